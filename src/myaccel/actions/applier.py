"""Apply, roll back and verify lists of settings, journaling every change first.

``apply_changes`` plans every setting (the same ``Setting.plan`` that ``--dry-run`` and
``verify`` use), refuses while an unfinished journal exists, then for each change:

1. capture the old state and save it as a *pending* journal entry (fsync file + directory);
2. make the change;
3. read it back and mark the entry *applied*.

An error stops the run; by default everything done so far is rolled back at once. A crash
leaves the journal ``open``: ``rollback`` reverts its applied and pending entries, newest
first, and finally puts every file back to the bytes recorded by its earliest entry.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from myaccel.actions.crashpoint import crash_point
from myaccel.actions.errors import ApplyError, JournalError, RollbackIncomplete, UnfinishedJournal
from myaccel.actions.files import FileState, restore_file
from myaccel.actions.journal import (
    Clock,
    Journal,
    JournalEntry,
    JournalOwner,
    journal_lock,
    journals_dir,
    utc_now,
)
from myaccel.actions.settings import Change, Connect, Runner, Setting, setting_from_spec
from myaccel.errors import MyaccelError, UsageError
from myaccel.model import Frozen

log = logging.getLogger(__name__)

# Test hook: called as hook(point, entry_index) at "journaled" (entry saved as pending, no
# change yet), "changed" (change made, entry still pending), "applied" (entry marked) and,
# during rollback, "reverted". Raising SimulatedCrash from it simulates a crash there.
# The same points are crash points for subprocess tests (MYACCEL_CRASH_AT, see crashpoint).
Hook = Callable[[str, int], None]


def _at(hook: Hook | None, point: str, index: int) -> None:
    crash_point(point, index)
    if hook is not None:
        hook(point, index)


class SimulatedCrash(BaseException):
    """Raised by test hooks to stop an apply or rollback as a crash would: it is not an
    ``Exception``, so no error handling (and no automatic rollback) runs."""


class ApplyResult(Frozen):
    status: Literal["dry-run", "unchanged", "applied"]
    journal_path: str | None = None
    journal_id: str | None = None
    changes: list[Change]  # what would change (dry run) or changed
    unchanged: list[str]  # targets already at the desired value
    warnings: list[str]


class RollbackResult(Frozen):
    status: Literal["rolled-back"]
    journal_path: str
    journal_id: str
    reverted: list[str]  # targets, in the order they were reverted
    already_reverted: list[str]
    warnings: list[str]


class Drift(Frozen):
    """A setting that is not at the value it should have."""

    target: str
    expected: str
    actual: str | None
    warnings: tuple[str, ...] = ()
    # the value lives in the running kernel or server only: a reboot (or a server
    # restart, for SET GLOBAL) drops it, as documented; `apply` again puts it back
    runtime_only: bool = False


Planned = tuple[Setting, str, Change]


def _check_unique(changes: Sequence[tuple[Setting, str]]) -> None:
    seen: set[str] = set()
    for setting, _ in changes:
        if setting.target in seen:
            raise UsageError(
                f"{setting.target} appears twice in one apply",
                hint="give each target one desired value",
            )
        seen.add(setting.target)


def plan_changes(changes: Sequence[tuple[Setting, str]]) -> tuple[list[Planned], list[str]]:
    """The simulate path shared by apply, ``--dry-run`` and verify: (setting, desired,
    change) for what would change, and the targets already at their desired value."""
    _check_unique(changes)
    planned: list[Planned] = []
    unchanged: list[str] = []
    for setting, desired in changes:
        change = setting.plan(desired)
        if change is None:
            unchanged.append(setting.target)
        else:
            planned.append((setting, change.desired, change))
    return planned, unchanged


def _unfinished_error(paths: list[Path]) -> UnfinishedJournal:
    return UnfinishedJournal(
        f"an earlier apply or rollback did not finish: {paths[-1]}",
        hint="run `myaccel rollback` to finish it (it restores the recorded old values), "
        "then apply again",
        context={"journal": str(paths[-1])},
    )


def _require_root(needs_root: bool, what: str) -> None:
    if needs_root and os.geteuid() != 0:
        raise ApplyError(
            f"{what} changes system settings and needs root",
            hint="run it with sudo, or limit it to server settings (--layers server)"
            if what == "apply"
            else "run it with sudo (the journal records system settings)",
        )


def apply_changes(
    changes: Sequence[tuple[Setting, str]],
    journal_dir: Path | None = None,
    *,
    dry_run: bool = False,
    plan_id: str | None = None,
    facts_digest: str | None = None,
    server: dict[str, object] | None = None,
    crash_after: int | None = None,
    hook: Hook | None = None,
    rollback_on_error: bool = True,
    keep_open: bool = False,
    owner: JournalOwner | None = None,
    clock: Clock = utc_now,
) -> ApplyResult:
    """Apply ``(setting, desired)`` pairs with a journal; ``dry_run`` only plans.

    ``server`` (``ServerTarget.describe()``) is recorded in the journal before the first
    change, so that a rollback after a crash can reach, stop and start the server.

    ``keep_open`` leaves the journal ``open`` after the last entry, for a caller that still
    has work to do before the apply counts as done (a server restart and health check); it
    then calls ``finish_journal``. A crash in between leaves an unfinished journal.
    ``owner`` marks changes that last only while that process runs (see ``JournalOwner``).

    ``crash_after=k`` (tests) raises ``SimulatedCrash`` right after the k-th change (1-based)
    was made and before its entry is marked applied: the worst moment for a crash.
    """
    jdir = journal_dir if journal_dir is not None else journals_dir()
    planned, unchanged = plan_changes(changes)
    warnings = [w for _, _, c in planned for w in c.warnings]
    if dry_run:
        unfinished = Journal.find_unfinished(jdir)
        if unfinished:
            warnings.append(
                f"an unfinished journal exists ({unfinished[-1]}): apply will refuse until "
                "`myaccel rollback` finishes it"
            )
        return ApplyResult(
            status="dry-run",
            changes=[c for _, _, c in planned],
            unchanged=unchanged,
            warnings=warnings,
        )
    _require_root(any(s.needs_root for s, _, _ in planned), "apply")

    with journal_lock(jdir):
        unfinished = Journal.find_unfinished(jdir)
        if unfinished:
            raise _unfinished_error(unfinished)
        if not planned:
            return ApplyResult(
                status="unchanged", changes=[], unchanged=unchanged, warnings=warnings
            )
        journal = Journal.create(
            jdir,
            plan_id=plan_id,
            facts_digest=facts_digest,
            server=server,
            owner=owner,
            clock=clock,
        )
        log.info("journal %s", journal.path)
        by_index: dict[int, Setting] = {}
        for n, (setting, desired, _change) in enumerate(planned, start=1):
            index: int | None = None
            try:
                old = setting.capture()
                entry = journal.add_pending(
                    target=setting.target,
                    kind=setting.kind,
                    spec=setting.spec(),
                    old=old,
                    new_value=desired,
                )
                index = entry.index
                by_index[index] = setting
                _at(hook, "journaled", index)
                setting.apply(desired)
                _at(hook, "changed", index)
                if crash_after is not None and n == crash_after:
                    raise SimulatedCrash(f"simulated crash after entry {n}")
                actual = setting.read()
                journal.mark(index, "applied", read_back=actual)
                _at(hook, "applied", index)
                if not setting.matches(actual, desired):
                    warnings.append(
                        f"{setting.target}: asked for {desired}, reads back {actual} "
                        "(the kernel or server adjusted it)"
                    )
            except Exception as exc:
                _fail(journal, index, setting, exc, by_index, rollback_on_error)
        if not keep_open:
            journal.set_status("applied")
    return ApplyResult(
        status="applied",
        journal_path=str(journal.path),
        journal_id=journal.id,
        changes=[c for _, _, c in planned],
        unchanged=unchanged,
        warnings=warnings,
    )


def finish_journal(path: Path) -> None:
    """Mark a journal that ``apply_changes(keep_open=True)`` left open as applied."""
    with journal_lock(path.parent):
        journal = Journal.load(path)
        if journal.status == "open":
            journal.set_status("applied")


def finish_rollback(path: Path) -> None:
    """Mark a journal whose entries ``rollback(finish=False)`` reverted as rolled back."""
    with journal_lock(path.parent):
        journal = Journal.load(path, verify_checksum=False)
        if all(e.state == "reverted" for e in journal.entries):
            journal.set_status("rolled-back")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, MyaccelError):
        return exc.message
    return f"{type(exc).__name__}: {exc}"


def _fail(
    journal: Journal,
    index: int | None,
    setting: Setting,
    exc: Exception,
    by_index: dict[int, Setting],
    rollback_on_error: bool,
) -> None:
    """Record the failure, roll back what was done (unless told not to) and raise."""
    message = f"{setting.target}: {_describe(exc)}"
    if index is not None:
        journal.mark(index, "failed", error=message)
    journal.set_status("failed", error=message)
    hint = exc.hint if isinstance(exc, MyaccelError) and exc.hint else ""
    context = {"journal": str(journal.path)}
    if not rollback_on_error:
        raise ApplyError(
            f"applying {message}; the journal is left for `myaccel rollback`",
            hint=hint or f"run `myaccel rollback --journal {journal.path}` to undo what was done",
            context=context,
        ) from exc
    try:
        _revert_journal(journal, lambda e: by_index[e.index], hook=None)
    except RollbackIncomplete as rb:
        raise ApplyError(
            f"applying {message}; the automatic rollback was incomplete: {rb.message}",
            hint=rb.hint,
            context=context,
        ) from exc
    raise ApplyError(
        f"applying {message}; every change of this run was rolled back",
        hint=hint or "fix the cause, then apply again",
        context=context,
    ) from exc


def _revert_journal(
    journal: Journal,
    resolve: Callable[[JournalEntry], Setting],
    hook: Hook | None,
    finish: bool = True,
) -> tuple[list[str], list[str]]:
    """Revert every entry not yet reverted, newest first; then put each file back to the
    bytes recorded by its earliest entry (this also repairs files after a retry that
    followed a partial rollback). Raises ``RollbackIncomplete`` and leaves the journal
    ``failed`` if anything could not be reverted."""
    reverted: list[str] = []
    already: list[str] = []
    errors: list[str] = []
    for entry in reversed(journal.entries):
        if entry.state == "reverted":
            already.append(entry.target)
            continue
        try:
            resolve(entry).revert(entry)
        except Exception as exc:
            msg = _describe(exc)
            log.warning("reverting %s failed: %s", entry.target, msg)
            journal.note_error(entry.index, f"revert failed: {msg}")
            errors.append(f"{entry.target}: {msg}")
            continue
        journal.mark(entry.index, "reverted")
        reverted.append(entry.target)
        _at(hook, "reverted", entry.index)
    errors += restore_recorded_files(journal)
    if errors:
        journal.set_status("failed", error="rollback incomplete: " + "; ".join(errors))
        raise RollbackIncomplete(
            f"{len(errors)} change(s) could not be reverted: " + "; ".join(errors),
            hint=f"fix the cause, then run `myaccel rollback --journal {journal.path}` again "
            "(it resumes where it stopped)",
            context={"journal": str(journal.path)},
        )
    if finish:
        journal.set_status("rolled-back")
    return reverted, already


def restore_recorded_files(journal: Journal, kinds: tuple[str, ...] | None = None) -> list[str]:
    """Put every file the journal recorded back to the bytes of its earliest entry
    (idempotent); ``kinds`` limits it to entries of those kinds. Returns the errors."""
    errors: list[str] = []
    earliest: dict[tuple[str, str], FileState] = {}
    for entry in journal.entries:
        if kinds is not None and entry.kind not in kinds:
            continue
        root = str(entry.spec.get("root", "/"))
        for state in entry.old.files:
            earliest.setdefault((root, state.path), state)
    for (root, path), state in earliest.items():
        try:
            restore_file(Path(root), state)
        except (MyaccelError, OSError) as exc:
            errors.append(f"{path}: {_describe(exc)}")
    return errors


def _pick_journal(jdir: Path, journal_path: Path | None) -> tuple[Path, list[Path]]:
    active = Journal.find_active(jdir)
    if journal_path is not None:
        return journal_path, active
    if not active:
        raise JournalError(
            f"nothing to roll back: no applied or unfinished journal in {jdir}",
            hint="`myaccel rollback --list` shows the journals",
        )
    return active[-1], active


def rollback(
    journal_path: Path | None = None,
    *,
    journal_dir: Path | None = None,
    connect: Connect | None = None,
    runner: Runner | None = None,
    force: bool = False,
    ignore_checksum: bool = False,
    hook: Hook | None = None,
    before_revert: Callable[[Journal], None] | None = None,
    finish: bool = True,
    clock: Clock = utc_now,
) -> RollbackResult:
    """Undo a journal (the newest one still in effect when ``journal_path`` is None),
    newest entry first. Completes an unfinished journal after a crash; running it again
    on a rolled-back journal changes nothing.

    ``before_revert(journal)`` runs under the journal lock once the journal is loaded and
    checked, before anything is reverted (the CLI starts a stopped server there).
    ``finish=False`` reverts every entry but leaves the journal's status as it was, for a
    caller that must still restart the server (then ``finish_rollback``): a crash before
    that restart leaves the journal in effect, and the next rollback restarts.

    Refuses (unless ``force``) a journal from another host, or one that a newer journal
    still in effect was applied on top of.
    """
    if journal_path is not None:
        jdir = journal_path.parent
    else:
        jdir = journal_dir if journal_dir is not None else journals_dir()
    with journal_lock(jdir):
        path, active = _pick_journal(jdir, journal_path)
        journal = Journal.load(path, verify_checksum=not ignore_checksum, clock=clock)
        if not force:
            host = socket.gethostname()
            if journal.data.host != host:
                raise JournalError(
                    f"journal {path.name} was written on host {journal.data.host}, this is {host}",
                    hint="roll it back on that host (or pass --force if the host was renamed)",
                )
            order = [p.resolve() for p in Journal.list_paths(jdir)]
            mine = order.index(path.resolve()) if path.resolve() in order else len(order)
            newer = [p for p in active if p.resolve() in order[mine + 1 :]]
            if newer:
                raise JournalError(
                    f"{newer[-1].name} was applied after {path.name} and is still in effect",
                    hint="roll back the newer journal first (`myaccel rollback` takes the "
                    "newest), or pass --force",
                )
        if before_revert is not None:
            before_revert(journal)
        pending = [e for e in journal.entries if e.state != "reverted"]
        settings = {
            e.index: setting_from_spec(e.kind, e.spec, connect=connect, runner=runner)
            for e in pending
        }
        _require_root(any(s.needs_root for s in settings.values()), "rollback")
        warnings = []
        if journal.status in ("open", "failed"):
            warnings.append(
                f"journal {journal.id} was {journal.status}: reverting its applied and pending "
                "entries to their recorded old state"
            )
        reverted, already = _revert_journal(
            journal, lambda e: settings[e.index], hook, finish=finish
        )
    return RollbackResult(
        status="rolled-back",
        journal_path=str(path),
        journal_id=journal.id,
        reverted=reverted,
        already_reverted=already,
        warnings=warnings,
    )


def verify(changes: Sequence[tuple[Setting, str]]) -> list[Drift]:
    """Settings that are not at their desired value (the dry-run path, read-only)."""
    planned, _ = plan_changes(changes)
    return [
        Drift(
            target=s.target,
            expected=desired,
            actual=c.current,
            warnings=c.warnings,
            runtime_only=not s.survives_reboot,
        )
        for s, desired, c in planned
    ]


def verify_journal(
    journal_path: Path | None = None,
    *,
    journal_dir: Path | None = None,
    connect: Connect | None = None,
    runner: Runner | None = None,
) -> list[Drift]:
    """Drift of the applied entries of a journal (the newest applied one when None): what
    changed since `myaccel apply` (a reboot without persistence, a server restart, a hand
    edit)."""
    jdir = journal_dir if journal_dir is not None else journals_dir()
    if journal_path is None:
        applied = [p for p in Journal.list_paths(jdir) if Journal.peek_status(p) == "applied"]
        if not applied:
            raise JournalError(f"no applied journal in {jdir}", hint="run `myaccel apply` first")
        journal_path = applied[-1]
    journal = Journal.load(journal_path)
    changes = [
        (setting_from_spec(e.kind, e.spec, connect=connect, runner=runner), e.new_value)
        for e in journal.entries
        if e.state == "applied"
    ]
    return verify(changes)


def needs_root(changes: Sequence[tuple[Setting, str]]) -> bool:
    """Whether applying these needs root (some write system files or kernel state)."""
    return any(s.needs_root for s, _ in changes)


__all__ = [
    "ApplyResult",
    "Drift",
    "Hook",
    "RollbackResult",
    "SimulatedCrash",
    "apply_changes",
    "finish_journal",
    "finish_rollback",
    "needs_root",
    "plan_changes",
    "restore_recorded_files",
    "rollback",
    "verify",
    "verify_journal",
]
