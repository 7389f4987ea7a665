"""`tune` on a sandbox as one function call: every check first (``validate``: the request,
the results directory, the knobs asked for against the catalog of the sandbox's server, a
resumed study's search space, the dataset a running sandbox holds; nothing is created,
started or written before they pass), then probe and plan (or, on ``--resume``, the facts
and plan the study started from), the search space and its constraint, the dataset
snapshot, the search, and the artifacts (``tune.json``, ``plan.json``). The sandbox ends on
its own configuration whatever happens (``bench.ab.restore_base_config``).

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

import json
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from myaccel.accelerate.common import probe_and_plan
from myaccel.accelerate.dataset_check import dataset_conflict
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
from myaccel.server.sandbox import Sandbox, find_server
from myaccel.tune.constraint import Constraint, plan_values
from myaccel.tune.process import PROCESS_PARAMS, all_nodes, with_layers
from myaccel.tune.request import SEARCH_LAYERS, TuneProgress, TuneRequest
from myaccel.tune.result import NoiseRow, TuneResult, now_iso, tuned_plan
from myaccel.tune.sandbox_objective import SandboxObjective
from myaccel.tune.search import Outcome, Search
from myaccel.tune.space import SEARCH_RANGES, Space, build_space, cap_dim, value_text
from myaccel.tune.study import STUDY_FILE, Study

RULES_PLAN = "rules-plan.json"


def check_request(req: TuneRequest) -> None:
    bad = [lay for lay in req.layers if lay not in SEARCH_LAYERS]
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


DATASET_HINT = (
    "add --cleanup to drop it and prepare a new one, or match --tables/--table-size to it"
)
_NEW_OUT_HINT = (
    "choose a new or empty directory, or omit --out (results go under $MYACCEL_HOME/results)"
)


@dataclass(frozen=True)
class Checked:
    """What ``validate`` found: where the study goes, what a resumed one started from,
    and whether the dataset is still to be checked once the sandbox runs."""

    out: Path
    resumed: tuple[Facts, Plan] | None = None
    dataset_checked: bool = False  # the running sandbox's dataset fits the profile


def validate(req: TuneRequest) -> Checked:
    """Every check that needs no side effect: nothing is created, started, restarted or
    written before these pass (a refused tune has changed nothing)."""
    check_request(req)
    out = req.out_dir or myaccel_home() / "results" / new_campaign_id("tune")
    resumed = _check_out(req, out)
    sk = _server_knobs_of_sandbox(req)
    check_knobs(req.knobs, sk, req.durability)
    if resumed is not None:
        _check_resumed_space(req, out, *resumed, sk)
    checked = False
    if Sandbox.exists(req.sandbox) and _dataset_checkable(req):
        sb = Sandbox.load(req.sandbox)
        if sb.is_running():
            _check_dataset(req, sb)
            checked = True
    return Checked(out=out, resumed=resumed, dataset_checked=checked)


def _check_out(req: TuneRequest, out: Path) -> tuple[Facts, Plan] | None:
    """A new study wants a new or empty directory; a resumed one a directory holding a
    study, not busy (its facts and plan read back, the sandbox not touched)."""
    if out.exists() and not out.is_dir():
        raise UsageError(
            f"--out '{out}' is a file, not a directory",
            hint=_NEW_OUT_HINT if not req.resume else "give --out the directory of the study",
        )
    if not req.resume:
        if out.is_dir() and any(out.iterdir()):
            held = " (it holds a tune study)" if (out / STUDY_FILE).exists() else ""
            raise UsageError(
                f"--out '{out}' is not empty{held}",
                hint="pass --resume to continue the study there, or choose a new directory",
            )
        return None
    if not (out / STUDY_FILE).is_file():
        what = "does not exist" if not out.exists() else f"holds no {STUDY_FILE}"
        raise UsageError(
            f"--resume: --out '{out}' {what}: there is no tune study to resume",
            hint="give --out the directory of an earlier tune, or run without --resume "
            "to start a study",
        )
    _check_not_busy(out)
    facts = load(out / "facts.json", Facts, error=DataError)
    plan = load(out / RULES_PLAN, Plan, error=DataError)
    return facts, plan


def _check_not_busy(out: Path) -> None:
    """A study another tune holds (its lock taken) is refused before the sandbox is
    restarted under it; a lock file that is not there is not created here."""
    if (out / "study.lock").exists():
        from myaccel.tune.study import take_study_lock

        take_study_lock(out).release()


def _server_knobs_of_sandbox(req: TuneRequest) -> ServerKnobs:
    """The catalog of the server the trials run on: the sandbox's, or the server a new
    sandbox would be made with (read without starting anything)."""
    if Sandbox.exists(req.sandbox):
        st = Sandbox.load(req.sandbox).state
        return Catalog.load().for_server(st.flavor, st.version_string or st.version)
    install = find_server(req.basedir)
    return Catalog.load().for_server(install.flavor, install.version)


def check_knobs(knobs: tuple[str, ...], sk: ServerKnobs, durability: str) -> None:
    """Every ``--knob`` is a server knob tune searches, exists on this server, and may be
    searched under ``durability``."""
    cat = Catalog.load()
    problems: list[tuple[str, str]] = []
    for k in dict.fromkeys(knobs):
        if k in PROCESS_PARAMS:
            problems.append(
                (
                    f"--knob {k}: a parameter of the process layer, not a server knob",
                    "--layers server,process searches the process layer; --knob narrows "
                    "the server knobs only",
                )
            )
        elif k not in SEARCH_RANGES:
            problems.append(
                (
                    f"--knob {k}: not a knob tune searches",
                    "docs/tuning.md lists the search space, e.g. --knob innodb_io_capacity",
                )
            )
        elif not sk.exists(k):
            problems.append(
                (f"--knob {k}: not a knob of {sk.label}", "leave it out; see docs/tuning.md")
            )
        elif cat.is_durability(k) and durability != "relaxed":
            problems.append(
                (
                    f"--knob {k} is a durability knob and --durability is {durability}",
                    "durability knobs are searched only with --durability relaxed",
                )
            )
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise UsageError(problems[0][0] + more, hint=problems[0][1])


def _check_resumed_space(
    req: TuneRequest, out: Path, facts: Facts, plan: Plan, sk: ServerKnobs
) -> None:
    """A resumed study must search what it started with (``Search`` checks it again);
    read from ``study.db`` without opening it for writing."""
    space, _ = _space(req, facts, plan, sk)
    names = space.names()
    try:
        with closing(sqlite3.connect(f"file:{out / STUDY_FILE}?mode=ro", uri=True)) as db:
            row = db.execute(
                "SELECT value_json FROM study_user_attributes WHERE key = 'searched'"
            ).fetchone()
    except sqlite3.Error:
        return  # not readable here: the study's own check decides
    if row is None:
        return
    try:
        before = list(json.loads(row[0]))
    except (ValueError, TypeError):
        return
    if before != names:
        raise UsageError(
            f"this study searched {', '.join(before) or 'nothing'}; now asked for "
            f"{', '.join(names)}",
            hint="resume with the same --knob, --layers and --durability options, or start "
            "a new --out",
        )


def _dataset_checkable(req: TuneRequest) -> bool:
    """The dataset a run needs is known before the plan only when it is the profile's own
    (``--dataset`` sizes it from the plan's buffer pool) and ``--cleanup`` does not drop
    whatever is there."""
    return req.dataset is None and not req.cleanup


def _check_dataset(req: TuneRequest, sb: Sandbox) -> None:
    conflict = dataset_conflict(sb.connect_params(), req.profile.tables, req.profile.table_size)
    if conflict is not None:
        raise UsageError(conflict.message, hint=DATASET_HINT)


def run(req: TuneRequest, progress: TuneProgress) -> TuneResult:
    checked = validate(req)
    out = checked.out
    if req.create and not Sandbox.exists(req.sandbox):
        progress.note(f"creating sandbox '{req.sandbox}'")
        sb = Sandbox.init(req.sandbox, basedir=req.basedir, progress=progress.note)
    else:
        sb = Sandbox.load(req.sandbox)
        if not checked.dataset_checked and _dataset_checkable(req):
            _check_dataset_after_start(req, sb, progress)
    ab.restore_base_config(sb, progress.note)
    try:
        facts, plan = checked.resumed or _facts_and_plan(req, sb, out, progress)
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
        obj.ready = ab.prepare_snapshot(
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
    return _write(req, out, plan, sk, space, outcome, numa_nodes=all_nodes(facts))


def _check_dataset_after_start(req: TuneRequest, sb: Sandbox, progress: TuneProgress) -> None:
    """A stopped sandbox's dataset can be read only once it runs: start it on its own
    configuration, check, and leave it stopped again when the dataset does not fit (before
    anything is written)."""
    sb.start(progress=progress.note)
    try:
        _check_dataset(req, sb)
    except BaseException:
        sb.stop()
        raise


def _facts_and_plan(
    req: TuneRequest, sb: Sandbox, out: Path, progress: TuneProgress
) -> tuple[Facts, Plan]:
    """A new study probes and plans (a resumed one read what it started from in
    ``validate``)."""
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
    req: TuneRequest,
    out: Path,
    plan: Plan,
    sk: ServerKnobs,
    space: Space,
    o: Outcome,
    *,
    numa_nodes: str | None,
) -> TuneResult:
    chosen = (
        tuned_plan(
            plan,
            o.winner,
            sk,
            evidence={"tune.json": "final A/B and ablation"},
            numa_nodes=numa_nodes,
        )
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
