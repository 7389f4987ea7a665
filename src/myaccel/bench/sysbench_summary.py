"""From what the lines held to the result: intervals, the summary and checkpoints (MYACCEL
numbers first, the text filling what they lack), the command, and what went wrong."""

from __future__ import annotations

from math import isfinite
from typing import Literal

from myaccel.bench.records import FailureKind, IntervalReport, Summary
from myaccel.bench.sysbench_lines import ParseState, TextBlock
from myaccel.bench.sysbench_myaccel import MyaccelReport, finite

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


# Summary fields the text gives under the same names: counts, then figures.
_TEXT_COUNTS = (
    "queries_read",
    "queries_write",
    "queries_other",
    "queries_total",
    "transactions",
    "ignored_errors",
    "reconnects",
    "total_events",
)
_TEXT_FIGURES = (
    "transactions_per_s",
    "queries_per_s",
    "ignored_errors_per_s",
    "reconnects_per_s",
    "total_time_s",
    "latency_ms_min",
    "latency_ms_avg",
    "latency_ms_max",
    "latency_ms_sum",
    "latency_ms_pct",
)
# Threads fairness: only the text has it, also when the MYACCEL numbers win.
_FAIRNESS = (
    "fairness_events_avg",
    "fairness_events_stddev",
    "fairness_exec_time_avg_s",
    "fairness_exec_time_stddev_s",
)


def _fairness(block: TextBlock | None) -> dict[str, float | None]:
    values = block.values if block is not None else {}
    return {key: values.get(key) for key in _FAIRNESS}


def summary_from_text(block: TextBlock) -> Summary | None:
    """The block as a ``Summary``; None while a required figure is missing."""
    if block.missing():
        return None
    v = block.values
    pct = v.get("percentile")
    return Summary.model_validate(
        {
            **{key: int(v[key]) for key in _TEXT_COUNTS},
            **{key: v.get(key) for key in _TEXT_FIGURES},
            **_fairness(block),
            "percentile": int(pct) if pct is not None else None,
            "checkpoint_at_s": block.checkpoint_at_s,
            "source": "text",
        }
    )


def _summary_from_myaccel(r: MyaccelReport, text: TextBlock | None) -> Summary | None:
    lat_min, lat_avg, lat_max, lat_sum = (
        finite(x) for x in (r.lat_ms_min, r.lat_ms_avg, r.lat_ms_max, r.lat_ms_sum)
    )
    if lat_min is None or lat_avg is None or lat_max is None or lat_sum is None:
        return None
    if not isfinite(r.t):
        return None
    return Summary(
        queries_read=r.reads,
        queries_write=r.writes,
        queries_other=r.other,
        queries_total=r.reads + r.writes + r.other,
        transactions=r.events,
        transactions_per_s=finite(r.tps),
        queries_per_s=finite(r.qps),
        ignored_errors=r.errors,
        ignored_errors_per_s=finite(r.err_per_s),
        reconnects=r.reconnects,
        reconnects_per_s=finite(r.reconn_per_s),
        total_time_s=r.t,
        total_events=r.events,
        latency_ms_min=lat_min,
        latency_ms_avg=lat_avg,
        latency_ms_max=lat_max,
        latency_ms_sum=lat_sum,
        latency_ms_pct=finite(r.lat_ms_pct),
        percentile=r.pct,
        window_s=finite(r.dt),
        threads=r.threads,
        **_fairness(text),
        checkpoint_at_s=r.t if r.kind == "checkpoint" else None,
        source="myaccel",
    )


def merge_intervals(st: ParseState) -> tuple[IntervalReport, ...]:
    if not st.my_intervals:
        return tuple(st.text_intervals)
    merged = list(st.my_intervals)
    last_t = round(merged[-1].t_s)
    # A truncated tail may hold a human line whose MYACCEL twin never made it out.
    merged.extend(i for i in st.text_intervals if i.t_s > last_t)
    return tuple(merged)


def cumulative_reports(st: ParseState) -> tuple[Summary | None, tuple[Summary, ...], list[str]]:
    notes: list[str] = []
    text_final: TextBlock | None = None
    text_checkpoints: list[TextBlock] = []
    for block in st.blocks:
        if block.checkpoint_at_s is None:
            text_final = block
        else:
            text_checkpoints.append(block)

    def text_checkpoint_at(t: float) -> TextBlock | None:
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
        summary = summary_from_text(text_final)
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
            cp = summary_from_text(b)
            if cp is not None:
                checkpoints.append(cp)
    return summary, tuple(checkpoints), notes


def command_of(st: ParseState) -> Literal["run", "prepare", "cleanup", "unknown"]:
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


def classify(
    st: ParseState,
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
