"""The steps of ``myaccel apply`` and ``rollback`` around the applier: the plan file and
what it may be narrowed to, the server's option directory, the refusal of a second apply
over an unfinished one, restart with automatic rollback, and the checks after rollback."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from myaccel.actions.applier import finish_rollback, restore_recorded_files, rollback
from myaccel.actions.crashpoint import crash_point
from myaccel.actions.errors import ApplyError, UnfinishedJournal
from myaccel.actions.journal import Journal
from myaccel.actions.plan_apply import ServerHandle, health_check
from myaccel.actions.server_files import server_option_files
from myaccel.artifacts import load
from myaccel.errors import UsageError
from myaccel.model import Facts
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


def derive_conf_dir(handle: ServerHandle, facts: Facts, note: Note) -> None:
    """Without --conf-dir: the directory the running server itself reads (from its
    process), or none, with the reason (restart-only knobs are then skipped)."""
    if handle.kind == "sandbox" or handle.conf_dir is not None or handle.params is None:
        return
    srv = facts.server
    pid = srv.pid.value if srv is not None and srv.pid.known else None
    if pid is None:
        why = srv.pid.unknown if srv is not None else "no server facts"
        handle.conf_dir_reason = f"the server's option files cannot be determined ({why})"
        return
    binary = srv.binary_path.value if srv is not None and srv.binary_path.known else None
    found = server_option_files(pid, binary)
    if found is None:
        handle.conf_dir_reason = f"the command line of server pid {pid} is not readable"
    elif found.conf_dir is None:
        handle.conf_dir_reason = found.why_no_dir()
    else:
        handle.conf_dir = Path(found.conf_dir)
        note(f"option files: {handle.conf_dir} (read by server pid {pid}: {found.source})")


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


def restart_and_check(
    handle: ServerHandle, expected: dict[str, str], jpath: Path, note: Note
) -> None:
    """Restart on the new configuration and check it; a server that does not come back
    healthy is rolled back, restarted on the old configuration, and an ``ApplyError``
    says so."""
    try:
        handle.restart(note)
        crash_point("health-check")
        problems = health_check(handle, expected)
    except Exception as exc:
        problems = [getattr(exc, "message", str(exc))]
    if not problems:
        return
    errs = handle.error_log_errors()
    note("health check failed: " + "; ".join(problems) + (" | " + errs[-1] if errs else ""))
    rollback(jpath, connect=handle.connector() if handle.params else None, finish=False)
    handle.restart(note)
    finish_rollback(jpath)
    raise ApplyError(
        "the server did not come back healthy with the new configuration ("
        + "; ".join(problems)[:300]
        + "): rolled back, it runs on the old configuration again",
        hint=f"see the error log; the journal {jpath} records what was tried",
    )


def journal_in_effect(jdir: Path) -> Path:
    """The unfinished journal, else the newest one in effect."""
    active = Journal.find_unfinished(jdir) or Journal.find_active(jdir)
    if not active:
        raise UsageError("no journal in effect to roll back", hint="see: myaccel rollback --list")
    return active[-1]


def server_entries_pending(journal: Journal) -> bool:
    return any(e.kind in ("mysql", "mycnf") and e.state != "reverted" for e in journal.entries)


def bring_up(handle: ServerHandle | None, journal: Journal, note: Note) -> bool:
    """Under the journal lock, before reverting: a server that a crash left down (or half
    way up) is waited for, or started on its restored option files. True when started."""
    if handle is None or handle.params is None or not server_entries_pending(journal):
        return False
    if handle.wait_reachable(timeout_s=60.0) or not handle.startable():
        return False
    note("the server is not running: restoring its option files, then starting it")
    errors = restore_recorded_files(journal, kinds=("mycnf",))
    if errors:
        raise ApplyError(
            "cannot restore the option files before starting the server: " + "; ".join(errors),
            hint="fix the cause, then run `myaccel rollback` again",
        )
    handle.start(note)
    return True


def check_after_rollback(handle: ServerHandle, journal: Journal, note: Note) -> None:
    """The server is healthy; a server value that differs from the journal's old one is
    a warning."""
    problems = health_check(handle, {})
    if problems:
        raise ApplyError(
            "server unhealthy after rollback: " + "; ".join(problems), hint="see its error log"
        )
    old = {
        e.target.removeprefix("mysql:"): e.old.value
        for e in journal.entries
        if e.kind == "mysql" and e.old.value is not None
    }
    for problem in health_check(handle, old):
        note(f"warning: after rollback {problem}")
