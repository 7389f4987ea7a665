"""The plan as it runs on a clone: its memory knobs scaled by the clone's factor.

A clone runs beside its source, so its big buffers are scaled to what the host can spare
(``myaccel.clone.rewrite``); a plan sized for the real server (a buffer pool for all of
its memory) is scaled by the same factor before the A/B on the clone, so both arms keep
the proportion they have on the real server. The clone's factor is chosen with the plan's
buffers in view (``candidate_memory``), so the scaled plan fits as well. What the real
server gets is the plan as written; the report says which clone figures came from a
scaled plan (``ScaledPlan.describe``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from myaccel.clone.rewrite import MEMORY_KEYS, scaled_size
from myaccel.rules.model import Plan, target_knob
from myaccel.units import format_size, size_or_none


@dataclass(frozen=True)
class ScaledKnob:
    knob: str
    planned: str  # the plan's value (what the real server gets)
    on_clone: str  # what the clone's candidate arm ran with


@dataclass(frozen=True)
class ScaledPlan:
    plan: Plan  # the plan for the clone
    factor: float
    knobs: list[ScaledKnob] = field(default_factory=list)

    @property
    def scaled(self) -> bool:
        return bool(self.knobs)

    def describe(self) -> str:
        if not self.knobs:
            return "the plan ran on the clone as written"
        each = ", ".join(f"{k.knob} {k.planned} -> {k.on_clone}" for k in self.knobs)
        return (
            f"the plan's memory knobs scaled by {self.factor:.2f} on the clone, like the "
            f"clone's own buffers: {each}"
        )

    def summary(self) -> dict[str, Any]:
        return {
            "factor": self.factor,
            "knobs": [k.__dict__ for k in self.knobs],
            "note": self.describe(),
        }


def _memory_knob(target: str) -> str | None:
    name = target_knob(target)
    return name if name in MEMORY_KEYS else None


def plan_memory(plan: Plan) -> dict[str, int]:
    """The plan's memory knobs (``clone.rewrite.MEMORY_KEYS``) in bytes."""
    out: dict[str, int] = {}
    for r in plan.recommendations:
        knob = _memory_knob(r.target)
        size = size_or_none(r.proposed)
        if knob is not None and size is not None and size > 0:
            out[knob] = size
    return out


def scale_plan(plan: Plan, factor: float) -> ScaledPlan:
    """``plan`` with its memory knobs times ``factor`` (as the clone's own buffers)."""
    if factor >= 1.0:
        return ScaledPlan(plan, 1.0)
    recs = []
    knobs: dict[str, ScaledKnob] = {}
    for r in plan.recommendations:
        knob = _memory_knob(r.target)
        size = size_or_none(r.proposed)
        if knob is None or size is None or size <= 0:
            recs.append(r)
            continue
        new = scaled_size(knob, size, factor)
        if new == size:
            recs.append(r)
            continue
        value = format_size(new, largest="G")
        recs.append(r.model_copy(update={"proposed": value}))
        knobs[knob] = ScaledKnob(knob, r.proposed, value)
    return ScaledPlan(
        plan.model_copy(update={"recommendations": recs}), factor, list(knobs.values())
    )
