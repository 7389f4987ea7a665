"""Compare two sets of runs cell by cell (workload x threads) with honest statistics, and
format the article-style table (baseline, tuned, gain %) with CIs and verdicts."""

from __future__ import annotations

import datetime as dt
import math
import statistics
from collections.abc import Sequence
from pathlib import Path

from pydantic import Field

from myaccel import markdown
from myaccel.artifacts import artifact
from myaccel.bench import stats
from myaccel.bench.quiet import disturbed_banner
from myaccel.bench.run_record import QuietGate, RunRecord
from myaccel.bench.work_counters import (
    OTHERS_SHARE_WARN,
    OTHERS_WARNING_PREFIX,
    CounterMedians,
    counter_differences,
)
from myaccel.errors import UsageError
from myaccel.model import Frozen, same_named

COMPARISON_SCHEMA = "myaccel.comparison/1"


class CellResult(Frozen):
    workload: str
    threads: int
    n_baseline: int
    n_candidate: int
    invalid_runs: int
    baseline_tps_median: float | None
    candidate_tps_median: float | None
    baseline_cv_pct: float | None
    candidate_cv_pct: float | None
    delta_pct: float | None
    ci_low_pct: float | None
    ci_high_pct: float | None
    ci_coverage: float | None
    p_value: float | None
    p_adjusted: float | None
    p_method: str | None
    mde_pct: float | None
    verdict: str
    reason: str
    advice: list[str] = Field(default_factory=list)
    baseline_p95_ms_median: float | None = None
    candidate_p95_ms_median: float | None = None
    baseline_tps: list[float] = Field(default_factory=list)
    candidate_tps: list[float] = Field(default_factory=list)
    per_txn: dict[str, CounterMedians] = Field(default_factory=dict)
    # what gave the verdict: None = TPS; "instructions" = the instruction count of a
    # CPU-bound cell whose TPS was inconclusive (``bench/instructions.py``)
    decided_by: str | None = None


class InstructionFigure(Frozen):
    """Instructions per transaction of each arm's server for one CPU-bound workload
    (``bench/instructions.py``): a count, not a timing; fewer is ``improved``."""

    workload: str
    events: int  # transactions per counted run
    tool: str
    baseline: list[float]  # instructions per transaction, one per repeat
    candidate: list[float]
    delta_pct: float
    spread_pct: float  # the largest difference between the repeats of one arm
    verdict: str
    reason: str


# The CellResult fields a cell's CellComparison gives under the same name.
_SAME_NAMED = (
    "delta_pct",
    "ci_low_pct",
    "ci_high_pct",
    "ci_coverage",
    "p_value",
    "p_adjusted",
    "p_method",
    "mde_pct",
    "verdict",
    "reason",
)


@artifact(COMPARISON_SCHEMA)
class Comparison(Frozen):
    schema_version: str = COMPARISON_SCHEMA
    created_at: str
    metric: str = "tps"
    baseline_label: str
    candidate_label: str
    baseline_runs: list[str]
    candidate_runs: list[str]
    cells: list[CellResult]
    geomean_delta_pct: float | None = None
    geomean_ci_low_pct: float | None = None
    geomean_ci_high_pct: float | None = None
    warnings: list[str] = Field(default_factory=list)
    forced: bool = False
    # the first thing every rendering says, when the figures are disturbed: the host busy
    # before the first run (the quiet gate) or most runs disturbed (``quiet.py``)
    disturbed: str | None = None
    # ``--instructions``: the count per transaction of CPU-bound workloads, per arm
    instructions: list[InstructionFigure] = Field(default_factory=list)


def _mismatches(a: Sequence[RunRecord], b: Sequence[RunRecord]) -> list[str]:
    def one(rs: Sequence[RunRecord], key: str) -> set[str]:
        out: set[str] = set()
        for r in rs:
            if key == "host":
                out.add(str(r.host.get("hostname")))
            elif key == "server":
                out.add(f"{r.server.get('flavor')} {r.server.get('version')}")
            elif key == "dataset":
                d = r.dataset
                out.add(f"{d.get('tables')} x {d.get('table_size')} (scale {d.get('scale')})")
        return out

    probs = []
    for key, what in (("host", "hosts"), ("server", "server versions"), ("dataset", "datasets")):
        sa, sb = one(a, key), one(b, key)
        if sa != sb or len(sa) > 1:
            probs.append(f"different {what}: {', '.join(sorted(sa))} vs {', '.join(sorted(sb))}")
    return probs


def compare_runs(
    baseline: Sequence[RunRecord],
    candidate: Sequence[RunRecord],
    *,
    baseline_label: str = "baseline",
    candidate_label: str = "candidate",
    force: bool = False,
    seed: int = 0,
    allow_server_difference: bool = False,
    gates: Sequence[QuietGate] = (),
) -> Comparison:
    """The cells' statistics and verdicts; ``gates``: what the quiet gate measured before
    the runs (the comparison then leads with a loud host, ``Comparison.disturbed``)."""
    probs = _mismatches(baseline, candidate)
    if allow_server_difference:
        probs = [p for p in probs if not p.startswith("different server versions")]
    if probs and not force:
        raise UsageError(
            "refusing to compare: " + "; ".join(probs),
            hint="compare runs of one host, server version and dataset, or pass --force to do it anyway",
        )
    warnings = [f"forced: {p}" for p in probs]
    shared = {r.run_id for r in baseline} & {r.run_id for r in candidate}
    if shared:
        warnings.append(
            f"both sides hold the same {len(shared)} run(s) (one directory compared with itself?): "
            "identical data, not a measurement of any difference"
        )
    cells: dict[tuple[str, int], tuple[list[RunRecord], list[RunRecord]]] = {}
    for r in baseline:
        cells.setdefault((r.workload, r.threads), ([], []))[0].append(r)
    for r in candidate:
        cells.setdefault((r.workload, r.threads), ([], []))[1].append(r)

    def ok(rs: list[RunRecord]) -> list[RunRecord]:
        return [r for r in rs if r.validity.valid and r.summary is not None and r.summary.tps > 0]

    usable: dict[str, tuple[list[float], list[float]]] = {}
    for (w, t), (ra, rb) in cells.items():
        va = [r.summary.tps for r in ok(ra) if r.summary]
        vb = [r.summary.tps for r in ok(rb) if r.summary]
        if va and vb:
            usable[f"{w}@{t}"] = (va, vb)
    results = stats.compare_cells(usable, seed=seed) if usable else []
    by_name = {c.name: c for c in results}

    out_cells: list[CellResult] = []
    for (w, t), (ra, rb) in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        oa, ob = ok(ra), ok(rb)
        invalid = len(ra) + len(rb) - len(oa) - len(ob)
        p95a = [r.summary.latency_ms_p95 for r in oa if r.summary and r.summary.latency_ms_p95]
        p95b = [r.summary.latency_ms_p95 for r in ob if r.summary and r.summary.latency_ms_p95]
        c = by_name.get(f"{w}@{t}")
        if c is None:
            out_cells.append(
                CellResult(
                    workload=w,
                    threads=t,
                    n_baseline=len(oa),
                    n_candidate=len(ob),
                    invalid_runs=invalid,
                    baseline_tps_median=statistics.median([r.summary.tps for r in oa if r.summary])
                    if oa
                    else None,
                    candidate_tps_median=statistics.median([r.summary.tps for r in ob if r.summary])
                    if ob
                    else None,
                    baseline_cv_pct=None,
                    candidate_cv_pct=None,
                    delta_pct=None,
                    ci_low_pct=None,
                    ci_high_pct=None,
                    ci_coverage=None,
                    p_value=None,
                    p_adjusted=None,
                    p_method=None,
                    mde_pct=None,
                    verdict="inconclusive",
                    reason="an arm has no valid run in this cell",
                    advice=["see the runs' validity reasons; rerun the cell"],
                )
            )
            continue
        out_cells.append(
            CellResult(
                workload=w,
                threads=t,
                n_baseline=c.baseline.n,
                n_candidate=c.candidate.n,
                invalid_runs=invalid,
                baseline_tps_median=c.baseline.median,
                candidate_tps_median=c.candidate.median,
                baseline_cv_pct=c.baseline.cv_pct,
                candidate_cv_pct=c.candidate.cv_pct,
                **same_named(c, _SAME_NAMED),
                advice=list(c.advice),
                baseline_p95_ms_median=statistics.median(p95a) if p95a else None,
                candidate_p95_ms_median=statistics.median(p95b) if p95b else None,
                baseline_tps=list(c.baseline_values),
                candidate_tps=list(c.candidate_values),
                per_txn=_per_txn_medians(oa, ob),
            )
        )
    geo: stats.GeoMean | None = None
    if results:
        try:
            geo = stats.geomean_ratio(results, seed=seed)
        except (ValueError, UsageError):
            geo = None
    if disturbed := _disturbed(baseline, candidate, baseline_label, candidate_label):
        warnings.append(disturbed)
    if invalid_total := sum(c.invalid_runs for c in out_cells):
        warnings.append(
            f"{invalid_total} run(s) were invalid and left out (see their validity reasons)"
        )
    return Comparison(
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        baseline_label=baseline_label,
        candidate_label=candidate_label,
        baseline_runs=[r.run_id for r in baseline],
        candidate_runs=[r.run_id for r in candidate],
        cells=out_cells,
        geomean_delta_pct=geo.delta_pct if geo else None,
        geomean_ci_low_pct=geo.ci_low_pct if geo else None,
        geomean_ci_high_pct=geo.ci_high_pct if geo else None,
        warnings=warnings,
        forced=bool(probs),
        disturbed=disturbed_banner(gates, [*baseline, *candidate]),
    )


def _disturbed(
    a: Sequence[RunRecord], b: Sequence[RunRecord], label_a: str, label_b: str
) -> str | None:
    """How many valid runs of each arm other processes shared the CPU with, when any did
    (an invalid run is left out of the comparison, and of this count)."""
    a = [r for r in a if r.validity.valid]
    b = [r for r in b if r.validity.valid]

    def n(rs: Sequence[RunRecord]) -> int:
        return sum(
            any(w.startswith(OTHERS_WARNING_PREFIX) for w in r.validity.warnings) for r in rs
        )

    na, nb = n(a), n(b)
    if not na and not nb:
        return None
    return (
        f"other processes used more than {OTHERS_SHARE_WARN:.0%} of the CPU during "
        f"{na} of {len(a)} valid {label_a} run(s) and {nb} of {len(b)} valid {label_b} run(s): "
        "a disturbance that falls on one arm more than the other biases the verdict; "
        "measure on a quiet host"
    )


def _per_txn_medians(a: Sequence[RunRecord], b: Sequence[RunRecord]) -> dict[str, CounterMedians]:
    """The median of each per-transaction figure both arms' valid runs recorded."""
    keys = set.intersection(*(set(r.per_txn) for r in [*a, *b])) if a and b else set()
    return {
        k: CounterMedians(
            baseline=statistics.median(r.per_txn[k] for r in a),
            candidate=statistics.median(r.per_txn[k] for r in b),
        )
        for k in sorted(keys)
    }


def _f(v: float | None, fmt: str = ",.1f") -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:+.1f}%"


def format_markdown(cmp: Comparison) -> str:
    header = ["workload", "threads", f"{cmp.baseline_label} TPS", f"{cmp.candidate_label} TPS"]
    header += ["gain %", "95% CI", "p (Holm)", "n", "verdict"]
    rows = [
        [
            c.workload,
            c.threads,
            _f(c.baseline_tps_median),
            _f(c.candidate_tps_median),
            _pct(c.delta_pct),
            "-" if c.ci_low_pct is None else f"[{c.ci_low_pct:+.1f}%, {c.ci_high_pct:+.1f}%]",
            "-" if c.p_adjusted is None else f"{c.p_adjusted:.3g}",
            f"{c.n_baseline}+{c.n_candidate}",
            c.verdict + (" (instructions)" if c.decided_by == "instructions" else ""),
        ]
        for c in cmp.cells
    ]
    lines = markdown.table(header, rows, "lrrrrlrrl")
    if cmp.disturbed:
        lines = [f"**Disturbed**: {cmp.disturbed}.", "", *lines]
    if cmp.geomean_delta_pct is not None:
        lines.append("")
        lines.append(
            f"Geometric mean over {len(cmp.cells)} cell(s): {cmp.geomean_delta_pct:+.1f}% "
            f"(95% CI {cmp.geomean_ci_low_pct:+.1f}% to {cmp.geomean_ci_high_pct:+.1f}%)."
        )
    notes = []
    for c in cmp.cells:
        notes.append(
            f"- {c.workload} @ {c.threads}: {c.reason}"
            + (f" Next: {c.advice[0]}" if c.advice else "")
        )
        if differ := counter_differences(c.per_txn):
            notes.append(
                f"- {c.workload} @ {c.threads}, per transaction ({cmp.baseline_label} -> "
                f"{cmp.candidate_label}, medians): {differ}"
            )
    if notes:
        lines += ["", *notes]
    if cmp.instructions:
        lines += ["", *instruction_lines(cmp), ""]
    for w in cmp.warnings:
        lines.append(f"- warning: {w}")
    return "\n".join(lines) + "\n"


def instruction_lines(cmp: Comparison) -> list[str]:
    """The instruction figures as a table (markdown lines)."""
    rows = [
        [
            f.workload,
            f"{sum(f.baseline) / len(f.baseline):,.0f}",
            f"{sum(f.candidate) / len(f.candidate):,.0f}",
            f"{f.delta_pct:+.2f}%",
            f"{f.spread_pct:.2f}%",
            f"{f.events} x {len(f.baseline)}+{len(f.candidate)}",
            f.verdict,
        ]
        for f in cmp.instructions
    ]
    tool = cmp.instructions[0].tool
    return [
        f"Instructions per transaction of the server ({tool}; a count, not a timing):",
        "",
        *markdown.table(
            [
                "workload",
                cmp.baseline_label,
                cmp.candidate_label,
                "change",
                "repeat spread",
                "transactions x runs",
                "verdict",
            ],
            rows,
            "lrrrrrl",
        ),
    ]


def compare_paths(baseline: Path, candidate: Path | None, *, force: bool = False) -> Comparison:
    """``myaccel compare``: the runs of two result directories (or files), A then B and
    labelled by their names, or of one ``ab`` campaign's two arms."""
    from myaccel.bench.campaign import load_runs

    a = load_runs(baseline)
    if candidate is None:
        base = [r for r in a if r.arm == "baseline"]
        cand = [r for r in a if r.arm == "candidate"]
        if not base or not cand:
            raise UsageError(
                f"'{baseline}' is not an A/B campaign with two arms",
                hint="pass two result directories: myaccel compare BASELINE_DIR CANDIDATE_DIR",
            )
        labels = ("baseline", "candidate")
    else:
        base, cand = a, load_runs(candidate)
        labels = (baseline.name or "A", candidate.name or "B")
    return compare_runs(
        base, cand, baseline_label=labels[0], candidate_label=labels[1], force=force
    )
