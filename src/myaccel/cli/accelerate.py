"""`myaccel accelerate`: one command from a bare machine to a before/after report."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from myaccel import proc
from myaccel.accelerate import report_markdown, write_candidate
from myaccel.bench.campaign import new_campaign_id
from myaccel.bench.profiles import get_profile
from myaccel.cli.progress import note
from myaccel.errors import UsageError
from myaccel.facts.collect import collect_facts
from myaccel.paths import myaccel_home
from myaccel.rules.engine import Hints, make_plan
from myaccel.rules.knobview import knob_view_for
from myaccel.server.sandbox import Sandbox


@click.command()
@click.option(
    "--sandbox",
    "sandbox_name",
    default="accelerate",
    show_default=True,
    help="Sandbox to accelerate (created with the distribution's defaults if missing).",
)
@click.option("--profile", default="quick", show_default=True)
@click.option(
    "--durability", type=click.Choice(["strict", "relaxed"]), default="strict", show_default=True
)
@click.option("--runs", type=int, help="Runs per arm and cell (default: the profile's).")
@click.option("--time", type=int, help="Measured seconds per run.")
@click.option("--scale", type=float)
@click.option("--out", "out_dir", type=click.Path(file_okay=False))
def accelerate(**kwargs: Any) -> None:
    """Probe, benchmark the defaults, plan, apply the plan's server layer, benchmark again
    (interleaved), compare, and write report.md with the article-style table."""
    from myaccel.cli.ab import ab as ab_cmd

    t0 = time.monotonic()
    proc.require("sysbench")
    prof = get_profile(kwargs["profile"])
    name = kwargs["sandbox_name"]
    if Sandbox.exists(name):
        sb = Sandbox.load(name)
        sb.stop()
        sb.start(progress=note)  # its own (base) configuration
    else:
        note(f"creating sandbox '{name}' with the distribution's default configuration")
        sb = Sandbox.init(name, progress=note)
    note("probing the machine, the server and its binary")
    facts = collect_facts("/", server=sb.connect_params(), server_required=True)
    plan = make_plan(
        facts,
        durability=kwargs["durability"],
        hints=Hints(threads=max(prof.threads)),
        knobs=knob_view_for(facts),
    )
    cid = new_campaign_id("accelerate")
    out = Path(kwargs["out_dir"]) if kwargs["out_dir"] else myaccel_home() / "results" / cid
    out.mkdir(parents=True, exist_ok=True)
    (out / "facts.json").write_text(facts.model_dump_json(indent=2) + "\n")
    (out / "plan.json").write_text(plan.model_dump_json(indent=2) + "\n")
    cand = write_candidate(plan, facts, out / "tuned.cnf")
    if not cand.applied:
        raise UsageError(
            "the plan has no server change to measure on this sandbox",
            hint=f"see {out / 'plan.json'} (everything may already be tuned)",
        )
    note(
        f"plan: {len(cand.applied)} server change(s) to measure, {len(cand.not_applied)} not applied here (see report)"
    )
    for r in cand.applied:
        note(f"  {r.id}: {r.target} {r.current} -> {r.proposed}")
    args = [
        "--sandbox",
        name,
        "--candidate",
        str(cand.path),
        "--profile",
        prof.name,
        "--out",
        str(out / "ab"),
    ]
    for opt in ("runs", "time", "scale"):
        if kwargs[opt] is not None:
            args += [f"--{opt}", str(kwargs[opt])]
    ctx = click.get_current_context()
    ctx.invoke(ab_cmd, **_ab_defaults(ab_cmd, args))
    from myaccel.bench.compare import Comparison

    cmp = Comparison.model_validate_json((out / "ab" / "comparison.json").read_text())
    command = "myaccel " + " ".join(sys.argv[1:])
    md = report_markdown(
        facts,
        plan,
        cand,
        cmp,
        command=command,
        duration_s=time.monotonic() - t0,
        profile_name=prof.name,
    )
    (out / "report.md").write_text(md)
    click.echo(f"report: {out / 'report.md'}")
    click.echo(f"total: {(time.monotonic() - t0) / 60:.1f} min")


def _ab_defaults(cmd: click.Command, args: list[str]) -> dict[str, Any]:
    """Parse ``args`` with ab's own option definitions (defaults included)."""
    ctx = cmd.make_context("ab", list(args), resilient_parsing=False)
    return dict(ctx.params)
