"""The rule engine: registered pure rules turn facts (plus optional hints) into a plan.

A rule is a function ``(ctx) -> list[Recommendation]`` registered with its metadata; it may
raise ``Skip(reason)``. Rules never touch the system: everything they need is in the
facts. The engine runs them in layer order, resolves conflicts (one target, one value) and
checks the memory budget.
"""

from __future__ import annotations

import datetime as dt
import hashlib

from myaccel import __version__
from myaccel.errors import UsageError
from myaccel.model import FACTS_SCHEMA, Facts
from myaccel.rules.base import (
    REGISTRY,
    FindingEffect,
    Hints,
    KnobView,
    RuleContext,
    RuleFn,
    RuleSpec,
    Skip,
    rule,
)
from myaccel.rules.measured import cite_measured
from myaccel.rules.model import (
    LAYERS,
    MemoryBudget,
    Plan,
    Recommendation,
    Skipped,
    target_knob,
)
from myaccel.rules.ownership import machine, owned
from myaccel.units import format_gib

__all__ = [
    "REGISTRY",
    "FindingEffect",
    "Hints",
    "KnobView",
    "RuleContext",
    "RuleFn",
    "RuleSpec",
    "Skip",
    "apply_finding_effects",
    "facts_digest",
    "load_rules",
    "make_plan",
    "rule",
]


_CONFIDENCE = ("low", "medium", "high")


def apply_finding_effects(
    rule_id: str, recs: list[Recommendation], hints: Hints
) -> list[Recommendation]:
    """Raise (one confidence step up) or lower (one step down) the recommendations of
    ``rule_id`` that profile findings name, with the finding as evidence and in the
    rationale."""
    mine = [e for e in hints.effects if e.rule == rule_id]
    if not mine:
        return recs
    out: list[Recommendation] = []
    for r in recs:
        level = _CONFIDENCE.index(r.confidence)
        evidence = dict(r.evidence)
        notes: list[str] = []
        for e in mine:
            step = 1 if e.direction == "raise" else -1
            level = min(len(_CONFIDENCE) - 1, max(0, level + step))
            evidence[f"finding:{e.finding}"] = f"{e.direction}s: {e.reason}"
            notes.append(f"profile finding {e.finding} {e.direction}s it")
        out.append(
            r.model_copy(
                update={
                    "confidence": _CONFIDENCE[level],
                    "evidence": evidence,
                    "rationale": f"{r.rationale} ({'; '.join(notes)})",
                }
            )
        )
    return out


def facts_digest(facts: Facts) -> str:
    """Identity of the machine and server a plan was made for (not of volatile values)."""
    c = facts.cpu
    parts = [
        str(facts.hostname.value),
        str(c.model.value),
        str(c.logical_cpus.value),
        str(facts.memory.total_bytes.value),
    ]
    if facts.server is not None:
        parts += [str(facts.server.version_string.value), str(facts.server.datadir.value)]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def load_rules() -> dict[str, RuleSpec]:
    from myaccel.rules import build_rules, os_rules, server_rules, simple  # noqa: F401  (registration)

    return REGISTRY


def make_plan(
    facts: Facts,
    *,
    durability: str = "strict",
    layers: list[str] | None = None,
    hints: Hints | None = None,
    knobs: KnobView | None = None,
) -> Plan:
    want = _check_request(facts, durability, layers)
    ctx = RuleContext(facts=facts, durability=durability, hints=hints or Hints(), knobs=knobs)
    skipped: list[Skipped] = []
    warnings: list[str] = [str(w) for w in getattr(knobs, "warnings", [])]
    recs = _run_rules(ctx, want, skipped)
    final = _one_value_per_target(recs, skipped)
    memory: MemoryBudget | None = None
    if facts.server is not None and "server" in want:
        memory = _memory_budget(ctx, warnings)
    numa = _numa_table(ctx) if "numa" in want else None
    sv = None
    if facts.server is not None:
        sv = {
            "flavor": facts.server.flavor.value,
            "version": facts.server.version.value,
            "connection": facts.server.connection,
        }
    # The digest seals the content, durability included: apply accepts durability-knob
    # changes only from a relaxed plan whose digest still matches (actions/guard.py).
    return Plan(
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        myaccel_version=__version__,
        facts_digest=facts_digest(facts),
        hostname=facts.hostname.value,
        server=sv or {},
        durability="relaxed" if durability == "relaxed" else "strict",
        layers=want,
        recommendations=final,
        skipped=skipped,
        memory=memory,
        numa_placement=numa,
        warnings=warnings,
    ).sealed()


def _check_request(facts: Facts, durability: str, layers: list[str] | None) -> list[str]:
    """The layers to plan, after checking the facts' schema and the options."""
    if facts.schema_version != FACTS_SCHEMA:
        raise UsageError(
            f"facts have schema {facts.schema_version!r}, this myaccel reads {FACTS_SCHEMA!r}",
            hint="run `myaccel probe --out facts.json` with this version",
        )
    if durability not in ("strict", "relaxed"):
        raise UsageError(f"unknown durability mode '{durability}'", hint="use strict or relaxed")
    want = list(layers or LAYERS)
    for lay in want:
        if lay not in LAYERS:
            raise UsageError(f"unknown layer '{lay}'", hint="layers: " + ", ".join(LAYERS))
    return want


def _run_rules(ctx: RuleContext, want: list[str], skipped: list[Skipped]) -> list[Recommendation]:
    """Every rule of the wanted layers, in layer order; a rule's proposals are visible to
    the rules after it (``ctx.proposed``). Skips and refused durability changes go to
    ``skipped``."""
    recs: list[Recommendation] = []
    owner = machine(ctx.facts)  # who may change what (rules/ownership.py)
    for spec in sorted(load_rules().values(), key=lambda s: (LAYERS.index(s.layer), s.order, s.id)):
        if spec.layer not in want:
            continue
        ctx.rule = spec
        try:
            out = apply_finding_effects(spec.id, spec.fn(ctx), ctx.hints)
        except Skip as s:
            raised = [e.finding for e in ctx.hints.effects if e.rule == spec.id]
            why = s.reason + (f" (raised by finding {', '.join(raised)})" if raised else "")
            skipped.append(Skipped(id=spec.id, layer=spec.layer, reason=why))
            continue
        for proposed in out:
            r = owned(proposed, owner)
            if isinstance(r, Skipped):
                skipped.append(r)
                continue
            if ctx.durability != "relaxed" and (r.group == "durability" or _durability_change(r)):
                knob = target_knob(r.target) or r.target
                why = f"durability knob ({knob}): only with --durability relaxed"
                skipped.append(Skipped(id=r.id, layer=r.layer, reason=why))
                continue
            recs.append(_cite_measured(ctx, r))
            if r.target.startswith("mysql:"):
                ctx.proposed[r.target[len("mysql:") :]] = r.proposed
    return recs


def _cite_measured(ctx: RuleContext, r: Recommendation) -> Recommendation:
    """``r`` citing what its change measured on a server like this one (rules/measured.py)."""
    if ctx.facts.server is None:
        return r
    try:
        return cite_measured(r, ctx.flavor, ctx.cpus())
    except Skip:
        return r


def _one_value_per_target(
    recs: list[Recommendation], skipped: list[Skipped]
) -> list[Recommendation]:
    """One target, one value: the first rule (layer order) wins, the rest are recorded."""
    seen: dict[str, Recommendation] = {}
    final: list[Recommendation] = []
    for r in recs:
        prev = seen.get(r.target)
        if prev is not None:
            if prev.proposed != r.proposed:
                why = f"{r.target} already set to {prev.proposed} by {prev.id}"
                skipped.append(Skipped(id=r.id, layer=r.layer, reason=why))
            continue
        seen[r.target] = r
        final.append(r)
    return final


def _memory_budget(ctx: RuleContext, warnings: list[str]) -> MemoryBudget | None:
    """The memory sum of the proposed server; a warning when it exceeds the budget."""
    from myaccel.rules.server_rules import memory_budget

    try:
        memory = memory_budget(ctx)
    except Skip as s:
        warnings.append(f"memory budget not computed: {s.reason}")
        return None
    if not memory.within:
        warnings.append(
            f"memory sum {format_gib(memory.total_bytes)} exceeds the budget {format_gib(memory.budget_bytes)}"
        )
    return memory


def _numa_table(ctx: RuleContext) -> list[str] | None:
    """The NUMA placement, one line per node (``numa.table``), on a machine of several
    nodes, whether the plan binds, interleaves or leaves the placement alone."""
    from myaccel.rules.numa import table
    from myaccel.rules.os_rules import numa_placement

    try:
        return table(numa_placement(ctx)[0])
    except Skip:
        return None


def _durability_change(r: Recommendation) -> bool:
    """An applied change to a knob the catalog marks as durability-related (any value:
    apply refuses every such change in a strict plan)."""
    from myaccel.knobs.catalog import Catalog

    name = target_knob(r.target)
    return r.action == "apply" and name is not None and Catalog.load().is_durability(name)
