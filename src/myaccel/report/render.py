"""Render report content to one self-contained HTML file and a GitHub-flavored Markdown file.

Templates (Jinja2) live in ``myaccel/report/templates``; the stylesheet and the small
script are inlined into the HTML, figures are inline SVG: the file opens without network.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jinja2
from markupsafe import Markup

from myaccel.bench.work_counters import counter_differences
from myaccel.profile.folded import parse_folded
from myaccel.report import fmt
from myaccel.report.content import ReportContent, arm_points

MD_LIMIT_CHARS = 60_000  # GitHub refuses comments over 65,536 characters


@dataclass
class Figure:
    id: str
    title: str
    svg: Markup
    caption: str


@dataclass
class ProfileFigures:
    flame: Markup | None
    flame_file: str | None


def _env(autoescape: bool) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("myaccel.report", "templates"),
        autoescape=autoescape,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        tps=fmt.tps,
        ms=fmt.ms,
        pct=fmt.pct,
        pval=fmt.pval,
        num=fmt.num,
        share=fmt.share,
        md=fmt.md_cell,
        work=counter_differences,
    )
    env.globals.update(ci=fmt.ci)
    return env


# Captions of the per-experiment figures (the threads figure adds the CPU count).
_THREADS_CAPTION = (
    "Median TPS (top) and median p95 latency (bottom) per arm; bars: "
    "distribution-free CI of the median (order statistics; with 5 runs per arm "
    "this is the range, 93.75% coverage)."
)
_STRIP_CAPTION = (
    "Each dot is one whole run (the unit of analysis); black bar: median; "
    "red x: an invalid run, left out of the statistics."
)
_FOREST_CAPTION = (
    "TPS gain per cell with its 95% CI, coloured by verdict (green improved, "
    "red regressed, grey no change, amber inconclusive); diamond: geometric "
    "mean over the cells."
)
_SERIES_CAPTION = (
    "One typical run per arm and cell (the valid run closest to the arm's "
    "median); shaded: warm-up, excluded from the run's summary."
)


def _figures(content: ReportContent) -> dict[int, list[Figure]]:
    from myaccel.report import plots

    cpus = content.cpus
    threads_caption = _THREADS_CAPTION + (
        f" Shaded: more client threads than the {cpus} logical CPUs (oversubscribed)."
        if cpus
        else " Logical CPU count unknown: no oversubscribed region."
    )
    out: dict[int, list[Figure]] = {}
    for i, exp in enumerate(content.experiments):
        drawn = (
            (
                "threads",
                "Throughput and p95 latency against threads",
                threads_caption,
                plots.tps_vs_threads(exp, cpus, f"f{i}tps"),
            ),
            ("strip", "Every run", _STRIP_CAPTION, plots.strip_plot(exp, f"f{i}strip")),
            (
                "forest",
                "Gains with confidence intervals",
                _FOREST_CAPTION,
                plots.forest_plot(exp, f"f{i}forest"),
            ),
            (
                "series",
                "Per-second time series",
                _SERIES_CAPTION,
                plots.time_series(exp, f"f{i}ts"),
            ),
        )
        out[i] = [
            Figure(f"fig-{i}-{name}", title, Markup(svg), caption)
            for name, title, caption, svg in drawn
            if svg
        ]
    return out


def _profile_figures(content: ReportContent) -> list[ProfileFigures]:
    from myaccel.report.flame import flame_svg

    out: list[ProfileFigures] = []
    for i, pv in enumerate(content.profiles):
        flame = None
        if pv.folded is not None:
            try:
                folded = parse_folded(pv.folded.read_text(errors="replace"), source=str(pv.folded))
                svg = flame_svg(folded, prefix=f"flame{i}")
                flame = Markup(svg) if svg else None
            except OSError:
                flame = None
        out.append(
            ProfileFigures(
                flame=flame,
                flame_file=pv.flamegraph_file.name if pv.flamegraph_file else None,
            )
        )
    return out


_HISTORY_CAPTION = (
    "Each trial's change against the rules' plan (interleaved runs, Hodges-Lehmann shift), "
    "coloured by stage; grey band: the noise floor from the A/A; black steps: the incumbent "
    "(the best configuration on all its runs so far; 0% while the plan is still the best known)."
)
_IMPORTANCE_CAPTION = (
    "Optuna's importance evaluator (PED-ANOVA) over the study's complete trials: how much "
    "each searched parameter matters for reaching the best trials' scores. On few, noisy "
    "trials this is a hint, not a measurement (the ablation measures)."
)


def _tune_figures(content: ReportContent) -> list[list[Figure]]:
    from myaccel.report import plots

    out: list[list[Figure]] = []
    for i, tv in enumerate(content.tunes):
        drawn = (
            ("history", "Optimization history", _HISTORY_CAPTION, plots.tune_history(tv, f"t{i}h")),
            (
                "importance",
                "Parameter importances",
                _IMPORTANCE_CAPTION,
                plots.importance_plot(tv, f"t{i}imp"),
            ),
        )
        out.append(
            [
                Figure(f"fig-tune-{i}-{name}", title, Markup(svg), caption)
                for name, title, caption, svg in drawn
                if svg
            ]
        )
    return out


def _micro_figure(content: ReportContent) -> Markup | None:
    from myaccel.report import plots

    svg = plots.microarch_plot(content.micro, content.micro_labels, "fmicro")
    return Markup(svg) if svg else None


def _context(content: ReportContent) -> dict[str, Any]:
    return {
        "r": content,
        "points": {i: arm_points(e) for i, e in enumerate(content.experiments)},
        "micro_labels": content.micro_labels,
    }


def render_html(content: ReportContent) -> str:
    env = _env(autoescape=True)
    loader = env.loader
    assert loader is not None
    css = loader.get_source(env, "report.css")[0]
    js = loader.get_source(env, "report.js")[0]
    tpl = env.get_template("report.html.j2")
    return tpl.render(
        **_context(content),
        figures=_figures(content),
        pfigs=_profile_figures(content),
        micro_svg=_micro_figure(content),
        tfigs=_tune_figures(content),
        css=Markup(css),
        js=Markup(js),
    )


def render_markdown(content: ReportContent, *, with_html: bool = True) -> str:
    env = _env(autoescape=False)
    text = env.get_template("report.md.j2").render(**_context(content), with_html=with_html)
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    if len(text) > MD_LIMIT_CHARS:
        cut = text.rfind("\n", 0, MD_LIMIT_CHARS - 200)
        text = (
            text[:cut]
            + "\n\n*(cut here to fit an issue comment: the full report is report.html)*\n"
        )
    return text
