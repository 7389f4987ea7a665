"""The two protocols every journaled change to a server goes through, written once:

``apply_with_restart``: the journal with the server's record before the first change, the
changes, then (when restart-only settings changed) the restart on the new configuration
and the health check, the journal kept ``open`` until both passed (a crash in between
leaves it unfinished: ``myaccel apply`` refuses, ``myaccel rollback`` finishes it); a
server that does not come back healthy is rolled back and restarted on its old
configuration.

``rollback_with_restart``: every entry reverted, then the restart on the restored
configuration, the journal marked rolled back only after it (a crash before: the next
rollback restarts). Run by the process that applied (it knows whether it restarted) or by
``myaccel rollback`` after a crash, which first brings up a server the crash left down.

Callers: ``myaccel apply``/``rollback`` (``cli/apply.py``), the existing-server rollout of
``accelerate`` (``accelerate/rollout.py``), the binary swaps (``accelerate/swap_unit.py``,
``accelerate/sandbox_mode.py``), ``capture``'s switches (``capture/session.py``) and the
repair of a killed command's switches (``cli/repair.py``). The crash points
(``crashpoint``) are in the applier, the targets' restarts and here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from myaccel.actions.applier import (
    ApplyResult,
    RollbackResult,
    apply_changes,
    finish_journal,
    finish_rollback,
    restore_recorded_files,
    rollback,
)
from myaccel.actions.crashpoint import crash_point
from myaccel.actions.errors import ApplyError
from myaccel.actions.journal import Journal, JournalOwner
from myaccel.actions.plan_apply import health_check
from myaccel.actions.settings import Connect, Runner, Setting
from myaccel.actions.target import ServerTarget

Note = Callable[[str], None]


def apply_with_restart(
    target: ServerTarget | None,
    changes: Sequence[tuple[Setting, str]],
    *,
    restart: bool,
    note: Note,
    expected: dict[str, str] | None = None,
    plan_id: str | None = None,
    facts_digest: str | None = None,
    journal_dir: Path | None = None,
    owner: JournalOwner | None = None,
    keep_open: bool = False,
    applied: Callable[[ApplyResult], None] | None = None,
) -> ApplyResult:
    """Apply ``changes`` to ``target``'s server with a journal; with ``restart``, restart
    it and check it (``expected``: server values that must read back), rolling back
    automatically (``ApplyError``) when it does not come back healthy.

    ``applied(result)`` runs once the changes are made, before the restart (the journal's
    path is known). ``keep_open`` leaves the journal ``open`` after all of it, for
    changes that last only while ``owner`` runs (``capture``): ``rollback_with_restart``
    ends them. No change to make: no journal, no restart (``result.journal_path`` None)."""
    res = apply_changes(
        changes,
        journal_dir,
        plan_id=plan_id,
        facts_digest=facts_digest,
        server=None if target is None else target.describe(),
        keep_open=restart or keep_open,  # done only once the server is back and healthy
        owner=owner,
    )
    if res.journal_path is None:
        return res
    jpath = Path(res.journal_path)
    if applied is not None:
        applied(res)
    if restart:
        if target is None:
            raise ApplyError(
                "restart-only settings changed and no server is known to restart",
                hint=f"restart it yourself, or undo with: myaccel rollback --journal {jpath}",
            )
        restart_and_check(target, expected or {}, jpath, note)
        if not keep_open:
            finish_journal(jpath)
    return res


def restart_and_check(
    target: ServerTarget, expected: dict[str, str], jpath: Path, note: Note
) -> None:
    """Restart on the new configuration and check it; a server that does not come back
    healthy is rolled back, restarted on the old configuration, and an ``ApplyError``
    says so."""
    try:
        target.restart(note)
        crash_point("health-check")
        problems = health_check(target, expected)
    except Exception as exc:
        problems = [getattr(exc, "message", str(exc))]
    if not problems:
        return
    errs = target.error_log_errors()
    note("health check failed: " + "; ".join(problems) + (" | " + errs[-1] if errs else ""))
    rollback_with_restart(target, jpath, restart=True, note=note)
    raise ApplyError(
        "the server did not come back healthy with the new configuration ("
        + "; ".join(problems)[:300]
        + "): rolled back, it runs on the old configuration again",
        hint=f"see the error log; the journal {jpath} records what was tried",
    )


def rollback_with_restart(
    target: ServerTarget | None,
    journal: Path | Journal,
    *,
    note: Note,
    restart: bool | None = None,
    connect: Connect | None = None,
    runner: Runner | None = None,
    force: bool = False,
    ignore_checksum: bool = False,
    reverted: Callable[[RollbackResult], None] | None = None,
) -> RollbackResult:
    """Undo ``journal`` on ``target``'s server, then restart it when ``restart``; the
    journal is marked rolled back only after that restart.

    ``restart`` True or False: the caller knows whether it restarted the server for this
    journal. None (``myaccel rollback``, finishing what another process left): a server
    the crash left down (or half way up) is waited for, or started on its restored
    option files, before anything is reverted; the restart happens when option files (or
    the unit's binary) changed and myaccel can start the server, else a warning says to
    restart it; the server is checked afterwards.

    ``connect`` (default: the target's) reaches the server for ``mysql:`` entries;
    ``reverted(result)`` runs once every entry is reverted, before the restart."""
    path = journal.path if isinstance(journal, Journal) else journal
    if connect is None and target is not None and target.params is not None:
        connect = target.connector()
    recover = restart is None
    loaded: Journal | None = None
    options_changed = False
    started: list[bool] = []

    def before_revert(j: Journal) -> None:
        if bring_up(target, j, note):
            started.append(True)

    if recover:
        loaded = (
            journal
            if isinstance(journal, Journal)
            else Journal.load(path, verify_checksum=not ignore_checksum)
        )
        # Option files (or the unit's server binary, or a drop-in of the unit that runs
        # it) changed since the server started: it must restart on the restored ones. The
        # journal stays in effect until then (a crash before it: rollback again).
        options_changed = loaded.status != "rolled-back" and any(
            e.kind in ("mycnf", "systemd-binary")
            or (e.kind == "systemd" and target is not None and e.spec.get("unit") == target.unit)
            for e in loaded.entries
        )
        restart = options_changed and target is not None and target.startable()
    res = rollback(
        path,
        connect=connect,
        runner=runner,
        force=force,
        ignore_checksum=ignore_checksum,
        before_revert=before_revert if recover else None,
        finish=not restart,
    )
    if reverted is not None:
        reverted(res)
    if restart:
        if target is None:
            raise ApplyError(
                "the server must restart on its restored configuration and none is known",
                hint=f"restart it yourself, then run `myaccel rollback --journal {path}` again",
            )
        if not started:
            target.restart(note)
        crash_point("rollback-finish")
        finish_rollback(path)
    elif options_changed:
        note("warning: restart the server yourself: its option files were restored")
    if loaded is not None and target is not None and target.params is not None:
        check_after_rollback(target, loaded, note)
    return res


def server_entries_pending(journal: Journal) -> bool:
    return any(e.kind in ("mysql", "mycnf") and e.state != "reverted" for e in journal.entries)


def bring_up(target: ServerTarget | None, journal: Journal, note: Note) -> bool:
    """Under the journal lock, before reverting: a server that a crash left down (or half
    way up) is waited for, or started on its restored option files. True when started."""
    if target is None or target.params is None or not server_entries_pending(journal):
        return False
    if target.wait_reachable(timeout_s=60.0) or not target.startable():
        return False
    note("the server is not running: restoring its option files, then starting it")
    # what the server starts with: its option files and its unit's drop-ins (a crash can
    # leave a drop-in systemd cannot start the unit with)
    errors = restore_recorded_files(journal, kinds=("mycnf", "systemd"))
    if errors:
        raise ApplyError(
            "cannot restore the option files before starting the server: " + "; ".join(errors),
            hint="fix the cause, then run `myaccel rollback` again",
        )
    target.start(note)
    return True


def check_after_rollback(target: ServerTarget, journal: Journal, note: Note) -> None:
    """The server is healthy; a server value that differs from the journal's old one is
    a warning."""
    problems = health_check(target, {})
    if problems:
        raise ApplyError(
            "server unhealthy after rollback: " + "; ".join(problems), hint="see its error log"
        )
    old = {
        e.target.removeprefix("mysql:"): e.old.value
        for e in journal.entries
        if e.kind == "mysql" and e.old.value is not None
    }
    for problem in health_check(target, old):
        note(f"warning: after rollback {problem}")
