"""Plans for tests (imported as ``plans``: ``tests/`` is on the path of every test):
``rec`` makes one recommendation, ``plan`` a plan of them, ``make_plan`` a server layer
from (target, value, risk) triples."""

from __future__ import annotations

from myaccel.rules.model import Plan, Recommendation, Risk, target_knob


def rec(
    id: str,
    target: str,
    proposed: str,
    risk: str = "online",
    layer: str = "server",
    action: str = "apply",
    title: str | None = None,
    rationale: str = "r",
) -> Recommendation:
    return Recommendation.model_validate(
        dict(
            id=id,
            layer=layer,
            title=title or id,
            target=target,
            current=None,
            proposed=proposed,
            action=action,
            rationale=rationale,
            expected_effect="e",
            effect_source="s",
            risk=risk,
            verify="v",
        )
    )


def plan(*recs: Recommendation) -> Plan:
    return Plan(
        created_at="t",
        myaccel_version="0",
        facts_digest="d",
        hostname="h",
        recommendations=list(recs),
    )


def make_plan(*recs: tuple[str, str, Risk], rationale: str = "r") -> Plan:
    """One recommendation per (target, proposed value, risk), titled by its knob."""
    return plan(
        *[
            rec(
                f"test-{target_knob(t) or t}",
                t,
                value,
                risk,
                title=target_knob(t) or t,
                rationale=rationale,
            )
            for t, value, risk in recs
        ]
    )
