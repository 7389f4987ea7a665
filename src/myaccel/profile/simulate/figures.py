"""Figures from valgrind's counts: per-transaction instructions, MPKI and miss ratios,
the before/after comparison (baseline = 100%) and a short markdown summary."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from myaccel import markdown
from myaccel.errors import UsageError
from myaccel.profile.metrics import NormalizedRow, normalize
from myaccel.profile.simulate.models import SimulationResult

# Units of the metrics compare_simulations normalises.
METRIC_UNITS: dict[str, str] = {
    "ir_per_transaction": "instructions",
    "ir_per_query": "instructions",
    "l1i_mpki": "MPKI",
    "l1d_mpki": "MPKI",
    "lli_mpki": "MPKI",
    "lld_mpki": "MPKI",
    "ll_mpki": "MPKI",
    "branch_mpki": "MPKI",
    "l1i_miss_pct": "%",
    "l1d_miss_pct": "%",
    "ll_miss_pct": "%",
    "branch_mispredict_pct": "%",
    "data_refs_per_instruction": "ratio",
}


def derive_metrics(totals: Mapping[str, int], transactions: int, queries: int) -> dict[str, float]:
    """Per-transaction/query instructions, MPKI and miss ratios from valgrind's counts.

    MPKI = misses per thousand instructions. L1d and LL data count reads and writes;
    ``ll_mpki`` counts instruction and data misses of the last level; branches count
    conditional and indirect mispredictions together. Events the run did not simulate
    yield no metric."""
    ir = totals.get("Ir", 0)
    out: dict[str, float] = {}
    if ir <= 0:
        return out
    out["ir"] = float(ir)
    if transactions > 0:
        out["ir_per_transaction"] = round(ir / transactions, 1)
    if queries > 0:
        out["ir_per_query"] = round(ir / queries, 1)

    def has(*names: str) -> bool:
        return all(n in totals for n in names)

    def mpki(n: int) -> float:
        return round(1000.0 * n / ir, 4)

    data_refs = totals.get("Dr", 0) + totals.get("Dw", 0)
    if has("Dr", "Dw"):
        out["data_refs_per_instruction"] = round(data_refs / ir, 4)
    if has("I1mr"):
        out["l1i_mpki"] = mpki(totals["I1mr"])
        out["l1i_miss_pct"] = round(100.0 * totals["I1mr"] / ir, 4)
    if has("D1mr", "D1mw"):
        d1 = totals["D1mr"] + totals["D1mw"]
        out["l1d_mpki"] = mpki(d1)
        if data_refs > 0:
            out["l1d_miss_pct"] = round(100.0 * d1 / data_refs, 4)
    if has("ILmr"):
        out["lli_mpki"] = mpki(totals["ILmr"])
    if has("DLmr", "DLmw"):
        out["lld_mpki"] = mpki(totals["DLmr"] + totals["DLmw"])
    if has("ILmr", "DLmr", "DLmw"):
        ll = totals["ILmr"] + totals["DLmr"] + totals["DLmw"]
        out["ll_mpki"] = mpki(ll)
        out["ll_miss_pct"] = round(100.0 * ll / (ir + data_refs), 4)
    if has("Bc", "Bcm", "Bi", "Bim"):
        miss = totals["Bcm"] + totals["Bim"]
        out["branch_mpki"] = mpki(miss)
        branches = totals["Bc"] + totals["Bi"]
        if branches > 0:
            out["branch_mispredict_pct"] = round(100.0 * miss / branches, 4)
    return out


def compare_simulations(before: SimulationResult, after: SimulationResult) -> list[NormalizedRow]:
    """``after`` as a percentage of ``before`` (baseline = 100%), metric by metric.

    Per-transaction and per-query instructions and the miss rates are normalised, so the
    event counts may differ; the tool, workload and dataset must match (the window and
    the work would differ otherwise)."""
    for what, a, b in (
        ("tool", before.tool, after.tool),
        ("workload", before.workload, after.workload),
        ("tables", before.tables, after.tables),
        ("table size", before.table_size, after.table_size),
        ("random seed", before.rand_seed, after.rand_seed),
    ):
        if a != b:
            raise UsageError(
                f"cannot compare simulations with different {what}: {a} vs {b}",
                hint="simulate both with the same tool, workload, dataset and seed",
            )
    names = [n for n in METRIC_UNITS if n in before.metrics or n in after.metrics]
    rows = normalize(
        {n: before.metrics.get(n) for n in names}, {n: after.metrics.get(n) for n in names}
    )
    return [r.model_copy(update={"unit": METRIC_UNITS.get(r.name, r.unit)}) for r in rows]


def format_simulation(result: SimulationResult, *, top_n: int = 10) -> str:
    """A short markdown summary: the label, totals, metrics and the top functions."""
    m = result.metrics
    lines = [
        f"**{result.label}**",
        "",
        f"{result.tool} (valgrind {result.valgrind_version}), {result.workload}, "
        f"{result.events} events, {result.threads} thread(s), {result.tables} x "
        f"{result.table_size:,} rows, seed {result.rand_seed}; {result.server_version} "
        f"({Path(result.server_binary).name} sha256 {result.server_binary_sha256[:12]})",
        f"window: {result.window}",
        "",
        *markdown.table(
            ["metric", "value"],
            [
                ["instructions (Ir)", f"{result.instructions:,}"],
                ["transactions / queries", f"{result.transactions:,} / {result.queries:,}"],
                *([f"{n} ({unit})", f"{m[n]:,.4g}"] for n, unit in METRIC_UNITS.items() if n in m),
            ],
            "lr",
        ),
    ]
    if result.top_self:
        top = [
            [
                f"`{f.function}`",
                f"{f.self_pct:.2f}",
                f"{f.inclusive_pct:.2f}" if f.inclusive_pct is not None else "-",
            ]
            for f in result.top_self[:top_n]
        ]
        lines += ["", *markdown.table(["function", "self Ir %", "inclusive Ir %"], top, "lrr")]
    return "\n".join(lines) + "\n"
