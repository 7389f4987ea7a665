"""The exact Mann-Whitney machinery: p-values, the null distribution of U, the CI rank, the
minimum detectable effect.

scipy serves where it can: ``scipy.stats.mannwhitneyu(method="exact")`` gives the p-value
without ties (5 vs 5 separated: 2/252 = 0.0079; 4 vs 4: 2/70 = 0.0286) and
``method="asymptotic"`` beyond ``EXACT_MAX_TOTAL_RUNS``. Hand-written, because scipy 1.17
has no public equivalent:

- ``u_counts``: the exact null distribution of U as counts. scipy computes it inside
  ``mannwhitneyu`` but exposes only the p-value of an observed sample, while the
  Hodges-Lehmann interval needs the rank ``k`` and the achieved coverage (``ci_rank``), and
  the MDE the critical U (``mde_standardized``), both read off the distribution itself.
- ``permutation_p``: the exact p-value with ties. scipy's ``method="exact"`` ignores ties,
  and ``method=PermutationMethod()`` enumerates (or samples) the C(m+n, m) relabelings,
  which is not exact beyond its resample budget; the subset-sum count here is exact and
  fast up to ``m + n = 60``.

tests/unit/test_stats.py checks both against scipy (no ties) and brute force (ties).
scipy is imported where it is used: it takes about a second, which `myaccel ab --help`
must not pay.
"""

from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist
from typing import Literal

import numpy as np

from myaccel.bench.stats.descriptive import FloatArray, StatsInputError

PMethod = Literal["exact", "exact-permutation", "asymptotic"]
MdeMethod = Literal["simulation", "normal-approximation", "unreachable", "not-estimated"]

MIN_RUNS_PER_ARM = 3
POWER = 0.80

# Exact null distributions (U counts, permutation counts) up to this many runs in total;
# C(60, 30) ~ 1.2e17 still fits the int64 counters of the permutation DP.
EXACT_MAX_TOTAL_RUNS = 60
# The MDE simulation handles up to this many pairwise differences per draw (30 x 30 runs).
_MDE_SIM_MAX_PAIRS = 900
_MDE_SIM_DRAWS = 4000


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


@lru_cache(maxsize=512)
def u_counts(m: int, n: int) -> tuple[int, ...]:
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


def ci_rank(m: int, n: int, confidence: float) -> tuple[int, float]:
    """Order statistic k of the CI [D(k), D(mn+1-k)] and its achieved coverage."""
    pairs = m * n
    tail = (1.0 - confidence) / 2.0
    if m + n <= EXACT_MAX_TOTAL_RUNS:
        counts = u_counts(m, n)
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


def mann_whitney_p(base: FloatArray, cand: FloatArray) -> tuple[float, PMethod]:
    from scipy import stats as scipy_stats  # type: ignore[import-untyped]

    pooled = np.concatenate([base, cand])
    ties = np.unique(pooled).size < pooled.size
    if pooled.size <= EXACT_MAX_TOTAL_RUNS:
        if not ties:
            result = scipy_stats.mannwhitneyu(cand, base, alternative="two-sided", method="exact")
            return float(result.pvalue), "exact"
        return permutation_p(base, cand), "exact-permutation"
    result = scipy_stats.mannwhitneyu(cand, base, alternative="two-sided", method="asymptotic")
    return float(result.pvalue), "asymptotic"


def permutation_p(base: FloatArray, cand: FloatArray) -> float:
    """Exact two-sided permutation p of the rank-sum statistic with midranks (ties).

    Counts, over all C(m+n, m) ways to label m of the pooled runs "baseline", how often the
    baseline's midrank sum lies at least as far from its mean as observed. Midranks are
    halves, so doubled ranks are integers and the count is an exact subset-sum DP.
    """
    from scipy import stats as scipy_stats

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
def mde_standardized(
    m: int, n: int, alpha: float, power: float, seed: int
) -> tuple[float, MdeMethod]:
    """Shift (in noise standard deviations) the exact test detects with ``power``.

    The caller has checked that ``min_p_value(m, n) < alpha`` (otherwise nothing is detectable).
    """
    if m + n <= EXACT_MAX_TOTAL_RUNS and m * n <= _MDE_SIM_MAX_PAIRS:
        counts = u_counts(m, n)
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


def runs_needed(noise_log_sd: float, effect_pct: float, alpha: float, power: float) -> int:
    """Runs per arm (equal arms) for ``power`` against ``effect_pct``: normal formula with the
    Mann-Whitney efficiency factor pi/3, and never below what the exact test can reach."""
    floor = max(MIN_RUNS_PER_ARM, runs_to_reach(alpha))
    shift = math.log1p(effect_pct / 100.0)
    z = NormalDist().inv_cdf(1.0 - alpha / 2.0) + NormalDist().inv_cdf(power)
    needed = 2.0 * (z * noise_log_sd / shift) ** 2 * (math.pi / 3.0)
    return max(floor, math.ceil(needed))
