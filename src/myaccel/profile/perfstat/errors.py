"""What a failed ``perf stat`` means: one error class per cause, each with its fix."""

from __future__ import annotations

import re

from myaccel.errors import ExitCode, MyaccelError, ProcessFailed
from myaccel.facts.perfcap import PMU_DIR


class PerfStatError(MyaccelError, code="perf-stat"):
    pass


class PerfUnknownEvent(PerfStatError, code="perf-unknown-event", exit_code=ExitCode.USAGE):
    """perf could not parse an event name (exit code 129)."""


class PerfPermissionDenied(PerfStatError, code="perf-permission"):
    pass


class PerfUnsupported(PerfStatError, code="perf-unsupported"):
    """The PMU cannot count what was asked for (no PMU in a VM, a group with a missing event)."""


_SYNTAX = re.compile(r"event syntax error: '([^']*)'")
_NOT_SUPPORTED = re.compile(r"The (\S+) event is not supported")
_PERMISSION = (
    "Access to performance monitoring and observability operations is limited",
    "perf_event_paranoid setting is",
    "No permission to enable",
    "You may not have permission to collect",
)


def perf_stat_error(
    returncode: int,
    stderr: str,
    *,
    paranoid: int | None = None,
    system_wide: bool = False,
) -> MyaccelError | None:
    """The error a failed ``perf stat`` run means, or None when it succeeded."""
    text = stderr or ""
    if returncode == 0:
        return None
    tail = " | ".join(text.strip().splitlines()[-3:]) or "no output"
    if returncode == 129 or "event syntax error" in text:
        m = _SYNTAX.search(text)
        ev = m.group(1) if m else "?"
        return PerfUnknownEvent(
            f"perf does not know the event '{ev}' (exit code {returncode})",
            hint="list what this perf and kernel offer with `perf list`; myaccel only asks "
            f"for events listed under {PMU_DIR}/*/events, so a perf older than the kernel "
            "may be missing the name (install the linux-perf matching `uname -r`)",
            context={"event": ev, "exit_code": str(returncode)},
        )
    if any(s in text for s in _PERMISSION):
        m = re.search(r"perf_event_paranoid setting is (-?\d+)", text)
        level = int(m.group(1)) if m else paranoid
        now = f" (now {level})" if level is not None else ""
        need = "0 for system-wide counting (-a)" if system_wide else "1 to count a process"
        return PerfPermissionDenied(
            f"kernel.perf_event_paranoid{now} does not allow this perf stat",
            hint=f"run myaccel as root (or with CAP_PERFMON), or lower the limit to {need}: "
            "sysctl -w kernel.perf_event_paranoid=1 (persist it in /etc/sysctl.d/); counting "
            "another user's process (mysqld) also needs root or CAP_SYS_PTRACE",
            context={"paranoid": str(level), "exit_code": str(returncode)},
        )
    if "System does not support topdown" in text:
        return PerfUnsupported(
            "this CPU has no top-down events (perf --topdown refused)",
            hint="use the per-family metric set (myaccel picks events from sysfs) instead",
            context={"exit_code": str(returncode)},
        )
    m = _NOT_SUPPORTED.search(text)
    if m:
        return PerfUnsupported(
            f"the PMU cannot count '{m.group(1)}' and it was requested in a group",
            hint="on a VM without a virtual PMU hardware events are unavailable: profile "
            "with software events (perf record -e cpu-clock) or valgrind --tool=cachegrind",
            context={"event": m.group(1), "exit_code": str(returncode)},
        )
    return ProcessFailed(
        f"perf stat failed with exit code {returncode}: {tail}",
        hint="rerun with --debug to see the full perf command",
        context={"exit_code": str(returncode)},
    )
