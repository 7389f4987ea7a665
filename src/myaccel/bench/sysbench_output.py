"""Parse what sysbench 1.0.20 printed (stdout and stderr together) into ``SysbenchOutput``.

Two sources, in order of preference:

1. ``MYACCEL {...}`` lines printed by our Lua hooks (``lua/myaccel_report.lua``, loaded by
   ``lua/myaccel_wrapper.lua``): exact counts and windows, one JSON object per line.
2. The plain human text of sysbench 1.0.20 ("[ 1s ] thds: ...", "SQL statistics:", ...).

When both are present the MYACCEL numbers win and the text fills what they lack (threads
fairness). The parser never raises on odd input: garbage, truncated output and interleaved
lines give a result whose ``failure`` says what is missing.

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

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from myaccel.bench.records import (
    EchoedOptions,
    FailureKind,
    FatalError,
    IntervalReport,
    Summary,
    SysbenchOutput,
)

MYACCEL_PREFIX = "MYACCEL "

# Our Lua hooks, shipped inside the package.
LUA_DIR = Path(__file__).resolve().parent / "lua"
LUA_WRAPPER = LUA_DIR / "myaccel_wrapper.lua"
LUA_REPORT_MODULE = LUA_DIR / "myaccel_report.lua"
# Environment variable naming the workload the wrapper runs.
WORKLOAD_ENV = "MYACCEL_WORKLOAD"

# Error codes that mean the connection could not be made at all.
CONNECT_ERROR_CODES = frozenset(
    {
        1044,  # access denied to database
        1045,  # access denied for user
        1049,  # unknown database
        1130,  # host not allowed
        2002,  # can't connect through socket
        2003,  # can't connect to server on host
        2005,  # unknown host
        2059,  # authentication plugin cannot be loaded
    }
)
TOO_MANY_CONNECTIONS_CODES = frozenset({1040, 1203})  # 1203: max_user_connections
# Error codes that mean an established connection went away.
CONNECTION_LOST_CODES = frozenset(
    {
        2006,  # server has gone away
        2013,  # lost connection during query
        2055,  # lost connection at ... system error
        1053,  # server shutdown in progress
        1927,  # MariaDB: connection was killed
        4031,  # MySQL 8: disconnected by the server because of inactivity
    }
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
_GLUED_RE = re.compile(r"(?<=[^\n])(?=MYACCEL \{|SQL statistics:|FATAL: )")

_MAX_DIGITS = 30  # longer digit strings are garbage, not sysbench numbers


def _to_int(s: str | None) -> int | None:
    if s is None or not s or len(s) > _MAX_DIGITS:
        return None
    try:
        return int(s)
    except ValueError:
        return None


def _to_float(s: str | None) -> float | None:
    """A finite float, or None (for "nan", "inf" and anything unparsable)."""
    if s is None or not s or len(s) > 64:
        return None
    try:
        v = float(s)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def _finite(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) else None


# ------------------------------------------------------------------ MYACCEL records


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _MyaccelReport(_Lenient):
    v: int = 1
    kind: Literal["interval", "checkpoint", "summary"]
    t: float
    dt: float | None = None
    threads: int | None = None
    events: int
    reads: int
    writes: int
    other: int
    errors: int
    reconnects: int
    tps: float | None = None
    qps: float | None = None
    reads_per_s: float | None = None
    writes_per_s: float | None = None
    other_per_s: float | None = None
    err_per_s: float | None = None
    reconn_per_s: float | None = None
    lat_ms_pct: float | None = None
    pct: int | None = None
    queue_length: int | None = None
    concurrency: int | None = None
    lat_ms_min: float | None = None
    lat_ms_avg: float | None = None
    lat_ms_max: float | None = None
    lat_ms_sum: float | None = None


def _parse_myaccel(payload: str) -> _MyaccelReport | None:
    try:
        data = json.loads(payload)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    try:
        return _MyaccelReport.model_validate(data)
    except ValidationError:
        return None


def _interval_from_myaccel(r: _MyaccelReport) -> IntervalReport | None:
    rates = (r.tps, r.qps, r.reads_per_s, r.writes_per_s, r.other_per_s, r.lat_ms_pct)
    tps, qps, rps, wps, ops, lat = (_finite(x) for x in rates)
    if tps is None or qps is None or rps is None or wps is None or ops is None or lat is None:
        return None
    if r.threads is None or not math.isfinite(r.t):
        return None
    return IntervalReport(
        t_s=r.t,
        threads=r.threads,
        tps=tps,
        qps=qps,
        reads_per_s=rps,
        writes_per_s=wps,
        other_per_s=ops,
        latency_ms_pct=lat,
        percentile=r.pct,
        err_per_s=_finite(r.err_per_s) or 0.0,
        reconn_per_s=_finite(r.reconn_per_s) or 0.0,
        dt_s=_finite(r.dt),
        events=r.events,
        reads=r.reads,
        writes=r.writes,
        other=r.other,
        errors=r.errors,
        reconnects=r.reconnects,
        queue_length=r.queue_length,
        concurrency=r.concurrency,
        source="myaccel",
    )


def _summary_from_myaccel(r: _MyaccelReport, text: _Block | None) -> Summary | None:
    lat_min, lat_avg, lat_max, lat_sum = (
        _finite(x) for x in (r.lat_ms_min, r.lat_ms_avg, r.lat_ms_max, r.lat_ms_sum)
    )
    if lat_min is None or lat_avg is None or lat_max is None or lat_sum is None:
        return None
    if not math.isfinite(r.t):
        return None
    fair = text.values if text is not None else {}
    return Summary(
        queries_read=r.reads,
        queries_write=r.writes,
        queries_other=r.other,
        queries_total=r.reads + r.writes + r.other,
        transactions=r.events,
        transactions_per_s=_finite(r.tps),
        queries_per_s=_finite(r.qps),
        ignored_errors=r.errors,
        ignored_errors_per_s=_finite(r.err_per_s),
        reconnects=r.reconnects,
        reconnects_per_s=_finite(r.reconn_per_s),
        total_time_s=r.t,
        total_events=r.events,
        latency_ms_min=lat_min,
        latency_ms_avg=lat_avg,
        latency_ms_max=lat_max,
        latency_ms_sum=lat_sum,
        latency_ms_pct=_finite(r.lat_ms_pct),
        percentile=r.pct,
        window_s=_finite(r.dt),
        threads=r.threads,
        fairness_events_avg=fair.get("fairness_events_avg"),
        fairness_events_stddev=fair.get("fairness_events_stddev"),
        fairness_exec_time_avg_s=fair.get("fairness_exec_time_avg_s"),
        fairness_exec_time_stddev_s=fair.get("fairness_exec_time_stddev_s"),
        checkpoint_at_s=r.t if r.kind == "checkpoint" else None,
        source="myaccel",
    )


# ------------------------------------------------------------------ text records


@dataclass
class _Block:
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

    def to_summary(self) -> Summary | None:
        v = self.values
        if self.missing():
            return None

        def count(key: str) -> int:
            return int(v[key])

        pct = v.get("percentile")
        return Summary(
            queries_read=count("queries_read"),
            queries_write=count("queries_write"),
            queries_other=count("queries_other"),
            queries_total=count("queries_total"),
            transactions=count("transactions"),
            transactions_per_s=v.get("transactions_per_s"),
            queries_per_s=v.get("queries_per_s"),
            ignored_errors=count("ignored_errors"),
            ignored_errors_per_s=v.get("ignored_errors_per_s"),
            reconnects=count("reconnects"),
            reconnects_per_s=v.get("reconnects_per_s"),
            total_time_s=v["total_time_s"],
            total_events=count("total_events"),
            latency_ms_min=v["latency_ms_min"],
            latency_ms_avg=v["latency_ms_avg"],
            latency_ms_max=v["latency_ms_max"],
            latency_ms_sum=v["latency_ms_sum"],
            latency_ms_pct=v.get("latency_ms_pct"),
            percentile=int(pct) if pct is not None else None,
            fairness_events_avg=v.get("fairness_events_avg"),
            fairness_events_stddev=v.get("fairness_events_stddev"),
            fairness_exec_time_avg_s=v.get("fairness_exec_time_avg_s"),
            fairness_exec_time_stddev_s=v.get("fairness_exec_time_stddev_s"),
            checkpoint_at_s=self.checkpoint_at_s,
            source="text",
        )


def _read_block_line(line: str, block: _Block) -> bool:
    """Store a cumulative-report value found on ``line``; False if the line is not one."""
    v = block.values
    if m := _COUNT_ONLY_RE.match(line):
        n = _to_int(m.group(2))
        if n is not None:
            v[_COUNT_ONLY[m.group(1)]] = n
        return True
    if m := _COUNT_RATE_RE.match(line):
        count_key, rate_key = _COUNT_RATE[m.group(1)]
        n = _to_int(m.group(2))
        if n is not None:
            v[count_key] = n
        rate = _to_float(m.group(3))
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
        num = _to_float(raw)
        if num is not None:
            v[key] = num
    return True


def _interval_from_text(m: re.Match[str]) -> IntervalReport | None:
    t = _to_float(m.group(1))
    threads = _to_int(m.group(2))
    nums = [_to_float(m.group(i)) for i in (3, 4, 5, 6, 7, 9, 10, 11)]
    tps, qps, rps, wps, ops, lat, err, reconn = nums
    if (
        t is None
        or threads is None
        or tps is None
        or qps is None
        or rps is None
        or wps is None
        or ops is None
        or lat is None
        or err is None
        or reconn is None
    ):
        return None
    return IntervalReport(
        t_s=t,
        threads=threads,
        tps=tps,
        qps=qps,
        reads_per_s=rps,
        writes_per_s=wps,
        other_per_s=ops,
        latency_ms_pct=lat,
        percentile=_to_int(m.group(8)),
        err_per_s=err,
        reconn_per_s=reconn,
        source="text",
    )


def _parse_fatal(message: str) -> FatalError:
    line = "FATAL: " + message
    if m := _RETURNED_RE.match(message):
        return FatalError(
            line=line,
            error_code=_to_int(m.group("code")),
            error_message=m.group("msg"),
            function=m.group("func"),
            query=m.group("query"),
        )
    if m := _LUA_SQL_RE.match(message):
        return FatalError(
            line=line,
            error_code=_to_int(m.group("code")),
            sql_state=m.group("state") or None,
            error_message=m.group("msg"),
            function=m.group("func"),
        )
    if m := _MYSQL_ERROR_RE.match(message):
        return FatalError(
            line=line, error_code=_to_int(m.group("code")), error_message=m.group("msg")
        )
    if m := _CONN_ERROR_RE.match(message):
        return FatalError(
            line=line, error_code=_to_int(m.group("code")), error_message=m.group("msg")
        )
    if m := _FUNC_FAILED_RE.match(message):
        return FatalError(line=line, function=m.group("func"), error_message=m.group("msg"))
    return FatalError(line=line, error_message=message)


# ------------------------------------------------------------------ the parser


@dataclass
class _State:
    version: str | None = None
    luajit: str | None = None
    option_lines: list[str] = field(default_factory=list)
    opts: dict[str, object] = field(default_factory=dict)
    threads_started: bool = False
    text_intervals: list[IntervalReport] = field(default_factory=list)
    blocks: list[_Block] = field(default_factory=list)
    pending_checkpoint: float | None = None
    my_intervals: list[IntervalReport] = field(default_factory=list)
    my_cumulative: list[_MyaccelReport] = field(default_factory=list)
    myaccel_lines: int = 0
    malformed_myaccel: int = 0
    fatals: list[FatalError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    last_logged: Literal["fatal", "other"] = "other"
    ignored_codes: list[int] = field(default_factory=list)
    reconnect_attempts: int = 0
    created: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    rows_inserted: int = 0
    notes: list[str] = field(default_factory=list)


def _read_option_line(line: str, st: _State) -> bool:
    o = st.opts
    if m := _THREADS_RE.match(line):
        o["threads"] = _to_int(m.group(1))
    elif m := _RATE_RE.match(line):
        o["target_rate_per_s"] = _to_int(m.group(1))
    elif m := _REPORT_INTERVAL_RE.match(line):
        o["report_interval_s"] = _to_int(m.group(1))
    elif m := _REPORT_CHECKPOINTS_RE.match(line):
        points = [_to_int(p.strip()) for p in m.group(1).split(",") if p.strip()]
        o["report_checkpoints_s"] = tuple(p for p in points if p is not None)
    elif m := _SEED_RE.match(line):
        o["random_seed"] = _to_int(m.group(1))
    elif _SEED_TIME_RE.match(line):
        o["seeded_from_time"] = True
    elif m := _FORCED_SHUTDOWN_RE.match(line):
        o["forced_shutdown_s"] = _to_int(m.group(1))
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
def _read_line(line: str, st: _State, *, partial: bool = False) -> None:  # noqa: C901
    """Read one line. ``partial``: the last line of a capture without its newline, whose
    numbers may be cut short; it is not trusted for figures."""
    if line.startswith(MYACCEL_PREFIX):
        st.myaccel_lines += 1
        rec = _parse_myaccel(line[len(MYACCEL_PREFIX) :])
        if rec is None:
            st.malformed_myaccel += 1
        elif rec.kind == "interval":
            interval = _interval_from_myaccel(rec)
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
        t = _to_float(m.group(1))
        if st.text_intervals and st.text_intervals[-1].t_s == t:
            st.text_intervals[-1] = st.text_intervals[-1].model_copy(
                update={
                    "queue_length": _to_int(m.group(2)),
                    "concurrency": _to_int(m.group(3)),
                }
            )
        return
    if m := _CHECKPOINT_RE.match(line):
        st.pending_checkpoint = _to_float(m.group(1))
        return

    stripped = line.strip()
    if stripped == "SQL statistics:" or (
        stripped == "General statistics:"
        and (not st.blocks or "total_time_s" in st.blocks[-1].values)
    ):
        st.blocks.append(_Block(checkpoint_at_s=st.pending_checkpoint))
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
        n = _to_int(m.group(1)) or 0
        if st.last_logged == "fatal" and st.fatals:
            last = st.fatals[-1]
            st.fatals[-1] = last.model_copy(update={"repeated": last.repeated + n})
        return
    st.last_logged = "other"
    if line.startswith("WARNING: "):
        st.warnings.append(line[len("WARNING: ") :].rstrip())
        return
    if m := _IGNORING_RE.match(line):
        code = _to_int(m.group(1))
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
        st.rows_inserted += _to_int(m.group(1)) or 0
        return
    if m := _DROPPING_RE.match(line):
        st.dropped.append(m.group(1))


def _merge_intervals(st: _State) -> tuple[IntervalReport, ...]:
    if not st.my_intervals:
        return tuple(st.text_intervals)
    merged = list(st.my_intervals)
    last_t = round(merged[-1].t_s)
    # A truncated tail may hold a human line whose MYACCEL twin never made it out.
    merged.extend(i for i in st.text_intervals if i.t_s > last_t)
    return tuple(merged)


def _cumulative_reports(st: _State) -> tuple[Summary | None, tuple[Summary, ...], list[str]]:
    notes: list[str] = []
    text_final: _Block | None = None
    text_checkpoints: list[_Block] = []
    for block in st.blocks:
        if block.checkpoint_at_s is None:
            text_final = block
        else:
            text_checkpoints.append(block)

    def text_checkpoint_at(t: float) -> _Block | None:
        for b in text_checkpoints:
            if b.checkpoint_at_s is not None and abs(b.checkpoint_at_s - t) < 1.0:
                return b
        return None

    my_final = [r for r in st.my_cumulative if r.kind == "summary"]
    my_checkpoints = [r for r in st.my_cumulative if r.kind == "checkpoint"]

    summary: Summary | None = None
    if my_final:
        summary = _summary_from_myaccel(my_final[-1], text_final)
        if summary is None:
            notes.append("the MYACCEL summary line lacks latency figures; used the text")
    if summary is None and text_final is not None:
        summary = text_final.to_summary()
        if summary is None:
            missing = ", ".join(text_final.missing())
            notes.append(f"the summary is incomplete (missing: {missing})")

    checkpoints: list[Summary] = []
    if my_checkpoints:
        for r in my_checkpoints:
            cp = _summary_from_myaccel(r, text_checkpoint_at(r.t))
            if cp is not None:
                checkpoints.append(cp)
    else:
        for b in text_checkpoints:
            cp = b.to_summary()
            if cp is not None:
                checkpoints.append(cp)
    return summary, tuple(checkpoints), notes


def _command(st: _State) -> Literal["run", "prepare", "cleanup", "unknown"]:
    if st.threads_started or st.option_lines or st.text_intervals or st.my_intervals:
        return "run"
    if st.blocks or st.my_cumulative:
        return "run"
    if st.created or st.rows_inserted:
        return "prepare"
    if st.dropped:
        return "cleanup"
    return "unknown"


def _signal_name(exit_code: int) -> str:
    signo = -exit_code if exit_code < 0 else exit_code - 128
    names = {6: "SIGABRT", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM", 2: "SIGINT", 7: "SIGBUS"}
    return names.get(signo, f"signal {signo}")


def _classify(
    st: _State,
    command: str,
    summary: Summary | None,
    intervals: tuple[IntervalReport, ...],
    exit_code: int | None,
) -> tuple[FailureKind, list[str]]:
    kinds: list[FailureKind] = []
    reasons: list[str] = []

    if exit_code is not None and (exit_code < 0 or exit_code >= 128):
        kinds.append(FailureKind.CRASHED)
        reasons.append(
            f"sysbench was killed by {_signal_name(exit_code)} (exit code {exit_code})"
            + (
                " after trying to reconnect: the Debian build's MariaDB client library "
                "crashes on reconnect"
                if st.reconnect_attempts
                else ""
            )
        )

    codes = [f.error_code for f in st.fatals if f.error_code is not None]
    connect_failed = any(
        "unable to connect" in f.line or "connection creation failed" in f.line for f in st.fatals
    )
    first_sql = next((f for f in st.fatals if f.error_code is not None), None)
    if any(c in TOO_MANY_CONNECTIONS_CODES for c in codes):
        kinds.append(FailureKind.TOO_MANY_CONNECTIONS)
        reasons.append(
            "the server refused connections: error 1040 'Too many connections' "
            "(raise max_connections above --threads)"
        )
    if connect_failed or any(c in CONNECT_ERROR_CODES for c in codes):
        code = next((c for c in codes if c in CONNECT_ERROR_CODES), None)
        msg = next((f.error_message for f in st.fatals if f.error_code == code), None)
        kinds.append(FailureKind.CONNECTION_FAILED)
        reasons.append(
            "sysbench could not connect to the server"
            + (f": error {code} ({msg})" if code is not None else "")
        )
    lost = [c for c in codes if c in CONNECTION_LOST_CODES]
    lost += [c for c in st.ignored_codes if c in CONNECTION_LOST_CODES]
    if lost:
        kinds.append(FailureKind.CONNECTION_LOST)
        reasons.append(f"the connection to the server was lost mid-run (error {lost[0]})")
    other_sql = [
        f
        for f in st.fatals
        if f.error_code is not None
        and f.error_code not in CONNECT_ERROR_CODES | TOO_MANY_CONNECTIONS_CODES
        and f.error_code not in CONNECTION_LOST_CODES
    ]
    if other_sql:
        f = other_sql[0]
        kinds.append(FailureKind.FATAL_SQL_ERROR)
        where = f" in {f.function}()" if f.function else ""
        query = f" for query '{f.query}'" if f.query else ""
        reasons.append(f"SQL error {f.error_code} ({f.error_message}){where}{query}")
    if st.fatals and first_sql is None and not connect_failed:
        kinds.append(FailureKind.FATAL_ERROR)
        reasons.append(f"sysbench stopped: {st.fatals[0].line}")

    if command == "run" and summary is None:
        kinds.append(FailureKind.NO_SUMMARY)
        reasons.append(
            f"no complete summary after {len(intervals)} interval report(s)"
            + (" (the output may be truncated, or sysbench was killed)" if not st.fatals else "")
        )
    if (
        exit_code is not None
        and 0 < exit_code < 128
        and not st.fatals
        and (summary is not None or command != "run")
    ):
        kinds.append(FailureKind.FATAL_ERROR)
        reasons.append(f"sysbench exited with code {exit_code}")

    if command == "unknown" and not st.fatals and summary is None:
        if st.version is None:
            kinds.append(FailureKind.UNRECOGNIZED)
            reasons.append("this does not look like sysbench output")
        else:
            kinds.append(FailureKind.NO_SUMMARY)
            reasons.append("sysbench printed its banner and nothing else")

    if summary is not None:
        if summary.reconnects > 0:
            kinds.append(FailureKind.RECONNECTS_PRESENT)
            reasons.append(
                f"{summary.reconnects} reconnect(s) during the run: the run is not valid"
            )
        if summary.ignored_errors > 0:
            rate = summary.ignored_errors_per_s
            per_s = f" ({rate:.2f} per s)" if rate is not None else ""
            kinds.append(FailureKind.IGNORED_ERRORS_PRESENT)
            reasons.append(
                f"{summary.ignored_errors} ignored error(s){per_s} were retried; "
                "they inflate latency and query counts"
            )
    if st.reconnect_attempts and summary is None and not kinds:
        kinds.append(FailureKind.CONNECTION_LOST)
        reasons.append("sysbench tried to reconnect and printed nothing after that")

    order = list(FailureKind)
    failure = min(kinds, key=order.index) if kinds else FailureKind.OK
    return failure, reasons


def parse_output(text: str | bytes, *, exit_code: int | None = None) -> SysbenchOutput:
    """Parse sysbench 1.0.20 output (stdout and stderr together) into ``SysbenchOutput``.

    ``exit_code``, when known, lets a crash (signal) be told from a truncated capture.
    Never raises for odd input.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    st = _State()
    text = _GLUED_RE.sub("\n", text.replace("\r\n", "\n").replace("\r", "\n"))
    lines = text.split("\n")
    # sysbench ends every line with a newline: a last line without one was cut short.
    last = lines.pop()
    for raw in lines:
        _read_line(raw, st)
    if last:
        _read_line(last, st, partial=True)

    intervals = _merge_intervals(st)
    summary, checkpoints, notes = _cumulative_reports(st)
    command = _command(st)
    failure, reasons = _classify(st, command, summary, intervals, exit_code)

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
        exit_code=exit_code,
        failure=failure,
        failure_reasons=tuple(reasons),
    )
