"""Compare two arms of benchmark runs, with verdicts that say what to do next.

The unit of analysis is one whole run (the TPS of one sysbench run, its p95 latency, ...):
``n`` is small (3..20 runs per arm) and run-to-run noise on small VMs is 10-15% CV. So:

- Effects are multiplicative: everything is computed on ``log(value)`` and reported as a
  percent change of the candidate against the baseline. Values must be positive and finite.
- The test is the two-sided Mann-Whitney U test, exact wherever that is affordable
  (``p_method``): ``"exact"`` (``scipy.stats.mannwhitneyu(method="exact")``, no ties),
  ``"exact-permutation"`` (ties: every one of the C(m+n, m) splits of the pooled midranks is
  counted, by dynamic programming rather than enumeration, so it stays exact up to
  ``m + n <= 60``), ``"asymptotic"`` beyond (normal approximation with tie correction).
  An exact rank test has a floor: the smallest two-sided p is ``2 / C(m+n, m)``, i.e. 0.10
  at 3+3 runs, 0.0286 at 4+4, 0.0079 at 5+5. No number of "significant digits" fixes that.
- The confidence interval is the distribution-free interval for a shift of ``log(value)``
  that inverts the same test (Lehmann; Bauer 1972; the interval around the Hodges-Lehmann
  estimator): ``[D(k), D(mn+1-k)]`` of the ``m * n`` sorted pairwise differences
  ``log(candidate_j) - log(baseline_i)``, with ``k`` from the exact null distribution of U.
  It needs no normality and no large-n argument; its coverage is exact for any n under the
  multiplicative shift model (the candidate's run distribution is the baseline's scaled by
  a constant, which is what a tuning change does to TPS to first order). Because U is
  discrete, the achieved coverage is the smallest attainable value >= ``confidence``
  (96.8% for 5+5 at 95%); when even the widest interval ``[D(1), D(mn)]`` cannot reach it
  (3+3: 90.0%, 3+4: 94.3%), that interval is returned and ``ci_coverage`` says what it
  really is. A percentile bootstrap of the ratio of medians was rejected: with 3..7 runs
  the bootstrap distribution of a median takes a handful of values and the interval is
  markedly too narrow (it undercovers); this one does not.
- Multiple cells (workload x threads) are one family: p-values are Holm-adjusted across
  cells (:func:`compare_cells`) before verdicts are drawn.
- ``mde_pct`` is the minimum detectable effect: the smallest multiplicative change that the
  exact test, at this ``n`` per arm and this ``alpha`` (``alpha / cells``, the strictest Holm
  step, when a family is compared), would detect with 80% power, given the observed noise.
  The noise is the pooled standard deviation of ``log(value)`` of the two arms (~ the CV).
  Power is computed for normal noise on the log scale by a seeded simulation of the exact
  test itself (4000 draws of standardized samples, common random numbers: the rejection
  threshold of each draw is an order statistic of its pairwise differences, so the power
  curve is exact for those draws and the MDE is its 80% quantile). That honours the
  discreteness of small-n rank tests, which the usual t/normal formula ignores. Beyond 30x30
  runs the normal formula ``(z[1-a/2] + z[power]) * sigma * sqrt(1/m + 1/n) * sqrt(pi/3)``
  is used (``pi/3``: the Mann-Whitney efficiency loss vs the t-test under normal noise).
  When the test cannot reach ``p < alpha`` at all (3+3 runs), the MDE is ``None`` and
  ``mde_note`` says why. The MDE inherits the uncertainty of a noise estimate from few runs.

Verdicts (``improved``/``regressed`` use ``higher_is_better`` to name the direction):

- ``improved`` / ``regressed``: Holm-adjusted p < alpha, the CI excludes 0 on the side of the
  median delta, and ``|delta_pct| >= practical_threshold_pct``.
- ``no change``: the CI lies within ``+-equivalence_margin_pct`` and either contains 0 or
  lies within the practical threshold. The margin is ``max(practical_threshold_pct,
  mde_pct)`` when the n is adequate, i.e. the MDE exists and is at most ``max_mde_pct``
  (default 10%), else just the practical threshold. So "no change" means equivalence shown,
  or no change as large as a (small enough) MDE; the reason then says that smaller changes
  are not excluded and the advice says how many runs would resolve the threshold. Without
  the cap, 5+5 runs at 12% CV (MDE ~30%) would call a true +10% "no change" 40% of the time.
- ``inconclusive``: anything else, including fewer than 3 runs in an arm. Fewer than 3 runs
  is not an error (an interrupted campaign still gets a report): the p-value is computed,
  the CI and MDE are None, and the advice asks for more runs. Invalid input (an empty arm,
  a value that is not a positive finite number, a bad parameter) raises
  :class:`StatsInputError`, a ``ValueError``.

Everything is deterministic: the only random parts (the MDE simulation, the geometric-mean
bootstrap) use ``numpy.random.default_rng(seed)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from scipy import stats as scipy_stats  # type: ignore[import-untyped]

from myaccel.errors import UsageError

Verdict = Literal["improved", "regressed", "no change", "inconclusive"]
PMethod = Literal["exact", "exact-permutation", "asymptotic"]
MdeMethod = Literal["simulation", "normal-approximation", "unreachable", "not-estimated"]

MIN_RUNS_PER_ARM = 3
RECOMMENDED_RUNS_PER_ARM = 5
DEFAULT_MAX_CV_PCT = 10.0
# "no change" on the strength of the MDE only when the MDE is at most this: a larger MDE
# would let "no change" hide a real gain of that size (at 5+5 runs and 12% CV the MDE is
# ~30%, and a true +10% would be called "no change" about 40% of the time without the cap).
DEFAULT_MAX_MDE_PCT = 10.0
POWER = 0.80

# Exact null distributions (U counts, permutation counts) up to this many runs in total;
# C(60, 30) ~ 1.2e17 still fits the int64 counters of the permutation DP.
EXACT_MAX_TOTAL_RUNS = 60
# The MDE simulation handles up to this many pairwise differences per draw (30 x 30 runs).
_MDE_SIM_MAX_PAIRS = 900
_MDE_SIM_DRAWS = 4000

FloatArray = NDArray[np.float64]


class StatsInputError(UsageError, ValueError):
    """Values or parameters the statistics cannot work with."""

    code = "stats-input"


# ---------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class ArmSummary:
    """Descriptive statistics of one arm (one value per run)."""

    n: int
    median: float
    mean: float
    stdev: float | None  # sample standard deviation (n - 1); None with a single run
    cv_pct: float | None  # stdev / mean in percent; None with a single run or mean <= 0
    min: float
    max: float


@dataclass(frozen=True, slots=True)
class CellComparison:
    """Candidate vs baseline for one cell (one workload, thread count, ... combination).

    Percentages are changes of the candidate relative to the baseline (``+10`` = the
    candidate's value is 1.10 x the baseline's), whatever ``higher_is_better`` says.
    """

    name: str
    baseline: ArmSummary
    candidate: ArmSummary
    baseline_values: tuple[float, ...]
    candidate_values: tuple[float, ...]
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


@dataclass(frozen=True, slots=True)
class GeoMean:
    """Geometric mean over cells of the candidate/baseline ratio of medians."""

    n_cells: int
    delta_pct: float  # geometric-mean ratio minus 1, in percent
    ci_low_pct: float
    ci_high_pct: float
    confidence: float
    higher_is_better: bool
    n_resamples: int
    seed: int
    method: str


# ---------------------------------------------------------------- public functions


def summarize(values: Sequence[float]) -> ArmSummary:
    """n, median, mean, sample stdev, CV, min and max of one arm."""
    array = _as_finite_array(values, "values")
    n = int(array.size)
    mean = float(np.mean(array))
    stdev = float(np.std(array, ddof=1)) if n >= 2 else None
    cv_pct = stdev / mean * 100.0 if stdev is not None and mean > 0.0 else None
    return ArmSummary(
        n=n,
        median=float(np.median(array)),
        mean=mean,
        stdev=stdev,
        cv_pct=cv_pct,
        min=float(np.min(array)),
        max=float(np.max(array)),
    )


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


def compare_arms(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    higher_is_better: bool = True,
    confidence: float = 0.95,
    seed: int = 0,
    alpha: float = 0.05,
    practical_threshold_pct: float = 2.0,
    max_cv_pct: float = DEFAULT_MAX_CV_PCT,
    max_mde_pct: float = DEFAULT_MAX_MDE_PCT,
    name: str = "",
) -> CellComparison:
    """Compare one cell: candidate runs vs baseline runs (a family of one, no Holm penalty).

    ``seed`` drives the MDE simulation; ``max_cv_pct`` is the CV above which the advice
    flags the host as noisy; ``max_mde_pct`` is the largest MDE at which a non-result may be
    called "no change". See the module docstring for the methods and verdict rules.
    """
    return compare_cells(
        {name: (baseline, candidate)},
        higher_is_better=higher_is_better,
        confidence=confidence,
        seed=seed,
        alpha=alpha,
        practical_threshold_pct=practical_threshold_pct,
        max_cv_pct=max_cv_pct,
        max_mde_pct=max_mde_pct,
    )[0]


def compare_cells(
    cells: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    higher_is_better: bool = True,
    confidence: float = 0.95,
    seed: int = 0,
    alpha: float = 0.05,
    practical_threshold_pct: float = 2.0,
    max_cv_pct: float = DEFAULT_MAX_CV_PCT,
    max_mde_pct: float = DEFAULT_MAX_MDE_PCT,
) -> list[CellComparison]:
    """Compare every cell ``name -> (baseline runs, candidate runs)``, in mapping order.

    The cells form one family: p-values are Holm-adjusted across all of them before the
    verdicts, and the MDE is computed at ``alpha / len(cells)`` (the strictest Holm step) so
    that it stays honest about how much harder significance gets with many cells.
    """
    if not cells:
        raise StatsInputError("no cells to compare")
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
        _conclude(
            a,
            p_adjusted=p_adj,
            family_size=family_size,
            alpha=alpha,
            higher_is_better=higher_is_better,
            confidence=confidence,
            practical_threshold_pct=practical_threshold_pct,
            max_cv_pct=max_cv_pct,
            max_mde_pct=max_mde_pct,
        )
        for a, p_adj in zip(analyses, adjusted, strict=True)
    ]


def geomean_ratio(
    comparisons: Sequence[CellComparison],
    *,
    confidence: float = 0.95,
    seed: int = 0,
    n_resamples: int = 10_000,
) -> GeoMean:
    """Geometric mean of the cells' candidate/baseline median ratios, with a bootstrap CI.

    The CI is a seeded percentile bootstrap over runs within cells: each resample redraws
    the runs of every arm of every cell with replacement (cells are fixed, arms independent)
    and recomputes the geometric mean of median ratios. The cells are the fixed set that was
    measured: the CI is about these cells' runs, not about other workloads. Simulated
    coverage of the 95% interval (lognormal runs, 12% CV, 1..12 cells): 92-93% with 3 runs
    per arm in 1-2 cells, 96-99% otherwise. Mixing cells where higher is better with cells
    where lower is better raises.
    """
    if not comparisons:
        raise StatsInputError("no comparisons to average")
    if not 0.0 < confidence < 1.0:
        raise StatsInputError(f"confidence {confidence!r} is not in (0, 1)")
    if n_resamples < 100:
        raise StatsInputError(f"n_resamples {n_resamples} is below 100")
    directions = {c.higher_is_better for c in comparisons}
    if len(directions) != 1:
        raise StatsInputError(
            "cannot average cells where higher is better with cells where lower is better",
            hint="compute one geometric mean per metric direction",
        )
    rng = np.random.default_rng(seed)
    log_ratio_sum = 0.0
    boot_sum = np.zeros(n_resamples)
    for comparison in comparisons:
        base = np.log(np.asarray(comparison.baseline_values, dtype=np.float64))
        cand = np.log(np.asarray(comparison.candidate_values, dtype=np.float64))
        log_ratio_sum += float(np.median(cand) - np.median(base))
        boot_sum += _bootstrap_medians(cand, rng, n_resamples) - _bootstrap_medians(
            base, rng, n_resamples
        )
    k = len(comparisons)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(boot_sum / k, [tail, 1.0 - tail])
    return GeoMean(
        n_cells=k,
        delta_pct=_log_to_pct(log_ratio_sum / k),
        ci_low_pct=_log_to_pct(float(low)),
        ci_high_pct=_log_to_pct(float(high)),
        confidence=confidence,
        higher_is_better=directions.pop(),
        n_resamples=n_resamples,
        seed=seed,
        method="percentile bootstrap over runs within cells",
    )


def min_p_value(m: int, n: int) -> float:
    """Smallest two-sided exact Mann-Whitney p-value for m and n runs (complete separation)."""
    if m < 1 or n < 1:
        raise StatsInputError("each arm needs at least one run")
    return min(1.0, 2.0 / math.comb(m + n, m))


def runs_to_reach(alpha: float) -> int:
    """Smallest n per arm (equal arms) whose exact two-sided p can go below ``alpha``."""
    if not 0.0 < alpha < 1.0:
        raise StatsInputError(f"alpha {alpha!r} is not in (0, 1)")
    n = 1
    while min_p_value(n, n) >= alpha:
        n += 1
    return n


# ---------------------------------------------------------------- analysis of one cell


@dataclass(frozen=True, slots=True)
class _Analysis:
    name: str
    baseline: ArmSummary
    candidate: ArmSummary
    baseline_values: tuple[float, ...]
    candidate_values: tuple[float, ...]
    delta_pct: float
    hl_delta_pct: float
    ci: tuple[float, float, float] | None  # low %, high %, achieved coverage
    p_value: float
    p_method: PMethod
    min_p_value: float
    alpha_per_test: float
    noise_log_sd: float | None
    mde_pct: float | None
    mde_method: MdeMethod
    mde_note: str


def _analyze(
    name: str,
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    confidence: float,
    alpha_per_test: float,
    family_size: int,
    seed: int,
) -> _Analysis:
    label = f"{name}: " if name else ""
    base = _as_positive_array(baseline, f"{label}baseline")
    cand = _as_positive_array(candidate, f"{label}candidate")
    m, n = int(base.size), int(cand.size)
    log_base, log_cand = np.log(base), np.log(cand)
    diffs = np.sort(np.subtract.outer(log_cand, log_base).ravel())
    enough = m >= MIN_RUNS_PER_ARM and n >= MIN_RUNS_PER_ARM

    ci: tuple[float, float, float] | None = None
    noise: float | None = None
    mde_pct: float | None = None
    mde_method: MdeMethod
    if enough:
        k, coverage = _ci_rank(m, n, confidence)
        ci = (_log_to_pct(float(diffs[k - 1])), _log_to_pct(float(diffs[m * n - k])), coverage)
        noise = _pooled_log_sd(log_base, log_cand)

    p_value, p_method = _mann_whitney_p(base, cand)
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
        standardized, mde_method = _mde_standardized(m, n, alpha_per_test, POWER, seed)
        mde_pct = _log_to_pct(noise * standardized)
        how = "simulated exact test" if mde_method == "simulation" else "normal approximation"
        mde_note = (
            f"80% power at p < {alpha_per_test:.3g} with {m}+{n} runs and noise "
            f"{noise * 100:.1f}% (log-sd), {how}"
        )
    return _Analysis(
        name=name,
        baseline=summarize(base.tolist()),
        candidate=summarize(cand.tolist()),
        baseline_values=tuple(base.tolist()),
        candidate_values=tuple(cand.tolist()),
        delta_pct=(float(np.median(cand)) / float(np.median(base)) - 1.0) * 100.0,
        hl_delta_pct=_log_to_pct(float(np.median(diffs))),
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
    a: _Analysis,
    *,
    p_adjusted: float,
    family_size: int,
    alpha: float,
    higher_is_better: bool,
    confidence: float,
    practical_threshold_pct: float,
    max_cv_pct: float,
    max_mde_pct: float,
) -> CellComparison:
    threshold = practical_threshold_pct
    adequate = a.mde_pct is not None and a.mde_pct <= max_mde_pct
    margin = max(threshold, a.mde_pct) if adequate and a.mde_pct is not None else threshold
    verdict, reason, advice = _verdict(
        a,
        p_adjusted=p_adjusted,
        family_size=family_size,
        alpha=alpha,
        higher_is_better=higher_is_better,
        confidence=confidence,
        threshold=threshold,
        margin=margin,
        max_cv_pct=max_cv_pct,
        max_mde_pct=max_mde_pct,
    )
    return CellComparison(
        name=a.name,
        baseline=a.baseline,
        candidate=a.candidate,
        baseline_values=a.baseline_values,
        candidate_values=a.candidate_values,
        higher_is_better=higher_is_better,
        delta_pct=a.delta_pct,
        hl_delta_pct=a.hl_delta_pct,
        ci_low_pct=a.ci[0] if a.ci else None,
        ci_high_pct=a.ci[1] if a.ci else None,
        ci_coverage=a.ci[2] if a.ci else None,
        confidence=confidence,
        ci_method="exact distribution-free CI for a shift of log(value) (Mann-Whitney/Hodges-Lehmann)",
        p_value=a.p_value,
        p_adjusted=p_adjusted,
        p_method=a.p_method,
        min_p_value=a.min_p_value,
        family_size=family_size,
        alpha=alpha,
        noise_log_sd=a.noise_log_sd,
        mde_pct=a.mde_pct,
        mde_method=a.mde_method,
        mde_note=a.mde_note,
        practical_threshold_pct=threshold,
        equivalence_margin_pct=margin,
        verdict=verdict,
        reason=reason,
        advice=tuple(advice),
    )


def _verdict(
    a: _Analysis,
    *,
    p_adjusted: float,
    family_size: int,
    alpha: float,
    higher_is_better: bool,
    confidence: float,
    threshold: float,
    margin: float,
    max_cv_pct: float,
    max_mde_pct: float,
) -> tuple[Verdict, str, list[str]]:
    m, n = a.baseline.n, a.candidate.n
    noise_advice = _noise_advice(a.baseline, a.candidate, max_cv_pct)
    holm_note = f", Holm over {family_size} cells" if family_size > 1 else ""
    p_text = f"p={_fmt_p(a.p_value)} ({a.p_method}{holm_note}"
    p_text += f": {_fmt_p(p_adjusted)})" if family_size > 1 else ")"
    best_n = max(RECOMMENDED_RUNS_PER_ARM, runs_to_reach(a.alpha_per_test))
    more_runs = (
        f"run more repetitions (n={best_n} per arm reaches "
        f"p={_fmt_p(min_p_value(best_n, best_n))} at best)"
    )

    if a.ci is None:
        return (
            "inconclusive",
            f"too few runs: baseline n={m}, candidate n={n}; need >= {MIN_RUNS_PER_ARM} per arm",
            [more_runs, *noise_advice],
        )

    low, high, coverage = a.ci
    delta = a.delta_pct
    ci_text = f"{_ci_label(coverage, confidence, m, n)}: {low:+.1f}% to {high:+.1f}%"
    head = f"{delta:+.1f}% [{ci_text}], {p_text}"
    significant = p_adjusted < alpha
    excludes_zero = low > 0.0 or high < 0.0
    consistent = (low > 0.0 and delta > 0.0) or (high < 0.0 and delta < 0.0)
    large = abs(delta) >= threshold

    if significant and excludes_zero and consistent and large:
        better = (delta > 0.0) == higher_is_better
        return (
            "improved" if better else "regressed",
            f"{head} < {alpha:g}; |delta| >= {threshold:g}%",
            noise_advice,
        )

    within_threshold = -threshold <= low and high <= threshold
    within_margin = -margin <= low and high <= margin
    if within_margin and (not excludes_zero or within_threshold):
        if within_threshold:
            return (
                "no change",
                f"{head}: the CI lies within the +-{threshold:g}% practical threshold",
                noise_advice,
            )
        return (
            "no change",
            f"{head}: no change beyond +-{margin:.1f}% (the MDE at {m}+{n} runs); "
            f"smaller changes are not excluded",
            [_runs_advice(a, threshold), *noise_advice],
        )

    advice: list[str] = []
    if a.mde_pct is None:
        reason = f"{head}: {a.mde_note}"
        advice.append(more_runs)
    elif significant and excludes_zero and consistent:
        reason = (
            f"{head}: significant, but below the {threshold:g}% practical threshold "
            f"and the CI reaches beyond it"
        )
        advice.append(
            f"lower practical_threshold_pct if a {abs(delta):.1f}% change matters; "
            + _runs_advice(a, threshold)
        )
    elif excludes_zero and consistent and large and not significant:
        reason = f"{head}: the CI excludes 0 but p is not < {alpha:g}"
        if family_size > 1:
            reason += f" after Holm over {family_size} cells"
        advice.append(_runs_advice(a, abs(delta)))
    elif significant and not consistent:
        reason = f"{head}: the median delta and the CI disagree (skewed or outlying runs)"
        advice.append("check the runs for outliers (a disturbed run, a cold cache)")
        advice.append(_runs_advice(a, max(threshold, abs(delta))))
    elif a.mde_pct > max_mde_pct and -a.mde_pct <= low and high <= a.mde_pct:
        reason = (
            f"{head}: only changes beyond +-{a.mde_pct:.1f}% (the MDE at {m}+{n} runs) are "
            f"excluded, more than max_mde_pct {max_mde_pct:g}%"
        )
        advice.append(_runs_advice(a, max(threshold, max_mde_pct)))
    else:
        reason = f"{head}: the CI is wider than the +-{margin:.1f}% equivalence margin"
        advice.append(_runs_advice(a, max(threshold, abs(delta))))
    return "inconclusive", reason, [*advice, *noise_advice]


def _runs_advice(a: _Analysis, effect_pct: float) -> str:
    """'run about N per arm to resolve X%' for the observed noise."""
    effect_pct = max(effect_pct, 0.1)
    noise = a.noise_log_sd or 0.0
    needed = _runs_needed(noise, effect_pct, a.alpha_per_test, POWER)
    have = min(a.baseline.n, a.candidate.n)
    if needed <= have:  # the formula is optimistic here (noise estimated from few runs)
        needed = have + max(2, have // 2)
    text = f"run ~{needed} repetitions per arm to resolve a {effect_pct:.1f}% change"
    if noise > 0.0:
        text += f" at this noise ({noise * 100:.1f}%)"
    if needed > 50:
        text += ": reduce the noise first"
    return text


def _noise_advice(baseline: ArmSummary, candidate: ArmSummary, max_cv_pct: float) -> list[str]:
    noisy = [
        f"{label} CV {arm.cv_pct:.0f}%"
        for label, arm in (("baseline", baseline), ("candidate", candidate))
        if arm.cv_pct is not None and arm.cv_pct > max_cv_pct
    ]
    if not noisy:
        return []
    return [
        f"host noisy: {', '.join(noisy)} > {max_cv_pct:g}%: quiet the machine (stop "
        "background load, fix the CPU frequency), lengthen the runs, and keep the client "
        "placement identical in both arms"
    ]


# ---------------------------------------------------------------- building blocks


def _as_finite_array(values: Sequence[float], what: str) -> FloatArray:
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise StatsInputError(f"{what} are not numbers: {exc}") from exc
    if array.ndim != 1 or array.size == 0:
        raise StatsInputError(f"{what}: need a non-empty flat list of numbers")
    if not np.all(np.isfinite(array)):
        raise StatsInputError(f"{what}: contains NaN or infinity")
    return array


def _as_positive_array(values: Sequence[float], what: str) -> FloatArray:
    array = _as_finite_array(values, what)
    if np.any(array <= 0.0):
        raise StatsInputError(
            f"{what}: values must be positive (ratios are compared)",
            hint="drop failed runs (0 TPS) before comparing; they are invalid, not slow",
        )
    return array


def _log_to_pct(log_ratio: float) -> float:
    return math.expm1(log_ratio) * 100.0


def _fmt_p(p: float) -> str:
    if p >= 0.1:
        return f"{p:.2f}"
    return f"{p:.4f}" if p >= 0.001 else f"{p:.1e}"


def _ci_label(coverage: float, confidence: float, m: int, n: int) -> str:
    if coverage >= confidence - 1e-12:
        return f"{confidence * 100:g}% CI"
    return f"{coverage * 100:.1f}% CI, the most {m}+{n} runs allow"


def _pooled_log_sd(log_base: FloatArray, log_cand: FloatArray) -> float:
    m, n = log_base.size, log_cand.size
    ss = float(np.var(log_base, ddof=1)) * (m - 1) + float(np.var(log_cand, ddof=1)) * (n - 1)
    return math.sqrt(ss / (m + n - 2))


def _bootstrap_medians(values: FloatArray, rng: np.random.Generator, resamples: int) -> FloatArray:
    index = rng.integers(0, values.size, size=(resamples, values.size))
    return np.asarray(np.median(values[index], axis=1), dtype=np.float64)


@lru_cache(maxsize=512)
def _u_counts(m: int, n: int) -> tuple[int, ...]:
    """Number of the C(m+n, m) arrangements with U = 0..m*n (no ties).

    These are the coefficients of the Gaussian binomial [m+n choose m](q), built as the
    product over i = 1..m of (1 - q^(n+i)) / (1 - q^i); every partial product is an integer
    polynomial, so plain integer arithmetic is exact.
    """
    if m > n:
        m, n = n, m
    poly = [1]
    for i in range(1, m + 1):
        grown = [*poly, *([0] * (n + i))]
        for j in range(len(grown) - 1, n + i - 1, -1):  # multiply by (1 - q^(n+i))
            grown[j] -= grown[j - n - i]
        for j in range(i, len(grown)):  # divide by (1 - q^i)
            grown[j] += grown[j - i]
        poly = grown[: i * n + 1]
    return tuple(poly)


def _ci_rank(m: int, n: int, confidence: float) -> tuple[int, float]:
    """Order statistic k of the CI [D(k), D(mn+1-k)] and its achieved coverage."""
    pairs = m * n
    tail = (1.0 - confidence) / 2.0
    if m + n <= EXACT_MAX_TOTAL_RUNS:
        counts = _u_counts(m, n)
        total = math.comb(m + n, m)
        k, cumulative = 1, counts[0]
        # P(U <= k-1) <= tail keeps coverage 1 - 2 P(U <= k-1) >= confidence.
        while 2 * k < pairs and cumulative + counts[k] <= tail * total:
            cumulative += counts[k]
            k += 1
        return k, 1.0 - 2.0 * cumulative / total
    sd = math.sqrt(pairs * (m + n + 1) / 12.0)
    z = NormalDist().inv_cdf(1.0 - tail)
    k = max(1, min(pairs // 2, math.floor(pairs / 2.0 - z * sd)))
    coverage = 1.0 - 2.0 * NormalDist().cdf((k - 0.5 - pairs / 2.0) / sd)
    return k, coverage


def _mann_whitney_p(base: FloatArray, cand: FloatArray) -> tuple[float, PMethod]:
    pooled = np.concatenate([base, cand])
    ties = np.unique(pooled).size < pooled.size
    if pooled.size <= EXACT_MAX_TOTAL_RUNS:
        if not ties:
            result = scipy_stats.mannwhitneyu(cand, base, alternative="two-sided", method="exact")
            return float(result.pvalue), "exact"
        return _permutation_p(base, cand), "exact-permutation"
    result = scipy_stats.mannwhitneyu(cand, base, alternative="two-sided", method="asymptotic")
    return float(result.pvalue), "asymptotic"


def _permutation_p(base: FloatArray, cand: FloatArray) -> float:
    """Exact two-sided permutation p of the rank-sum statistic with midranks (ties).

    Counts, over all C(m+n, m) ways to label m of the pooled runs "baseline", how often the
    baseline's midrank sum lies at least as far from its mean as observed. Midranks are
    halves, so doubled ranks are integers and the count is an exact subset-sum DP.
    """
    pooled = np.concatenate([base, cand])
    m, total_n = base.size, pooled.size
    ranks2 = np.rint(2.0 * scipy_stats.rankdata(pooled)).astype(np.int64)
    top = int(ranks2.sum())
    ways = np.zeros((m + 1, top + 1), dtype=np.int64)
    ways[0, 0] = 1
    for weight in ranks2.tolist():
        ways[1:, weight:] = ways[1:, weight:] + ways[:-1, : top + 1 - weight]
    observed = int(ranks2[:m].sum())
    center = m * (total_n + 1)  # expected doubled rank sum
    sums = np.arange(top + 1)
    extreme = np.abs(sums - center) >= abs(observed - center)
    hits = int(ways[m][extreme].sum())
    return min(1.0, hits / math.comb(total_n, m))


@lru_cache(maxsize=256)
def _mde_standardized(
    m: int, n: int, alpha: float, power: float, seed: int
) -> tuple[float, MdeMethod]:
    """Shift (in noise standard deviations) the exact test detects with ``power``.

    The caller has checked that ``min_p_value(m, n) < alpha`` (otherwise nothing is detectable).
    """
    if m + n <= EXACT_MAX_TOTAL_RUNS and m * n <= _MDE_SIM_MAX_PAIRS:
        counts = _u_counts(m, n)
        total = math.comb(m + n, m)
        # Critical U: smallest c with P(U >= c) < alpha / 2, i.e. two-sided p < alpha.
        c, upper = m * n, counts[m * n]
        while c > 0 and upper + counts[c - 1] < alpha / 2.0 * total:
            c -= 1
            upper += counts[c]
        rng = np.random.default_rng(seed)
        base = rng.standard_normal((_MDE_SIM_DRAWS, m))
        cand = rng.standard_normal((_MDE_SIM_DRAWS, n))
        # A shift d rejects when U(d) = #{base_i - cand_j < d} >= c: d above the c-th
        # smallest difference. Power(d) is the share of draws whose threshold is below d.
        diffs = (base[:, :, None] - cand[:, None, :]).reshape(_MDE_SIM_DRAWS, m * n)
        thresholds = np.partition(diffs, c - 1, axis=1)[:, c - 1]
        return float(np.quantile(thresholds, power)), "simulation"
    z = NormalDist().inv_cdf(1.0 - alpha / 2.0) + NormalDist().inv_cdf(power)
    return z * math.sqrt(1.0 / m + 1.0 / n) * math.sqrt(math.pi / 3.0), "normal-approximation"


def _runs_needed(noise_log_sd: float, effect_pct: float, alpha: float, power: float) -> int:
    """Runs per arm (equal arms) for ``power`` against ``effect_pct``: normal formula with the
    Mann-Whitney efficiency factor pi/3, and never below what the exact test can reach."""
    floor = max(MIN_RUNS_PER_ARM, runs_to_reach(alpha))
    shift = math.log1p(effect_pct / 100.0)
    z = NormalDist().inv_cdf(1.0 - alpha / 2.0) + NormalDist().inv_cdf(power)
    needed = 2.0 * (z * noise_log_sd / shift) ** 2 * (math.pi / 3.0)
    return max(floor, math.ceil(needed))
