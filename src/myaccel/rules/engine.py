"""The rule engine: registered pure rules turn facts (plus optional hints) into a plan.

A rule is a function ``(ctx) -> list[Recommendation]`` registered with its metadata; it may
raise ``Skip(reason)``. Rules never touch the system: everything they need is in the
facts. The engine runs them in layer order, resolves conflicts (one target, one value) and
checks the memory budget.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from myaccel import __version__
from myaccel.errors import UsageError
from myaccel.model import FACTS_SCHEMA, Facts
from myaccel.rules.model import (
    LAYERS,
    Layer,
    MemoryBudget,
    Plan,
    Recommendation,
    Skipped,
    target_knob,
)
from myaccel.server.flavor import ServerVersion, parse_server_version


class Skip(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class KnobView(Protocol):
    """What rules need from the knob catalog for the running server's version."""

    def exists(self, name: str) -> bool: ...

    def dynamic(self, name: str) -> bool: ...


@dataclass(frozen=True)
class Hints:
    """Optional workload knowledge: from a benchmark profile, status counters or a profile."""

    threads: int | None = None
    write_heavy: bool | None = None
    findings: tuple[str, ...] = ()  # finding ids from `myaccel diagnose`
    effects: tuple[FindingEffect, ...] = ()  # what each finding says about a rule


@dataclass(frozen=True)
class FindingEffect:
    """A diagnose finding raising or lowering one rule (``myaccel plan --profile``)."""

    finding: str
    rule: str
    direction: str  # "raise" or "lower"
    reason: str = ""


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


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGTkmgt]?)[Bb]?\s*$")


def parse_size(text: str | None) -> int | None:
    if text is None:
        return None
    m = _SIZE.match(str(text))
    if not m:
        return None
    mult = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}[m.group(2).lower()]
    return int(float(m.group(1)) * mult)


def fmt_size(n: int) -> str:
    for unit, m in (("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if n >= m and n % m == 0:
            return f"{n // m}{unit}"
    return str(n)


@dataclass
class RuleContext:
    facts: Facts
    durability: str = "strict"
    hints: Hints = field(default_factory=Hints)
    knobs: KnobView | None = None
    proposed: dict[str, str] = field(default_factory=dict)  # server knob -> proposed value

    @property
    def server(self) -> Any:
        if self.facts.server is None:
            raise Skip("no server facts: probe with server options (or --sandbox) first")
        return self.facts.server

    @property
    def version(self) -> ServerVersion:
        s = self.server
        sv = parse_server_version(s.version_string.value or "", s.version_comment.value or "")
        if sv is None:
            raise Skip(f"unrecognized server version {s.version_string.value!r}")
        return sv

    @property
    def flavor(self) -> str:
        return self.version.flavor

    def variables(self) -> dict[str, str]:
        v = self.server.variables
        if not v.known or v.value is None:
            raise Skip("server variables unknown")
        return dict(v.value)

    def status(self) -> dict[str, str]:
        v = self.server.status
        return dict(v.value or {})

    def var(self, name: str) -> str | None:
        return self.variables().get(name)

    def var_int(self, name: str) -> int | None:
        return parse_size(self.var(name))

    def has(self, name: str) -> bool:
        if self.knobs is not None:
            return self.knobs.exists(name)
        return name in self.variables()

    def is_dynamic(self, name: str) -> bool:
        if self.knobs is not None:
            return self.knobs.dynamic(name)
        return False

    def cpus(self) -> int:
        n = self.facts.cpu.logical_cpus.value
        if not n:
            raise Skip("CPU count unknown")
        return n

    def numa_nodes(self) -> int:
        nodes = self.facts.cpu.numa_nodes.value
        return len(nodes) if nodes else 1


RuleFn = Callable[[RuleContext], list[Recommendation]]


@dataclass(frozen=True)
class RuleSpec:
    id: str
    layer: Layer
    title: str
    rationale: str
    source: str
    fn: RuleFn
    order: int = 50


REGISTRY: dict[str, RuleSpec] = {}


def rule(
    id: str, layer: Layer, title: str, source: str, *, order: int = 50
) -> Callable[[RuleFn], RuleFn]:
    """Register a rule. Within a layer rules run by ``order`` then id: a rule that reads
    other rules' proposals (the buffer pool reads every memory knob) runs later."""

    def deco(fn: RuleFn) -> RuleFn:
        if id in REGISTRY:
            raise RuntimeError(f"duplicate rule id {id}")
        REGISTRY[id] = RuleSpec(
            id, layer, title, " ".join((fn.__doc__ or "").split()), source, fn, order
        )
        return fn

    return deco


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
    from myaccel.rules import build_rules, os_rules, server_rules  # noqa: F401  (registration)

    return REGISTRY


def make_plan(
    facts: Facts,
    *,
    durability: str = "strict",
    layers: list[str] | None = None,
    hints: Hints | None = None,
    knobs: KnobView | None = None,
) -> Plan:
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
    ctx = RuleContext(facts=facts, durability=durability, hints=hints or Hints(), knobs=knobs)
    recs: list[Recommendation] = []
    skipped: list[Skipped] = []
    warnings: list[str] = [str(w) for w in getattr(knobs, "warnings", [])]
    for spec in sorted(load_rules().values(), key=lambda s: (LAYERS.index(s.layer), s.order, s.id)):
        if spec.layer not in want:
            continue
        try:
            out = apply_finding_effects(spec.id, spec.fn(ctx), ctx.hints)
        except Skip as s:
            raised = [e.finding for e in ctx.hints.effects if e.rule == spec.id]
            why = s.reason + (f" (raised by finding {', '.join(raised)})" if raised else "")
            skipped.append(Skipped(id=spec.id, layer=spec.layer, reason=why))
            continue
        for r in out:
            if durability != "relaxed" and (r.group == "durability" or _durability_change(r)):
                knob = target_knob(r.target) or r.target
                skipped.append(
                    Skipped(
                        id=r.id,
                        layer=r.layer,
                        reason=f"durability knob ({knob}): only with --durability relaxed",
                    )
                )
                continue
            recs.append(r)
            if r.target.startswith("mysql:"):
                ctx.proposed[r.target[len("mysql:") :]] = r.proposed
    # One target, one value: the first rule (layer order) wins, the rest are recorded.
    seen: dict[str, Recommendation] = {}
    final: list[Recommendation] = []
    for r in recs:
        prev = seen.get(r.target)
        if prev is not None:
            if prev.proposed != r.proposed:
                skipped.append(
                    Skipped(
                        id=r.id,
                        layer=r.layer,
                        reason=f"{r.target} already set to {prev.proposed} by {prev.id}",
                    )
                )
            continue
        seen[r.target] = r
        final.append(r)
    memory: MemoryBudget | None = None
    if facts.server is not None and "server" in want:
        from myaccel.rules.server_rules import memory_budget

        try:
            memory = memory_budget(ctx)
            if not memory.within:
                warnings.append(
                    f"memory sum {memory.total_bytes / 2**30:.1f} GiB exceeds the budget {memory.budget_bytes / 2**30:.1f} GiB"
                )
        except Skip as s:
            warnings.append(f"memory budget not computed: {s.reason}")
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
        warnings=warnings,
    ).sealed()


def _durability_change(r: Recommendation) -> bool:
    """An applied change to a knob the catalog marks as durability-related (any value:
    apply refuses every such change in a strict plan)."""
    from myaccel.knobs.catalog import Catalog

    name = target_knob(r.target)
    return r.action == "apply" and name is not None and Catalog.load().is_durability(name)
