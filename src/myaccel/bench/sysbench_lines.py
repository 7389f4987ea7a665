"""Reading sysbench 1.0.20's output line by line: what each line is, and what it holds.

``read_line`` classifies one line (a MYACCEL record, an interval, a cumulative report's
value, a FATAL error, an echoed option, ...) and stores what it found in a ``ParseState``;
the human text's records (cumulative blocks, interval lines, FATAL messages) are parsed
here, the MYACCEL JSON lines in ``sysbench_myaccel``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Literal

from myaccel.bench.records import FatalError, IntervalReport, ThreadCounts
from myaccel.bench.sysbench_myaccel import (
    MYACCEL_PREFIX,
    MyaccelReport,
    interval_from_myaccel,
    interval_report,
    parse_myaccel,
    parse_thread,
)

# printf("%f") renders NaN / infinity as "nan", "-nan", "inf".
_NUM = r"(-?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|inf))"
_T = r"\[\s*(\d+(?:\.\d+)?)s\s*\]"

_VERSION_RE = re.compile(r"^sysbench (\d[\w.\-]*?):?(?: \(using (.+)\))?\s*$")
_INTERVAL_RE = re.compile(
    rf"^{_T}\s+thds:\s*(\d+)\s+tps:\s*{_NUM}\s+qps:\s*{_NUM}\s+"
    rf"\(r/w/o:\s*{_NUM}/{_NUM}/{_NUM}\)\s+lat\s+\(ms,\s*(\d+)%\):\s*{_NUM}\s+"
    rf"err/s:?\s*{_NUM}\s+reconn/s:\s*{_NUM}\s*$"
)
_QUEUE_RE = re.compile(rf"^{_T}\s+queue length:\s*(\d+),\s*concurrency:\s*(\d+)\s*$")
_CHECKPOINT_RE = re.compile(rf"^{_T}\s+Checkpoint report:\s*$")

# Lines of a cumulative report -> field name(s).
_COUNT_ONLY = {
    "read": "queries_read",
    "write": "queries_write",
    "other": "queries_other",
    "total": "queries_total",
}
_COUNT_RATE = {
    "transactions": ("transactions", "transactions_per_s"),
    "queries": ("queries", "queries_per_s"),
    "ignored errors": ("ignored_errors", "ignored_errors_per_s"),
    "reconnects": ("reconnects", "reconnects_per_s"),
}
_LATENCY = {"min": "latency_ms_min", "avg": "latency_ms_avg", "max": "latency_ms_max"}
_COUNT_ONLY_RE = re.compile(r"^\s+(read|write|other|total):\s+(\d+)\s*$")
_COUNT_RATE_RE = re.compile(
    rf"^\s+(transactions|queries|ignored errors|reconnects):\s+(\d+)\s*\({_NUM} per sec\.\)\s*$"
)
_TOTAL_TIME_RE = re.compile(rf"^\s+total time:\s+{_NUM}s\s*$")
_TOTAL_EVENTS_RE = re.compile(r"^\s+total number of events:\s+(\d+)\s*$")
_LATENCY_RE = re.compile(rf"^\s+(min|avg|max):\s+{_NUM}\s*$")
_PCT_RE = re.compile(rf"^\s+(\d+)th percentile:\s+{_NUM}\s*$")
_SUM_RE = re.compile(rf"^\s+sum:\s+{_NUM}\s*$")
_FAIR_EVENTS_RE = re.compile(rf"^\s+events \(avg/stddev\):\s+{_NUM}/{_NUM}\s*$")
_FAIR_TIME_RE = re.compile(rf"^\s+execution time \(avg/stddev\):\s+{_NUM}/{_NUM}\s*$")

# FATAL message shapes (drv_mysql.c, sb_lua.c, oltp_common.lua).
_RETURNED_RE = re.compile(
    r"^(?P<func>[\w.]+)\(\) returned error (?P<code>\d+) \((?P<msg>.*)\)"
    r"(?: for query '(?P<query>.*?)'?)?\s*$"
)
_MYSQL_ERROR_RE = re.compile(r'^MySQL error: (?P<code>\d+) "?(?P<msg>.*?)"?\s*$')
_CONN_ERROR_RE = re.compile(r"^error (?P<code>\d+): (?P<msg>.*)$")
_LUA_SQL_RE = re.compile(
    r"^`(?P<func>\w+)' function failed: .*?SQL error, errno = (?P<code>\d+), "
    r"state = '(?P<state>[^']*)': (?P<msg>.*)$"
)
_CALL_FAILED_RE = re.compile(r"^FATAL: (?P<func>[\w.]+)\(\) failed\s*$")
_FUNC_FAILED_RE = re.compile(r"^`(?P<func>\w+)' function failed: (?P<msg>.*)$")
_REPEATED_RE = re.compile(r"^\(last message repeated (\d+) times?\)\s*$")
_IGNORING_RE = re.compile(r"^DEBUG: Ignoring error (\d+)")

_CREATING_RE = re.compile(r"^Creating table '([^']*)'")
_INSERTING_RE = re.compile(r"^Inserting (\d+) records into '([^']*)'")
_DROPPING_RE = re.compile(r"^Dropping table '([^']*)'")

_THREADS_RE = re.compile(r"^Number of threads: (\d+)\s*$")
_RATE_RE = re.compile(r"^Target transaction rate: (\d+)/sec\s*$")
_REPORT_INTERVAL_RE = re.compile(r"^Report intermediate results every (\d+) second\(s\)\s*$")
_REPORT_CHECKPOINTS_RE = re.compile(r"^Report checkpoint\(s\) at ([\d, ]+) seconds\s*$")
_SEED_RE = re.compile(r"^Initializing random number generator from seed \((-?\d+)\)\.?\s*$")
_SEED_TIME_RE = re.compile(r"^Initializing random number generator from (current time|timer)")
_FORCED_SHUTDOWN_RE = re.compile(r"^Forcing shutdown in (\d+) seconds\s*$")

# Records another thread printed before this line's newline (print() in Lua writes the
# newline separately): "... reconn/s: 0.00SQL statistics:". Split them apart.
GLUED_RE = re.compile(r"(?<=[^\n])(?=MYACCEL \{|SQL statistics:|FATAL: )")

_MAX_DIGITS = 30  # longer digit strings are garbage, not sysbench numbers


def to_int(s: str | None) -> int | None:
    if s is None or not s or len(s) > _MAX_DIGITS:
        return None
    try:
        return int(s)
    except ValueError:
        return None


def to_float(s: str | None) -> float | None:
    """A finite float, or None (for "nan", "inf" and anything unparsable)."""
    if s is None or not s or len(s) > 64:
        return None
    try:
        v = float(s)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


# ------------------------------------------------------------------ text records


@dataclass
class TextBlock:
    """A cumulative report being read from the human text."""

    checkpoint_at_s: float | None
    values: dict[str, float] = field(default_factory=dict)

    _REQUIRED = (
        "queries_read",
        "queries_write",
        "queries_other",
        "queries_total",
        "transactions",
        "queries",
        "ignored_errors",
        "reconnects",
        "total_time_s",
        "total_events",
        "latency_ms_min",
        "latency_ms_avg",
        "latency_ms_max",
        "latency_ms_sum",
    )

    def missing(self) -> list[str]:
        return [k for k in self._REQUIRED if k not in self.values]


def _read_block_line(line: str, block: TextBlock) -> bool:
    """Store a cumulative-report value found on ``line``; False if the line is not one."""
    v = block.values
    if m := _COUNT_ONLY_RE.match(line):
        n = to_int(m.group(2))
        if n is not None:
            v[_COUNT_ONLY[m.group(1)]] = n
        return True
    if m := _COUNT_RATE_RE.match(line):
        count_key, rate_key = _COUNT_RATE[m.group(1)]
        n = to_int(m.group(2))
        if n is not None:
            v[count_key] = n
        rate = to_float(m.group(3))
        if rate is not None:
            v[rate_key] = rate
        return True
    pairs: list[tuple[str, str | None]] = []
    if m := _TOTAL_TIME_RE.match(line):
        pairs = [("total_time_s", m.group(1))]
    elif m := _TOTAL_EVENTS_RE.match(line):
        pairs = [("total_events", m.group(1))]
    elif m := _LATENCY_RE.match(line):
        pairs = [(_LATENCY[m.group(1)], m.group(2))]
    elif m := _PCT_RE.match(line):
        pairs = [("percentile", m.group(1)), ("latency_ms_pct", m.group(2))]
    elif m := _SUM_RE.match(line):
        pairs = [("latency_ms_sum", m.group(1))]
    elif m := _FAIR_EVENTS_RE.match(line):
        pairs = [("fairness_events_avg", m.group(1)), ("fairness_events_stddev", m.group(2))]
    elif m := _FAIR_TIME_RE.match(line):
        pairs = [
            ("fairness_exec_time_avg_s", m.group(1)),
            ("fairness_exec_time_stddev_s", m.group(2)),
        ]
    else:
        return False
    for key, raw in pairs:
        num = to_float(raw)
        if num is not None:
            v[key] = num
    return True


# The figures of an interval line: field -> regex group of _INTERVAL_RE (8 is the percentile).
_INTERVAL_GROUPS = {
    "tps": 3,
    "qps": 4,
    "reads_per_s": 5,
    "writes_per_s": 6,
    "other_per_s": 7,
    "latency_ms_pct": 9,
    "err_per_s": 10,
    "reconn_per_s": 11,
}


def _interval_from_text(m: re.Match[str]) -> IntervalReport | None:
    figures = {k: to_float(m.group(g)) for k, g in _INTERVAL_GROUPS.items()}
    return interval_report(
        {"t_s": to_float(m.group(1)), "threads": to_int(m.group(2)), **figures},
        percentile=to_int(m.group(8)),
        source="text",
    )


def _parse_fatal(message: str) -> FatalError:
    line = "FATAL: " + message
    if m := _RETURNED_RE.match(message):
        return FatalError(
            line=line,
            error_code=to_int(m.group("code")),
            error_message=m.group("msg"),
            function=m.group("func"),
            query=m.group("query"),
        )
    if m := _LUA_SQL_RE.match(message):
        return FatalError(
            line=line,
            error_code=to_int(m.group("code")),
            sql_state=m.group("state") or None,
            error_message=m.group("msg"),
            function=m.group("func"),
        )
    if m := _MYSQL_ERROR_RE.match(message):
        return FatalError(
            line=line, error_code=to_int(m.group("code")), error_message=m.group("msg")
        )
    if m := _CONN_ERROR_RE.match(message):
        return FatalError(
            line=line, error_code=to_int(m.group("code")), error_message=m.group("msg")
        )
    if m := _FUNC_FAILED_RE.match(message):
        return FatalError(line=line, function=m.group("func"), error_message=m.group("msg"))
    return FatalError(line=line, error_message=message)


# ------------------------------------------------------------------ the parser


# ------------------------------------------------------------------ the parser state


@dataclass
class ParseState:
    version: str | None = None
    luajit: str | None = None
    option_lines: list[str] = field(default_factory=list)
    opts: dict[str, object] = field(default_factory=dict)
    threads_started: bool = False
    text_intervals: list[IntervalReport] = field(default_factory=list)
    blocks: list[TextBlock] = field(default_factory=list)
    pending_checkpoint: float | None = None
    my_intervals: list[IntervalReport] = field(default_factory=list)
    my_cumulative: list[MyaccelReport] = field(default_factory=list)
    myaccel_lines: int = 0
    malformed_myaccel: int = 0
    threads_ran: list[ThreadCounts] = field(default_factory=list)
    fatals: list[FatalError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    last_logged: Literal["fatal", "other"] = "other"
    ignored_codes: list[int] = field(default_factory=list)
    reconnect_attempts: int = 0
    created: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    rows_inserted: int = 0
    notes: list[str] = field(default_factory=list)


def _read_option_line(line: str, st: ParseState) -> bool:
    o = st.opts
    if m := _THREADS_RE.match(line):
        o["threads"] = to_int(m.group(1))
    elif m := _RATE_RE.match(line):
        o["target_rate_per_s"] = to_int(m.group(1))
    elif m := _REPORT_INTERVAL_RE.match(line):
        o["report_interval_s"] = to_int(m.group(1))
    elif m := _REPORT_CHECKPOINTS_RE.match(line):
        points = [to_int(p.strip()) for p in m.group(1).split(",") if p.strip()]
        o["report_checkpoints_s"] = tuple(p for p in points if p is not None)
    elif m := _SEED_RE.match(line):
        o["random_seed"] = to_int(m.group(1))
    elif _SEED_TIME_RE.match(line):
        o["seeded_from_time"] = True
    elif m := _FORCED_SHUTDOWN_RE.match(line):
        o["forced_shutdown_s"] = to_int(m.group(1))
    elif line.startswith("Debug mode enabled"):
        o["debug"] = True
    elif line.startswith(("Validation checks: on", "Additional request validation")):
        o["validation_checks"] = True
    else:
        return False
    st.option_lines.append(line.rstrip())
    return True


# One flat dispatch on the line's prefix, in the order sysbench prints them: splitting it
# would scatter the output format over functions that each see one branch.
def read_line(line: str, st: ParseState, *, partial: bool = False) -> None:  # noqa: C901
    """Read one line. ``partial``: the last line of a capture without its newline, whose
    numbers may be cut short; it is not trusted for figures."""
    if line.startswith(MYACCEL_PREFIX):
        st.myaccel_lines += 1
        payload = line[len(MYACCEL_PREFIX) :]
        if '"thread"' in payload and (thread := parse_thread(payload)) is not None:
            st.threads_ran.append(thread)
            return
        rec = parse_myaccel(payload)
        if rec is None:
            st.malformed_myaccel += 1
        elif rec.kind == "interval":
            interval = interval_from_myaccel(rec)
            if interval is None:
                st.malformed_myaccel += 1
            else:
                st.my_intervals.append(interval)
        else:
            st.my_cumulative.append(rec)
        return

    if partial and (_INTERVAL_RE.match(line) or _QUEUE_RE.match(line) or line[:1].isspace()):
        st.notes.append("the output ends in the middle of a line; that line was ignored")
        return
    if m := _INTERVAL_RE.match(line):
        interval = _interval_from_text(m)
        if interval is not None:
            st.text_intervals.append(interval)
        else:
            st.notes.append(f"interval line with non-finite numbers skipped: {line.strip()}")
        return
    if m := _QUEUE_RE.match(line):
        t = to_float(m.group(1))
        if st.text_intervals and st.text_intervals[-1].t_s == t:
            st.text_intervals[-1] = st.text_intervals[-1].model_copy(
                update={
                    "queue_length": to_int(m.group(2)),
                    "concurrency": to_int(m.group(3)),
                }
            )
        return
    if m := _CHECKPOINT_RE.match(line):
        st.pending_checkpoint = to_float(m.group(1))
        return

    stripped = line.strip()
    if stripped == "SQL statistics:" or (
        stripped == "General statistics:"
        and (not st.blocks or "total_time_s" in st.blocks[-1].values)
    ):
        st.blocks.append(TextBlock(checkpoint_at_s=st.pending_checkpoint))
        st.pending_checkpoint = None
        return
    if st.blocks and line[:1].isspace() and _read_block_line(line, st.blocks[-1]):
        return

    if line.startswith("FATAL: "):
        fatal = _parse_fatal(line[len("FATAL: ") :].rstrip())
        # "FATAL: mysql_stmt_prepare() failed" is followed by "FATAL: MySQL error: ...".
        prev = _CALL_FAILED_RE.match(st.fatals[-1].line) if st.fatals else None
        if prev and fatal.error_code is not None and fatal.function is None:
            fatal = fatal.model_copy(update={"function": prev.group("func")})
        st.fatals.append(fatal)
        st.last_logged = "fatal"
        return
    if line.startswith("invalid option: "):
        st.fatals.append(FatalError(line=line.rstrip(), error_message=line.strip()))
        st.last_logged = "fatal"
        return
    if m := _REPEATED_RE.match(line):
        n = to_int(m.group(1)) or 0
        if st.last_logged == "fatal" and st.fatals:
            last = st.fatals[-1]
            st.fatals[-1] = last.model_copy(update={"repeated": last.repeated + n})
        return
    st.last_logged = "other"
    if line.startswith("WARNING: "):
        st.warnings.append(line[len("WARNING: ") :].rstrip())
        return
    if m := _IGNORING_RE.match(line):
        code = to_int(m.group(1))
        if code is not None:
            st.ignored_codes.append(code)
        return
    if line.startswith("DEBUG: Reconnecting"):
        st.reconnect_attempts += 1
        return
    if st.version is None and (m := _VERSION_RE.match(line)):
        st.version = m.group(1)
        st.luajit = m.group(2)
        return
    if _read_option_line(line, st):
        return
    if stripped == "Threads started!":
        st.threads_started = True
        return
    if m := _CREATING_RE.match(line):
        st.created.append(m.group(1))
        return
    if m := _INSERTING_RE.match(line):
        st.rows_inserted += to_int(m.group(1)) or 0
        return
    if m := _DROPPING_RE.match(line):
        st.dropped.append(m.group(1))
