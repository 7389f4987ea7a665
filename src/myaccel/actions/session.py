"""The steps of ``myaccel apply`` and ``rollback`` around the protocols (``protocol``): the
plan file and what it may be narrowed to, the server's option directory, the refusal of a
second apply over an unfinished one, the journal in effect."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from myaccel.actions.errors import UnfinishedJournal
from myaccel.actions.guard import check_apply
from myaccel.actions.journal import Journal
from myaccel.actions.plan_apply import PlannedChanges, build_changes, preview_changes
from myaccel.actions.server_files import server_option_files
from myaccel.actions.settings import Change, Setting
from myaccel.actions.settings.systemd import main_pid_unit
from myaccel.actions.target import ServerTarget, UnmanagedServer, server_target
from myaccel.artifacts import load
from myaccel.errors import UsageError
from myaccel.facts.collect import collect_facts
from myaccel.model import Facts
from myaccel.rules.engine import facts_digest
from myaccel.rules.model import Plan

Note = Callable[[str], None]


def load_plan(path: str) -> Plan:
    """The plan in ``path``, or a ``UsageError`` naming the first field that is wrong
    (checked before anything is read from the machine or changed)."""
    return load(
        path,
        Plan,
        what="plan",
        hint="make the plan (again, with this version of myaccel): myaccel plan --out plan.json",
        error=UsageError,
    )


def check_only(plan: Plan, only: list[str] | None) -> None:
    """Every id of ``--only`` names a recommendation of the plan."""
    if not only:
        return
    valid = [r.id for r in plan.recommendations]
    unknown = [x for x in only if x not in valid]
    if unknown:
        raise UsageError(
            f"--only names no recommendation of this plan: {', '.join(unknown)}",
            hint="the plan's ids are: " + (", ".join(valid) if valid else "(none)"),
        )


def derive_conf_dir(target: ServerTarget, facts: Facts, note: Note) -> ServerTarget:
    """Without --conf-dir: the directory the running server itself reads (from its
    process), or none, with the reason (restart-only knobs are then skipped)."""
    if target.conf_dir is not None or target.params is None:
        return target  # given, or a sandbox's own
    srv = facts.server
    pid = srv.pid.value if srv is not None and srv.pid.known else None
    if pid is None:
        why = srv.pid.unknown if srv is not None else "no server facts"
        return target.with_conf_dir(None, f"the server's option files cannot be determined ({why})")
    binary = srv.binary_path.value if srv is not None and srv.binary_path.known else None
    found = server_option_files(pid, binary)
    if found is None:
        return target.with_conf_dir(None, f"the command line of server pid {pid} is not readable")
    if found.conf_dir is None:
        return target.with_conf_dir(None, found.why_no_dir())
    conf_dir = Path(found.conf_dir)
    note(f"option files: {conf_dir} (read by server pid {pid}: {found.source})")
    return target.with_conf_dir(conf_dir)


def derive_unit(
    target: ServerTarget, facts: Facts, note: Note, *, root: Path = Path("/")
) -> ServerTarget:
    """Without --server-unit or a restart command: the systemd service whose main process
    is the server (``main_pid_unit``, as the clone preflight finds it too), so that a
    restart goes through systemd and the unit's drop-in is that unit's; else the target
    unchanged. ``root``: the sysroot of ``/proc`` and ``/run/systemd``."""
    srv = facts.server
    if not isinstance(target, UnmanagedServer) or srv is None or not srv.pid.known:
        return target
    pid = srv.pid.value
    unit = main_pid_unit(pid, root) if pid is not None else None
    if unit is None:
        return target
    note(f"server unit: {unit} (its main process is server pid {pid})")
    return server_target(
        target.params, conf_dir=target.conf_dir, conf_dir_reason=target.conf_dir_reason, unit=unit
    )


def refuse_unfinished(jdir: Path) -> None:
    """An earlier apply or rollback that did not finish must be rolled back first."""
    unfinished = Journal.find_unfinished(jdir)
    if unfinished:
        raise UnfinishedJournal(
            f"an earlier apply or rollback did not finish: {unfinished[-1]}",
            hint="run `myaccel rollback` to finish it (it restores the recorded old values), "
            "then apply again",
            context={"journal": str(unfinished[-1])},
        )


def journal_in_effect(jdir: Path) -> Path:
    """The unfinished journal, else the newest one in effect."""
    active = Journal.find_unfinished(jdir) or Journal.find_active(jdir)
    if not active:
        raise UsageError("no journal in effect to roll back", hint="see: myaccel rollback --list")
    return active[-1]


def prepare_apply(
    plan: Plan,
    target: ServerTarget,
    note: Note,
    *,
    layers: list[str] | None = None,
    only: list[str] | None = None,
    force: bool = False,
    partial: bool = False,
    persist_server_variables: bool = False,
) -> tuple[ServerTarget, PlannedChanges]:
    """Before anything is printed, journaled or changed: the facts here against the plan's
    (another host, server or datadir is refused unless ``force``), the server's option
    directory, the plan's durability and ranges (``guard``), and the settings that carry
    each recommendation. Returns the target (with its option directory) and the changes."""
    facts = collect_facts(
        "/", server=target.params, server_required=target.params is not None, perf_live_test=False
    )
    digest = facts_digest(facts)
    if digest != plan.facts_digest and not force:
        raise UsageError(
            f"this plan was made for other facts (digest {plan.facts_digest}, here {digest}): "
            "another host, server or datadir",
            hint="make a plan here (myaccel plan --out plan.json), or pass --force",
        )
    target = derive_unit(derive_conf_dir(target, facts, note), facts, note)
    check_apply(plan, facts, layers=layers, only=only)  # durability and ranges
    pc = build_changes(
        plan,
        target,
        layers=layers,
        only=only,
        partial=partial,
        persist_server_variables=persist_server_variables,
    )
    return target, pc


def preview_apply(
    target: ServerTarget, pc: PlannedChanges, *, create: bool
) -> tuple[list[tuple[Setting, str, Change]], list[str], tuple[Path, ...]]:
    """What the apply would change and what is already in place, and the directories it
    creates first (a sandbox's own conf.d; made here when ``create``, never on a dry run)."""
    own = target.conf_dir if target.creates_conf_dir else None
    new_dirs = (own,) if own is not None else ()
    if create and own is not None:
        own.mkdir(exist_ok=True)
    planned, unchanged = preview_changes(pc.changes, new_dirs)
    return planned, unchanged, new_dirs
