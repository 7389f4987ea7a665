"""Captured statements into the workload's classes and per-connection traces."""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from myaccel.bench.workload import ConnectionTrace, Latency, Statement, StatementClass
from myaccel.capture.normalize import class_id, kind_of, normalize, not_replayed_because
from myaccel.capture.sqlguard import class_refusal

# Examples with literals kept per class (a reservoir sample): the replay draws from them,
# so a few dozen spread its reads and writes over more than a handful of rows.
MAX_EXAMPLES = 50
# Statements kept in the per-connection traces (the classes always count them all): the
# window's first part, the same on every connection (``_trace_cutoff``).
MAX_TRACE_STATEMENTS = 20_000


@dataclass(frozen=True)
class Event:
    """One statement a source saw, in the order of its connection."""

    conn_id: int
    t_s: float  # since the start of the window
    sql: str
    schema: str = ""
    latency_us: float | None = None
    rows_sent: int | None = None
    rows_affected: int | None = None
    rows_examined: int | None = None
    user: str | None = None


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of sorted values."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return float(sorted_values[min(rank, len(sorted_values)) - 1])


def latency_of(values: list[float]) -> Latency | None:
    if not values:
        return None
    s = sorted(values)
    return Latency(
        samples=len(s),
        mean_us=round(sum(s) / len(s), 2),
        p50_us=round(percentile(s, 50), 2),
        p95_us=round(percentile(s, 95), 2),
        p99_us=round(percentile(s, 99), 2),
        max_us=round(s[-1], 2),
    )


@dataclass
class _Acc:
    schema: str
    text: str
    count: int = 0
    examples: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)


def _add_rows(acc: _Acc, e: Event) -> None:
    for name in ("rows_sent", "rows_affected", "rows_examined"):
        v = getattr(e, name)
        if v is not None:
            acc.rows[name] = acc.rows.get(name, 0) + int(v)


def _keep_example(acc: _Acc, sql: str, rng: random.Random) -> None:
    """A reservoir sample of the class's statements, distinct texts preferred."""
    if sql in acc.examples:
        return
    if len(acc.examples) < MAX_EXAMPLES:
        acc.examples.append(sql)
        return
    j = rng.randrange(acc.count)
    if j < MAX_EXAMPLES:
        acc.examples[j] = sql


def _trace_cutoff(events: Sequence[Event]) -> float | None:
    """The traces keep the statements that started before this time, at most
    ``MAX_TRACE_STATEMENTS`` (more in a log of whole seconds, below): the same first part of the window on every connection (a
    general log's whole seconds), so that each connection has its trace; None: all."""
    if len(events) <= MAX_TRACE_STATEMENTS:
        return None
    times = sorted(e.t_s for e in events)
    cut = times[MAX_TRACE_STATEMENTS]
    if all(t.is_integer() for t in times):
        # A log of whole seconds: ``t < cut`` keeps whole seconds. When the first second
        # alone reaches the limit (from ~20,000 statements/s), that partial second, whose
        # length nobody knows, would be all a trace holds: spread over a whole second it
        # made the timed replay 83% slow (measured). Keep one whole second after it, even
        # beyond the limit.
        return max(cut, times[0] + 2)
    return cut if cut > times[0] else None  # all in one instant: the first ones, in order


def _not_replayed(accs: dict[str, _Acc], traces: Iterable[ConnectionTrace]) -> dict[str, str]:
    """Why a replay leaves each class out: its first word (``not_replayed_because``), or
    one of its examples or traced statements that a replay may not issue
    (``sqlguard.class_refusal``: the same check a replay makes of the file it reads)."""
    why = {cid: r for cid, a in accs.items() if (r := not_replayed_because(a.text)) is not None}
    for cid, a in accs.items():
        if cid not in why and (r := class_refusal(a.schema, a.examples)) is not None:
            why[cid] = r
    for t in traces:
        for st in t.statements:
            a = accs[st.class_id]
            if st.class_id not in why and (r := class_refusal(a.schema, [st.sql])) is not None:
                why[st.class_id] = r
    return why


def build_classes(
    events: Iterable[Event], *, seed: int = 1
) -> tuple[list[StatementClass], list[ConnectionTrace], bool]:
    """The classes (most frequent first), the connections' traces, and whether the traces
    were cut at ``MAX_TRACE_STATEMENTS``."""
    events = list(events)
    cutoff = _trace_cutoff(events)
    rng = random.Random(seed)
    accs: dict[str, _Acc] = {}
    traces: dict[int, ConnectionTrace] = {}
    kept = 0
    truncated = False
    texts: dict[str, str] = {}  # memo: statement -> normalized text
    for e in events:
        text = texts.get(e.sql)
        if text is None:
            text = normalize(e.sql)
            if len(texts) < 200_000:
                texts[e.sql] = text
        if not text:
            continue
        cid = class_id(e.schema, text)
        acc = accs.get(cid)
        if acc is None:
            acc = accs[cid] = _Acc(schema=e.schema, text=text)
        acc.count += 1
        _keep_example(acc, e.sql, rng)
        if e.latency_us is not None:
            acc.latencies.append(e.latency_us)
        _add_rows(acc, e)
        trace = traces.get(e.conn_id)
        if trace is None:
            trace = traces[e.conn_id] = ConnectionTrace(id=e.conn_id, user=e.user)
        if (cutoff is not None and e.t_s < cutoff) or (
            cutoff is None and kept < MAX_TRACE_STATEMENTS
        ):
            trace.statements.append(
                Statement(
                    t_ms=round(e.t_s * 1000, 3), class_id=cid, sql=e.sql, latency_us=e.latency_us
                )
            )
            kept += 1
        else:
            truncated = True
    total = sum(a.count for a in accs.values()) or 1
    why = _not_replayed(accs, traces.values())
    classes = [
        StatementClass(
            id=cid,
            text=a.text,
            schema_name=a.schema,
            kind=kind_of(a.text),
            count=a.count,
            share_pct=round(100 * a.count / total, 3),
            examples=a.examples,
            replayable=why.get(cid) is None,
            not_replayed_because=why.get(cid),
            rows_sent=a.rows.get("rows_sent"),
            rows_affected=a.rows.get("rows_affected"),
            rows_examined=a.rows.get("rows_examined"),
            latency=latency_of(a.latencies),
        )
        for cid, a in accs.items()
    ]
    classes.sort(key=lambda c: (-c.count, c.id))
    return classes, sorted(traces.values(), key=lambda t: t.id), truncated
