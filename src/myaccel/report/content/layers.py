"""Where an `accelerate` run's gain comes from, layer by layer: the knobs (the plan against
the server as it is), the OS (the plan's host-wide advice, not measured in the A/B), the
build (``--build``: build + plan against distro + plan) and the version (``--versions``:
the next release line on an upgraded copy of the data, as it is, against the server as it
is). Each measured row is one comparison of the same interleaved campaign, read from the
file its pair is saved in (``comparison[-PAIR].json``, ``bench/ab.py: ArmPair``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from myaccel.bench.compare import Comparison
from myaccel.report.content.experiments import Experiment
from myaccel.report.content.plans import PlanView

# layer -> the comparison file of the campaign that measures it, and the option that adds it
MEASURED: tuple[tuple[str, str, str | None], ...] = (
    ("knobs", "comparison.json", None),
    ("build", "comparison-build-vs-plan.json", "--build"),
    ("version", "comparison-version.json", "--versions"),
)


@dataclass(frozen=True)
class LayerRow:
    layer: str
    measured: str  # what against what, or why nothing was measured
    comparison: Comparison | None = None

    @property
    def verdicts(self) -> str:
        if self.comparison is None:
            return "-"
        return ", ".join(f"{c.workload} @ {c.threads}: {c.verdict}" for c in self.comparison.cells)


def _accelerate(e: Experiment) -> bool:
    return e.campaign is not None and "accelerate" in e.campaign.command


def _os_row(plans: Sequence[PlanView]) -> LayerRow:
    recs = [r for pv in plans for r in pv.plan.recommendations if r.layer == "os"]
    if not plans:
        return LayerRow("OS", "no plan: nothing to say")
    return LayerRow(
        "OS",
        f"advice only: {len(recs)} host-wide recommendation(s) in the plan, not measured "
        "in the A/B (myaccel apply on a server)"
        if recs
        else "no recommendation in the plan",
    )


def layer_rows(exps: Sequence[Experiment], plans: Sequence[PlanView]) -> list[LayerRow]:
    """One row per layer for the first `accelerate` campaign with a comparison (none
    without one)."""
    acc = [e for e in exps if e.comparison is not None and _accelerate(e) and not e.provisional]
    if not acc:
        return []
    assert acc[0].campaign is not None
    campaign = acc[0].campaign.campaign_id
    by_file = {
        e.source.name: e.comparison
        for e in acc
        if e.campaign is not None and e.campaign.campaign_id == campaign
    }
    rows: list[LayerRow] = []
    for layer, name, option in MEASURED:
        cmp = by_file.get(name)
        if cmp is not None:
            rows.append(
                LayerRow(layer, f"{cmp.candidate_label} vs {cmp.baseline_label}", comparison=cmp)
            )
        else:
            rows.append(LayerRow(layer, f"not measured (accelerate {option})"))
        if layer == "knobs":
            rows.append(_os_row(plans))
    return rows
