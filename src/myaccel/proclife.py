"""Whether a process recorded earlier still runs: its pid, the time it started and the
boot it ran in (a pid alone may have been reused). Standard library only: read before
every command (``myaccel.cli.repair``), it must cost nothing to import."""

from __future__ import annotations

from pathlib import Path


def boot_id() -> str:
    """This boot's id (empty where the kernel does not say)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def process_start_ticks(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, /proc/PID/stat field 22): with
    the pid it names one process even after the pid is reused. None if it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def still_runs(pid: int, started: str, boot: str) -> bool:
    """The process recorded as (pid, start ticks, boot id) runs now."""
    return boot == boot_id() and process_start_ticks(pid) == started
