"""What one sysbench invocation printed, as data: the result of ``parse_output``.

Units are in the names (``_s`` seconds, ``_ms`` milliseconds, ``_per_s`` rates). Counts
that sysbench prints only as rates in its human text (the per-interval ``reads`` etc.) are
present only when the machine-readable ``MYACCEL`` lines of our Lua hooks were available.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field

from myaccel.model import Frozen

SYSBENCH_OUTPUT_SCHEMA = "myaccel.sysbench-output/1"

Source = Literal["myaccel", "text"]


class FailureKind(StrEnum):
    """How a sysbench run ended, worst first when several apply.

    Only ``ok`` and ``ignored-errors-present`` produced a summary that can be used; the
    second needs a warning (ignored errors were retried and inflate latency and query
    counts). A run with reconnects is invalid even though it has a summary.
    """

    CRASHED = "crashed"  # killed by a signal (exit code >= 128 or negative)
    TOO_MANY_CONNECTIONS = "too-many-connections"  # error 1040 while connecting
    CONNECTION_FAILED = "connection-failed"  # could not connect at all (2002, 1045, ...)
    CONNECTION_LOST = "connection-lost"  # server went away mid-run (2013, 2006, 1927)
    FATAL_SQL_ERROR = "fatal-sql-error"  # a statement failed with a server error code
    FATAL_ERROR = "fatal-error"  # FATAL without an SQL error code (Lua, options, ...)
    NO_SUMMARY = "no-summary"  # a run that printed no (complete) summary
    UNRECOGNIZED = "unrecognized"  # empty, or not sysbench output at all
    RECONNECTS_PRESENT = "reconnects-present"  # summary, but the client reconnected
    IGNORED_ERRORS_PRESENT = "ignored-errors-present"  # summary, with ignored errors
    OK = "ok"


# Failure kinds whose summary can be used as a measurement.
USABLE_FAILURE_KINDS = frozenset({FailureKind.OK, FailureKind.IGNORED_ERRORS_PRESENT})


class EchoedOptions(Frozen):
    """The options sysbench echoes under "Running the test with following options:"."""

    threads: int | None = None
    target_rate_per_s: int | None = None  # --rate
    report_interval_s: int | None = None
    report_checkpoints_s: tuple[int, ...] = ()
    random_seed: int | None = None  # None: seeded from the current time (or not echoed)
    seeded_from_time: bool = False
    debug: bool = False
    validation_checks: bool = False
    forced_shutdown_s: int | None = None
    lines: tuple[str, ...] = ()  # the echoed lines verbatim


class IntervalReport(Frozen):
    """One ``--report-interval`` line. Rates are per second over the interval."""

    t_s: float  # time since start; whole seconds in the human text
    threads: int
    tps: float
    qps: float
    reads_per_s: float
    writes_per_s: float
    other_per_s: float
    latency_ms_pct: float
    percentile: int | None = None
    err_per_s: float
    reconn_per_s: float
    # Only from MYACCEL lines: the exact window and the raw counts in it.
    dt_s: float | None = None
    events: int | None = None
    reads: int | None = None
    writes: int | None = None
    other: int | None = None
    errors: int | None = None
    reconnects: int | None = None
    # Only with --rate.
    queue_length: int | None = None
    concurrency: int | None = None
    source: Source


class Summary(Frozen):
    """A cumulative report: the final summary or one ``--report-checkpoints`` report.

    With checkpoints, the final summary covers only the window after the last checkpoint:
    the rates use that window (``window_s`` when known) while ``total_time_s`` is still the
    time since the start.
    """

    queries_read: int
    queries_write: int
    queries_other: int
    queries_total: int
    transactions: int
    transactions_per_s: float | None
    queries_per_s: float | None
    ignored_errors: int
    ignored_errors_per_s: float | None
    reconnects: int
    reconnects_per_s: float | None
    total_time_s: float
    total_events: int
    latency_ms_min: float
    latency_ms_avg: float
    latency_ms_max: float
    latency_ms_sum: float
    latency_ms_pct: float | None = None
    percentile: int | None = None
    window_s: float | None = None  # MYACCEL only: the span the counts and rates cover
    threads: int | None = None  # MYACCEL only
    fairness_events_avg: float | None = None
    fairness_events_stddev: float | None = None
    fairness_exec_time_avg_s: float | None = None
    fairness_exec_time_stddev_s: float | None = None
    checkpoint_at_s: float | None = None  # set for checkpoint reports
    source: Source


class FatalError(Frozen):
    """A ``FATAL:`` line, with the SQL error it reports when there is one."""

    line: str
    error_code: int | None = None
    sql_state: str | None = None
    error_message: str | None = None
    function: str | None = None  # e.g. mysql_stmt_execute, thread_run
    query: str | None = None
    repeated: int = 1  # sysbench folds repeats into "(last message repeated N times)"


class ThreadCounts(Frozen):
    """One worker thread's ``MYACCEL {"kind":"thread",...}`` line (lua/myaccel_report.lua):
    its events, the workload options it ran with and its calls of each statement group."""

    tid: int
    events: int
    options: dict[str, float | bool | str] = Field(default_factory=dict)
    calls: dict[str, int] = Field(default_factory=dict)


class SysbenchOutput(Frozen):
    """Everything ``parse_output`` could read from one sysbench invocation."""

    schema_version: str = SYSBENCH_OUTPUT_SCHEMA
    sysbench_version: str | None = None
    luajit: str | None = None
    command: Literal["run", "prepare", "cleanup", "unknown"] = "unknown"
    options: EchoedOptions = EchoedOptions()
    threads_started: bool = False
    intervals: tuple[IntervalReport, ...] = ()
    summary: Summary | None = None
    checkpoints: tuple[Summary, ...] = ()
    fatal_errors: tuple[FatalError, ...] = ()
    warnings: tuple[str, ...] = ()
    # From "DEBUG:" lines (--verbosity=5 only).
    ignored_error_codes: tuple[int, ...] = ()
    reconnect_attempts: int = 0
    # prepare / cleanup
    tables_created: tuple[str, ...] = ()
    tables_dropped: tuple[str, ...] = ()
    rows_inserted: int = 0
    # MYACCEL lines seen / rejected (truncated or not valid JSON)
    myaccel_lines: int = 0
    malformed_myaccel_lines: int = 0
    threads_ran: tuple[ThreadCounts, ...] = ()
    exit_code: int | None = None
    failure: FailureKind = FailureKind.UNRECOGNIZED
    failure_reasons: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.failure is FailureKind.OK

    @property
    def usable(self) -> bool:
        """A summary exists and may be used (perhaps with a warning about ignored errors)."""
        return self.failure in USABLE_FAILURE_KINDS and self.summary is not None
