"""The objective on a sandbox: a trial is a short interleaved `ab` of the plan's option file
against the trial's, with `ab`'s own machinery (``bench.ab.interleave``: the dataset restored
from its snapshot before every write run, ABBA order, paired seeds, prewarm after restarts)
and its comparison (``compare_runs``, written as ``comparison.json`` next to the runs).

Option files are the `accelerate` candidate file (``accelerate.candidate.write_candidate``)
of the plan with the trial's changes: the plan's server layer plus the trial's values. The
process layer's CPU affinity and NUMA policy are the candidate arm's start prefix
(``tune.process.launch_prefix``), never the plan arm's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from myaccel.accelerate.candidate import write_candidate
from myaccel.artifacts import save
from myaccel.bench import ab
from myaccel.bench.compare import Comparison, compare_runs
from myaccel.bench.session import BenchProgress, CampaignSetup, HarnessOptions, finish_campaign
from myaccel.errors import NoValidRuns
from myaccel.knobs.server_knobs import ServerKnobs
from myaccel.model import Facts
from myaccel.rules.model import Plan
from myaccel.server.sandbox import Sandbox
from myaccel.tune.objective import Sample
from myaccel.tune.process import launch_prefix, server_changes
from myaccel.tune.result import tuned_plan


@dataclass
class SandboxObjective:
    sandbox: Sandbox
    plan: Plan
    facts: Facts
    server_knobs: ServerKnobs | None
    out: Path  # OUT/trials: one directory of runs per trial
    progress: BenchProgress
    command: list[str]
    basedir: Path | None = None
    ps_mode: str = "auto"
    client_cpus: str | None = None
    ready: ab.Prepared | None = None  # the dataset snapshot and connections (set before measuring)

    def option_file(self, changes: Mapping[str, str], path: Path) -> Path:
        """The plan's server layer with ``changes``, written to ``path``."""
        path.parent.mkdir(parents=True, exist_ok=True)
        plan = tuned_plan(self.plan, server_changes(changes), self.server_knobs)
        write_candidate(plan, self.facts, path)
        return path

    def plan_arm(self) -> ab.Arm:
        cfg = self.option_file({}, self.out.parent / "configs" / "plan.cnf")
        return ab.Arm("baseline", config=cfg, basedir=self.basedir)

    def measure(self, label: str, changes: Mapping[str, str], pairs: int) -> Sample:
        cfg = self.option_file(changes, self.out.parent / "configs" / f"{label}.cnf")
        arms = {
            "baseline": self.plan_arm(),
            "candidate": ab.Arm(
                "candidate", config=cfg, basedir=self.basedir, launch=launch_prefix(changes)
            ),
        }
        assert self.ready is not None, "prepare the dataset first (bench.ab.prepare_snapshot)"
        ready = replace(self.ready, profile=replace(self.ready.profile, runs_per_arm=pairs))
        setup = CampaignSetup(
            kind="ab",
            command=self.command,
            arms={k: a.describe() for k, a in arms.items()},
            out_dir=self.out / label,
        )
        ctx = ab.interleave(
            self.sandbox,
            ready,
            arms,
            setup=setup,
            progress=self.progress,
            harness=HarnessOptions(ps_mode=self.ps_mode, pin_client=self.client_cpus),
        )
        finish_campaign(ctx)
        recs = ctx.records
        cmp = compare_runs(
            [r for r in recs if r.arm == "baseline"],
            [r for r in recs if r.arm == "candidate"],
            baseline_label="plan",
            candidate_label=label,
        )
        save(ctx.out_dir / "comparison.json", cmp, private=True)
        return sample_of(cmp, ctx.out_dir)

    def comparison_path(self, label: str) -> str | None:
        p = self.out / label / "comparison.json"
        return str(p) if p.is_file() else None


def sample_of(cmp: Comparison, where: Path) -> Sample:
    """The valid TPS of each arm per cell; ``NoValidRuns`` when an arm has none."""
    cells: dict[str, tuple[list[float], list[float]]] = {}
    for c in cmp.cells:
        if not c.baseline_tps or not c.candidate_tps:
            raise NoValidRuns(
                f"{c.workload}@{c.threads}: an arm has no valid run",
                hint=f"see the runs in {where}",
            )
        cells[f"{c.workload}@{c.threads}"] = (list(c.baseline_tps), list(c.candidate_tps))
    return Sample(cells)
