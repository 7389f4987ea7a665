"""Which process owns a temporary state, and whether it still runs.

A command that changes something only for as long as it runs (a capture's general log, a
sandbox started on an A/B arm's configuration) records itself as the owner: its pid, the
time the process started (so that a reused pid is not taken for it) and the boot it runs
in. Its clean-up undoes the change on every way out Python sees (``myaccel.signals``);
after a SIGKILL the owner is gone and the next myaccel command undoes it
(``myaccel.cli.repair``). The /proc reading is ``myaccel.proclife``.
"""

from __future__ import annotations

import os

from myaccel.model import Strict
from myaccel.proclife import boot_id, process_start_ticks, still_runs


class ProcessOwner(Strict):
    """The process whose change lasts only while it runs."""

    command: str
    pid: int
    started: str  # process_start_ticks(pid) when the change was made
    boot_id: str

    @classmethod
    def this_process(cls, command: str) -> ProcessOwner:
        pid = os.getpid()
        return cls(
            command=command, pid=pid, started=process_start_ticks(pid) or "", boot_id=boot_id()
        )

    def alive(self) -> bool:
        """The owner still runs (same boot, same pid, same start time)."""
        return still_runs(self.pid, self.started, self.boot_id)
