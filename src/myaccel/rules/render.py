"""Human views of a plan, and docs/rules.md from the rules' own metadata."""

from __future__ import annotations

from myaccel import markdown
from myaccel.rules.engine import load_rules
from myaccel.rules.measured import measured_for, measured_markdown
from myaccel.rules.model import LAYERS, Plan


def format_text(plan: Plan) -> str:
    lines = [
        f"plan for {plan.hostname or '?'} ({plan.server.get('flavor', 'no server')} {plan.server.get('version', '')}), "
        f"durability {plan.durability}, facts {plan.facts_digest}"
    ]
    for layer in LAYERS:
        recs = [r for r in plan.recommendations if r.layer == layer]
        if not recs:
            continue
        lines.append("")
        lines.append(f"[{layer}]")
        for r in recs:
            tag = "" if r.action == "apply" else " (advisory)"
            label = " [DURABILITY TRADE-OFF]" if r.group == "durability" else ""
            lines.append(
                f"  {r.id}{tag}{label}: {r.target}  {r.current} -> {r.proposed}  [{r.risk}]"
            )
            lines.append(f"      why: {r.rationale}")
            lines.append(f"      effect: {r.expected_effect} ({r.effect_source})")
    if plan.memory is not None:
        m = plan.memory
        gib = 2**30
        lines.append("")
        lines.append(
            f"memory: budget {m.budget_bytes / gib:.1f} GiB ({m.budget_source}); buffer pool {m.buffer_pool_bytes / gib:.1f} + "
            f"connections {m.connections_bytes / gib:.2f} ({m.max_connections} x {m.per_connection_bytes / 2**20:.1f} MiB) + "
            f"global {m.global_buffers_bytes / gib:.2f} + OS reserve {m.os_reserve_bytes / gib:.1f} = {m.total_bytes / gib:.1f} GiB"
            + ("" if m.within else "  EXCEEDS THE BUDGET")
        )
    if plan.numa_placement:
        lines.append("")
        lines.append(plan.numa_placement[0])
        lines.extend(f"  {row}" for row in plan.numa_placement[1:])
    if plan.skipped:
        lines.append("")
        lines.append("skipped:")
        for s in plan.skipped:
            lines.append(f"  {s.id}: {s.reason}")
    for w in plan.warnings:
        lines.append(f"warning: {w}")
    return "\n".join(lines) + "\n"


def format_markdown(plan: Plan) -> str:
    lines = [
        f"## Plan: {plan.hostname or '?'} ({plan.server.get('flavor', 'no server')} {plan.server.get('version', '')})",
        "",
        f"Durability: **{plan.durability}**. Facts digest `{plan.facts_digest}`.",
        "",
    ]
    rows = [
        [
            r.layer,
            r.id
            + (" (advisory)" if r.action == "advisory" else "")
            + (" **durability**" if r.group == "durability" else ""),
            f"`{r.target}`",
            r.current,
            r.proposed,
            r.risk,
            r.expected_effect,
            r.effect_source,
        ]
        for r in plan.recommendations
    ]
    header = ["layer", "id", "target", "current", "proposed", "risk", "expected effect", "source"]
    lines += markdown.table(header, rows)
    if plan.numa_placement:
        lines += ["", f"{plan.numa_placement[0]}:", ""]
        lines += [f"- {row}" for row in plan.numa_placement[1:]]
    if plan.skipped:
        lines += ["", "Skipped:", ""]
        lines += [f"- `{s.id}`: {s.reason}" for s in plan.skipped]
    return "\n".join(lines) + "\n"


def rules_markdown() -> str:
    """docs/rules.md, generated from the registered rules (`myaccel explain --all --md`)."""
    rules = load_rules()
    out = [
        "# Rules",
        "",
        "Generated from the rules' own metadata by `myaccel explain --all --md`; do not edit by hand.",
        "Each rule is a pure function of probe facts (plus optional workload hints) that proposes",
        "changes with rationale, evidence, expected effect, risk and a way to verify them.",
    ]
    for layer in LAYERS:
        specs = sorted((s for s in rules.values() if s.layer == layer), key=lambda s: s.id)
        if not specs:
            continue
        out += ["", f"## {layer}", ""]
        for s in specs:
            out += [f"### `{s.id}`: {s.title}", "", s.rationale, "", f"Source: {s.source}", ""]
            out += [
                f"Measured on its own ({m.machine}, {m.server}, {m.dataset}): {m.summary()}"
                for m in measured_for(s.id)
            ]
    if table := measured_markdown():
        out += ["", *table]
    return "\n".join(out).rstrip() + "\n"
