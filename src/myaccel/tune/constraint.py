"""The hard limits of a trial: the memory budget (the rules' own sum), the durability
promise and, for the process layer, CPUs the server may use.

A configuration is measured only when both hold; one that breaks either is recorded as a
pruned trial with the reason and never reaches the server. The memory sum is the one the
rule engine checks a plan with (``rules.server_rules.memory_budget``): OS reserve, global
buffers, per-connection buffers times max_connections and the buffer pool, with the trial's
values standing in for the plan's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from myaccel.knobs.catalog import Catalog
from myaccel.model import Facts
from myaccel.rules.base import RuleContext, Skip
from myaccel.rules.model import MemoryBudget, Plan, target_knob
from myaccel.tune.process import check_changes, server_changes, server_cpus
from myaccel.units import format_gib


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str  # empty when ok
    memory: MemoryBudget | None = None


def plan_values(plan: Plan) -> dict[str, str]:
    """The server knobs the plan sets (knob -> proposed)."""
    out: dict[str, str] = {}
    for r in plan.recommendations:
        name = target_knob(r.target)
        if r.action == "apply" and name is not None:
            out[name] = r.proposed
    return out


@dataclass(frozen=True)
class Constraint:
    """Checks trial configurations (knob -> value text, on top of the plan) on ``facts``."""

    facts: Facts
    plan: Plan
    durability: str = "strict"

    def memory(self, changes: Mapping[str, str]) -> MemoryBudget | None:
        """The memory sum with ``changes``; None when the facts cannot give it."""
        from myaccel.rules.server_rules import memory_budget

        proposed = {**plan_values(self.plan), **changes}
        ctx = RuleContext(facts=self.facts, durability=self.durability, proposed=proposed)
        try:
            return memory_budget(ctx)
        except Skip:
            return None

    def largest_buffer_pool(self) -> int | None:
        """The buffer pool that fills the budget with everything else at the plan's values
        (an upper bound for the search; per-trial checks still decide)."""
        m = self.memory({})
        if m is None:
            return None
        return max(0, m.budget_bytes - (m.total_bytes - m.buffer_pool_bytes))

    def check(self, changes: Mapping[str, str]) -> Verdict:
        bad = durability_changes(changes) if self.durability != "relaxed" else []
        if bad:
            return Verdict(False, f"durability knob(s) {', '.join(bad)} under --durability strict")
        why = check_changes(changes, server_cpus(self.facts))
        if why:
            return Verdict(False, why)
        m = self.memory(server_changes(changes))
        if m is None:
            return Verdict(False, "memory budget unknown (no memory or server facts)")
        if not m.within:
            return Verdict(
                False,
                f"memory sum {format_gib(m.total_bytes)} exceeds the budget "
                f"{format_gib(m.budget_bytes)} ({m.budget_source})",
                m,
            )
        return Verdict(True, "", m)


def durability_changes(changes: Mapping[str, str], catalog: Catalog | None = None) -> list[str]:
    """The knobs of ``changes`` that the catalog marks as durability knobs."""
    cat = catalog or Catalog.load()
    return sorted(n for n in changes if cat.is_durability(n))
