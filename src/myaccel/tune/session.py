"""`tune` on a sandbox as one function call: probe and plan (or, on ``--resume``, the facts
and plan the study started from), the search space and its constraint, the dataset snapshot,
the search, and the artifacts (``tune.json``, ``plan.json``). The sandbox ends on its own
configuration whatever happens (``bench.ab.restore_base_config``).

Results directory::

    facts.json, rules-plan.json   what the search started from (the plan is trial 0)
    study.db                      the Optuna study (every trial; ``--resume`` continues it)
    configs/*.cnf                 the option file of each trial
    trials/trial-NNN/             each trial's runs and comparison.json (an `ab` campaign)
    tune.json                     myaccel.tune/1: trials, noise, final A/B, verdict, ablation
    plan.json                     the plan to apply: the rules' plan with the winner's changes
                                  when it won the final A/B, else the rules' plan
"""

from __future__ import annotations

from pathlib import Path

from myaccel.accelerate.common import probe_and_plan
from myaccel.accelerate.request import AccelerateRequest, SandboxTarget
from myaccel.artifacts import load, save
from myaccel.bench import ab
from myaccel.bench.campaign import new_campaign_id
from myaccel.bench.run_record import private_dir
from myaccel.bench.session import HarnessOptions
from myaccel.errors import DataError, UsageError
from myaccel.knobs.catalog import Catalog
from myaccel.knobs.server_knobs import ServerKnobs
from myaccel.model import Facts
from myaccel.paths import myaccel_home
from myaccel.rules.model import Plan
from myaccel.server.sandbox import Sandbox
from myaccel.tune.constraint import Constraint, plan_values
from myaccel.tune.process import with_layers
from myaccel.tune.request import LAYERS, TuneProgress, TuneRequest
from myaccel.tune.result import NoiseRow, TuneResult, now_iso, tuned_plan
from myaccel.tune.sandbox_objective import SandboxObjective
from myaccel.tune.search import Outcome, Search
from myaccel.tune.space import Space, build_space, cap_dim, value_text
from myaccel.tune.study import Study

RULES_PLAN = "rules-plan.json"


def check_request(req: TuneRequest) -> None:
    bad = [lay for lay in req.layers if lay not in LAYERS]
    if bad:
        raise UsageError(
            f"unknown layer(s) {', '.join(bad)}",
            hint="use --layers server or --layers server,process",
        )
    if "server" not in req.layers:
        raise UsageError(
            "--layers must include server: every trial is a server configuration",
            hint="use --layers server or --layers server,process",
        )
    if req.durability not in ("strict", "relaxed"):
        raise UsageError(
            f"unknown durability mode '{req.durability}'", hint="use strict or relaxed"
        )
    if req.resume and req.out_dir is None:
        raise UsageError("--resume needs --out: the directory of the study to continue")


def run(req: TuneRequest, progress: TuneProgress) -> TuneResult:
    check_request(req)
    out = req.out_dir or myaccel_home() / "results" / new_campaign_id("tune")
    if req.create and not Sandbox.exists(req.sandbox):
        progress.note(f"creating sandbox '{req.sandbox}'")
        sb = Sandbox.init(req.sandbox, basedir=req.basedir, progress=progress.note)
    else:
        sb = Sandbox.load(req.sandbox)
    ab.restore_base_config(sb, progress.note)
    try:
        facts, plan = _facts_and_plan(req, sb, out, progress)
        sk = _server_knobs(facts)
        space, constraint = _space(req, facts, plan, sk)
        progress.note(f"searching {len(space.dims)} knob(s): {', '.join(space.names())}")
        private_dir(out)
        obj = SandboxObjective(
            sandbox=sb,
            plan=plan,
            facts=facts,
            server_knobs=sk,
            out=out / "trials",
            progress=progress,
            command=req.command,
            basedir=req.basedir,
            ps_mode=req.ps_mode,
            client_cpus=req.pin_client,
        )
        obj.ready = ab.prepare_dataset(
            sb,
            req.profile,
            obj.plan_arm(),
            harness=HarnessOptions(dataset=req.dataset, ps_mode=req.ps_mode, cleanup=req.cleanup),
            note=progress.note,
        )
        startup = max(3, min(10, (req.budget.trials or 20) // 3))
        with Study.open(out, resume=req.resume, seed=req.seed, startup_trials=startup) as study:
            outcome = Search(
                study=study,
                space=space,
                constraint=constraint,
                objective=obj,
                progress=progress,
                budget=req.budget,
                final_comparison=obj.comparison_path,
            ).run()
    finally:
        ab.restore_base_config(sb, progress.note)
    return _write(req, out, plan, sk, space, outcome)


def _facts_and_plan(
    req: TuneRequest, sb: Sandbox, out: Path, progress: TuneProgress
) -> tuple[Facts, Plan]:
    """A new study probes and plans; a resumed one reads what it started from."""
    if req.resume:
        facts = load(out / "facts.json", Facts, error=DataError)
        plan = load(out / RULES_PLAN, Plan, error=DataError)
        return facts, plan
    if out.is_dir() and any(out.iterdir()):
        raise UsageError(
            f"--out '{out}' is not empty",
            hint="pass --resume to continue the study there, or choose a new directory",
        )
    progress.note("probing the machine and the sandbox's server; planning")
    areq = AccelerateRequest(
        target=SandboxTarget(name=req.sandbox),
        profile=req.profile,
        command=req.command,
        durability=req.durability,
        out_dir=out,
        measure_storage=req.measure_storage,
    )
    facts, plan, _ = probe_and_plan(areq, sb.connect_params(), progress.note)
    save(out / RULES_PLAN, plan)
    return facts, plan


def _server_knobs(facts: Facts) -> ServerKnobs:
    s = facts.server
    if s is None or not s.version_string.value:
        raise UsageError("the sandbox's server version is unknown", hint="see facts.json")
    return Catalog.load().for_server(s.flavor.value or "mysql", s.version_string.value)


def _space(req: TuneRequest, facts: Facts, plan: Plan, sk: ServerKnobs) -> tuple[Space, Constraint]:
    variables = dict(facts.server.variables.value or {}) if facts.server else {}
    base = {**variables, **plan_values(plan)}
    unknown = [k for k in req.knobs if k not in base and not sk.exists(k)]
    if unknown:
        raise UsageError(
            f"--knob {', '.join(unknown)}: not a knob of this server",
            hint="see docs/tuning.md for the knobs tune searches",
        )
    space = build_space(sk, base, durability=req.durability, only=req.knobs)
    space = with_layers(space, req.layers, facts, sk, base)
    if not space.dims:
        raise UsageError(
            "nothing to search: no searchable knob is left",
            hint="see docs/tuning.md (--knob, --durability)",
        )
    constraint = Constraint(facts=facts, plan=plan, durability=req.durability)
    top = constraint.largest_buffer_pool()
    if top is not None:
        space = cap_dim(space, "innodb_buffer_pool_size", top)
    return space, constraint


def _write(
    req: TuneRequest, out: Path, plan: Plan, sk: ServerKnobs, space: Space, o: Outcome
) -> TuneResult:
    chosen = (
        tuned_plan(plan, o.winner, sk, evidence={"tune.json": "final A/B and ablation"})
        if o.improved
        else plan
    )
    save(out / "plan.json", chosen)
    result = tune_result(
        o,
        space,
        out,
        target=req.sandbox,
        durability=req.durability,
        workload=[f"{w}@{t}" for w, t in req.profile.cells],
        layers=list(req.layers),
    )
    save(out / "tune.json", result, private=True)
    return result


def tune_result(
    o: Outcome,
    space: Space,
    out: Path,
    *,
    target: str,
    durability: str,
    workload: list[str],
    layers: list[str],
) -> TuneResult:
    """``tune.json`` of a search's outcome (``out``: the results directory)."""
    return TuneResult(
        created_at=now_iso(),
        target=target,
        durability=durability,
        workload=workload,
        layers=layers,
        searched=space.names(),
        left_out=space.left_out,
        noise=NoiseRow(
            aa_delta_pct=o.noise.aa_delta_pct,
            cv_pct=o.noise.cv_pct,
            floor_pct=o.noise.floor_pct,
            mde_pct=o.noise.mde_pct,
            screen_pairs=o.noise.screen_pairs,
        ),
        trials=o.trials,
        winner=o.winner,
        winner_plan_values={k: value_text(space.base[k]) for k in o.winner},
        final=o.final,
        improved=o.improved,
        verdict=o.verdict,
        ablation=o.ablation,
        importances=o.importances,
        study=str(out / "study.db"),
        plan=str(out / "plan.json"),
    )
