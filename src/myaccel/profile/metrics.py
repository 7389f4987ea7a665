"""Micro-architecture metric sets per CPU family, computed from ``perf stat`` counts.

Each metric carries its formula (in perf event names, lowercase as sysfs spells them),
unit, description and the document it comes from. A formula string is the computation:
it is evaluated by a tiny arithmetic evaluator, so what the report shows is what ran.
Some metrics have alternatives (e.g. iTLB misses from ``itlb_walk`` or, failing that,
``l1i_tlb_refill``); the first whose events were all counted is used.

``compute(family, counts)`` returns every metric of the family's set, those whose events
are missing as unavailable with the reason. ``normalize(before, after)`` expresses the
second run as a percentage of the first (baseline = 100%), the way seed 000 (Yitian 710)
reports its micro-architecture table.

Families are the ids of ``myaccel.facts.cpu``: neoverse-n1, neoverse-n2, neoverse-v1,
neoverse-v2, kunpeng920, x86-intel, x86-amd (others fall back to a generic Arm or x86 set).
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import Field

from myaccel import markdown
from myaccel.model import Frozen
from myaccel.profile.perfstat import PerfStatResult, counts_mapping

# ---------------------------------------------------------------- sources

SRC_PERF_N1 = (
    "Linux tools/perf/pmu-events/arch/arm64/arm/neoverse-n1/metrics.json "
    "(Arm Neoverse N1 PMU guide metrics)"
)
SRC_PERF_N2 = (
    "Linux tools/perf/pmu-events/arch/arm64/arm/neoverse-n2-v2/metrics.json: N2 has 5 slots "
    "and its STALL_SLOT/STALL_SLOT_FRONTEND count one extra slot per cycle, so CPU_CYCLES "
    "is subtracted (Arm Neoverse N2 errata notice, quoted in the LKML patch of 2023-01 that "
    "added the correction); backend_bound from tools/perf/pmu-events/arch/arm64/sbsa.json"
)
SRC_PERF_V1 = (
    "Linux tools/perf/pmu-events/arch/arm64/arm/neoverse-v1/metrics.json (8 slots, "
    "frontend/bad-speculation corrected by 4 x BR_MIS_PRED); backend_bound and retiring "
    "from tools/perf/pmu-events/arch/arm64/sbsa.json"
)
SRC_ARM_V2 = (
    "Arm Neoverse V2 Telemetry Specification top-down stage 1 (8 rename slots), as "
    "tabulated in Arm's learning path 'topdown-compare' (learn.arm.com)"
)
SRC_HIP08 = (
    "Linux tools/perf/pmu-events/arch/arm64/hisilicon/hip08/metrics.json (TopDownL1, 4-wide; "
    "FETCH_BUBBLE is IMP-DEF event 0x2014)"
)
SRC_PERF_ICL = (
    "Linux perf util/stat-shadow.c td_metric_ratio(): the kernel reports topdown-* as "
    "slots x fraction, so each level-1 ratio is the event over the sum of the four"
)
SRC_PERF_SKL = (
    "Linux perf util/stat-shadow.c td_fe_bound/td_bad_spec/td_retiring/td_be_bound "
    "(Yasin's top-down level 1 on pre-Ice Lake topdown-* events)"
)
SRC_SEED000 = (
    "seed 000 (Yitian 710 one-click tuning): stall rate = stalls_x / (frontend + backend "
    "stalls), KNOWLEDGE.md sections 1 and 6"
)
SRC_MPKI_ARM = "Linux tools/perf/pmu-events/arch/arm64/arm/neoverse-n1/metrics.json (*_mpki)"
SRC_MPKI_X86 = (
    "perf generic hardware-cache events (perf list); misses per 1000 instructions as in the "
    "Arm metric files"
)


# ---------------------------------------------------------------- formula evaluation

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*(?:-[A-Za-z0-9_]+)*")


class FormulaError(ValueError):
    pass


def formula_inputs(formula: str) -> tuple[str, ...]:
    """Event names a formula reads, in order of first use."""
    seen: dict[str, None] = {}
    for m in _NAME.finditer(formula):
        seen.setdefault(m.group(0).lower(), None)
    return tuple(seen)


def evaluate(formula: str, values: Mapping[str, float]) -> float:
    """Evaluate ``formula`` (numbers, event names, + - * / and parentheses).

    Event names may contain hyphens (``topdown-fe-bound``), so binary minus must be
    written with spaces around it. Raises ``ZeroDivisionError`` or ``KeyError``.
    """
    names: list[str] = []

    def sub(m: re.Match[str]) -> str:
        names.append(m.group(0).lower())
        return f"_v{len(names) - 1}"

    expr = _NAME.sub(sub, formula)
    tree = ast.parse(expr, mode="eval")
    env = {f"_v{i}": float(values[n]) for i, n in enumerate(names)}

    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return float(node.value)
        if isinstance(node, ast.Name) and node.id in env:
            return env[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            if isinstance(node.op, ast.Div):
                return a / b
        raise FormulaError(f"unsupported expression in formula {formula!r}")

    return ev(tree)


# ---------------------------------------------------------------- definitions


@dataclass(frozen=True)
class MetricDef:
    name: str  # snake_case id; the same keys records.derive_microarch understands
    unit: str  # "%", "MPKI", "per cycle"
    description: str
    formulas: tuple[str, ...]  # alternatives, first whose inputs were all counted wins
    source: str
    inputs: tuple[tuple[str, ...], ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(formula_inputs(f) for f in self.formulas))


class MetricValue(Frozen):
    name: str
    value: float | None
    unit: str
    formula: str  # the alternative used (the first one when unavailable)
    description: str
    source: str
    inputs: dict[str, float | None] = Field(default_factory=dict)
    unavailable: str | None = None  # why value is None
    multiplexed: dict[str, float] = Field(default_factory=dict)  # input -> % of time counted

    @property
    def available(self) -> bool:
        return self.value is not None


def _m(name: str, unit: str, description: str, source: str, *formulas: str) -> MetricDef:
    return MetricDef(
        name=name, unit=unit, description=description, formulas=formulas, source=source
    )


def _mpki(name: str, what: str, source: str, instructions: str, *events: str) -> MetricDef:
    return MetricDef(
        name=name,
        unit="MPKI",
        description=f"{what} per 1000 instructions",
        formulas=tuple(f"{e} / {instructions} * 1000" for e in events),
        source=source,
    )


# Arm common-event metrics (N1, N2, V1, V2, Kunpeng 920 share PMUv3 common events).
ARM_COMMON: tuple[MetricDef, ...] = (
    _m(
        "ipc",
        "per cycle",
        "instructions retired per cycle",
        SRC_MPKI_ARM,
        "inst_retired / cpu_cycles",
    ),
    _m(
        "frontend_stall_cycles_pct",
        "%",
        "cycles in which the frontend delivered no operation (STALL_FRONTEND)",
        SRC_PERF_N1,
        "stall_frontend / cpu_cycles * 100",
    ),
    _m(
        "backend_stall_cycles_pct",
        "%",
        "cycles in which the backend accepted no operation (STALL_BACKEND)",
        SRC_PERF_N1,
        "stall_backend / cpu_cycles * 100",
    ),
    _m(
        "frontend_stall_rate_pct",
        "%",
        "frontend share of all stall cycles, as seed 000 reports it",
        SRC_SEED000,
        "stall_frontend / (stall_frontend + stall_backend) * 100",
    ),
    _m(
        "backend_stall_rate_pct",
        "%",
        "backend share of all stall cycles, as seed 000 reports it",
        SRC_SEED000,
        "stall_backend / (stall_frontend + stall_backend) * 100",
    ),
    _mpki(
        "itlb_mpki",
        "instruction TLB misses (walks)",
        SRC_MPKI_ARM,
        "inst_retired",
        "itlb_walk",
        "l1i_tlb_refill",
    ),
    _mpki(
        "l1i_mpki", "L1 instruction cache refills", SRC_MPKI_ARM, "inst_retired", "l1i_cache_refill"
    ),
    _mpki(
        "branch_mpki",
        "mispredicted branches",
        SRC_MPKI_ARM,
        "inst_retired",
        "br_mis_pred_retired",
        "br_mis_pred",
    ),
    _mpki(
        "dtlb_mpki",
        "data TLB misses (walks)",
        SRC_MPKI_ARM,
        "inst_retired",
        "dtlb_walk",
        "l1d_tlb_refill",
    ),
    _mpki("l1d_mpki", "L1 data cache refills", SRC_MPKI_ARM, "inst_retired", "l1d_cache_refill"),
    _mpki("l2d_mpki", "L2 cache refills", SRC_MPKI_ARM, "inst_retired", "l2d_cache_refill"),
)


def _topdown(source: str, fe: str, bs: str, ret: str, be: str) -> tuple[MetricDef, ...]:
    return (
        _m(
            "frontend_bound_pct",
            "%",
            "top-down level 1: slots lost because the frontend supplied no operation",
            source,
            fe,
        ),
        _m(
            "bad_speculation_pct",
            "%",
            "top-down level 1: slots spent on operations that never retired",
            source,
            bs,
        ),
        _m("retiring_pct", "%", "top-down level 1: slots that retired operations", source, ret),
        _m(
            "backend_bound_pct",
            "%",
            "top-down level 1: slots lost because the backend accepted no operation",
            source,
            be,
        ),
    )


N2_TOPDOWN = _topdown(
    SRC_PERF_N2,
    "(stall_slot_frontend - cpu_cycles) / (5 * cpu_cycles) * 100",
    "(1 - op_retired / op_spec) * (1 - (stall_slot - cpu_cycles) / (5 * cpu_cycles)) * 100",
    "op_retired / op_spec * (1 - (stall_slot - cpu_cycles) / (5 * cpu_cycles)) * 100",
    "stall_slot_backend / (5 * cpu_cycles) * 100",
)
V1_TOPDOWN = _topdown(
    SRC_PERF_V1,
    "(stall_slot_frontend / (8 * cpu_cycles) - 4 * br_mis_pred / cpu_cycles) * 100",
    "((1 - op_retired / op_spec) * (1 - stall_slot / (8 * cpu_cycles))"
    " + 4 * br_mis_pred / cpu_cycles) * 100",
    "op_retired / op_spec * (1 - stall_slot / (8 * cpu_cycles)) * 100",
    "stall_slot_backend / (8 * cpu_cycles) * 100",
)
V2_TOPDOWN = _topdown(
    SRC_ARM_V2,
    "(stall_slot_frontend / (8 * cpu_cycles) - br_mis_pred / cpu_cycles) * 100",
    "((1 - op_retired / op_spec) * (1 - stall_slot / (8 * cpu_cycles))"
    " + 4 * br_mis_pred / cpu_cycles) * 100",
    "op_retired / op_spec * (1 - stall_slot / (8 * cpu_cycles)) * 100",
    "(stall_slot_backend / (8 * cpu_cycles) - 3 * br_mis_pred / cpu_cycles) * 100",
)
HIP08_TOPDOWN = _topdown(
    SRC_HIP08,
    "fetch_bubble / (4 * cpu_cycles) * 100",
    "(inst_spec - inst_retired) / (4 * cpu_cycles) * 100",
    "inst_retired / (4 * cpu_cycles) * 100",
    "(1 - (fetch_bubble + inst_spec) / (4 * cpu_cycles)) * 100",
)

_ICL_SUM = "(topdown-retiring + topdown-bad-spec + topdown-fe-bound + topdown-be-bound)"
X86_TOPDOWN: tuple[MetricDef, ...] = tuple(
    MetricDef(
        name=icl.name,
        unit="%",
        description=icl.description,
        formulas=(icl.formulas[0], skl.formulas[0]),
        source=f"{SRC_PERF_ICL}; else {SRC_PERF_SKL}",
    )
    for icl, skl in zip(
        _topdown(
            SRC_PERF_ICL,
            f"topdown-fe-bound / {_ICL_SUM} * 100",
            f"topdown-bad-spec / {_ICL_SUM} * 100",
            f"topdown-retiring / {_ICL_SUM} * 100",
            f"topdown-be-bound / {_ICL_SUM} * 100",
        ),
        _topdown(
            SRC_PERF_SKL,
            "topdown-fetch-bubbles / topdown-total-slots * 100",
            "(topdown-slots-issued - topdown-slots-retired + topdown-recovery-bubbles)"
            " / topdown-total-slots * 100",
            "topdown-slots-retired / topdown-total-slots * 100",
            "(1 - (topdown-fetch-bubbles + topdown-slots-issued + topdown-recovery-bubbles)"
            " / topdown-total-slots) * 100",
        ),
        strict=True,
    )
)

X86_COMMON: tuple[MetricDef, ...] = (
    _m("ipc", "per cycle", "instructions retired per cycle", SRC_MPKI_X86, "instructions / cycles"),
    _mpki(
        "itlb_mpki", "instruction TLB load misses", SRC_MPKI_X86, "instructions", "itlb-load-misses"
    ),
    _mpki(
        "l1i_mpki",
        "L1 instruction cache load misses",
        SRC_MPKI_X86,
        "instructions",
        "l1-icache-load-misses",
    ),
    _mpki("branch_mpki", "mispredicted branches", SRC_MPKI_X86, "instructions", "branch-misses"),
    _mpki("dtlb_mpki", "data TLB load misses", SRC_MPKI_X86, "instructions", "dtlb-load-misses"),
    _mpki(
        "l1d_mpki",
        "L1 data cache load misses",
        SRC_MPKI_X86,
        "instructions",
        "l1-dcache-load-misses",
    ),
    _mpki(
        "llc_mpki", "last-level cache load misses", SRC_MPKI_X86, "instructions", "llc-load-misses"
    ),
)

X86_INTEL_STALL = (
    _m(
        "frontend_stall_rate_pct",
        "%",
        "frontend share of frontend + backend bound slots (slot-based analogue of seed 000's "
        "stall rate)",
        f"{SRC_SEED000}; {SRC_PERF_ICL}",
        "topdown-fe-bound / (topdown-fe-bound + topdown-be-bound) * 100",
    ),
    _m(
        "backend_stall_rate_pct",
        "%",
        "backend share of frontend + backend bound slots (slot-based analogue of seed 000's "
        "stall rate)",
        f"{SRC_SEED000}; {SRC_PERF_ICL}",
        "topdown-be-bound / (topdown-fe-bound + topdown-be-bound) * 100",
    ),
)
X86_AMD_STALL = (
    _m(
        "frontend_stall_cycles_pct",
        "%",
        "cycles with an empty micro-op queue (stalled-cycles-frontend; Zen 2+ map it to "
        "PMCx0A9, and have no backend counterpart)",
        "Linux commit 'perf/x86/amd/core: Update and fix stalled-cycles-* events for Zen 2 "
        "and later'",
        "stalled-cycles-frontend / cycles * 100",
    ),
)

METRIC_SETS: dict[str, tuple[MetricDef, ...]] = {
    "neoverse-n1": ARM_COMMON,
    "neoverse-n2": N2_TOPDOWN + ARM_COMMON,
    "neoverse-v1": V1_TOPDOWN + ARM_COMMON,
    "neoverse-v2": V2_TOPDOWN + ARM_COMMON,
    "kunpeng920": HIP08_TOPDOWN + ARM_COMMON,
    "x86-intel": X86_TOPDOWN + X86_INTEL_STALL + X86_COMMON,
    "x86-amd": X86_AMD_STALL + X86_COMMON,
}


def metric_set(family: str) -> tuple[MetricDef, ...]:
    """The family's metrics; unknown Arm cores get the common set, unknown x86 the AMD one
    (generic events only)."""
    if family in METRIC_SETS:
        return METRIC_SETS[family]
    if family.startswith("x86"):
        return METRIC_SETS["x86-amd"]
    return ARM_COMMON


# ---------------------------------------------------------------- computing


def compute(
    family: str,
    counts: PerfStatResult | Mapping[str, float | None],
    *,
    reasons: Mapping[str, str] | None = None,
) -> list[MetricValue]:
    """Every metric of ``family``'s set from event counts.

    ``counts`` is a parsed ``perf stat`` run or a mapping of event name -> value (None for
    an event that could not be counted). A metric whose events are missing, uncounted or
    give a zero denominator is returned with ``value=None`` and the reason.
    """
    values = counts_mapping(counts)
    why: dict[str, str] = dict(reasons or {})
    mux: dict[str, float] = {}
    if isinstance(counts, PerfStatResult):
        why.update(counts.reasons())
        mux = counts.multiplexed()
    out: list[MetricValue] = []
    for d in metric_set(family):
        out.append(_compute_one(d, values, why, mux))
    return out


def _missing_reason(
    names: Sequence[str], values: Mapping[str, float | None], why: Mapping[str, str]
) -> str:
    parts: list[str] = []
    for n in names:
        if n not in values:
            parts.append(f"{n} not measured")
        elif values[n] is None:
            parts.append(f"{n} {why.get(n, 'not counted')}")
    return "; ".join(parts)


def _compute_one(
    d: MetricDef,
    values: Mapping[str, float | None],
    why: Mapping[str, str],
    mux: Mapping[str, float],
) -> MetricValue:
    base = {"name": d.name, "unit": d.unit, "description": d.description, "source": d.source}
    for formula, names in zip(d.formulas, d.inputs, strict=True):
        if any(values.get(n) is None for n in names):
            continue
        got = {n: float(values[n] or 0.0) for n in names}
        used = {n: values[n] for n in names}
        scaled = {n: mux[n] for n in names if n in mux}
        try:
            v = evaluate(formula, got)
        except ZeroDivisionError:
            zeros = ", ".join(n for n in names if got[n] == 0) or "a denominator"
            return MetricValue(
                **base,
                value=None,
                formula=formula,
                inputs=used,
                unavailable=f"division by zero ({zeros} = 0)",
                multiplexed=scaled,
            )
        if not math.isfinite(v):
            return MetricValue(
                **base,
                value=None,
                formula=formula,
                inputs=used,
                unavailable="not a finite number",
                multiplexed=scaled,
            )
        return MetricValue(**base, value=v, formula=formula, inputs=used, multiplexed=scaled)
    names = d.inputs[0]
    return MetricValue(
        **base,
        value=None,
        formula=d.formulas[0],
        inputs={n: values.get(n) for n in names},
        unavailable=_missing_reason(names, values, why) or "inputs missing",
    )


def to_microarch(values: Sequence[MetricValue]) -> dict[str, float]:
    """Available metrics as the ``Profile.microarch`` mapping (keys of
    ``records.derive_microarch``). Without top-down, the stall-cycle shares stand in for
    ``frontend_bound_pct``/``backend_bound_pct``, as derive_microarch does for Arm."""
    out = {v.name: v.value for v in values if v.value is not None}
    for bound, stall in (
        ("frontend_bound_pct", "frontend_stall_cycles_pct"),
        ("backend_bound_pct", "backend_stall_cycles_pct"),
    ):
        if bound not in out and stall in out:
            out[bound] = out[stall]
    return out


# ---------------------------------------------------------------- before/after


class NormalizedRow(Frozen):
    name: str
    unit: str
    before: float | None
    after: float | None
    after_pct_of_before: float | None  # baseline = 100
    change_pct: float | None  # after_pct_of_before - 100 (seed 000: iTLB miss -43.9%)
    note: str | None = None


def normalize(
    before: Sequence[MetricValue] | Mapping[str, float | None],
    after: Sequence[MetricValue] | Mapping[str, float | None],
) -> list[NormalizedRow]:
    """The after run as a percentage of the before run, metric by metric (baseline = 100%).

    Rows follow the order of ``before``, then metrics only ``after`` has. A metric missing
    on either side, or zero before, has no percentage and a note saying why.
    """
    b_vals, b_units = _as_table(before)
    a_vals, a_units = _as_table(after)
    names = list(b_vals) + [n for n in a_vals if n not in b_vals]
    rows: list[NormalizedRow] = []
    for n in names:
        b, a = b_vals.get(n), a_vals.get(n)
        unit = b_units.get(n) or a_units.get(n) or ""
        pct: float | None = None
        note: str | None = None
        if b is None or a is None:
            note = "not measured before" if b is None else "not measured after"
            if b is None and a is None:
                note = "not measured in either run"
        elif b == 0:
            note = "zero in the baseline: no percentage"
        else:
            pct = a / b * 100.0
        rows.append(
            NormalizedRow(
                name=n,
                unit=unit,
                before=b,
                after=a,
                after_pct_of_before=pct,
                change_pct=None if pct is None else pct - 100.0,
                note=note,
            )
        )
    return rows


def _as_table(
    side: Sequence[MetricValue] | Mapping[str, float | None],
) -> tuple[dict[str, float | None], dict[str, str]]:
    if isinstance(side, Mapping):
        return dict(side), {}
    return {v.name: v.value for v in side}, {v.name: v.unit for v in side}


def format_normalized(rows: Sequence[NormalizedRow]) -> str:
    """A markdown table: metric, before, after, after as % of before (baseline 100%)."""

    def num(x: float | None) -> str:
        return "-" if x is None else f"{x:.4g}"

    def pct(r: NormalizedRow) -> str:
        if r.after_pct_of_before is not None:
            return f"{r.after_pct_of_before:.1f}%"
        return r.note or "-"

    header = ["metric", "unit", "before", "after", "after (before = 100%)"]
    cells = [[r.name, r.unit, num(r.before), num(r.after), pct(r)] for r in rows]
    return "\n".join(markdown.table(header, cells, "llrrr")) + "\n"
