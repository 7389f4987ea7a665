"""Guarded verification on the live server: its own counters only, read over a window
before and a window after an apply, and a verdict.

Observational, not causal: the live server's traffic is whatever its clients send, so the
after window is compared with the before window's own noise (its per-interval spread), not
with a controlled arm. What is read, once per interval, through one connection:
``SHOW GLOBAL STATUS`` (``Questions`` minus this sampler's own statements for the
throughput, ``Com_*`` for its mix, ``Threads_running``, ``Uptime`` for a restart) and,
where ``performance_schema`` is on, the statement digests' totals (count, wait time,
errors), our own ``SHOW``/``performance_schema`` statements left out. Nothing is written
to the server."""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from myaccel.errors import MyaccelError
from myaccel.server.connection import ConnectParams, connect, query_rows

# statements the sampler itself sends per sample (counted in Questions): SHOW GLOBAL
# STATUS, and the digests' SELECT when performance_schema is on
_OWN_STATEMENTS = {False: 1, True: 2}
_DIGESTS = (
    "SELECT COALESCE(SUM(COUNT_STAR), 0), COALESCE(SUM(SUM_TIMER_WAIT), 0), "
    "COALESCE(SUM(SUM_ERRORS), 0) FROM performance_schema.events_statements_summary_by_digest "
    "WHERE DIGEST_TEXT IS NULL OR (DIGEST_TEXT NOT LIKE 'SHOW%' "
    "AND DIGEST_TEXT NOT LIKE '%performance_schema%')"
)
# a breach needs a change beyond the before window's noise (NOISE_SD standard deviations
# of its intervals) and beyond a floor (small windows have little spread by chance)
NOISE_SD = 3.0
THROUGHPUT_FLOOR = 0.15  # a drop of at least 15%
LATENCY_FLOOR = 0.25  # a rise of at least 25%
# whatever the noise (a stall in a short window), these are always breaches
THROUGHPUT_CAP = 0.5  # throughput halved
LATENCY_CAP = 1.0  # latency doubled
ERROR_RATE_FLOOR = 0.01  # one statement in a hundred more failing
THREADS_FLOOR = 4.0  # Threads_running up by at least 4
# below this many statements per second the window says nothing about throughput
IDLE_QPS = 1.0


@dataclass(frozen=True)
class Sample:
    t: float
    status: dict[str, int]
    digests: tuple[int, int, int] | None  # statements, wait (ps), errors; None: P_S off


@dataclass
class Window:
    """Per-interval figures of one window."""

    label: str
    seconds: float
    qps: list[float] = field(default_factory=list)
    threads_running: list[float] = field(default_factory=list)
    latency_ms: list[float] = field(default_factory=list)  # P_S: mean statement latency
    error_rate: list[float] = field(default_factory=list)  # P_S: errors per statement
    com: dict[str, int] = field(default_factory=dict)  # Com_* deltas over the window
    restarted: bool = False  # Uptime went back: the counters were reset

    def summary(self) -> dict[str, Any]:
        def stat(xs: list[float]) -> dict[str, float] | None:
            if not xs:
                return None
            sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
            return {"mean": round(statistics.fmean(xs), 3), "sd": round(sd, 3)}

        top = sorted(self.com.items(), key=lambda kv: -kv[1])[:6]
        return {
            "label": self.label,
            "seconds": round(self.seconds, 1),
            "intervals": len(self.qps),
            "qps": stat(self.qps),
            "threads_running": stat(self.threads_running),
            "latency_ms": stat(self.latency_ms),
            "error_rate": stat(self.error_rate),
            "com": dict(top),
        }


@dataclass(frozen=True)
class Verdict:
    before: Window
    after: Window
    breaches: list[str]
    notes: list[str]

    @property
    def ok(self) -> bool:
        return not self.breaches

    def summary(self) -> dict[str, Any]:
        return {
            "source": "the live server's own counters (observational: before vs after)",
            "before": self.before.summary(),
            "after": self.after.summary(),
            "breaches": self.breaches,
            "notes": self.notes,
        }


def _sample(conn: Any, with_digests: bool) -> Sample:
    status: dict[str, int] = {}
    for name, value in query_rows(conn, "SHOW GLOBAL STATUS"):
        key = str(name)
        if key in ("Questions", "Threads_running", "Uptime") or key.startswith("Com_"):
            try:
                status[key] = int(value)
            except (TypeError, ValueError):
                continue
    digests = None
    if with_digests:
        row = query_rows(conn, _DIGESTS)[0]
        digests = (int(row[0]), int(row[1]), int(row[2]))
    return Sample(time.monotonic(), status, digests)


def digests_enabled(conn: Any) -> bool:
    rows = query_rows(conn, "SELECT @@GLOBAL.performance_schema")
    return bool(rows) and str(rows[0][0]) in ("1", "ON")


def measure_window(
    params: ConnectParams,
    label: str,
    seconds: float,
    *,
    interval_s: float = 1.0,
    stop: Callable[[], bool] | None = None,
) -> Window:
    """Sample every ``interval_s`` for ``seconds``; a connection that fails raises
    ``MyaccelError`` (the caller counts it as a server that is not healthy)."""
    conn = connect(params)
    try:
        with_digests = digests_enabled(conn)
        samples = [_sample(conn, with_digests)]
        deadline = samples[0].t + seconds
        while time.monotonic() < deadline and not (stop and stop()):
            time.sleep(max(0.0, min(interval_s, deadline - time.monotonic())))
            samples.append(_sample(conn, with_digests))
    finally:
        conn.close()
    return window_from(label, samples)


def window_from(label: str, samples: list[Sample]) -> Window:
    w = Window(label, samples[-1].t - samples[0].t if samples else 0.0)
    for a, b in itertools.pairwise(samples):
        dt = b.t - a.t
        if dt <= 0:
            continue
        if b.status.get("Uptime", 0) < a.status.get("Uptime", 0):
            w.restarted = True
            continue
        own = _OWN_STATEMENTS[b.digests is not None]
        q = b.status.get("Questions", 0) - a.status.get("Questions", 0) - own
        w.qps.append(max(0, q) / dt)
        w.threads_running.append(float(b.status.get("Threads_running", 0)))
        if a.digests is not None and b.digests is not None:
            n = b.digests[0] - a.digests[0]
            if n > 0:
                w.latency_ms.append((b.digests[1] - a.digests[1]) / n / 1e9)
                w.error_rate.append((b.digests[2] - a.digests[2]) / n)
    if len(samples) > 1 and not w.restarted:
        first, last = samples[0].status, samples[-1].status
        for k, v in last.items():
            if k.startswith("Com_") and v - first.get(k, 0) > 0:
                w.com[k] = v - first.get(k, 0)
    return w


def _mean_sd(xs: list[float]) -> tuple[float, float]:
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def judge(before: Window, after: Window, problems: list[str] | None = None) -> Verdict:
    """Breaches: the server not healthy (``problems``), then error rate, throughput,
    latency and running threads worse than the before window's noise allows."""
    breaches = [f"server not healthy: {p}" for p in problems or []]
    notes: list[str] = []
    if not before.qps or not after.qps:
        notes.append("a window has no complete interval: only the health check counts")
        return Verdict(before, after, breaches, notes)
    qb, qb_sd = _mean_sd(before.qps)
    qa, _ = _mean_sd(after.qps)
    if qb < IDLE_QPS:
        notes.append(
            f"the server was idle before the apply ({qb:.2f} statements/s): throughput and "
            "latency say nothing; only health and errors count"
        )
    else:
        allowed = min(max(NOISE_SD * qb_sd, THROUGHPUT_FLOOR * qb), THROUGHPUT_CAP * qb)
        if qb - qa > allowed:
            breaches.append(
                f"throughput fell from {qb:.1f} to {qa:.1f} statements/s "
                f"(more than the {allowed:.1f} the before window's noise allows)"
            )
    if before.latency_ms and after.latency_ms and qb >= IDLE_QPS:
        lb, lb_sd = _mean_sd(before.latency_ms)
        la, _ = _mean_sd(after.latency_ms)
        allowed = min(max(NOISE_SD * lb_sd, LATENCY_FLOOR * lb), LATENCY_CAP * lb)
        if la - lb > allowed:
            breaches.append(
                f"mean statement latency rose from {lb:.3f} to {la:.3f} ms "
                f"(more than the {allowed:.3f} ms the before window's noise allows)"
            )
    elif not before.latency_ms:
        notes.append("performance_schema is off: no latency or error figures, throughput only")
    if before.error_rate and after.error_rate:
        eb, eb_sd = _mean_sd(before.error_rate)
        ea, _ = _mean_sd(after.error_rate)
        allowed = max(NOISE_SD * eb_sd, ERROR_RATE_FLOOR)
        if ea - eb > allowed:
            breaches.append(f"error rate rose from {eb:.2%} to {ea:.2%} of statements")
    tb, tb_sd = _mean_sd(before.threads_running)
    ta, _ = _mean_sd(after.threads_running)
    if ta - tb > max(NOISE_SD * tb_sd, THREADS_FLOOR, tb):
        breaches.append(f"Threads_running rose from {tb:.1f} to {ta:.1f} on average")
    return Verdict(before, after, breaches, notes)


def safe_window(params: ConnectParams, label: str, seconds: float) -> tuple[Window, list[str]]:
    """``measure_window``, with a connection failure as a health problem."""
    try:
        return measure_window(params, label, seconds), []
    except MyaccelError as exc:
        return Window(label, 0.0), [exc.message]
