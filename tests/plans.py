"""Plans for tests (imported as ``plans``: ``tests/`` is on the path of every test):
``make_plan`` gives a server layer with the given targets and values."""

from __future__ import annotations

from myaccel.rules.model import Plan, Recommendation, Risk, target_knob


def make_plan(*recs: tuple[str, str, Risk], rationale: str = "-") -> Plan:
    """One recommendation per (target, proposed value, risk), titled by its knob."""
    return Plan(
        created_at="2026-11-25T00:00:00+00:00",
        myaccel_version="test",
        facts_digest="test",
        hostname=None,
        recommendations=[
            Recommendation(
                id=f"test-{target_knob(target) or target}",
                layer="server",
                title=target_knob(target) or target,
                target=target,
                current=None,
                proposed=value,
                rationale=rationale,
                expected_effect="-",
                effect_source="test",
                risk=risk,
                verify="-",
            )
            for target, value, risk in recs
        ],
    )
