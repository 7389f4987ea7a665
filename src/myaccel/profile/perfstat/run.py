"""Running ``perf stat``: the argv of the chosen events, its errors mapped, its output parsed."""

from __future__ import annotations

import tempfile
from pathlib import Path

from myaccel import proc
from myaccel.profile.perfstat.errors import perf_stat_error
from myaccel.profile.perfstat.events import EventPlan, build_perf_stat_argv
from myaccel.profile.perfstat.parse import PerfStatResult, parse_perf_stat_csv


def run_perf_stat(
    plan: EventPlan,
    *,
    duration_s: float,
    pid: int | None = None,
    system_wide: bool = False,
    paranoid: int | None = None,
) -> PerfStatResult:
    """Count ``plan`` for ``duration_s`` on a process or the whole system.

    Raises ``ToolMissing`` without perf, ``PerfUnknownEvent`` (exit 129),
    ``PerfPermissionDenied`` (perf_event_paranoid), ``PerfUnsupported`` or ``ProcessFailed``.
    """
    perf = proc.require("perf")
    with tempfile.TemporaryDirectory(prefix="myaccel-perfstat-") as tmp:
        out = Path(tmp) / "stat.csv"
        argv = build_perf_stat_argv(
            plan,
            duration_s=duration_s,
            pid=pid,
            system_wide=system_wide,
            perf=perf,
            output_path=out,
        )
        done = proc.run(argv, timeout_s=duration_s + 60.0)
        err = perf_stat_error(
            done.returncode, done.stderr, paranoid=paranoid, system_wide=system_wide
        )
        if err is not None:
            raise err
        text = out.read_text(errors="replace") if out.exists() else done.stderr
    return parse_perf_stat_csv(text)
