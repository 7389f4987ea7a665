"""What a report says, independent of its format: experiments (a comparison with its runs),
the plan with the status of each recommendation, journal changes, environment, profiles,
build manifests and everything that is missing or doubtful.

The HTML and Markdown templates render these objects; numbers are formatted by
:mod:`myaccel.report.fmt` in both, so the two always agree.

One module per section family: ``experiments`` (runs, comparisons, per-arm statistics,
headlines), ``plans`` (the plan and the journals), ``environment``, ``profiles``,
``builds``, ``workloads`` (captures), ``tuning`` (a `tune` study), and ``summary`` for what spans them (what was done, warnings, what is missing).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from myaccel.actions.journal import JournalData
from myaccel.model import Facts
from myaccel.report.content.builds import BuildView, build_view
from myaccel.report.content.environment import environment, logical_cpus
from myaccel.report.content.experiments import (
    ArmPoint,
    ArmsTable,
    Experiment,
    Headline,
    arm_points,
    arms_tables,
    campaign_command,
    cell_headlines,
    collect_experiments,
    median_ci,
    representative_run,
)
from myaccel.report.content.layers import LayerRow, layer_rows
from myaccel.report.content.plans import (
    Change,
    PlanView,
    journal_changes,
    not_applied_rows,
    plan_view,
)
from myaccel.report.content.profiles import MicroRow, ProfileView, microarch_rows, profile_views
from myaccel.report.content.summary import (
    disturbed_line,
    done_lines,
    missing_lines,
    report_title,
    validity_warnings,
)
from myaccel.report.content.tuning import TuneView, tune_done, tune_views
from myaccel.report.content.workloads import WorkloadView, workload_views
from myaccel.report.load import Artifacts


@dataclass
class ReportContent:
    title: str
    created_at: str
    done: list[str]  # what was done, one line each
    headlines: list[Headline]
    geomean: str | None
    disturbed: str | None  # the summary's first line when runs were disturbed
    not_applied: list[tuple[str, str]]  # id/target, why
    command: str | None
    experiments: list[Experiment]
    arms_tables: list[ArmsTable]  # campaigns of three or more arms
    layers: list[LayerRow]  # an accelerate run's gain by layer: knobs, OS, build, version
    plans: list[PlanView]
    journals: list[tuple[Path, JournalData, list[Change]]]
    facts: Facts | None
    env: list[tuple[str, str]]
    cpus: int | None
    profiles: list[ProfileView]
    micro: list[MicroRow]
    micro_labels: list[str]
    micro_source: str
    builds: list[BuildView]
    workloads: list[WorkloadView]
    tunes: list[TuneView]
    warnings: list[str]
    missing: list[str]
    sources: list[str]


def build_content(arts: Artifacts) -> ReportContent:
    exps = collect_experiments(arts)
    facts = arts.facts[-1].doc if arts.facts else None
    plans = [plan_view(lp, arts.journals, arts.candidate_configs) for lp in arts.plans]
    journals = [(lj.path, lj.doc, journal_changes(lj.doc)) for lj in arts.journals]
    runs_all = [r for e in exps for r in e.all_runs]
    profs = profile_views(arts, facts)
    builds = [build_view(b) for b in arts.builds]
    headlines, geomean = cell_headlines(exps)

    micro_rows, micro_labels, micro_source = microarch_rows(profs)
    tunes = tune_views(arts)
    return ReportContent(
        title="myaccel tune report" if tunes else report_title(exps, profs, builds),
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        done=done_lines(exps, facts, plans, journals, profs, builds)
        + [tune_done(t) for t in tunes],
        headlines=headlines,
        geomean=geomean,
        disturbed=disturbed_line(exps),
        not_applied=not_applied_rows(plans),
        command=campaign_command(exps),
        experiments=exps,
        arms_tables=arms_tables(exps),
        layers=layer_rows(exps, plans),
        plans=plans,
        journals=journals,
        facts=facts,
        env=environment(facts, runs_all),
        cpus=logical_cpus(facts, runs_all),
        profiles=profs,
        micro=micro_rows,
        micro_labels=micro_labels,
        micro_source=micro_source,
        builds=builds,
        workloads=workload_views(arts),
        tunes=tunes,
        warnings=validity_warnings(exps, arts, facts, plans),
        missing=missing_lines(exps, facts, plans, profs, builds, runs_all),
        sources=[str(p) for p in arts.roots],
    )


__all__ = [
    "ArmPoint",
    "ArmsTable",
    "Experiment",
    "LayerRow",
    "MicroRow",
    "ReportContent",
    "TuneView",
    "arm_points",
    "build_content",
    "median_ci",
    "representative_run",
]
