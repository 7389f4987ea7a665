"""The time between a captured connection's statements, which ``--replay-mode timed``
reproduces (``Statement.gap_us``, ``Workload.trace_gaps``).

What a gap is depends on what the source timed:

- ``end-to-start`` (performance_schema: ``TIMER_START``/``TIMER_END`` of every statement,
  picoseconds): from the end of the connection's previous statement to the start of this
  one, that is the client's own time between statements (its think time, its driver, the
  network round trip). The replay waits that long after the previous statement returned.
- ``start-to-start`` (the general log: a timestamp per second, no latency): the captured
  schedule. A connection's statements of one second are spread evenly within it (their
  order is known, their instants are not), and a gap is from the start of the previous
  statement to the start of this one; the replay issues a statement that long after the
  previous one started, or at once when the previous one took longer. The first and last
  second of a trace are partial (the log starts and the window ends inside them): their
  statements are spread at the connection's median rate of its other seconds when that is
  higher, anchored to the end of the first second and to the start of the last one.

A trace's first statement has no gap (``None``: the replay issues it at once). Either way
the replay stays closed loop per connection: a statement never starts before the previous
one on its connection ended, so a slower server makes the connection fall behind.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from myaccel.bench.workload import ConnectionTrace, Statement, TraceGaps, Workload


def gaps_kind(traces: Sequence[ConnectionTrace]) -> TraceGaps:
    """End-to-start when every traced statement has its latency (a timed source)."""
    timed = all(s.latency_us is not None for t in traces for s in t.statements)
    return "end-to-start" if timed else "start-to-start"


def end_to_start(statements: Sequence[Statement]) -> list[float | None]:
    """Per statement: microseconds from the end of the previous one to its start (never
    negative: timers of one thread can overlap by rounding)."""
    out: list[float | None] = []
    prev_end: float | None = None
    for s in statements:
        start_us = s.t_ms * 1000
        out.append(None if prev_end is None else round(max(0.0, start_us - prev_end), 3))
        prev_end = start_us + (s.latency_us or 0.0)
    return out


def _seconds(statements: Sequence[Statement]) -> list[tuple[int, int]]:
    """(second, how many statements) of each run of statements within one second."""
    runs: list[tuple[int, int]] = []
    for s in statements:
        sec = math.floor(s.t_ms / 1000 + 1e-9)
        if runs and runs[-1][0] == sec:
            runs[-1] = (sec, runs[-1][1] + 1)
        else:
            runs.append((sec, 1))
    return runs


def spread_starts(statements: Sequence[Statement]) -> list[float]:
    """The statements' start times in seconds, each second's statements spread evenly
    within it (the partial first and last seconds as the module says)."""
    runs = _seconds(statements)
    inner = [n for _, n in runs[1:-1]]
    # with no whole second inside the trace (a trace cut after its second second, as the
    # capture cuts long ones), the fuller of the two is the best estimate of the rate
    typical = statistics.median(inner) if inner else max((n for _, n in runs), default=0)
    starts: list[float] = []
    for i, (sec, n) in enumerate(runs):
        if len(runs) > 1 and i == 0:
            rate = max(n, typical)
            starts += [sec + 1 - (n - k) / rate for k in range(n)]
        elif len(runs) > 1 and i == len(runs) - 1:
            rate = max(n, typical)
            starts += [sec + k / rate for k in range(n)]
        else:
            starts += [sec + k / n for k in range(n)]
    return starts


def start_to_start(statements: Sequence[Statement]) -> list[float | None]:
    """Per statement: microseconds from the previous one's (spread) start to its own."""
    starts = spread_starts(statements)
    return [None if i == 0 else round((t - starts[i - 1]) * 1e6, 3) for i, t in enumerate(starts)]


def with_gaps(traces: Sequence[ConnectionTrace]) -> tuple[list[ConnectionTrace], TraceGaps]:
    """The traces with every statement's ``gap_us`` set, and what the gaps measure."""
    kind = gaps_kind(traces)
    gaps_of = end_to_start if kind == "end-to-start" else start_to_start
    out = []
    for t in traces:
        gaps = gaps_of(t.statements)
        statements = [
            s.model_copy(update={"gap_us": g}) for s, g in zip(t.statements, gaps, strict=True)
        ]
        out.append(t.model_copy(update={"statements": statements}))
    return out, kind


def timed_traces(w: Workload) -> tuple[list[ConnectionTrace], TraceGaps]:
    """The workload's traces with their gaps: as captured, or derived from the statements'
    offsets and latencies for a capture written before gaps were recorded."""
    if w.trace_gaps is not None:
        return list(w.connections), w.trace_gaps
    return with_gaps(w.connections)
