"""Compare cells of candidate runs against baseline runs: one analysis per cell, Holm over
the family, then the verdicts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Unpack

import numpy as np

from myaccel.bench.stats.descriptive import (
    StatsInputError,
    as_positive_array,
    log_to_pct,
    pooled_log_sd,
    summarize,
)
from myaccel.bench.stats.ranks import (
    MIN_RUNS_PER_ARM,
    POWER,
    MdeMethod,
    PMethod,
    ci_rank,
    mann_whitney_p,
    mde_standardized,
    min_p_value,
)
from myaccel.bench.stats.verdicts import (
    Analysis,
    CellArms,
    RuleOptions,
    Verdict,
    VerdictRules,
    draw_verdict,
)


@dataclass(frozen=True, slots=True)
class CellComparison(CellArms):
    """Candidate vs baseline for one cell (one workload, thread count, ... combination).

    Percentages are changes of the candidate relative to the baseline (``+10`` = the
    candidate's value is 1.10 x the baseline's), whatever ``higher_is_better`` says.
    """

    higher_is_better: bool
    delta_pct: float  # ratio of the medians, minus 1
    hl_delta_pct: float  # Hodges-Lehmann: median of the m*n pairwise ratios, minus 1
    ci_low_pct: float | None  # None when an arm has fewer than MIN_RUNS_PER_ARM runs
    ci_high_pct: float | None
    ci_coverage: float | None  # achieved coverage of [ci_low_pct, ci_high_pct]
    confidence: float  # requested coverage
    ci_method: str
    p_value: float  # two-sided, unadjusted
    p_adjusted: float  # Holm-adjusted across the cells compared together
    p_method: PMethod
    min_p_value: float  # smallest two-sided p this n per arm can produce (no ties)
    family_size: int  # number of cells the Holm adjustment ran over
    alpha: float
    noise_log_sd: float | None  # pooled stdev of log(value): the noise the MDE assumes
    mde_pct: float | None  # minimum detectable effect at 80% power; None: see mde_note
    mde_method: MdeMethod
    mde_note: str
    practical_threshold_pct: float
    equivalence_margin_pct: float  # the +- band a "no change" CI must lie in
    verdict: Verdict
    reason: str  # one line
    advice: tuple[str, ...]  # actionable lines, most important first; may be empty

    @property
    def ci_excludes_zero(self) -> bool:
        if self.ci_low_pct is None or self.ci_high_pct is None:
            return False
        return self.ci_low_pct > 0.0 or self.ci_high_pct < 0.0


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values, in the order given.

    The i-th smallest p (1-based) is multiplied by ``k - i + 1``, capped at 1, and made
    monotone (an adjusted p is never smaller than that of a smaller raw p). Rejecting every
    hypothesis with adjusted p < alpha controls the family-wise error rate at alpha.
    """
    k = len(pvalues)
    for p in pvalues:
        if not 0.0 <= p <= 1.0:  # also rejects NaN
            raise StatsInputError(f"p-value {p!r} is not in [0, 1]")
    order = sorted(range(k), key=lambda i: pvalues[i])
    adjusted = [0.0] * k
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (k - rank) * pvalues[index]))
        adjusted[index] = running
    return adjusted


class CompareOptions(RuleOptions, total=False):
    """The keyword arguments of ``compare_cells``, for ``compare_arms`` to pass on."""

    seed: int


def compare_arms(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    name: str = "",
    **options: Unpack[CompareOptions],
) -> CellComparison:
    """Compare one cell: candidate runs vs baseline runs (a family of one, no Holm penalty).

    ``options`` are those of ``compare_cells``.
    """
    return compare_cells({name: (baseline, candidate)}, **options)[0]


def compare_cells(
    cells: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    seed: int = 0,
    **options: Unpack[RuleOptions],
) -> list[CellComparison]:
    """Compare every cell ``name -> (baseline runs, candidate runs)``, in mapping order.

    The cells form one family: p-values are Holm-adjusted across all of them before the
    verdicts, and the MDE is computed at ``alpha / len(cells)`` (the strictest Holm step) so
    that it stays honest about how much harder significance gets with many cells.
    ``seed`` drives the MDE simulation; ``max_cv_pct`` is the CV above which the advice
    flags the host as noisy; ``max_mde_pct`` is the largest MDE at which a non-result may be
    called "no change". See the package docstring for the methods and verdict rules.
    """
    if not cells:
        raise StatsInputError("no cells to compare")
    rules = VerdictRules(**options)
    alpha, confidence = rules.alpha, rules.confidence
    practical_threshold_pct = rules.practical_threshold_pct
    max_cv_pct, max_mde_pct = rules.max_cv_pct, rules.max_mde_pct
    if not 0.0 < confidence < 1.0:
        raise StatsInputError(f"confidence {confidence!r} is not in (0, 1)")
    if not 0.0 < alpha < 1.0:
        raise StatsInputError(f"alpha {alpha!r} is not in (0, 1)")
    if not practical_threshold_pct >= 0.0:
        raise StatsInputError(f"practical_threshold_pct {practical_threshold_pct!r} is negative")
    if not max_cv_pct > 0.0:
        raise StatsInputError(f"max_cv_pct {max_cv_pct!r} is not positive")
    if not max_mde_pct >= 0.0:
        raise StatsInputError(f"max_mde_pct {max_mde_pct!r} is negative")
    family_size = len(cells)
    alpha_per_test = alpha / family_size
    analyses = [
        _analyze(
            name,
            baseline,
            candidate,
            confidence=confidence,
            alpha_per_test=alpha_per_test,
            family_size=family_size,
            seed=seed,
        )
        for name, (baseline, candidate) in cells.items()
    ]
    adjusted = holm([a.p_value for a in analyses])
    return [
        _conclude(a, rules, p_adjusted=p_adj, family_size=family_size)
        for a, p_adj in zip(analyses, adjusted, strict=True)
    ]


def _analyze(
    name: str,
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    confidence: float,
    alpha_per_test: float,
    family_size: int,
    seed: int,
) -> Analysis:
    label = f"{name}: " if name else ""
    base = as_positive_array(baseline, f"{label}baseline")
    cand = as_positive_array(candidate, f"{label}candidate")
    m, n = int(base.size), int(cand.size)
    log_base, log_cand = np.log(base), np.log(cand)
    diffs = np.sort(np.subtract.outer(log_cand, log_base).ravel())
    enough = m >= MIN_RUNS_PER_ARM and n >= MIN_RUNS_PER_ARM

    ci: tuple[float, float, float] | None = None
    noise: float | None = None
    mde_pct: float | None = None
    mde_method: MdeMethod
    if enough:
        k, coverage = ci_rank(m, n, confidence)
        ci = (log_to_pct(float(diffs[k - 1])), log_to_pct(float(diffs[m * n - k])), coverage)
        noise = pooled_log_sd(log_base, log_cand)

    p_value, p_method = mann_whitney_p(base, cand)
    best_p = min_p_value(m, n)
    if not enough:
        mde_method, mde_note = "not-estimated", f"needs >= {MIN_RUNS_PER_ARM} runs per arm"
    elif best_p >= alpha_per_test:
        mde_method = "unreachable"
        needed = f"{alpha_per_test:.3g}"
        if family_size > 1:
            needed += f" (alpha {alpha_per_test * family_size:g} / {family_size} cells, Holm)"
        mde_note = f"{m}+{n} runs cannot give p < {needed}: best two-sided p is {best_p:.3g}"
    else:
        assert noise is not None
        standardized, mde_method = mde_standardized(m, n, alpha_per_test, POWER, seed)
        mde_pct = log_to_pct(noise * standardized)
        how = "simulated exact test" if mde_method == "simulation" else "normal approximation"
        mde_note = (
            f"80% power at p < {alpha_per_test:.3g} with {m}+{n} runs and noise "
            f"{noise * 100:.1f}% (log-sd), {how}"
        )
    return Analysis(
        name=name,
        baseline=summarize(base.tolist()),
        candidate=summarize(cand.tolist()),
        baseline_values=tuple(base.tolist()),
        candidate_values=tuple(cand.tolist()),
        delta_pct=(float(np.median(cand)) / float(np.median(base)) - 1.0) * 100.0,
        hl_delta_pct=log_to_pct(float(np.median(diffs))),
        ci=ci,
        p_value=p_value,
        p_method=p_method,
        min_p_value=best_p,
        alpha_per_test=alpha_per_test,
        noise_log_sd=noise,
        mde_pct=mde_pct,
        mde_method=mde_method,
        mde_note=mde_note,
    )


def _conclude(
    a: Analysis, rules: VerdictRules, *, p_adjusted: float, family_size: int
) -> CellComparison:
    verdict, reason, advice = draw_verdict(a, rules, p_adjusted=p_adjusted, family_size=family_size)
    return CellComparison(
        **a.carried(),
        higher_is_better=rules.higher_is_better,
        ci_low_pct=a.ci[0] if a.ci else None,
        ci_high_pct=a.ci[1] if a.ci else None,
        ci_coverage=a.ci[2] if a.ci else None,
        confidence=rules.confidence,
        ci_method="exact distribution-free CI for a shift of log(value) (Mann-Whitney/Hodges-Lehmann)",
        p_adjusted=p_adjusted,
        family_size=family_size,
        alpha=rules.alpha,
        practical_threshold_pct=rules.practical_threshold_pct,
        equivalence_margin_pct=rules.margin(a.mde_pct),
        verdict=verdict,
        reason=reason,
        advice=tuple(advice),
    )
