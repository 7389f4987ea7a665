"""``--swap-binary`` on a real server run by systemd: the unit runs the build's binary from
now on, a journaled change (``systemd-binary:UNIT``, a drop-in ``ExecStart`` override; see
``actions.settings.server_binary``). The unit restarts through the server's restart method
and is health-checked; one that does not come back healthy is rolled back (the drop-in
removed, ``daemon-reload``) and restarted on its own binary. ``myaccel rollback`` undoes a
swap that stayed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from myaccel.actions import ApplyResult
from myaccel.actions.protocol import apply_with_restart
from myaccel.actions.settings.base import Runner
from myaccel.actions.settings.server_binary import ServerBinarySetting
from myaccel.actions.target import ServerTarget, SystemdServer
from myaccel.errors import UsageError


def swap_unit_binary(
    target: ServerTarget,
    binary: Path,
    *,
    plan_id: str,
    facts_digest: str,
    note: Callable[[str], None],
    root: str | Path = "/",
    runner: Runner | None = None,
) -> Path | None:
    """Point the target's systemd unit at ``binary``; the journal's path (None when the unit
    already runs it)."""
    if not isinstance(target, SystemdServer) or not target.unit:
        raise UsageError(
            "swapping a real server's binary needs the systemd unit that runs it",
            hint="pass --server-unit UNIT (a basedir swap is for sandboxes: --sandbox NAME)",
        )
    unit = target.unit
    setting = ServerBinarySetting(unit, root=root, runner=runner)

    def applied(res: ApplyResult) -> None:
        note(f"{unit}: ExecStart now runs {binary} (journal {res.journal_path})")

    res = apply_with_restart(  # rolls back and restarts itself on a failed start
        target,
        [(setting, str(binary))],
        restart=True,
        note=note,
        plan_id=plan_id,
        facts_digest=facts_digest,
        applied=applied,
    )
    if res.journal_path is None:
        note(f"{unit} already runs {binary}")
        return None
    note(f"{unit} runs {binary}; undo with: myaccel rollback")
    return Path(res.journal_path)
