"""Fidelity of a replay: the captured workload against a capture of its replay, class by
class (share of the statements, latency) and in total (statements per second,
concurrency), as a table.

The mix compares the classes a replay issues (``StatementClass.replayable``): on each side
their shares are taken over the statements of those classes only, so that what a replay
adds of its own (``USE``) or leaves out (``SET``, DDL) does not move the others."""

from __future__ import annotations

from dataclasses import dataclass

from myaccel import markdown
from myaccel.bench.workload import StatementClass, Workload

# The mix of a class matches when its shares differ by at most this many points.
MIX_TOLERANCE_PTS = 5.0


@dataclass(frozen=True)
class ClassFidelity:
    id: str
    text: str
    captured_pct: float
    replayed_pct: float
    captured_p50_us: float | None
    replayed_p50_us: float | None
    captured_p95_us: float | None
    replayed_p95_us: float | None

    @property
    def diff_pts(self) -> float:
        return self.replayed_pct - self.captured_pct


@dataclass(frozen=True)
class Fidelity:
    rows: list[ClassFidelity]
    captured_qps: float
    replayed_qps: float
    captured_connections: int
    replayed_connections: int
    captured_threads_running: float | None
    replayed_threads_running: float | None

    @property
    def max_diff_pts(self) -> float:
        return max((abs(r.diff_pts) for r in self.rows), default=0.0)

    @property
    def mix_matches(self) -> bool:
        return self.max_diff_pts <= MIX_TOLERANCE_PTS

    @property
    def throughput_ratio(self) -> float | None:
        return self.replayed_qps / self.captured_qps if self.captured_qps else None


def _key(c: StatementClass) -> tuple[str, str]:
    return (c.schema_name, c.text)


def _shares(w: Workload) -> dict[tuple[str, str], tuple[float, StatementClass]]:
    mix = [c for c in w.classes if c.replayable]
    total = sum(c.count for c in mix) or 1
    return {_key(c): (100 * c.count / total, c) for c in mix}


def _replayed_qps(w: Workload) -> float:
    n = sum(c.count for c in w.classes if c.replayable)
    return n / w.window_s if w.window_s else 0.0


def compare(captured: Workload, replayed: Workload) -> Fidelity:
    """Captured against replayed, most frequent captured class first; classes only the
    replay shows come last (with a captured share of 0)."""
    a, b = _shares(captured), _shares(replayed)
    rows: list[ClassFidelity] = []
    for key in [*a, *(k for k in b if k not in a)]:
        pa, ca = a.get(key, (0.0, None))
        pb, cb = b.get(key, (0.0, None))
        ref = ca or cb
        assert ref is not None
        la = ca.latency if ca else None
        lb = cb.latency if cb else None
        rows.append(
            ClassFidelity(
                id=ref.id,
                text=ref.text,
                captured_pct=pa,
                replayed_pct=pb,
                captured_p50_us=la.p50_us if la else None,
                replayed_p50_us=lb.p50_us if lb else None,
                captured_p95_us=la.p95_us if la else None,
                replayed_p95_us=lb.p95_us if lb else None,
            )
        )
    return Fidelity(
        rows=rows,
        captured_qps=_replayed_qps(captured),
        replayed_qps=_replayed_qps(replayed),
        captured_connections=captured.concurrency.connections,
        replayed_connections=replayed.concurrency.connections,
        captured_threads_running=captured.concurrency.threads_running_mean,
        replayed_threads_running=replayed.concurrency.threads_running_mean,
    )


def _us(v: float | None) -> str:
    return "-" if v is None else f"{v / 1000:.2f}"


def _short(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def format_fidelity(f: Fidelity) -> str:
    """The side-by-side table (markdown), then the totals and the verdict on the mix."""
    header = ["class", "statement", "captured %", "replayed %", "diff pts"]
    header += ["p50 ms cap / rep", "p95 ms cap / rep"]
    rows = [
        [
            r.id[:8],
            f"`{_short(r.text)}`",
            f"{r.captured_pct:.1f}",
            f"{r.replayed_pct:.1f}",
            f"{r.diff_pts:+.1f}",
            f"{_us(r.captured_p50_us)} / {_us(r.replayed_p50_us)}",
            f"{_us(r.captured_p95_us)} / {_us(r.replayed_p95_us)}",
        ]
        for r in f.rows
    ]
    lines = markdown.table(header, rows, "llrrrrr")
    ratio = f.throughput_ratio
    tr = (
        "-"
        if f.captured_threads_running is None or f.replayed_threads_running is None
        else f"{f.captured_threads_running:.2f} / {f.replayed_threads_running:.2f}"
    )
    lines += [
        "",
        f"statements/s captured {f.captured_qps:,.1f}, replayed {f.replayed_qps:,.1f}"
        + (f" ({100 * (ratio - 1):+.1f}%)" if ratio is not None else ""),
        f"connections captured {f.captured_connections}, replayed {f.replayed_connections}; "
        f"Threads_running mean captured / replayed {tr}",
        f"mix: largest difference {f.max_diff_pts:.1f} points per class "
        + (
            f"(within {MIX_TOLERANCE_PTS:g}: matches)"
            if f.mix_matches
            else f"(more than {MIX_TOLERANCE_PTS:g}: does not match)"
        ),
    ]
    return "\n".join(lines)
