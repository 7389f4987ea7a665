"""`myaccel plan` and `myaccel explain`.

The facts and the rules (pydantic models, the knob catalog) are imported where used, not
by ``--help``."""

from __future__ import annotations

from dataclasses import dataclass

import click

from myaccel.cli import options, ranges
from myaccel.cli.common import ServerOptions, measure_storage, options_into, resolve, server_options
from myaccel.cli.output import write_output
from myaccel.cli.progress import note
from myaccel.errors import UsageError


@dataclass(frozen=True, kw_only=True)
class PlanOptions(ServerOptions):
    facts_file: str | None = None
    durability: str = "strict"
    layers: str | None = None
    threads: int | None = None
    profile_file: str | None = None
    as_json: bool = False
    as_md: bool = False
    out_file: str | None = None
    measure_storage: bool = False


@click.command()
@click.option(
    "--facts", "facts_file", metavar="FILE", help="Plan from a facts file (myaccel probe --out)."
)
@server_options
@options.durability("relaxed allows the opt-in durability group.")
@click.option("--layers", help="Comma-separated: server,os,numa,nic,build,hardware.")
@click.option(
    "--threads", type=ranges.THREADS, help="Expected client concurrency (a workload hint)."
)
@click.option(
    "--profile",
    "profile_file",
    metavar="FILE",
    help="A profile (myaccel profile): its findings raise or lower the rules they name.",
)
@options.json()
@click.option("--md", "as_md", is_flag=True)
@click.option("--out", "out_file", metavar="FILE", help="Write the plan JSON here.")
@measure_storage
@options_into(PlanOptions)
def plan(opts: PlanOptions) -> None:
    """Turn facts into a layered plan: what to change, why, how sure, how to verify."""
    from myaccel.facts.collect import collect_facts
    from myaccel.facts.iomeasure import facts_with_cached_storage, facts_with_measured_storage
    from myaccel.facts.load import load_facts
    from myaccel.rules.engine import Hints, make_plan
    from myaccel.rules.render import format_markdown, format_text

    if opts.facts_file:
        facts = load_facts(opts.facts_file)
    else:
        facts = collect_facts("/", server=resolve(opts.conn), server_required=True)
    if opts.measure_storage:
        facts = facts_with_measured_storage(facts, say=note)
    elif not opts.facts_file:  # a facts file is planned as it was probed
        facts = facts_with_cached_storage(facts, say=note)
    from myaccel.profile.hints import plan_hints
    from myaccel.rules.knobview import knob_view_for

    knobs = knob_view_for(facts)
    layers = [x.strip() for x in opts.layers.split(",")] if opts.layers else None
    p = make_plan(
        facts,
        durability=opts.durability,
        layers=layers,
        hints=plan_hints(opts.profile_file, facts, threads=opts.threads, note=note)
        if opts.profile_file
        else Hints(threads=opts.threads),
        knobs=knobs,
    )
    if opts.out_file:
        write_output(opts.out_file, p.model_dump_json(indent=2) + "\n")
    if opts.as_json:
        click.echo(p.model_dump_json(indent=2))
    elif opts.as_md:
        click.echo(format_markdown(p), nl=False)
    else:
        click.echo(format_text(p), nl=False)


@click.command()
@click.argument("rule_id", required=False)
@click.option("--all", "show_all", is_flag=True, help="Every rule.")
@click.option("--md", "as_md", is_flag=True, help="Markdown (docs/rules.md).")
def explain(rule_id: str | None, show_all: bool, as_md: bool) -> None:
    """Explain a rule: what it does, why, and its source."""
    from myaccel.rules.engine import load_rules
    from myaccel.rules.render import rules_markdown

    rules = load_rules()
    if show_all or rule_id is None:
        if as_md:
            click.echo(rules_markdown(), nl=False)
            return
        for s in sorted(rules.values(), key=lambda s: (s.layer, s.id)):
            click.echo(f"{s.id:38s} {s.layer:9s} {s.title}")
        return
    spec = rules.get(rule_id)
    if spec is None:
        # recommendations may carry sub-ids (server-io-capacity-max): match the prefix
        cands = [s for k, s in rules.items() if rule_id.startswith(k)]
        if not cands:
            raise UsageError(f"no rule '{rule_id}'", hint="list them with: myaccel explain --all")
        spec = max(cands, key=lambda s: len(s.id))
    click.echo(
        f"{spec.id} ({spec.layer}): {spec.title}\n\n{spec.rationale}\n\nsource: {spec.source}"
    )
