"""Undo what a killed command left behind (``myaccel.cli.repair`` decides whether there is
anything, and only then loads this).

``myaccel.actions.orphans`` finds the open journals whose owner process is gone (a
``capture`` killed by SIGKILL while the general log was on). Each is rolled back, at the
latest by the next command that reaches that server:

1. when a command starts (``repair_orphans``): with the server recorded in the journal and
   the password from ``MYSQL_PWD`` or ``~/.my.cnf`` (a sandbox needs none);
2. one that could not be reached that way (the password was given with ``-p``) waits until
   the command resolves its own server options (``repair_with``): if they name the same
   server (socket, or host and port), the repair uses them;
3. what is still not undone when the command ends is one ``warning:`` line naming the
   ``myaccel rollback --journal ...`` command that finishes it (``warn_unrepaired``).

Clones left half-made by a killed ``myaccel clone`` are removed at the same moment.
The command the user asked for runs either way.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import ValidationError

from myaccel.actions.journal import Journal, journals_dir
from myaccel.actions.orphans import find_orphans
from myaccel.actions.protocol import rollback_with_restart
from myaccel.actions.target import rollback_target
from myaccel.clone.incomplete import MARKER as CLONE_MARKER
from myaccel.errors import MyaccelError, SandboxError
from myaccel.owner import ProcessOwner
from myaccel.paths import myaccel_home
from myaccel.server.connection import ConnectionOptions, ConnectParams, connect

if TYPE_CHECKING:
    from myaccel.server.sandbox import Sandbox

Note = Callable[[str], None]


@dataclass
class _Pending:
    note: Note | None = None
    journals: list[Journal] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)  # journal path -> last error
    busy: bool = False  # a repair resolves server options itself: no repair inside it


_pending = _Pending()


def repair_orphans(note: Note) -> None:
    """Roll back every orphaned journal that its recorded server allows (step 1)."""
    _pending.note, _pending.journals, _pending.failures = note, [], {}
    _remove_abandoned_clones(note)
    _restore_abandoned_arms(note)
    try:
        orphans = find_orphans(journals_dir())
    except OSError:
        return  # an unreadable home is the command's own error to report
    _pending.busy = True
    try:
        _repair_all(orphans)
    finally:
        _pending.busy = False


def _repair_all(orphans: list[Journal]) -> None:
    for journal in orphans:
        try:
            params = _recorded_params(journal)
        except (MyaccelError, OSError) as exc:
            _pending.failures[str(journal.path)] = str(exc)
            _pending.journals.append(journal)
            continue
        if not _try(journal, params):
            _pending.journals.append(journal)


def _remove_abandoned_clones(note: Note) -> None:
    """Clones whose maker was killed while making them (``myaccel.clone.incomplete``):
    removed with what they left running, so no half-made clone is listed as a sandbox.
    The marker is looked for first: most commands pay one directory listing."""
    root = myaccel_home() / "sandboxes"
    try:
        if not any(root.glob(f"*/{CLONE_MARKER}")):
            return
    except OSError:
        return
    from myaccel.clone.incomplete import remove_abandoned

    remove_abandoned(None, note)


def _restore_abandoned_arms(note: Note) -> None:
    """Sandboxes an A/B (``ab``, ``accelerate``, ``tune``) started on an arm's
    configuration and was killed before putting back: restarted on their base
    configuration, so that the next measurement of that sandbox measures what its name
    says. Each ``state.json`` is read as plain JSON first; the sandbox machinery is
    imported only for one that needs it."""
    for state in sorted((myaccel_home() / "sandboxes").glob("*/state.json")):
        try:
            doc = json.loads(state.read_bytes())
            owner = ProcessOwner.model_validate(doc["active_config"]["owner"])
        except (OSError, ValueError, KeyError, TypeError, ValidationError):
            continue  # no owner recorded, or a state the sandbox commands report
        if owner.alive():
            continue
        name = state.parent.name
        try:
            from myaccel.server.sandbox import Sandbox

            sb = Sandbox.load(name)
            what = _put_back(sb)
            note(
                f"note: {owner.command} (pid {owner.pid}) was killed and left sandbox "
                f"'{name}' on the configuration it measured with; {what}"
            )
        except (MyaccelError, OSError) as exc:
            note(
                f"warning: sandbox '{name}' was left on the configuration a killed "
                f"{owner.command} (pid {owner.pid}) measured with, and could not be put back: "
                f"{exc}; run: "
                f"myaccel sandbox restart {name} --base-config"
            )


def _put_back(sb: Sandbox) -> str:
    """The sandbox on its base configuration again; what was done. When its datadir holds
    an arm's own data a newer server upgraded (``accelerate --versions``, killed while that
    arm ran), its own server refuses it: the campaign's dataset snapshot goes back first."""
    from myaccel.bench.ab import SNAPSHOT

    try:
        if sb.is_running():
            sb.restart(reset=True)
            return "restarted it on its base configuration"
        sb.forget_owner()  # killed between stopping it and starting the next arm
        sb.start()
        return "started it again on its base configuration (it was left stopped)"
    except SandboxError as exc:
        if "datadir" not in exc.message or SNAPSHOT not in {s.name for s in sb.snapshot_list()}:
            raise
        sb.stop()
        sb.forget_owner()
        sb.snapshot_restore(SNAPSHOT)
        sb.start()
        return (
            "put the campaign's dataset snapshot back in its datadir (it held a copy a newer "
            "server had upgraded: " + exc.message + ") and started it on its base configuration"
        )


def repair_with(params: ConnectParams) -> None:
    """Step 2: the command's own server options, for the orphans of that same server."""
    if _pending.busy or not _pending.journals:
        return
    _pending.busy = True
    try:
        _repair_with(params)
    finally:
        _pending.busy = False


def _repair_with(params: ConnectParams) -> None:
    for journal in list(_pending.journals):
        try:
            recorded = _recorded_params(journal)
        except (MyaccelError, OSError):
            continue
        if recorded is not None and _same_server(recorded, params) and _try(journal, params):
            _pending.journals.remove(journal)


def warn_unrepaired() -> None:
    """Step 3: one warning per journal still not undone."""
    note = _pending.note
    for journal in _pending.journals:
        if note is not None:
            why = _pending.failures.get(str(journal.path), "no server connection")
            note(
                f"warning: {_who(journal)} was killed and left {_targets(journal)} switched on "
                f"(journal {journal.path.name}); undoing it failed: {why}. Finish it with: "
                f"myaccel rollback --journal {journal.path} (with the server options and "
                "password)"
            )
    _pending.journals = []


def _recorded_params(journal: Journal) -> ConnectParams | None:
    """The server recorded in the journal, with the password from MYSQL_PWD or
    ~/.my.cnf; None when the journal records none (its changes need no server)."""
    target = rollback_target(journal.path, journal, ConnectionOptions())
    return target.params if target is not None else None


def _same_server(a: ConnectParams, b: ConnectParams) -> bool:
    if a.socket and b.socket:
        return os.path.realpath(a.socket) == os.path.realpath(b.socket)
    local = {None, "localhost", "127.0.0.1", "::1"}
    same_host = a.host == b.host or (a.host in local and b.host in local)
    return not a.socket and not b.socket and same_host and a.port == b.port


def _reachable(journal: Journal, params: ConnectParams) -> bool:
    """Log in once before rolling back: a repair that cannot log in (the password was
    given with -p to the killed command) waits for step 2 instead of failing its entries."""
    try:
        connect(params).close()
    except (MyaccelError, OSError) as exc:
        _pending.failures[str(journal.path)] = str(exc)
        return False
    return True


def _try(journal: Journal, params: ConnectParams | None) -> bool:
    if params is not None and not _reachable(journal, params):
        return False
    try:
        res = rollback_with_restart(
            None,
            journal.path,
            restart=False,  # switches that last only while their owner runs: no restart
            note=_quiet,
            connect=None if params is None else lambda: connect(params),
        )
    except (MyaccelError, OSError) as exc:
        _pending.failures[str(journal.path)] = str(exc)
        return False
    from myaccel.capture.logdir import remove_left

    remove_left(((e.target, e.new_value) for e in journal.entries), _quiet)
    if _pending.note is not None:
        _pending.note(
            f"note: {_who(journal)} was killed and left {_targets(journal)} switched on; "
            f"switched back ({', '.join(res.reverted) or 'already back'}; journal "
            f"{journal.path.name})"
        )
    return True


def _quiet(_msg: str) -> None:
    pass


def _who(journal: Journal) -> str:
    owner = journal.data.owner
    return f"`myaccel {owner.command}` (pid {owner.pid})" if owner else "a command"


def _targets(journal: Journal) -> str:
    return ", ".join(dict.fromkeys(e.target for e in journal.entries)) or "nothing"
