"""``--swap-binary`` on a real server run by systemd: the unit runs the build's binary from
now on, a journaled change (``systemd-binary:UNIT``, a drop-in ``ExecStart`` override; see
``actions.settings.server_binary``). The unit restarts through the server's restart method
and is health-checked; one that does not come back healthy is rolled back (the drop-in
removed, ``daemon-reload``) and restarted on its own binary. ``myaccel rollback`` undoes a
swap that stayed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from myaccel.actions import apply_changes
from myaccel.actions.applier import finish_journal
from myaccel.actions.plan_apply import ServerHandle
from myaccel.actions.session import restart_and_check
from myaccel.actions.settings.base import Runner
from myaccel.actions.settings.server_binary import ServerBinarySetting
from myaccel.errors import UsageError


def swap_unit_binary(
    handle: ServerHandle,
    binary: Path,
    *,
    plan_id: str,
    facts_digest: str,
    note: Callable[[str], None],
    root: str | Path = "/",
    runner: Runner | None = None,
) -> Path | None:
    """Point the handle's systemd unit at ``binary``; the journal's path (None when the unit
    already runs it)."""
    if handle.kind != "systemd" or not handle.unit:
        raise UsageError(
            "swapping a real server's binary needs the systemd unit that runs it",
            hint="pass --server-unit UNIT (a basedir swap is for sandboxes: --sandbox NAME)",
        )
    setting = ServerBinarySetting(handle.unit, root=root, runner=runner)
    res = apply_changes(
        [(setting, str(binary))],
        plan_id=plan_id,
        facts_digest=facts_digest,
        server=handle.describe(),
        keep_open=True,  # done once the unit is back and healthy
    )
    if res.journal_path is None:
        note(f"{handle.unit} already runs {binary}")
        return None
    jpath = Path(res.journal_path)
    note(f"{handle.unit}: ExecStart now runs {binary} (journal {jpath})")
    restart_and_check(handle, {}, jpath, note)  # rolls back and restarts itself on failure
    finish_journal(jpath)
    note(f"{handle.unit} runs {binary}; undo with: myaccel rollback")
    return jpath
