"""Parse what sysbench 1.0.20 printed (stdout and stderr together) into ``SysbenchOutput``.

Two sources, in order of preference:

1. ``MYACCEL {...}`` lines printed by our Lua hooks (``lua/myaccel_report.lua``, loaded by
   ``lua/myaccel_wrapper.lua``): exact counts and windows, one JSON object per line.
2. The plain human text of sysbench 1.0.20 ("[ 1s ] thds: ...", "SQL statistics:", ...).

When both are present the MYACCEL numbers win and the text fills what they lack (threads
fairness). The parser never raises on odd input: garbage, truncated output and interleaved
lines give a result whose ``failure`` says what is missing.

``parse_output`` is the entry point; ``sysbench_lines`` classifies each line and reads the
human text, ``sysbench_myaccel`` the MYACCEL lines, ``sysbench_summary`` assembles the
summary, the checkpoints and the failure.

Shapes of the human text worth knowing (all seen on real 1.0.20 runs, see
tests/fixtures/sysbench/):

* the interval line from ``sysbench.report_default`` (Lua) prints ``err/s`` without the
  colon that the C reporter prints;
* with ``--report-checkpoints`` the reporting thread may print interval lines between
  "[ Ns ] Checkpoint report:" and its "SQL statistics:" block;
* ``(last message repeated N times)`` folds identical log lines;
* errors after which sysbench ends print ``FATAL:`` lines and no summary (exit code 1);
  a client-side crash (SIGSEGV on reconnect with the MariaDB client library) prints
  nothing at all: the output just stops.
"""

from __future__ import annotations

from pathlib import Path

from myaccel.bench.records import EchoedOptions, SysbenchOutput
from myaccel.bench.sysbench_lines import GLUED_RE, ParseState, read_line
from myaccel.bench.sysbench_myaccel import MYACCEL_PREFIX
from myaccel.bench.sysbench_summary import (
    classify,
    command_of,
    cumulative_reports,
    merge_intervals,
)

# Our Lua hooks, shipped inside the package.
LUA_DIR = Path(__file__).resolve().parent / "lua"
LUA_WRAPPER = LUA_DIR / "myaccel_wrapper.lua"
LUA_REPORT_MODULE = LUA_DIR / "myaccel_report.lua"
# Environment variable naming the workload the wrapper runs.
WORKLOAD_ENV = "MYACCEL_WORKLOAD"


def parse_output(text: str | bytes, *, exit_code: int | None = None) -> SysbenchOutput:
    """Parse sysbench 1.0.20 output (stdout and stderr together) into ``SysbenchOutput``.

    ``exit_code``, when known, lets a crash (signal) be told from a truncated capture.
    Never raises for odd input.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    st = ParseState()
    text = GLUED_RE.sub("\n", text.replace("\r\n", "\n").replace("\r", "\n"))
    lines = text.split("\n")
    # sysbench ends every line with a newline: a last line without one was cut short.
    last = lines.pop()
    for raw in lines:
        read_line(raw, st)
    if last:
        read_line(last, st, partial=True)

    intervals = merge_intervals(st)
    summary, checkpoints, notes = cumulative_reports(st)
    command = command_of(st)
    failure, reasons = classify(st, command, summary, intervals, exit_code)

    o = st.opts

    def opt_int(key: str) -> int | None:
        v = o.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    checkpoints_opt = o.get("report_checkpoints_s", ())
    options = EchoedOptions(
        threads=opt_int("threads"),
        target_rate_per_s=opt_int("target_rate_per_s"),
        report_interval_s=opt_int("report_interval_s"),
        report_checkpoints_s=checkpoints_opt if isinstance(checkpoints_opt, tuple) else (),
        random_seed=opt_int("random_seed"),
        seeded_from_time=bool(o.get("seeded_from_time", False)),
        debug=bool(o.get("debug", False)),
        validation_checks=bool(o.get("validation_checks", False)),
        forced_shutdown_s=opt_int("forced_shutdown_s"),
        lines=tuple(st.option_lines),
    )
    warnings = list(st.warnings)
    if st.malformed_myaccel:
        warnings.append(f"{st.malformed_myaccel} MYACCEL line(s) could not be read")
    warnings.extend(notes)
    warnings.extend(st.notes)
    return SysbenchOutput(
        sysbench_version=st.version,
        luajit=st.luajit,
        command=command,
        options=options,
        threads_started=st.threads_started,
        intervals=intervals,
        summary=summary,
        checkpoints=checkpoints,
        fatal_errors=tuple(st.fatals),
        warnings=tuple(warnings),
        ignored_error_codes=tuple(st.ignored_codes),
        reconnect_attempts=st.reconnect_attempts,
        tables_created=tuple(st.created),
        tables_dropped=tuple(st.dropped),
        rows_inserted=st.rows_inserted,
        myaccel_lines=st.myaccel_lines,
        malformed_myaccel_lines=st.malformed_myaccel,
        threads_ran=tuple(st.threads_ran),
        exit_code=exit_code,
        failure=failure,
        failure_reasons=tuple(reasons),
    )


__all__ = [
    "LUA_DIR",
    "LUA_REPORT_MODULE",
    "LUA_WRAPPER",
    "MYACCEL_PREFIX",
    "WORKLOAD_ENV",
    "parse_output",
]
