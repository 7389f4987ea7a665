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

One module a concern: ``descriptive`` (one arm, input checks), ``ranks`` (the exact test,
the null distribution of U, the MDE; scipy where it serves, see its opening comment),
``verdicts`` (verdict, reason, advice), ``compare`` (cells, Holm), ``geomean`` (the
geometric mean over cells).
"""

from myaccel.bench.stats.compare import (
    CellComparison,
    compare_arms,
    compare_cells,
    holm,
)
from myaccel.bench.stats.descriptive import ArmSummary, StatsInputError, summarize
from myaccel.bench.stats.geomean import GeoMean, geomean_ratio
from myaccel.bench.stats.ranks import (
    EXACT_MAX_TOTAL_RUNS,
    MIN_RUNS_PER_ARM,
    POWER,
    MdeMethod,
    PMethod,
    min_p_value,
    runs_to_reach,
)
from myaccel.bench.stats.verdicts import (
    DEFAULT_MAX_CV_PCT,
    DEFAULT_MAX_MDE_PCT,
    RECOMMENDED_RUNS_PER_ARM,
    Verdict,
)

__all__ = [
    "DEFAULT_MAX_CV_PCT",
    "DEFAULT_MAX_MDE_PCT",
    "EXACT_MAX_TOTAL_RUNS",
    "MIN_RUNS_PER_ARM",
    "POWER",
    "RECOMMENDED_RUNS_PER_ARM",
    "ArmSummary",
    "CellComparison",
    "GeoMean",
    "MdeMethod",
    "PMethod",
    "StatsInputError",
    "Verdict",
    "compare_arms",
    "compare_cells",
    "geomean_ratio",
    "holm",
    "min_p_value",
    "runs_to_reach",
    "summarize",
]
