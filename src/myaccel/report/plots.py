"""The report's figures, drawn with matplotlib (Agg) and embedded as inline SVG.

SVG keeps the figures sharp on any screen and in print, needs no image files next to the
report, and stays small (text is kept as text, not outlines). Each figure's element ids are
prefixed so several figures can live in one HTML document.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, cast

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from myaccel.report.content import (
    ArmPoint,
    Experiment,
    MicroRow,
    TuneView,
    arm_points,
    representative_run,
)

ARM_COLORS = ("#4a6fa5", "#e07b39", "#6a9f58", "#9b59b6")
VERDICT_COLORS = {
    "improved": "#2e8540",
    "regressed": "#c0392b",
    "no change": "#7f8c8d",
    "inconclusive": "#b7950b",
}
SHADE = "#f3d9c6"
MAX_CELL_PANELS = 24  # strip plots / time series beyond this are left out (said so)

_RC: dict[str, Any] = {
    "svg.fonttype": "none",  # text stays text: smaller, selectable, crisp
    "svg.hashsalt": "myaccel",  # deterministic ids
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Liberation Sans", "Arial", "Helvetica"],
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#e3e3e3",
    "grid.linewidth": 0.6,
    "axes.edgecolor": "#888888",
    "legend.frameon": False,
    "figure.dpi": 96,
}


def _style() -> AbstractContextManager[None]:
    return plt.rc_context(cast(Any, _RC))


def _svg(fig: Figure, prefix: str, label: str) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    start = text.find("<svg")
    text = text[start:]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.DOTALL)
    # matplotlib's "*{...}" rule would style the whole page: report.css scopes it instead
    text = re.sub(r'<style type="text/css">\*\{[^}]*\}</style>\s*', "", text)
    text = re.sub(r'\bid="([^"]+)"', rf'id="{prefix}-\1"', text)
    text = text.replace('href="#', f'href="#{prefix}-').replace("url(#", f"url(#{prefix}-")
    # Scale with the page: keep the viewBox, drop the fixed size.
    head_end = text.find(">")
    head = text[:head_end]
    m = re.search(r'\swidth="([\d.]+)pt"', head)
    width_px = float(m.group(1)) * 96 / 72 if m else 720.0
    head = re.sub(r'\s(width|height)="[^"]*"', "", head)
    head = re.sub(r'\sxmlns:(cc|dc|rdf)="[^"]*"', "", head)
    head += f' class="plot" style="width: {width_px:.0f}px" role="img" aria-label="{_attr(label)}"'
    return head + text[head_end:]


def _attr(s: str) -> str:
    return s.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def _grid(n: int, max_cols: int) -> tuple[int, int]:
    cols = max(1, min(max_cols, n))
    return math.ceil(n / cols), cols


def _threads_axis(ax: Axes, threads: Sequence[int], cpus: int | None) -> None:
    lo = min([*threads, cpus or threads[0]])
    hi = max([*threads, cpus or threads[0]])
    ax.set_xscale("log", base=2)
    ax.set_xlim(lo / 1.6, hi * 1.6)
    ticks = sorted({*threads, *([cpus] if cpus else [])})
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(t) for t in ticks])
    ax.minorticks_off()
    if cpus:
        ax.axvspan(cpus, hi * 1.6, color=SHADE, alpha=0.55, lw=0, zorder=0)
        ax.axvline(cpus, color="#c98b5e", lw=0.8, ls="--", zorder=1)


def tps_vs_threads(exp: Experiment, cpus: int | None, prefix: str) -> str | None:
    pts = [p for p in arm_points(exp) if p.tps_median is not None]
    if not pts:
        return None
    works = exp.workloads
    has_p95 = any(p.p95_median is not None for p in pts)
    rows = 2 if has_p95 else 1
    with _style():
        fig, axes = plt.subplots(
            rows,
            len(works),
            figsize=(min(11.5, max(5.0, 4.6 * len(works))), 3.1 * rows),
            squeeze=False,
            sharex="col",
        )
        for j, w in enumerate(works):
            threads = sorted({p.threads for p in pts if p.workload == w})
            if not threads:
                continue
            for i in range(rows):
                ax = axes[i][j]
                _threads_axis(ax, threads, cpus)
                for k, arm in enumerate(exp.arms):
                    mine = sorted(
                        (p for p in pts if p.workload == w and p.arm == arm),
                        key=lambda p: p.threads,
                    )
                    if i == 0:
                        ys = [p.tps_median for p in mine]
                        lows = [p.tps_low for p in mine]
                        highs = [p.tps_high for p in mine]
                    else:
                        mine = [p for p in mine if p.p95_median is not None]
                        ys = [p.p95_median for p in mine]
                        lows = [p.p95_low for p in mine]
                        highs = [p.p95_high for p in mine]
                    if not mine:
                        continue
                    xs = [p.threads * (1 + 0.04 * (k - (len(exp.arms) - 1) / 2)) for p in mine]
                    err = [
                        [
                            max(0.0, (y or 0) - (lo or y or 0))
                            for y, lo in zip(ys, lows, strict=True)
                        ],
                        [
                            max(0.0, (hi or y or 0) - (y or 0))
                            for y, hi in zip(ys, highs, strict=True)
                        ],
                    ]
                    ax.errorbar(
                        xs,
                        ys,
                        yerr=err,
                        color=ARM_COLORS[k % len(ARM_COLORS)],
                        marker="o",
                        ms=4,
                        lw=1.6,
                        capsize=3,
                        label=arm,
                    )
                top = max([float(v) for line in ax.lines for v in line.get_ydata()] + [0.0])
                ax.set_ylim(0, top * 1.12 if top > 0 else 1.0)
                if i == 0:
                    ax.set_title(w)
                    if j == 0:
                        ax.set_ylabel("TPS (median, CI)")
                elif j == 0:
                    ax.set_ylabel("p95 latency, ms")
                if i == rows - 1:
                    ax.set_xlabel("threads")
        handles, labels = axes[0][0].get_legend_handles_labels()
        if cpus:
            from matplotlib.patches import Patch

            handles.append(Patch(color=SHADE, alpha=0.55, label=f"threads > {cpus} CPUs"))
            labels.append(f"oversubscribed: threads > {cpus} CPUs")
        fig.legend(
            handles, labels, loc="upper center", ncol=len(labels), bbox_to_anchor=(0.5, 1.04)
        )
        fig.tight_layout()
        return _svg(fig, prefix, "TPS and p95 latency against threads, per arm")


def strip_plot(exp: Experiment, prefix: str) -> str | None:
    cells = exp.cells[:MAX_CELL_PANELS]
    if not exp.all_runs:
        return None
    nrows, ncols = _grid(len(cells), 6)
    with _style():
        fig, axes = plt.subplots(
            nrows,
            ncols,
            figsize=(min(11.5, 2.2 * ncols + 0.6), 2.6 * nrows),
            squeeze=False,
        )
        for idx, (w, t) in enumerate(cells):
            ax = axes[idx // ncols][idx % ncols]
            for k, arm in enumerate(exp.arms):
                runs = [r for r in exp.runs.get(arm, []) if r.workload == w and r.threads == t]
                color = ARM_COLORS[k % len(ARM_COLORS)]
                good = [r.summary.tps for r in runs if r.validity.valid and r.summary]
                bad = [r.summary.tps if r.summary else 0.0 for r in runs if not r.validity.valid]
                n = len(good)
                xs = [k + 0.25 * ((i / max(1, n - 1)) - 0.5) if n > 1 else k for i in range(n)]
                ax.scatter(xs, good, s=16, color=color, alpha=0.85, zorder=3)
                if bad:
                    ax.scatter([k] * len(bad), bad, s=26, marker="x", color="#c0392b", zorder=4)
                if good:
                    med = (
                        sorted(good)[len(good) // 2]
                        if n % 2
                        else sum(sorted(good)[n // 2 - 1 : n // 2 + 1]) / 2
                    )
                    ax.plot([k - 0.25, k + 0.25], [med, med], color="#222222", lw=1.4, zorder=4)
            ax.set_xticks(range(len(exp.arms)))
            ax.set_xticklabels([a[:12] for a in exp.arms], fontsize=8)
            ax.set_xlim(-0.6, len(exp.arms) - 0.4)
            ax.set_title(f"{w.removeprefix('oltp_')} @ {t}", fontsize=9)
            ax.grid(axis="x", visible=False)
            if idx % ncols == 0:
                ax.set_ylabel("TPS per run")
        for idx in range(len(cells), nrows * ncols):
            axes[idx // ncols][idx % ncols].set_visible(False)
        fig.tight_layout()
        return _svg(fig, prefix, "Every run's TPS per arm and cell")


def forest_plot(exp: Experiment, prefix: str) -> str | None:
    cmp = exp.comparison
    if cmp is None:
        return None
    cells = [c for c in cmp.cells if c.delta_pct is not None]
    if not cells:
        return None
    rows = [
        (f"{c.workload} @ {c.threads}", c.delta_pct, c.ci_low_pct, c.ci_high_pct, c.verdict)
        for c in cells
    ]
    if cmp.geomean_delta_pct is not None:
        rows.append(
            (
                "geometric mean",
                cmp.geomean_delta_pct,
                cmp.geomean_ci_low_pct,
                cmp.geomean_ci_high_pct,
                "geomean",
            )
        )
    with _style():
        fig, ax = plt.subplots(figsize=(8.4, 0.42 * len(rows) + 1.1))
        for i, (_, d, lo, hi, verdict) in enumerate(rows):
            y = len(rows) - 1 - i
            color = VERDICT_COLORS.get(verdict, "#222222")
            assert d is not None
            if lo is not None and hi is not None:
                ax.plot([lo, hi], [y, y], color=color, lw=2.2, solid_capstyle="butt")
            ax.plot(
                [d],
                [y],
                marker="D" if verdict == "geomean" else "o",
                ms=8 if verdict == "geomean" else 6,
                color=color,
            )
            ax.annotate(
                f"{d:+.1f}%",
                (hi if hi is not None else d, y),
                xytext=(6, 0),
                textcoords="offset points",
                va="center",
                fontsize=8,
            )
        ax.axvline(0, color="#555555", lw=0.9)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([r[0] for r in reversed(rows)])
        ax.set_xlabel("TPS gain, % (95% CI)")
        ax.grid(axis="y", visible=False)
        xs_all = [0.0] + [v for r in rows for v in (r[1], r[2], r[3]) if v is not None]
        lo_all, hi_all = min(xs_all), max(xs_all)
        span = (hi_all - lo_all) or 1.0
        ax.set_xlim(lo_all - 0.08 * span, hi_all + 0.2 * span)
        fig.tight_layout()
        return _svg(fig, prefix, "Forest plot of TPS gains with 95% confidence intervals")


def time_series(exp: Experiment, prefix: str) -> str | None:
    cells = exp.cells[:MAX_CELL_PANELS]
    panels = []
    for w, t in cells:
        reps = []
        for arm in exp.arms:
            rr = representative_run(
                [r for r in exp.runs.get(arm, []) if r.workload == w and r.threads == t]
            )
            reps.append(rr)
        if any(r is not None for r in reps):
            panels.append(((w, t), reps))
    if not panels:
        return None
    nrows, ncols = _grid(len(panels), 3)
    with _style():
        fig, axes = plt.subplots(nrows, ncols, figsize=(4.4 * ncols, 2.7 * nrows), squeeze=False)
        for idx, ((w, t), reps) in enumerate(panels):
            ax = axes[idx // ncols][idx % ncols]
            warm = 0.0
            for k, r in enumerate(reps):
                if r is None:
                    continue
                warm = max(warm, float(r.spec.get("warmup_s") or 0))
                xs = [p.t_s for p in r.series]
                ys = [p.tps for p in r.series]
                ax.plot(
                    xs,
                    ys,
                    color=ARM_COLORS[k % len(ARM_COLORS)],
                    lw=1.3,
                    label=f"{exp.arms[k]} (run {r.index})",
                )
            if warm > 0:
                ax.axvspan(0, warm, color="#dddddd", alpha=0.8, lw=0, zorder=0)
                ax.text(
                    warm / 2,
                    0.02,
                    "warm-up",
                    transform=ax.get_xaxis_transform(),
                    ha="center",
                    fontsize=7,
                    color="#666666",
                )
            ax.set_ylim(bottom=0)
            ax.set_xlim(left=0)
            ax.set_title(f"{w.removeprefix('oltp_')} @ {t}", fontsize=9)
            ax.set_xlabel("seconds")
            if idx % ncols == 0:
                ax.set_ylabel("TPS per second")
            ax.legend(fontsize=7, loc="lower right")
        for idx in range(len(panels), nrows * ncols):
            axes[idx // ncols][idx % ncols].set_visible(False)
        fig.tight_layout()
        return _svg(fig, prefix, "Per-second TPS of one typical run per arm, warm-up shaded")


def microarch_plot(rows: Sequence[MicroRow], labels: Sequence[str], prefix: str) -> str | None:
    use = [r for r in rows if any(p is not None for p in r.pct_of_first[1:])]
    if not use or len(labels) < 2:
        return None
    with _style():
        fig, ax = plt.subplots(figsize=(7.2, 0.36 * len(use) * (len(labels) - 1) + 1.2))
        height = 0.8 / (len(labels) - 1)
        for k in range(1, len(labels)):
            ys = [len(use) - 1 - i + (k - 1) * height - 0.4 + height / 2 for i in range(len(use))]
            vals = [r.pct_of_first[k] or 0.0 for r in use]
            ax.barh(
                ys,
                vals,
                height=height * 0.9,
                color=ARM_COLORS[k % len(ARM_COLORS)],
                label=labels[k],
            )
            for y, v in zip(ys, vals, strict=True):
                ax.text(v, y, f" {v:.0f}%", va="center", fontsize=7)
        ax.axvline(100, color="#222222", lw=1, ls="--")
        ax.set_yticks(range(len(use)))
        ax.set_yticklabels([r.name for r in reversed(use)])
        ax.set_xlabel(f"% of {labels[0]} (= 100%)")
        ax.legend(loc="lower right", fontsize=8)
        ax.grid(axis="y", visible=False)
        fig.tight_layout()
        return _svg(fig, prefix, "Micro-architecture metrics normalized to the baseline")


STAGE_COLORS = {
    "plan": "#7f8c8d",
    "screen": "#4a6fa5",
    "confirm": "#e07b39",
    "final": "#2e8540",
    "ablation": "#9b59b6",
}


def tune_history(view: TuneView, prefix: str) -> str | None:
    """Each trial's change against the plan by trial number, coloured by stage; pruned
    and failed trials as ticks on the axis; the incumbent as a step line; the noise floor
    as a band around the plan (0%)."""
    pts = view.history
    if not pts:
        return None
    measured = [p for p in pts if p.state == "COMPLETE" and p.delta_pct is not None]
    with _style():
        fig, ax = plt.subplots(figsize=(8.4, 3.4))
        if view.floor_pct:
            ax.axhspan(-view.floor_pct, view.floor_pct, color="#eeeeee", lw=0, zorder=0)
        ax.axhline(0, color="#555555", lw=0.9, zorder=1)
        for stage, color in STAGE_COLORS.items():
            mine = [p for p in measured if p.stage == stage]
            if mine:
                ax.scatter(
                    [p.number for p in mine],
                    [p.delta_pct or 0.0 for p in mine],
                    s=22,
                    color=color,
                    label=stage,
                    zorder=3,
                )
        ys = [float(p.delta_pct) for p in measured if p.delta_pct is not None] + [0.0]
        bottom = min(ys) - 0.08 * ((max(ys) - min(ys)) or 1.0)
        for state, marker, color in (("PRUNED", "|", "#aaaaaa"), ("FAIL", "x", "#c0392b")):
            mine = [p for p in pts if p.state == state]
            if mine:
                label = "pruned (infeasible)" if state == "PRUNED" else "failed"
                ax.scatter(
                    [p.number for p in mine],
                    [bottom] * len(mine),
                    marker=marker,
                    color=color,
                    label=label,
                    zorder=2,
                )
        ax.step(
            [p.number for p in pts],
            [p.incumbent_pct for p in pts],
            where="post",
            color="#222222",
            lw=1.4,
            label="incumbent",
            zorder=4,
        )
        ax.set_xlabel("trial")
        ax.set_ylabel("change vs the plan, %")
        if view.floor_pct:
            ax.plot([], [], color="#eeeeee", lw=6, label=f"noise floor ±{view.floor_pct:.1f}%")
        ax.legend(loc="upper center", ncol=4, fontsize=8, bbox_to_anchor=(0.5, 1.22))
        fig.tight_layout()
        return _svg(fig, prefix, "Optimization history: each trial against the plan")


def importance_plot(view: TuneView, prefix: str) -> str | None:
    rows = view.importances[:12]
    if not rows:
        return None
    with _style():
        fig, ax = plt.subplots(figsize=(7.2, 0.3 * len(rows) + 1.0))
        ys = list(range(len(rows) - 1, -1, -1))
        ax.barh(ys, [v for _, v in rows], color=ARM_COLORS[0], height=0.7)
        for y, (_, v) in zip(ys, rows, strict=True):
            ax.text(v, y, f" {v:.2f}", va="center", fontsize=7)
        ax.set_yticks(ys)
        ax.set_yticklabels([n for n, _ in rows])
        ax.set_xlabel("importance (PED-ANOVA, normalized to sum to 1)")
        ax.grid(axis="y", visible=False)
        fig.tight_layout()
        return _svg(fig, prefix, "Parameter importances")


__all__ = [
    "ArmPoint",
    "forest_plot",
    "importance_plot",
    "microarch_plot",
    "strip_plot",
    "time_series",
    "tps_vs_threads",
    "tune_history",
]
