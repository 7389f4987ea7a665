"""`myaccel plan` and `myaccel explain`."""

from __future__ import annotations

from typing import Any

import click

from myaccel.cli import ranges
from myaccel.cli.common import connection_options, server_options
from myaccel.cli.output import write_output
from myaccel.errors import UsageError, read_json_file, validation_summary
from myaccel.facts.collect import collect_facts
from myaccel.model import FACTS_SCHEMA, Facts
from myaccel.rules.engine import Hints, load_rules, make_plan
from myaccel.rules.render import format_markdown, format_text, rules_markdown
from myaccel.server.connection import resolve


def load_facts(path: str) -> Facts:
    doc = read_json_file(
        path, what="facts file", hint="write one with `myaccel probe --out facts.json`"
    )
    schema = doc.get("schema_version") if isinstance(doc, dict) else None
    if schema != FACTS_SCHEMA:
        raise UsageError(
            f"facts file '{path}' has schema {schema!r}, this myaccel reads {FACTS_SCHEMA!r}",
            hint="probe again with this version: myaccel probe --out facts.json",
        )
    try:
        return Facts.model_validate(doc)
    except ValueError as exc:
        raise UsageError(
            f"facts file '{path}' does not match its schema: {validation_summary(exc)}",
            hint="probe again",
        ) from None


@click.command()
@click.option(
    "--facts", "facts_file", metavar="FILE", help="Plan from a facts file (myaccel probe --out)."
)
@server_options
@click.option(
    "--durability",
    type=click.Choice(["strict", "relaxed"]),
    default="strict",
    show_default=True,
    help="relaxed allows the opt-in durability group.",
)
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
@click.option("--json", "as_json", is_flag=True)
@click.option("--md", "as_md", is_flag=True)
@click.option("--out", "out_file", metavar="FILE", help="Write the plan JSON here.")
def plan(**kwargs: Any) -> None:
    """Turn facts into a layered plan: what to change, why, how sure, how to verify."""
    conn = connection_options(kwargs)
    if kwargs["facts_file"]:
        facts = load_facts(kwargs["facts_file"])
    else:
        params = resolve(conn)
        facts = collect_facts("/", server=params, server_required=True)
    from myaccel.cli.profile import plan_hints
    from myaccel.rules.knobview import knob_view_for

    knobs = knob_view_for(facts)
    layers = [x.strip() for x in kwargs["layers"].split(",")] if kwargs["layers"] else None
    p = make_plan(
        facts,
        durability=kwargs["durability"],
        layers=layers,
        hints=plan_hints(kwargs["profile_file"], facts, threads=kwargs["threads"])
        if kwargs["profile_file"]
        else Hints(threads=kwargs["threads"]),
        knobs=knobs,
    )
    if kwargs["out_file"]:
        write_output(kwargs["out_file"], p.model_dump_json(indent=2) + "\n")
    if kwargs["as_json"]:
        click.echo(p.model_dump_json(indent=2))
    elif kwargs["as_md"]:
        click.echo(format_markdown(p), nl=False)
    else:
        click.echo(format_text(p), nl=False)


@click.command()
@click.argument("rule_id", required=False)
@click.option("--all", "show_all", is_flag=True, help="Every rule.")
@click.option("--md", "as_md", is_flag=True, help="Markdown (docs/rules.md).")
def explain(rule_id: str | None, show_all: bool, as_md: bool) -> None:
    """Explain a rule: what it does, why, and its source."""
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
