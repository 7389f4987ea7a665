"""Guarded verification on the live server: its own counters only, read over a window
before and a window after an apply, and a verdict.

Observational, not causal: the live server's traffic is whatever its clients send, so the
after window is compared with the before window's own noise (its per-interval spread), not
with a controlled arm. What is read, once per interval, through one connection:
``SHOW GLOBAL STATUS`` (``Questions`` minus this sampler's own statements for the
throughput, ``Com_*`` for its mix, ``Threads_running``, ``Threads_connected``,
``Aborted_clients``/``Aborted_connects``, ``Uptime`` for a restart) and, where
``performance_schema`` is on, the statement digests' totals (count, wait time, errors), our
own ``SHOW``/``performance_schema`` statements left out. Nothing is written to the server.

The sampler cannot be starved by the host as easily as the process that runs it: it is a
thread of its own that raises its own scheduling priority where it may (``SCHED_RR`` as
root or with ``CAP_SYS_NICE``, else a nice value of -10, else it says it runs at normal
priority), keeps a schedule on ``time.monotonic`` (a late sample does not shift the next
ones), and each interval's rate is over the real time between its two samples. A window
that starts late (the sampler, or the server's answer to it, held up) records by how much.

The verdict reads the whole window, interval by interval, not only its mean: a run of
intervals far below the before window's rate (a stall) is a breach even when the
application's catch-up burst afterwards brings the mean back."""

from __future__ import annotations

import itertools
import math
import os
import statistics
import threading
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
_STATUS = (
    "Questions",
    "Threads_running",
    "Threads_connected",
    "Aborted_clients",
    "Aborted_connects",
    "Uptime",
)
# a breach needs a change beyond the before window's noise (NOISE_SD standard deviations
# of its intervals) and beyond a floor (small windows have little spread by chance)
NOISE_SD = 3.0
THROUGHPUT_FLOOR = 0.15  # a drop of at least 15%
LATENCY_FLOOR = 0.25  # a rise of at least 25%
# whatever the noise (a stall in a short window), these are always breaches
THROUGHPUT_CAP = 0.5  # throughput halved
LATENCY_CAP = 1.0  # latency doubled
# ... unless the drop is within the counting noise of a quiet server: COUNT_Z standard
# errors of the difference of two Poisson rates (statements/s over each window's seconds)
COUNT_Z = 4.0
ERROR_RATE_FLOOR = 0.01  # one statement in a hundred more failing
THREADS_FLOOR = 4.0  # Threads_running up by at least 4
# below this many statements per second the window says nothing about throughput
IDLE_QPS = 1.0
# a stall: consecutive intervals below STALL_FRACTION of the before window's rate, for at
# least the longest of STALL_MIN_S, STALL_MIN_INTERVALS intervals, the time in which the
# before rate sends STALL_MIN_STATEMENTS (a quiet server's silences are not stalls) and
# twice the before window's own longest such run
STALL_FRACTION = 0.10
STALL_MIN_S = 5.0
STALL_MIN_INTERVALS = 3
STALL_MIN_STATEMENTS = 100.0
# a burst: an interval above BURST_X times the before rate and BURST_CEILING times the
# before window's highest interval, within BURST_WITHIN_S of a stall's end (or of the
# start of a window that began late)
BURST_X = 2.0
BURST_CEILING = 1.5
BURST_WITHIN_S = 15.0
# an interval longer than LATE_X times the nominal one: the sampler was held up
LATE_X = 2.0
# clients that disconnect: aborted connections at least ABORTED_MIN in the after window
# and ABORTED_X times the before window's rate (plus its counting noise); Threads_connected (the sampler's own
# connection left out) halved and down by at least CONNECTED_MIN
ABORTED_MIN = 5
ABORTED_X = 3.0
CONNECTED_MIN = 2.0


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
    dt: list[float] = field(default_factory=list)  # each interval's real length, s
    threads_running: list[float] = field(default_factory=list)
    threads_connected: list[float] = field(default_factory=list)  # the sampler's left out
    aborted: int = 0  # Aborted_clients + Aborted_connects over the window
    latency_ms: list[float] = field(default_factory=list)  # P_S: mean statement latency
    error_rate: list[float] = field(default_factory=list)  # P_S: errors per statement
    com: dict[str, int] = field(default_factory=dict)  # Com_* deltas over the window
    restarted: bool = False  # Uptime went back: the counters were reset
    interval_s: float = 1.0  # the nominal interval
    late_start_s: float = 0.0  # first sample after the window was asked for
    priority: str = ""  # what the sampler's thread ran at

    def lengths(self) -> list[float]:
        """Each interval's length (the nominal one for a window made without them)."""
        return self.dt if len(self.dt) == len(self.qps) else [self.interval_s] * len(self.qps)

    @property
    def rate(self) -> float:
        """Statements per second over the whole window (each interval by its length)."""
        dts = self.lengths()
        total = sum(dts)
        return sum(q * d for q, d in zip(self.qps, dts, strict=True)) / total if total else 0

    def late_intervals(self) -> list[float]:
        return [d for d in self.lengths() if d > LATE_X * self.interval_s]

    def summary(self) -> dict[str, Any]:
        def stat(xs: list[float]) -> dict[str, float] | None:
            if not xs:
                return None
            sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
            return {"mean": round(statistics.fmean(xs), 3), "sd": round(sd, 3)}

        top = sorted(self.com.items(), key=lambda kv: -kv[1])[:6]
        late = self.late_intervals()
        return {
            "label": self.label,
            "seconds": round(self.seconds, 1),
            "intervals": len(self.qps),
            "qps": stat(self.qps),
            "rate": round(self.rate, 3),
            "threads_running": stat(self.threads_running),
            "threads_connected": stat(self.threads_connected),
            "aborted": self.aborted,
            "latency_ms": stat(self.latency_ms),
            "error_rate": stat(self.error_rate),
            "com": dict(top),
            "sampler": {
                "priority": self.priority,
                "interval_s": self.interval_s,
                "late_start_s": round(self.late_start_s, 3),
                "max_interval_s": round(max(self.dt), 3) if self.dt else None,
                "late_intervals": len(late),
            },
            "qps_series": [round(q, 1) for q in self.qps],
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

    def line(self) -> str:
        """The verdict in one line: what breached, or that nothing did."""
        return "; ".join(self.breaches) if self.breaches else "no breach"

    def summary(self) -> dict[str, Any]:
        return {
            "source": "the live server's own counters (observational: before vs after)",
            "before": self.before.summary(),
            "after": self.after.summary(),
            "verdict": self.line(),
            "breaches": self.breaches,
            "notes": self.notes,
        }


def _sample(conn: Any, with_digests: bool) -> Sample:
    status: dict[str, int] = {}
    for name, value in query_rows(conn, "SHOW GLOBAL STATUS"):
        key = str(name)
        if key in _STATUS or key.startswith("Com_"):
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


def raise_priority() -> str:
    """Raise the calling thread's scheduling priority as far as it may: ``SCHED_RR``
    (root, or ``CAP_SYS_NICE``), else nice -10, else nothing. Says which."""
    try:
        os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(10))  # 0: this thread
        return "SCHED_RR 10"
    except (OSError, AttributeError):
        pass
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), -10)
        return "nice -10"
    except (OSError, AttributeError):
        return "normal (not permitted to raise it)"


@dataclass
class _Run:
    samples: list[Sample] = field(default_factory=list)
    error: BaseException | None = None
    priority: str = ""


def _sampler(
    params: ConnectParams,
    seconds: float,
    interval_s: float,
    stop: Callable[[], bool] | None,
    run: _Run,
) -> None:
    run.priority = raise_priority()
    try:
        conn = connect(params)
        try:
            with_digests = digests_enabled(conn)
            run.samples.append(_sample(conn, with_digests))
            t0 = run.samples[0].t
            deadline = t0 + seconds
            k = 1
            while not (stop and stop()):
                now = time.monotonic()
                if now >= deadline:
                    break
                # the schedule is t0 + k * interval: a late sample does not delay the next
                # ones (a sample missed altogether is skipped, not crowded in)
                nxt = t0 + k * interval_s
                while nxt <= now:
                    k += 1
                    nxt = t0 + k * interval_s
                time.sleep(min(nxt, deadline) - now)
                run.samples.append(_sample(conn, with_digests))
                k += 1
        finally:
            conn.close()
    except BaseException as exc:  # handed to the caller's thread
        run.error = exc


def measure_window(
    params: ConnectParams,
    label: str,
    seconds: float,
    *,
    interval_s: float = 1.0,
    stop: Callable[[], bool] | None = None,
    due: float | None = None,
) -> Window:
    """Sample every ``interval_s`` for ``seconds`` from a thread of its own at a raised
    priority; a connection that fails raises ``MyaccelError`` (the caller counts it as a
    server that is not healthy). ``due``: when (``time.monotonic``) the window should have
    begun, now by default; its first sample's delay from then is its ``late_start_s``."""
    asked = time.monotonic() if due is None else due
    run = _Run()
    thread = threading.Thread(
        target=_sampler,
        args=(params, seconds, interval_s, stop, run),
        name=f"myaccel-guard-{label}",
        daemon=True,
    )
    thread.start()
    thread.join()
    if run.error is not None:
        raise run.error
    w = window_from(label, run.samples, interval_s=interval_s)
    w.late_start_s = run.samples[0].t - asked if run.samples else 0.0
    w.priority = run.priority
    return w


def window_from(label: str, samples: list[Sample], *, interval_s: float = 1.0) -> Window:
    w = Window(label, samples[-1].t - samples[0].t if samples else 0.0, interval_s=interval_s)
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
        w.dt.append(dt)
        w.threads_running.append(float(b.status.get("Threads_running", 0)))
        if "Threads_connected" in b.status:
            w.threads_connected.append(float(max(0, b.status["Threads_connected"] - 1)))
        for k in ("Aborted_clients", "Aborted_connects"):
            w.aborted += max(0, b.status.get(k, 0) - a.status.get(k, 0))
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


def _runs_below(w: Window, threshold: float) -> list[tuple[int, int, float]]:
    """Runs of consecutive intervals below ``threshold``: (first, last index, seconds)."""
    out: list[tuple[int, int, float]] = []
    start: int | None = None
    for i, q in enumerate([*w.qps, math.inf]):
        if q < threshold:
            start = i if start is None else start
        elif start is not None:
            out.append((start, i - 1, sum(w.lengths()[start:i])))
            start = None
    return out


def _burst_after(w: Window, index: int, qb: float, ceiling: float) -> float | None:
    """The highest rate, as a multiple of ``qb``, of an interval that starts within
    ``BURST_WITHIN_S`` from interval ``index`` and is a burst; None without one."""
    best: float | None = None
    elapsed = 0.0
    for q, d in zip(w.qps[index:], w.lengths()[index:], strict=True):
        if elapsed > BURST_WITHIN_S:
            break
        if q > max(BURST_X * qb, BURST_CEILING * ceiling):
            best = max(best or 0.0, q / qb)
        elapsed += d
    return best


def min_stall_s(before: Window) -> float:
    """The shortest run below ``STALL_FRACTION`` of the before rate that is a stall."""
    qb = before.rate
    own = max((r[2] for r in _runs_below(before, STALL_FRACTION * qb)), default=0.0)
    return max(
        STALL_MIN_S,
        STALL_MIN_INTERVALS * before.interval_s,
        STALL_MIN_STATEMENTS / qb if qb > 0 else math.inf,
        2 * own,
    )


def _stall(before: Window, after: Window) -> str | None:
    """A stall in the after window (then its burst), or a late start that opened on a
    burst; None if neither."""
    qb = before.rate
    ceiling = max(before.qps)
    shortest = min_stall_s(before)
    runs = _runs_below(after, STALL_FRACTION * qb)
    long_runs = [r for r in runs if r[2] >= shortest]
    if long_runs:
        total = sum(r[2] for r in long_runs)
        longest = max(long_runs, key=lambda r: r[2])
        burst = _burst_after(after, longest[1] + 1, qb, ceiling)
        what = (
            f"stall: {total:.0f} s of {after.seconds:.0f} below {STALL_FRACTION:.0%} of the "
            f"before window's rate ({qb:.1f} statements/s)"
        )
        if len(long_runs) > 1:
            what += f", in {len(long_runs)} runs, the longest {longest[2]:.0f} s"
        if burst is not None:
            what += f", then a burst at {burst:.1f}x"
        return what
    late = after.late_start_s
    if late >= shortest:
        burst = _burst_after(after, 0, qb, ceiling)
        if burst is not None:
            return (
                f"the after window began {late:.0f} s late and opened on a burst at "
                f"{burst:.1f}x the before window's rate: a catch-up after a stall it did "
                "not see"
            )
    return None


def judge(before: Window, after: Window, problems: list[str] | None = None) -> Verdict:
    """Breaches: the server not healthy (``problems``), then a stall (with its catch-up
    burst), error rate, throughput, latency, running threads, clients disconnected worse
    than the before window's noise allows."""
    breaches = [f"server not healthy: {p}" for p in problems or []]
    notes: list[str] = []
    for w in (before, after):
        late = w.late_intervals()
        if w.late_start_s > LATE_X * w.interval_s:
            notes.append(f"the {w.label} window began {w.late_start_s:.1f} s late")
        if late:
            notes.append(
                f"the {w.label} window's sampler was held up: {len(late)} of {len(w.qps)} "
                f"intervals longer than {LATE_X:.0f}x {w.interval_s:g} s, the longest "
                f"{max(late):.1f} s (their rates are over their real length)"
            )
    if after.priority.startswith("normal"):
        notes.append(f"the sampler ran at {after.priority}: a busy host can hold it up")
    if not before.qps or not after.qps:
        notes.append("a window has no complete interval: only the health check counts")
        return Verdict(before, after, breaches, notes)
    _, qb_sd = _mean_sd(before.qps)
    qb = before.rate  # over the window's real time, each interval by its length
    qa = after.rate
    idle = qb < IDLE_QPS
    if idle:
        notes.append(
            f"the server was idle before the apply ({qb:.2f} statements/s): throughput and "
            "latency say nothing; only health, errors and clients count"
        )
    else:
        stall = _stall(before, after)
        if stall:
            breaches.append(stall)
        counting = COUNT_Z * math.sqrt(qb / sum(before.lengths()) + qa / sum(after.lengths()))
        allowed = max(
            min(max(NOISE_SD * qb_sd, THROUGHPUT_FLOOR * qb), THROUGHPUT_CAP * qb), counting
        )
        if qb - qa > allowed:
            breaches.append(
                f"throughput fell from {qb:.1f} to {qa:.1f} statements/s "
                f"(more than the {allowed:.1f} the before window's noise allows)"
            )
    if before.latency_ms and after.latency_ms and not idle:
        lb, lb_sd = _mean_sd(before.latency_ms)
        la, _ = _mean_sd(after.latency_ms)
        allowed = min(max(NOISE_SD * lb_sd, LATENCY_FLOOR * lb), LATENCY_CAP * lb)
        if la - lb > allowed:
            breaches.append(
                f"mean statement latency rose from {lb:.3f} to {la:.3f} ms "
                f"(more than the {allowed:.3f} ms the before window's noise allows)"
            )
    elif not before.latency_ms:
        notes.append(
            "performance_schema is off: no latency or error figures; throughput, its "
            "stalls and the clients' counters only"
        )
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
    breaches.extend(_clients(before, after))
    return Verdict(before, after, breaches, notes)


def _clients(before: Window, after: Window) -> list[str]:
    out: list[str] = []
    if before.seconds > 0 and after.seconds > 0:
        # the before window's rate, one more counted (none seen is not a rate of zero), and
        # 4 standard deviations of a Poisson count above ABORTED_X times it
        expected = (before.aborted + 1) / before.seconds * after.seconds
        allowed = ABORTED_X * expected + COUNT_Z * math.sqrt(expected + 1)
        if after.aborted >= ABORTED_MIN and after.aborted > allowed:
            out.append(
                f"aborted connections: {after.aborted} in the after window against "
                f"{before.aborted} in the before one ({expected:.1f} expected)"
            )
    if before.threads_connected and after.threads_connected:
        cb = statistics.fmean(before.threads_connected)
        ca = statistics.fmean(after.threads_connected)
        if cb - ca >= CONNECTED_MIN and ca < cb / 2:
            out.append(f"clients left: Threads_connected fell from {cb:.1f} to {ca:.1f}")
    return out


def safe_window(
    params: ConnectParams, label: str, seconds: float, *, due: float | None = None
) -> tuple[Window, list[str]]:
    """``measure_window``, with a connection failure as a health problem."""
    try:
        return measure_window(params, label, seconds, due=due), []
    except MyaccelError as exc:
        return Window(label, 0.0), [exc.message]
