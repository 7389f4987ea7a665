"""Captured workloads (``myaccel.workload/1``) in a report: the statement mix of each
capture and, for the capture of a replay (``capture --check``, whose ``replay_of`` names
the original's ``created_at``) with its original among the artifacts, the fidelity table."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from myaccel.bench.workload import Workload
from myaccel.capture.fidelity import compare
from myaccel.report.load import Artifacts, Loaded

MAX_TEXT = 90  # characters of a statement shown


def _ms(us: float | None) -> str:
    return "-" if us is None else f"{us / 1000:.2f}"


def _text(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."


@dataclass
class WorkloadView:
    path: Path
    line: str  # source, window, statements, rate, connections, Threads_running
    schemas: str
    redacted: bool
    # class, kind, count, share %, p50 ms, p95 ms, statement, replayed
    classes: list[tuple[str, str, str, str, str, str, str, str]]
    overhead: str | None = None
    replay_of: str | None = None  # the original's file, when this is a replay's capture
    # class, statement, captured %, replayed %, diff pts, p50 ms cap / rep, p95 ms cap / rep
    fidelity: list[tuple[str, str, str, str, str, str, str]] = field(default_factory=list)
    fidelity_line: str | None = None


def _view(lw: Loaded[Workload]) -> WorkloadView:
    w = lw.doc
    c = w.concurrency
    running = (
        ""
        if c.threads_running_mean is None
        else f", Threads_running mean {c.threads_running_mean:.2f}"
    )
    line = (
        f"{w.statements_total:,} statements in {w.window_s:.1f} s from "
        f"{w.source.replace('_', ' ')} ({w.statements_per_s:,.1f}/s), {len(w.classes)} classes, "
        f"{c.connections} connection(s){running}, observed concurrency "
        f"{w.observed().concurrency}"
    )
    o = w.overhead
    overhead = None
    if o is not None and o.overhead_pct is not None:
        overhead = (
            f"capture cost {o.overhead_pct:+.1f}% (statements/s {o.qps_before or 0:,.1f} before, "
            f"{o.qps_during or 0:,.1f} during, {o.qps_after or 0:,.1f} after)"
        )
    rows = [
        (
            k.id[:8],
            str(k.kind),
            f"{k.count:,}",
            f"{k.share_pct:.1f}",
            _ms(k.latency.p50_us if k.latency else None),
            _ms(k.latency.p95_us if k.latency else None),
            _text(k.text),
            "yes" if k.replayable else f"no ({k.not_replayed_because or 'not replayable'})",
        )
        for k in sorted(w.classes, key=lambda k: -k.count)
    ]
    return WorkloadView(
        path=lw.path,
        line=line,
        schemas=", ".join(s.name for s in w.schemas) or "-",
        redacted=w.redacted,
        classes=rows,
        overhead=overhead,
    )


def _with_fidelity(view: WorkloadView, original: Loaded[Workload], replayed: Workload) -> None:
    f = compare(original.doc, replayed)
    view.replay_of = str(original.path)
    view.fidelity = [
        (
            r.id[:8],
            _text(r.text),
            f"{r.captured_pct:.1f}",
            f"{r.replayed_pct:.1f}",
            f"{r.diff_pts:+.1f}",
            f"{_ms(r.captured_p50_us)} / {_ms(r.replayed_p50_us)}",
            f"{_ms(r.captured_p95_us)} / {_ms(r.replayed_p95_us)}",
        )
        for r in f.rows
    ]
    ratio = f.throughput_ratio
    change = "" if ratio is None else f" ({100 * (ratio - 1):+.1f}%)"
    verdict = "matches" if f.mix_matches else "does not match"
    view.fidelity_line = (
        f"statements/s captured {f.captured_qps:,.1f}, replayed {f.replayed_qps:,.1f}{change}; "
        f"connections {f.captured_connections} and {f.replayed_connections}; largest mix "
        f"difference {f.max_diff_pts:.1f} points (the mix {verdict})"
    )


def workload_views(arts: Artifacts) -> list[WorkloadView]:
    by_created = {lw.doc.created_at: lw for lw in arts.workloads}
    views = []
    for lw in arts.workloads:
        view = _view(lw)
        original = by_created.get(lw.doc.replay_of or "")
        if original is not None and original is not lw:
            _with_fidelity(view, original, lw.doc)
        views.append(view)
    return views
