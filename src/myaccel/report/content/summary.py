"""What the report says across its sections: what was done, the validity warnings, what
is missing and why, and the title."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from myaccel.actions.journal import JournalData
from myaccel.bench.run_record import RunRecord
from myaccel.model import Facts
from myaccel.report.content.builds import BuildView
from myaccel.report.content.experiments import Experiment, experiment_done
from myaccel.report.content.plans import Change, PlanView
from myaccel.report.content.profiles import ProfileView, simulated_metrics
from myaccel.report.load import Artifacts


def done_lines(
    exps: list[Experiment],
    facts: Facts | None,
    plans: list[PlanView],
    journals: list[tuple[Path, JournalData, list[Change]]],
    profs: list[ProfileView],
    builds: list[BuildView],
) -> list[str]:
    """ "What was done": one line per probe, experiment (and its arms), plan, journal,
    profile and build."""
    done: list[str] = []
    for e in exps:
        done += experiment_done(e)
    if facts is not None:
        done.insert(0, f"probed {facts.hostname.value or 'the host'} at {facts.collected_at}")
    for pv in plans:
        done.append(
            f"plan of {pv.plan.created_at}: {len(pv.plan.recommendations)} recommendation(s), "
            f"{len(pv.plan.skipped)} rule(s) skipped"
            + (", never applied" if pv.never_applied else "")
        )
    for path, j, ch in journals:
        done.append(f"journal {j.id} ({j.status}): {len(ch)} change(s), {path.name}")
    for pv_ in profs:
        r = pv_.profile.recording
        done.append(
            f"profile {pv_.label}: {r.tool} -e {r.event}, {r.duration_s:g} s, "
            f"{pv_.samples if pv_.samples is not None else '?'} samples"
        )
    for b in builds:
        if b.summary:
            m = b.summary
            done.append(f"build of {m.label} ({m.opts}): {m.status}, install tree {m.install_dir}")
        else:
            done.append(f"build manifest {b.path.name} ({b.schema})")
    return done


def disturbed_line(exps: list[Experiment]) -> str | None:
    """For the top of the summary: a campaign whose quiet gate found the host busy before
    its first run, and how many of the compared runs other processes shared the CPU with
    (any: before, the headline gain came first and the disturbed runs were counted 150
    lines further down). The sentence is ``bench.quiet.disturbed_banner``'s, as the
    console's and the comparison's."""
    from myaccel.bench.quiet import disturbed_banner

    compared = [e for e in exps if e.comparison is not None]
    gates = [e.campaign.quiet_gate for e in compared if e.campaign and e.campaign.quiet_gate]
    runs = [r for e in compared for r in e.all_runs]
    return disturbed_banner(gates, runs, lead_share=0.0)


def validity_warnings(
    exps: Sequence[Experiment], arts: Artifacts, facts: Facts | None, plans: Sequence[PlanView]
) -> list[str]:
    out: list[str] = []
    for e in exps:
        for r in e.all_runs:
            if not r.validity.valid:
                why = "; ".join(r.validity.reasons) or r.validity.failure
                out.append(
                    f"run {r.run_id} ({r.arm or '-'}, {r.workload} @ {r.threads}) is invalid: {why}"
                )
            for w in r.validity.warnings:
                out.append(f"run {r.run_id} ({r.arm or '-'}, {r.workload} @ {r.threads}): {w}")
        if e.comparison is not None:
            out += [f"comparison: {w}" for w in e.comparison.warnings]
            for c in e.comparison.cells:
                out += [f"{c.workload} @ {c.threads}: {a}" for a in c.advice]
    if facts is not None:
        out += [f"facts: {w}" for w in facts.warnings]
    for pv in plans:
        out += [f"plan: {w}" for w in pv.plan.warnings]
    for lp in arts.profiles:
        out += [f"profile {lp.path.name}: {w}" for w in lp.doc.warnings]
    out += arts.notes
    seen: set[str] = set()
    uniq = []
    for w in out:
        if w not in seen:
            seen.add(w)
            uniq.append(w)
    return uniq


def missing_lines(
    exps: list[Experiment],
    facts: Facts | None,
    plans: list[PlanView],
    profs: list[ProfileView],
    builds: list[BuildView],
    runs_all: list[RunRecord],
) -> list[str]:
    """What the report cannot show, and why."""
    missing: list[str] = []
    for e in exps:
        missing += [f"{e.title}: {m}" for m in e.missing]
    for pv_ in profs:
        missing += [f"profile {pv_.label}: {m}" for m in pv_.missing]
    if not exps:
        missing.append("no benchmark runs: no results table or plots")
    elif not any(e.comparison for e in exps):
        missing.append("no comparison: runs are shown without gains")
    if facts is None:
        missing.append(
            "no facts.json: environment taken from the run records"
            if runs_all
            else "no facts.json: no environment details"
        )
    if not plans and not profs and not builds:
        # a profile or a build is complete without a plan: say so only where one belongs
        missing.append("no plan.json: no recommendations to show")
    for pv in plans:
        if pv.never_applied:
            missing.append(
                f"plan {pv.path.name} was never applied: no journal and no A/B candidate "
                "configuration next to it"
            )
    if profs and len([p for p in profs if p.profile.microarch]) < 2:
        n_sim = len([p for p in profs if simulated_metrics(p.profile)])
        if n_sim < 2 or any(p.profile.microarch for p in profs):
            missing.append(
                "micro-architecture metrics normalized to a baseline need two profiles with "
                "PMU metrics (baseline and tuned), or two valgrind simulations"
            )
    return missing


def report_title(exps: list[Experiment], profs: list[ProfileView], builds: list[BuildView]) -> str:
    if any(e.campaign is not None and "accelerate" in e.campaign.command for e in exps):
        return "myaccel accelerate report"
    if exps:
        c = exps[0].campaign
        return f"myaccel {c.kind if c else 'runs'} report"
    if profs:
        return "myaccel profile report"
    if builds:
        return "myaccel build report"
    return "myaccel report"
