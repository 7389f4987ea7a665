"""What both modes of `accelerate` share: the results directory, the probe and the plan."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from myaccel.accelerate.request import AccelerateRequest
from myaccel.artifacts import save
from myaccel.bench.campaign import new_campaign_id
from myaccel.bench.run_record import private_dir
from myaccel.errors import UsageError
from myaccel.facts.collect import collect_facts
from myaccel.facts.iomeasure import facts_with_cached_storage, facts_with_measured_storage
from myaccel.model import Facts
from myaccel.paths import myaccel_home
from myaccel.rules.engine import Hints, make_plan
from myaccel.rules.knobview import knob_view_for
from myaccel.rules.model import Plan
from myaccel.server.connection import ConnectParams


def check_new_out_dir(out_dir: Path | None) -> None:
    """``--out`` must be new or empty: accelerate writes facts, plan, runs and a report
    there, and never mixes them with another run's files."""
    if out_dir is None:
        return
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(
            f"--out '{out_dir}' is a file, not a directory",
            hint="choose a new directory, or omit --out (results go under $MYACCEL_HOME/results)",
        )
    if out_dir.is_dir() and any(out_dir.iterdir()):
        raise UsageError(
            f"--out '{out_dir}' is not empty",
            hint="choose a new directory, or omit --out (results go under $MYACCEL_HOME/results)",
        )


def probe_and_plan(
    req: AccelerateRequest, server: ConnectParams, say: Callable[[str], None] | None = None
) -> tuple[Facts, Plan, Path]:
    """Facts of the machine and ``server``, the plan for the profile's concurrency, and the
    (private) results directory holding both as facts.json and plan.json."""
    facts, plan = facts_and_plan(req, server, say)
    return facts, plan, save_facts_and_plan(req, facts, plan)


def facts_and_plan(
    req: AccelerateRequest, server: ConnectParams, say: Callable[[str], None] | None = None
) -> tuple[Facts, Plan]:
    """Facts of the machine and ``server`` and the plan for the profile's concurrency,
    written nowhere yet (a refusal that depends on the plan comes first)."""
    facts = collect_facts("/", server=server, server_required=True)
    if req.measure_storage:
        facts = facts_with_measured_storage(facts, say=say)
    else:  # never fio on a live server's disk unasked; what was measured on it counts
        facts = facts_with_cached_storage(facts, say=say)
    plan = make_plan(
        facts,
        durability=req.durability,
        hints=Hints(threads=max(req.profile.threads)),
        knobs=knob_view_for(facts),
    )
    return facts, plan


def save_facts_and_plan(req: AccelerateRequest, facts: Facts, plan: Plan) -> Path:
    """The (private) results directory, with facts.json and plan.json written into it."""
    out = req.out_dir or myaccel_home() / "results" / new_campaign_id("accelerate")
    private_dir(out)
    save(out / "facts.json", facts)
    save(out / "plan.json", plan)
    return out
