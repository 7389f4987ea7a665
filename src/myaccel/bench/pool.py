"""The replay's pool: how many client sessions ran at once in the capture (its **observed
concurrency**), and the captured sessions mapped onto that many replay threads.

An application that opens a connection per request (PHP-style: 771 short connections in
12 s) used to be replayed with one sysbench thread per connection ever seen. The replay
now runs a pool of as many threads as sessions were open at once, and each pool thread
replays the sessions given to it one after another, in their captured order.

How many sessions were open at once (``observe``):

- a session is a captured connection; it is open from its first statement's start to
  its last statement's end (performance_schema: ``TIMER_START`` and the latency, to the
  microsecond). The general log stamps whole seconds only: a session whose statements
  all fall in one second tells nothing about what it overlapped, so only sessions that
  span two seconds or more count there, open from their first second to the end of their
  last one;
- the open sessions are counted along the window (a sweep over the spans' ends): their
  maximum and their 95th percentile weighted by time, over the time when at least one
  session is open (the idle time between requests does not lower it);
- the server's ``Threads_running`` samples (every 0.25 s, the capture's own thread left
  out) count the statements running at once: their 95th percentile, rounded up, is the
  floor of the estimate (what the general log's one-second sessions leave unknown);
- **observed concurrency** = max(p95 of the open sessions, ceil(p95 of Threads_running)),
  at least 1 and at most the number of sessions (with neither, as in a hand-made file:
  the number of sessions, one thread each as before).

The pool (``assign``): sessions in the order of their first statement, each given to the
pool thread that came free first (the end of its previous session), the lowest-numbered
on a tie: the captured order kept per thread, the threads' sessions interleaved as they
were in the capture.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Span = tuple[float, float]  # (start, end) in seconds since the window's start


@dataclass(frozen=True)
class Observed:
    sessions: int  # the sessions (connections) that ran statements
    open_max: int  # the most sessions open at once
    open_p95: int  # their time-weighted 95th percentile
    threads_running_p95: float | None
    concurrency: int  # what the pool is sized to

    @property
    def basis(self) -> str:
        tr = self.threads_running_p95
        tr_part = f", Threads_running p95 {tr:g}" if tr is not None else ""
        return (
            f"{self.sessions} session(s), at most {self.open_max} open at once "
            f"(p95 {self.open_p95}){tr_part}"
        )


def spans(
    statements: Iterable[tuple[int, float, float | None]], *, whole_seconds: bool
) -> list[Span]:
    """Per session (connection id), its span from ``(conn_id, t_s, latency_us)`` of each
    statement; ``whole_seconds``: a general log's stamps (sessions within one second are
    left out, the others end with their last second)."""
    first: dict[int, float] = {}
    last: dict[int, float] = {}
    for cid, t, lat in statements:
        end = t + (lat or 0.0) / 1e6
        if cid not in first or t < first[cid]:
            first[cid] = t
        if cid not in last or end > last[cid]:
            last[cid] = end
    out: list[Span] = []
    for cid, start in first.items():
        end = last[cid]
        if whole_seconds:
            if math.floor(end + 1e-9) <= math.floor(start + 1e-9):
                continue
            end = math.floor(end + 1e-9) + 1.0
        out.append((start, max(end, start)))
    return out


def open_counts(session_spans: Sequence[Span]) -> tuple[int, int]:
    """(most sessions open at once, time-weighted p95 of the sessions open while at least
    one is). Idle stretches are left out: an application whose clients spend most of their
    time connecting, or pausing, still ran that many sessions at once when it ran. An
    instant span counts at its instant (for the maximum)."""
    if not session_spans:
        return 0, 0
    events: list[tuple[float, int]] = []
    for s, e in session_spans:
        events += [(s, 1), (e, -1)]
    events.sort(key=lambda x: (x[0], -x[1]))  # opens before closes at one instant
    cur = peak = 0
    durations: dict[int, float] = {}
    prev_t = events[0][0]
    for t, d in events:
        if t > prev_t:
            if cur > 0:
                durations[cur] = durations.get(cur, 0.0) + (t - prev_t)
            prev_t = t
        cur += d
        peak = max(peak, cur)
    total = sum(durations.values())
    if total <= 0:
        return peak, peak
    acc = 0.0
    for n in sorted(durations):
        acc += durations[n]
        if acc >= 0.95 * total - 1e-12:
            return peak, n
    return peak, peak


def observe(
    session_spans: Sequence[Span], sessions: int, threads_running_p95: float | None
) -> Observed:
    peak, p95 = open_counts(session_spans)
    tr = math.ceil(threads_running_p95 - 1e-9) if threads_running_p95 is not None else 0
    conc = max(1, p95, tr)
    if not session_spans and threads_running_p95 is None:
        conc = sessions  # nothing tells (an older file): one thread per session, as before
    conc = min(conc, max(1, sessions))
    return Observed(
        sessions=sessions,
        open_max=peak,
        open_p95=p95,
        threads_running_p95=threads_running_p95,
        concurrency=conc,
    )


def assign(session_spans: Sequence[Span], size: int) -> list[list[int]]:
    """The sessions (indexes into ``session_spans``) of each of ``size`` pool threads:
    by their start, each to the thread free first (lowest number on a tie)."""
    size = max(1, size)
    pool: list[list[int]] = [[] for _ in range(size)]
    free = [(float("-inf"), i) for i in range(size)]
    heapq.heapify(free)
    order = sorted(range(len(session_spans)), key=lambda i: (session_spans[i][0], i))
    for i in order:
        start, end = session_spans[i]
        at, k = heapq.heappop(free)
        pool[k].append(i)
        heapq.heappush(free, (max(at, start) + max(0.0, end - start), k))
    return [p for p in pool if p] or [[]]
