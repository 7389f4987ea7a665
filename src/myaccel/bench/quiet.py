"""The quiet-machine gate: before a campaign's first run, the host's other load is measured
(other processes' share of all CPU time, as each run measures it during itself:
``work_counters.others_cpu_s``); above ``THRESHOLD_PCT`` the command waits for a quiet
host, at most ``--quiet-wait`` seconds, then goes on and says at the top of every output
that its figures are disturbed (``disturbed_banner``), as it does when most runs were
disturbed during themselves."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from myaccel.bench.run_record import QuietGate, RunRecord
from myaccel.bench.runner import process_cpu_s
from myaccel.bench.work_counters import (
    OTHERS_SHARE_WARN,
    OTHERS_WARNING_PREFIX,
    host_counters,
    others_cpu_s,
)

# Other processes above this share of the host's CPU make a host loud: the share that
# flags a run as disturbed during itself.
THRESHOLD_PCT = 100.0 * OTHERS_SHARE_WARN
DEFAULT_WAIT_S = 60.0  # --quiet-wait
SAMPLE_S = 2.0  # one measurement
POLL_S = 5.0  # between measurements while waiting

# sample seconds -> other processes' share of all the host's CPU time (%) over that
# sample, None when it cannot be read
LoadReader = Callable[[float], float | None]


def others_load(server_pid: int | None = None) -> LoadReader:
    """The reader of the live host: CPU time of the whole host over the sample, less the
    server's own (``server_pid``: a running server's background work is not other load)."""

    def read(sample_s: float) -> float | None:
        k0, s0 = host_counters(), process_cpu_s(server_pid)
        time.sleep(sample_s)
        k1, s1 = host_counters(), process_cpu_s(server_pid)
        own = s1 - s0 if s0 is not None and s1 is not None else 0.0
        others = others_cpu_s(k0, k1, own)
        total = k1.get("total", 0.0) - k0.get("total", 0.0)
        return None if others is None or total <= 0 else 100.0 * others / total

    return read


def wait_for_quiet(
    read: LoadReader,
    *,
    wait_s: float,
    note: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    threshold_pct: float = THRESHOLD_PCT,
    sample_s: float = SAMPLE_S,
    poll_s: float = POLL_S,
) -> QuietGate:
    """Measure; while other load is above ``threshold_pct`` and the next measurement still
    fits in ``wait_s`` seconds, say so, wait ``poll_s`` and measure again."""
    start = clock()
    first: float | None = None
    samples = 0
    while True:
        pct = read(sample_s)
        samples += 1
        first = pct if samples == 1 else first
        waited = clock() - start
        if pct is None:
            note("the host's other load could not be read: going on without the quiet gate")
            return QuietGate(
                verdict="unknown",
                others_pct=None,
                threshold_pct=threshold_pct,
                waited_s=round(waited, 1),
                wait_limit_s=wait_s,
                samples=samples,
            )
        quiet = pct <= threshold_pct
        if quiet or waited + poll_s + sample_s > wait_s:
            gate = QuietGate(
                verdict="quiet" if quiet else "loud",
                others_pct=round(pct, 1),
                first_pct=round(first, 1) if first is not None else None,
                threshold_pct=threshold_pct,
                waited_s=round(waited, 1),
                wait_limit_s=wait_s,
                samples=samples,
            )
            note(gate_line(gate))
            return gate
        note(
            f"host busy: other processes use {pct:.0f}% of the CPU (a quiet host: at most "
            f"{threshold_pct:.0f}%); waiting for it to quiet down ({waited:.0f} of "
            f"{wait_s:.0f} s, --quiet-wait)"
        )
        sleep(poll_s)


def gate_line(gate: QuietGate) -> str:
    """One line on the gate's outcome, for the console."""
    if gate.verdict == "quiet":
        after = f" after waiting {gate.waited_s:.0f} s" if gate.samples > 1 else ""
        return f"host quiet{after}: other processes use {gate.others_pct:.0f}% of the CPU"
    if gate.verdict == "loud":
        return (
            f"warning: host still busy ({gate.others_pct:.0f}% of the CPU used by other "
            f"processes after {gate.waited_s:.0f} s; a quiet host: at most "
            f"{gate.threshold_pct:.0f}%): going on, and every output says its figures are disturbed"
        )
    return "the host's other load could not be read"


def _disturbed(r: RunRecord) -> bool:
    return any(w.startswith(OTHERS_WARNING_PREFIX) for w in r.validity.warnings)


def disturbed_banner(
    gates: Sequence[QuietGate], runs: Sequence[RunRecord], *, lead_share: float = 0.5
) -> str | None:
    """The sentence every output leads with when its figures are disturbed: a gate that
    found the host loud before the first run, or more than ``lead_share`` of the valid
    ``runs`` disturbed during themselves (0: any); None otherwise."""
    parts: list[str] = []
    loud = [g for g in gates if g.verdict == "loud"]
    if loud:
        g = max(loud, key=lambda g: g.others_pct or 0.0)
        parts.append(
            f"the host was busy before the first run: other processes used "
            f"{g.others_pct:.0f}% of its CPU after waiting {g.waited_s:.0f} s for a quiet "
            f"host (at most {g.threshold_pct:.0f}%)"
        )
    valid = [r for r in runs if r.validity.valid]
    hit = [r for r in valid if _disturbed(r)]
    if hit and len(hit) > lead_share * len(valid):
        parts.append(
            f"{len(hit)} of {len(valid)} valid runs were disturbed (other processes used "
            f"more than {OTHERS_SHARE_WARN:.0%} of the host's CPU during them)"
        )
    if not parts:
        return None
    return (
        "; ".join(parts) + ": the figures below may be off by more than their intervals say; "
        "measure on a quiet host"
    )
