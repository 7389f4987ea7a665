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

from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Literal, TypeAlias

from pydantic import ConfigDict, Field, StringConstraints

from myaccel.artifacts import artifact, load
from myaccel.bench import choices, placeholders, pool
from myaccel.capture import sqlguard
from myaccel.errors import UsageError
from myaccel.model import Strict

WORKLOAD_SCHEMA = "myaccel.workload/1"

# Bounds of a workload file, far above what a capture writes (50 examples a class, traces
# of about 20,000 statements): a file is read whole and then replayed, and it may come
# from anywhere (docs/workloads.md, "What a workload file may hold").
MAX_FILE_BYTES = 64 * 2**20
MAX_DEPTH = 16  # a workload is 5 levels deep
MAX_CLASSES = 100_000
MAX_EXAMPLES = 1_000  # per class
MAX_CONNECTIONS = 100_000  # the replay's threads: a server's max_connections at most
MAX_TRACE_STATEMENTS = 1_000_000  # per connection
MAX_SAMPLES = 1_000_000
MAX_COUNT = 10**15
MAX_US = 1e13  # microseconds (115 days): a latency, a gap, an offset
Sql = Annotated[str, StringConstraints(max_length=sqlguard.MAX_STATEMENT_CHARS)]
Name = Annotated[str, StringConstraints(max_length=sqlguard.MAX_NAME_CHARS)]
Short = Annotated[str, StringConstraints(max_length=1_024)]
Note = Annotated[str, StringConstraints(max_length=10_000)]
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
StatementKind = Literal["read", "write", "transaction", "other"]
TraceGaps = Literal["end-to-start", "start-to-start"]  # what a Statement.gap_us measures
ReplayMode: TypeAlias = choices.ReplayMode  # also importable from here
REPLAY_MODES = choices.REPLAY_MODES


class Part(Strict):
    """A part of a workload file: unknown fields, a value of another type ("12" for 12)
    and a number that is not finite are errors."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False)


class Latency(Part):
    """Latency of a class's statements in microseconds (from the timed events)."""

    samples: Count
    mean_us: float = Field(ge=0, le=MAX_US)
    p50_us: float = Field(ge=0, le=MAX_US)
    p95_us: float = Field(ge=0, le=MAX_US)
    p99_us: float = Field(ge=0, le=MAX_US)
    max_us: float = Field(ge=0, le=MAX_US)


class StatementClass(Part):
    id: Short  # a short, stable hash of ``text``
    text: Sql  # the normalized statement (literals as ?)
    schema_name: Name = ""  # the default schema it ran in ("" when none)
    kind: StatementKind
    count: Count
    share_pct: float = Field(ge=0, le=100)
    # with literals (empty when redacted)
    examples: list[Sql] = Field(default_factory=list, max_length=MAX_EXAMPLES)
    replayable: bool = True
    not_replayed_because: Note | None = None
    rows_sent: Count | None = None
    rows_affected: Count | None = None
    rows_examined: Count | None = None
    latency: Latency | None = None


class Statement(Part):
    # since the start of the window (general log: 1 s resolution)
    t_ms: float = Field(ge=-MAX_US, le=MAX_US)
    class_id: Short
    sql: Sql  # with literals, or the normalized text when redacted
    latency_us: float | None = Field(default=None, ge=0, le=MAX_US)
    # the time before it on its connection, microseconds (``Workload.trace_gaps`` says from
    # what: the previous statement's end or start); None for a trace's first statement and
    # in captures written before gaps were recorded (``bench.trace_gaps.timed_traces``)
    gap_us: float | None = Field(default=None, ge=-MAX_US, le=MAX_US)


class ConnectionTrace(Part):
    id: int = Field(ge=0, le=2**64)
    user: Short | None = None
    statements: list[Statement] = Field(default_factory=list, max_length=MAX_TRACE_STATEMENTS)


class Concurrency(Part):
    # client connections that ran statements in the window (a replay's threads)
    connections: int = Field(ge=0, le=MAX_CONNECTIONS)
    sample_interval_s: float = Field(ge=0, le=3600)
    # samples, ours excluded
    threads_running: list[Count] = Field(default_factory=list, max_length=MAX_SAMPLES)
    threads_running_mean: float | None = Field(default=None, ge=0, le=MAX_COUNT)
    threads_running_p95: float | None = Field(default=None, ge=0, le=MAX_COUNT)
    # sessions open at once (``bench.pool``): the most, their time-weighted p95, and the
    # observed concurrency a replay's pool is sized to; absent in older files (a replay
    # then derives them from the traces and the Threads_running samples)
    sessions_open_max: int | None = Field(default=None, ge=0, le=MAX_CONNECTIONS)
    sessions_open_p95: int | None = Field(default=None, ge=0, le=MAX_CONNECTIONS)
    observed: int | None = Field(default=None, ge=1, le=MAX_CONNECTIONS)


class SchemaInfo(Part):
    name: Name
    tables: list[Name] = Field(default_factory=list, max_length=MAX_CLASSES)
    # SHOW CREATE DATABASE, then SHOW CREATE TABLE of each table (no data): what a sandbox
    # needs to replay on (``bench.replay.create_schemas``); empty in older captures
    ddl: list[Sql] = Field(default_factory=list, max_length=MAX_CLASSES + 1)


class Overhead(Part):
    """Statements per second the server counted (``Questions``, ours excluded) before the
    capture switched anything on, while it ran, and after it switched everything back."""

    baseline_s: float
    qps_before: float | None
    qps_during: float | None
    qps_after: float | None = None
    overhead_pct: float | None  # during against the mean of before and after


@artifact(WORKLOAD_SCHEMA)
class Workload(Part):
    schema_version: str = WORKLOAD_SCHEMA
    created_at: Short
    myaccel_version: Short
    # version_string, flavor, version, host
    server: dict[Short, Short | None] = Field(max_length=64)
    source: Literal["performance_schema", "general_log"]
    window_s: float = Field(ge=0, le=MAX_US)
    redacted: bool = False
    # redacted with typed placeholders (``bench.placeholders``: ``{int:3}``, ``{str:12}``):
    # a replay fills them with values of the same shape; a redaction without them (``?``,
    # older files) cannot be replayed
    placeholders: bool = False
    statements_total: Count
    statements_per_s: float = Field(ge=0, le=MAX_COUNT)
    classes: list[StatementClass] = Field(max_length=MAX_CLASSES)
    connections: list[ConnectionTrace] = Field(default_factory=list, max_length=MAX_CONNECTIONS)
    connections_truncated: bool = False
    # what the statements' gap_us measure (bench.trace_gaps); None in older captures
    trace_gaps: TraceGaps | None = None
    concurrency: Concurrency
    schemas: list[SchemaInfo] = Field(default_factory=list, max_length=MAX_CLASSES)
    overhead: Overhead | None = None
    # targets capture switched
    settings_changed: list[Short] = Field(default_factory=list, max_length=1_000)
    journal: Note | None = None
    replay_of: Short | None = None  # capture --check: the replayed workload's created_at
    notes: list[Note] = Field(default_factory=list, max_length=1_000)

    def replay_classes(self) -> list[StatementClass]:
        """The classes a replay issues: replayable, with an example and a count."""
        return [c for c in self.classes if c.replayable and c.examples and c.count > 0]

    def observed(self) -> pool.Observed:
        """How many sessions ran at once (``bench.pool``): as the capture recorded it, or
        derived from the traces and the Threads_running samples (older files)."""
        c = self.concurrency
        if c.observed is not None:
            return pool.Observed(
                sessions=c.connections,
                open_max=c.sessions_open_max or 0,
                open_p95=c.sessions_open_p95 or 0,
                threads_running_p95=c.threads_running_p95,
                concurrency=c.observed,
            )
        spans = pool.spans(
            ((t.id, s.t_ms / 1000, s.latency_us) for t in self.connections for s in t.statements),
            whole_seconds=self.trace_gaps == "start-to-start"
            or (self.trace_gaps is None and self.source == "general_log"),
        )
        return pool.observe(spans, max(1, c.connections), c.threads_running_p95)

    @property
    def replay_threads(self) -> int:
        """The concurrency a replay runs at: the observed concurrency (the sessions open
        at once, ``bench.pool``), not the connections ever seen (at least 1)."""
        return max(1, self.observed().concurrency)

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
_REFUSED_HINT = (
    "a workload file may hold single DML statements on its own schemas, and as DDL only "
    "their CREATE DATABASE and CREATE TABLE (docs/workloads.md); capture it again with "
    "`myaccel capture`"
)


def load_workload(path: Path) -> Workload:
    """A workload file named on the command line (errors are usage errors), read within
    the bounds above and checked against the model strictly."""
    return load(
        path,
        Workload,
        what="workload",
        hint=_HINT,
        error=UsageError,
        max_bytes=MAX_FILE_BYTES,
        max_depth=MAX_DEPTH,
    )


def load_replayable(path: Path) -> Workload:
    """A workload that can be replayed: not redacted, with statements to issue, each of
    them one a replay may issue (``check_replayable``)."""
    w = load_workload(path)
    if w.redacted and not w.placeholders:
        raise UsageError(
            f"workload '{path}' was redacted without typed placeholders (literals as ?): "
            "it has no values to replay",
            hint="capture again, with this version's --redact (typed placeholders) or "
            "without --redact",
        )
    if not w.replay_classes():
        raise UsageError(
            f"workload '{path}' holds no statement myaccel can replay",
            hint="capture a longer window while the application runs",
        )
    check_replayable(w, f"workload '{path}'")
    return w


def issued(w: Workload) -> Iterator[tuple[StatementClass, str, str]]:
    """(class, where in the file, SQL) of every statement a replay of ``w`` may issue:
    each example of a replayed class, each traced statement of one (as ``bench.replay``
    pairs them, by class id)."""
    replayed = w.replay_classes()
    # a template's placeholders filled with values of their shape (``bench.placeholders``:
    # digits, letters, dates in quotes), as the replay fills them
    shown = placeholders.sample if w.placeholders else str
    for c in replayed:
        for i, sql in enumerate(c.examples, 1):
            yield c, f"example {i}", shown(sql)
    by_id = {c.id: c for c in replayed}
    for t in w.connections:
        for i, st in enumerate(t.statements, 1):
            k = by_id.get(st.class_id)
            if k is not None:
                yield k, f"statement {i} of connection {t.id}", shown(st.sql)


def _shown(sql: str, width: int = 60) -> str:
    """A statement on one line, cut to ``width`` (for an error message)."""
    one = " ".join(repr(sql)[1:-1].split())
    return one if len(one) <= width else one[: width - 3] + "..."


def _refuse(name: str, where: str, why: str) -> UsageError:
    return UsageError(f"{name} is refused: {where}: {why}", hint=_REFUSED_HINT)


def check_replayable(w: Workload, name: str = "the workload") -> None:
    """Refuse (``UsageError``) a workload whose replay could issue anything but single DML
    statements on its own schemas (``capture.sqlguard``), or whose DDL is more than the
    CREATE DATABASE and CREATE TABLE of those schemas."""
    declared: set[str] = set()
    for s in w.schemas:
        try:
            sqlguard.valid_name(s.name, "the schema")
            if sqlguard.is_system_schema(s.name):
                raise sqlguard.Refused("it is a system schema")
            if s.name in declared:
                raise sqlguard.Refused("it is listed twice")
            for t in s.tables:
                sqlguard.valid_name(t, "the table")
            sqlguard.check_schema_ddl(s.name, s.tables, s.ddl)
        except sqlguard.Refused as exc:
            raise _refuse(name, f"schema {_shown(s.name, 30)!r}", str(exc)) from None
        declared.add(s.name)
    ids = [c.id for c in w.replay_classes()]
    if len(set(ids)) != len(ids):
        raise _refuse(name, "classes", "two replayed classes have the same id")
    for c, at, sql in issued(w):
        why = sqlguard.class_refusal(c.schema_name, [sql])
        if why is not None:
            raise _refuse(name, f"class {_shown(c.id, 12)}, {at} ({_shown(sql)})", why)
