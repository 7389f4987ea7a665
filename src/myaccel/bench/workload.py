"""A captured workload (``myaccel.workload/1``): what ``myaccel capture`` records of a
server's real statements and what ``bench``/``ab --workload-file`` replay.

The model lives here, below ``capture/`` (which writes it), because the replay in
``bench`` reads it. One document holds:

- ``classes``: the statement classes (one per normalized statement text, a "digest"), each
  with its count in the window, an example or a few with their literals (the replay's
  statements; a ``--redact``ed capture keeps only the normalized text), rows, and latency
  percentiles where the source timed the statements;
- ``connections``: per client connection, its statements in order with their time offset
  (and latency where timed) and the gap before each (``bench.trace_gaps``: what a timed
  replay waits), up to a bound;
- ``concurrency``: the client connections that ran statements and Threads_running samples;
- ``schemas``: the schemas the statements touched, with their tables and their DDL;
- ``overhead``: the server's throughput before and during the capture.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args

from pydantic import Field

from myaccel.artifacts import artifact, load
from myaccel.errors import UsageError
from myaccel.model import Strict

WORKLOAD_SCHEMA = "myaccel.workload/1"
StatementKind = Literal["read", "write", "transaction", "other"]
TraceGaps = Literal["end-to-start", "start-to-start"]  # what a Statement.gap_us measures
# how bench/ab/accelerate --workload-file and capture --check replay it (bench.replay)
ReplayMode = Literal["mix", "sequence", "timed"]
REPLAY_MODES: tuple[str, ...] = get_args(ReplayMode)


class Latency(Strict):
    """Latency of a class's statements in microseconds (from the timed events)."""

    samples: int
    mean_us: float
    p50_us: float
    p95_us: float
    p99_us: float
    max_us: float


class StatementClass(Strict):
    id: str  # a short, stable hash of ``text``
    text: str  # the normalized statement (literals as ?)
    schema_name: str = ""  # the default schema it ran in ("" when none)
    kind: StatementKind
    count: int
    share_pct: float
    examples: list[str] = Field(default_factory=list)  # with literals (empty when redacted)
    replayable: bool = True
    not_replayed_because: str | None = None
    rows_sent: int | None = None
    rows_affected: int | None = None
    rows_examined: int | None = None
    latency: Latency | None = None


class Statement(Strict):
    t_ms: float  # since the start of the window (general log: 1 s resolution)
    class_id: str
    sql: str  # with literals, or the normalized text when redacted
    latency_us: float | None = None
    # the time before it on its connection, microseconds (``Workload.trace_gaps`` says from
    # what: the previous statement's end or start); None for a trace's first statement and
    # in captures written before gaps were recorded (``bench.trace_gaps.timed_traces``)
    gap_us: float | None = None


class ConnectionTrace(Strict):
    id: int
    user: str | None = None
    statements: list[Statement] = Field(default_factory=list)


class Concurrency(Strict):
    connections: int  # client connections that ran statements in the window
    sample_interval_s: float
    threads_running: list[int] = Field(default_factory=list)  # samples, ours excluded
    threads_running_mean: float | None = None
    threads_running_p95: float | None = None


class SchemaInfo(Strict):
    name: str
    tables: list[str] = Field(default_factory=list)
    # SHOW CREATE DATABASE, then SHOW CREATE TABLE of each table (no data): what a sandbox
    # needs to replay on (``bench.replay.create_schemas``); empty in older captures
    ddl: list[str] = Field(default_factory=list)


class Overhead(Strict):
    """Statements per second the server counted (``Questions``, ours excluded) before the
    capture switched anything on, while it ran, and after it switched everything back."""

    baseline_s: float
    qps_before: float | None
    qps_during: float | None
    qps_after: float | None = None
    overhead_pct: float | None  # during against the mean of before and after


@artifact(WORKLOAD_SCHEMA)
class Workload(Strict):
    schema_version: str = WORKLOAD_SCHEMA
    created_at: str
    myaccel_version: str
    server: dict[str, str | None]  # version_string, flavor, version, host
    source: Literal["performance_schema", "general_log"]
    window_s: float
    redacted: bool = False
    statements_total: int
    statements_per_s: float
    classes: list[StatementClass]
    connections: list[ConnectionTrace] = Field(default_factory=list)
    connections_truncated: bool = False
    # what the statements' gap_us measure (bench.trace_gaps); None in older captures
    trace_gaps: TraceGaps | None = None
    concurrency: Concurrency
    schemas: list[SchemaInfo] = Field(default_factory=list)
    overhead: Overhead | None = None
    settings_changed: list[str] = Field(default_factory=list)  # targets capture switched
    journal: str | None = None
    replay_of: str | None = None  # capture --check: the replayed workload's created_at
    notes: list[str] = Field(default_factory=list)

    def replay_classes(self) -> list[StatementClass]:
        """The classes a replay issues: replayable, with an example and a count."""
        return [c for c in self.classes if c.replayable and c.examples and c.count > 0]

    @property
    def replay_threads(self) -> int:
        """The concurrency a replay runs at: the client connections seen (at least 1)."""
        return max(1, self.concurrency.connections)

    @property
    def schema_names(self) -> list[str]:
        return sorted({c.schema_name for c in self.replay_classes() if c.schema_name})

    def split_examples(self) -> tuple[Workload, Workload]:
        """(training, held out): each class keeps its count (the same mix) and gives its
        examples at even positions to training, those at odd positions to the held-out
        part; a class with a single example is in both (noted in the held-out part)."""
        train, held = [], []
        shared = 0
        for c in self.classes:
            even, odd = c.examples[0::2], c.examples[1::2]
            if not odd:
                odd, shared = even, shared + (1 if even else 0)
            train.append(c.model_copy(update={"examples": even}))
            held.append(c.model_copy(update={"examples": odd}))
        note = f"held out: the odd-numbered examples of every class ({shared} class(es) with one example in both)"
        return (
            self.model_copy(update={"classes": train, "connections": []}),
            self.model_copy(
                update={"classes": held, "connections": [], "notes": [*self.notes, note]}
            ),
        )


_HINT = "pass a file written by `myaccel capture --out W.json`"


def load_workload(path: Path) -> Workload:
    """A workload file named on the command line (errors are usage errors)."""
    return load(path, Workload, what="workload", hint=_HINT, error=UsageError)


def load_replayable(path: Path) -> Workload:
    """A workload that can be replayed: not redacted, with statements to issue."""
    w = load_workload(path)
    if w.redacted:
        raise UsageError(
            f"workload '{path}' was captured with --redact: it has no literals to replay",
            hint="capture again without --redact for replays (redacted captures are for sharing)",
        )
    if not w.replay_classes():
        raise UsageError(
            f"workload '{path}' holds no statement myaccel can replay",
            hint="capture a longer window while the application runs",
        )
    return w
