"""What a `tune` leaves: ``tune.json`` (``myaccel.tune/1``: the trials, the noise floor, the
final comparison, the verdict, the ablation, parameter importances) and ``plan.json``, the
rules' plan with the winner's changes, sealed as `myaccel plan` seals a plan, so that
`myaccel apply --plan` takes it (and journals it) as any plan.

When the winner does not beat the plan in the final `ab`, ``plan.json`` is the rules' plan
unchanged: "nothing measurably better than the plan" is a valid answer.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from pydantic import Field

from myaccel.artifacts import artifact
from myaccel.errors import UsageError
from myaccel.knobs.server_knobs import ServerKnobs
from myaccel.model import Frozen
from myaccel.rules.model import Plan, Recommendation, target_knob
from myaccel.tune.process import NUMA_POLICY, plan_target

TUNE_SCHEMA = "myaccel.tune/1"


class TrialRow(Frozen):
    number: int
    state: str
    stage: str
    rung: int = 0
    changes: dict[str, str] = Field(default_factory=dict)
    delta_pct: float | None = None  # vs the plan, Hodges-Lehmann, same statistics as ab
    runs_per_arm: int = 0
    note: str = ""


class FinalAb(Frozen):
    runs_per_arm: int
    delta_pct: float
    ci_low_pct: float | None
    ci_high_pct: float | None
    mde_pct: float | None
    verdicts: dict[str, str]  # cell -> improved / regressed / no change / inconclusive
    comparison: str | None = None  # path of comparison.json (sandbox runs)


class AblationRow(Frozen):
    knob: str
    value: str
    plan_value: str
    delta_without_pct: float  # the winner without this change, vs the plan
    contribution_pct: float  # the winner's delta minus that


class NoiseRow(Frozen):
    aa_delta_pct: float
    cv_pct: float
    floor_pct: float
    mde_pct: float | None
    screen_pairs: int


@artifact(TUNE_SCHEMA)
class TuneResult(Frozen):
    schema_version: str = TUNE_SCHEMA
    created_at: str
    target: str  # sandbox name or basedir
    durability: str
    workload: list[str]
    layers: list[str] = Field(default_factory=lambda: ["server"])  # server, process
    searched: list[str]
    left_out: dict[str, str] = Field(default_factory=dict)
    noise: NoiseRow | None = None
    trials: list[TrialRow] = Field(default_factory=list)
    winner: dict[str, str] = Field(default_factory=dict)  # changes against the plan
    winner_plan_values: dict[str, str] = Field(default_factory=dict)  # the plan's, same knobs
    final: FinalAb | None = None
    improved: bool = False
    verdict: str
    ablation: list[AblationRow] = Field(default_factory=list)
    importances: dict[str, float] = Field(default_factory=dict)
    study: str  # path of study.db
    plan: str  # path of the (tuned or unchanged) plan.json


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def tuned_plan(
    plan: Plan,
    changes: Mapping[str, str],
    sk: ServerKnobs | None,
    *,
    evidence: Mapping[str, str] | None = None,
    numa_nodes: str | None = None,
) -> Plan:
    """``plan`` with ``changes`` (knob -> value): a rule's recommendation on the same knob
    takes the measured value, other knobs get a ``tune-<knob>`` recommendation. Sealed.
    ``numa_nodes``: the host's NUMA nodes (``0-1``), the mask an interleave policy needs."""
    if not changes:
        return plan
    recs: list[Recommendation] = []
    done: set[str] = set()
    for r in plan.recommendations:
        name = target_knob(r.target)
        if name is not None and name in changes and r.action == "apply":
            recs.append(_measured(r, name, changes[name], evidence))
            done.add(name)
        else:
            recs.append(r)
    for name, value in changes.items():
        if name not in done:
            recs.append(_new(name, value, sk, evidence))
            if name == NUMA_POLICY and value == "interleave":
                # the mask first: a crash between the two entries leaves a startable unit
                recs.insert(len(recs) - 1, _numa_mask(recs[-1], numa_nodes))
    note = f"tuned: {len(changes)} server knob(s) set from measurements (myaccel tune)"
    return plan.model_copy(
        update={"recommendations": recs, "warnings": [*plan.warnings, note], "digest": None}
    ).sealed()


def _measured(
    r: Recommendation, name: str, value: str, evidence: Mapping[str, str] | None
) -> Recommendation:
    return r.model_copy(
        update={
            "id": f"tune-{name.replace('_', '-')}",
            "proposed": value,
            "rationale": f"measured by myaccel tune (the rule {r.id} proposed {r.proposed})",
            "evidence": {**r.evidence, **(evidence or {})},
            "effect_source": "myaccel tune: interleaved A/B against the rules' plan",
            "confidence": "medium",
        }
    )


def _new(
    name: str, value: str, sk: ServerKnobs | None, evidence: Mapping[str, str] | None
) -> Recommendation:
    """A knob the rules left alone, or a process-layer winner (CPU affinity, NUMA policy:
    a setting of the server's systemd unit; on the sandbox, `tune` started the server
    under taskset or numactl)."""
    launch = plan_target(name)
    dynamic = sk.dynamic(name) if sk is not None and sk.exists(name) else False
    durable = launch is None and sk is not None and sk.knob(name).spec.durability
    target, layer = launch or (f"mysql:{name}", "server")
    return Recommendation(
        id=f"tune-{name.replace('_', '-')}",
        layer=layer,
        title=f"Set {name} to the measured best",
        target=target,
        current=None,
        proposed=value,
        rationale="measured by myaccel tune: part of the configuration that beat the plan",
        evidence=dict(evidence or {}),
        expected_effect="see tune.json (final A/B and ablation)",
        effect_source="myaccel tune: interleaved A/B against the rules' plan",
        risk="durability" if durable else ("online" if dynamic else "restart"),
        verify=f"SELECT @@{name}" if launch is None else "/proc/PID/status Cpus_allowed_list",
        group="durability" if durable else "default",
        confidence="medium",
    )


def _numa_mask(policy: Recommendation, nodes: str | None) -> Recommendation:
    """The ``NUMAMask=`` beside ``NUMAPolicy=interleave``: without it systemd cannot start
    the unit ("Failed to set NUMA memory policy: Invalid argument", seen in the lab)."""
    if not nodes:
        raise UsageError(
            "the measured interleave policy needs the host's NUMA nodes, and they are unknown",
            hint="see facts.json (cpu.numa_nodes) in the study directory",
        )
    return policy.model_copy(
        update={
            "target": "systemd:server/NUMAMask",
            "proposed": nodes,
            "title": "NUMA nodes to interleave over",
        }
    )
