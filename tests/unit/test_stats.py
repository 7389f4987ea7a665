"""Statistics for A/B comparisons of benchmark runs: known vectors, properties, simulations."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats  # type: ignore[import-untyped]

from myaccel.bench.stats import (
    StatsInputError,
    compare_arms,
    compare_cells,
    geomean_ratio,
    holm,
    min_p_value,
    ranks,
    runs_to_reach,
    summarize,
)

CV = 0.12
LOG_SD = math.sqrt(math.log1p(CV**2))  # lognormal runs with a 12% coefficient of variation


def lognormal_runs(
    rng: np.random.Generator, n: int, scale: float = 1000.0, cv: float = CV
) -> list[float]:
    runs = scale * np.exp(rng.normal(0.0, math.sqrt(math.log1p(cv**2)), n))
    return [float(v) for v in runs]


# ---------------------------------------------------------------- summarize


def test_summarize_known_vector() -> None:
    s = summarize([4.0, 1.0, 3.0, 2.0])
    assert (s.n, s.median, s.mean, s.min, s.max) == (4, 2.5, 2.5, 1.0, 4.0)
    assert s.stdev == pytest.approx(1.2909944, rel=1e-6)
    assert s.cv_pct == pytest.approx(51.639778, rel=1e-6)


def test_summarize_single_run_has_no_spread() -> None:
    s = summarize([7.0])
    assert (s.n, s.median, s.stdev, s.cv_pct) == (1, 7.0, None, None)


@pytest.mark.parametrize("values", [[], [1.0, math.nan], [1.0, math.inf]])
def test_summarize_rejects_bad_input(values: list[float]) -> None:
    with pytest.raises(ValueError):
        summarize(values)


# ---------------------------------------------------------------- p-values


def test_five_vs_five_fully_separated_gives_exact_p_0_0079() -> None:
    r = compare_arms([100, 101, 102, 103, 104], [110, 111, 112, 113, 114])
    assert r.p_method == "exact"
    assert r.p_value == pytest.approx(2 / 252) == pytest.approx(0.007937, abs=1e-6)
    assert r.min_p_value == pytest.approx(2 / 252)
    # the other direction is the same two-sided p
    assert compare_arms([110, 111, 112, 113, 114], [100, 101, 102, 103, 104]).p_value == (
        pytest.approx(0.007937, abs=1e-6)
    )


def test_four_vs_four_fully_separated_gives_exact_p_0_0286() -> None:
    r = compare_arms([100, 101, 102, 103], [110, 111, 112, 113])
    assert r.p_value == pytest.approx(2 / 70) == pytest.approx(0.0286, abs=1e-4)


def test_min_p_value_and_runs_to_reach() -> None:
    assert min_p_value(3, 3) == pytest.approx(0.1)
    assert min_p_value(4, 4) == pytest.approx(0.028571, abs=1e-6)
    assert runs_to_reach(0.05) == 4
    assert runs_to_reach(0.05 / 8) == 6  # 5+5 runs cannot survive Holm over 8 cells


def test_u_distribution_matches_scipy_exact_p_values() -> None:
    rng = np.random.default_rng(1)
    for m, n in [(3, 4), (5, 5), (6, 9), (10, 10)]:
        base, cand = rng.normal(0, 1, m), rng.normal(0.7, 1, n)
        u = int(np.sum(cand[:, None] > base[None, :]))
        counts = ranks.u_counts(m, n)
        assert sum(counts) == math.comb(m + n, m)
        upper = sum(counts[u:]) / math.comb(m + n, m)
        lower = sum(counts[: u + 1]) / math.comb(m + n, m)
        ours = min(1.0, 2 * min(upper, lower))
        theirs = scipy_stats.mannwhitneyu(cand, base, method="exact").pvalue
        assert ours == pytest.approx(theirs, rel=1e-9)
        # without ties the permutation DP is the same exact test
        assert ranks.permutation_p(base, cand) == pytest.approx(theirs, rel=1e-9)


def brute_force_permutation_p(base: list[float], cand: list[float]) -> float:
    pooled = base + cand
    ranks = scipy_stats.rankdata(pooled)
    m, total = len(base), len(pooled)
    center = m * (total + 1) / 2
    observed = abs(sum(ranks[:m]) - center)
    splits = list(itertools.combinations(range(total), m))
    hits = sum(abs(sum(ranks[list(s)]) - center) >= observed - 1e-9 for s in splits)
    return float(hits / len(splits))


@pytest.mark.parametrize(
    ("base", "cand"),
    [
        ([10.0, 10.0, 11.0, 12.0, 12.0], [12.0, 13.0, 13.0, 14.0, 15.0]),
        ([5.0, 5.0, 5.0], [5.0, 6.0, 6.0, 7.0]),
        ([1.5, 2.5, 2.5, 3.5, 4.0, 4.0], [2.5, 4.0, 4.0, 5.0, 5.5, 6.0, 6.0]),
    ],
)
def test_ties_use_an_exact_permutation_test(base: list[float], cand: list[float]) -> None:
    r = compare_arms(base, cand)
    assert r.p_method == "exact-permutation"
    assert r.p_value == pytest.approx(brute_force_permutation_p(base, cand), rel=1e-12)


def test_large_samples_fall_back_to_asymptotic() -> None:
    rng = np.random.default_rng(2)
    r = compare_arms(lognormal_runs(rng, 31), lognormal_runs(rng, 31))
    assert r.p_method == "asymptotic"
    assert 0.0 < r.p_value <= 1.0
    assert r.ci_low_pct is not None
    assert r.mde_method == "normal-approximation"


# ---------------------------------------------------------------- Holm


@pytest.mark.parametrize(
    ("raw", "adjusted"),
    [
        ([0.01, 0.04, 0.03], [0.03, 0.06, 0.06]),
        ([0.01, 0.02, 0.03, 0.04], [0.04, 0.06, 0.06, 0.06]),
        ([0.5, 0.001], [0.5, 0.002]),
        ([0.3, 0.6, 0.9], [0.9, 1.0, 1.0]),
        ([0.04], [0.04]),
        ([], []),
    ],
)
def test_holm_known_vectors(raw: list[float], adjusted: list[float]) -> None:
    assert holm(raw) == pytest.approx(adjusted)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=12))
def test_holm_properties(raw: list[float]) -> None:
    adjusted = holm(raw)
    assert all(p <= a <= 1.0 for p, a in zip(raw, adjusted, strict=True))
    order = sorted(range(len(raw)), key=lambda i: raw[i])
    ordered = [adjusted[i] for i in order]
    assert ordered == sorted(ordered)  # monotone in the raw p
    assert adjusted[order[0]] == pytest.approx(min(1.0, len(raw) * raw[order[0]]))


def test_holm_rejects_invalid_p() -> None:
    with pytest.raises(StatsInputError):
        holm([0.1, 1.5])
    with pytest.raises(StatsInputError):
        holm([math.nan])


def test_holm_across_many_cells_can_make_5_runs_insufficient() -> None:
    cells = {f"cell{i}": ([100, 101, 102, 103, 104], [110, 111, 112, 113, 114]) for i in range(8)}
    results = compare_cells(cells)
    assert [r.name for r in results] == list(cells)
    for r in results:
        assert r.family_size == 8
        assert r.p_value == pytest.approx(0.007937, abs=1e-6)
        assert r.p_adjusted == pytest.approx(8 * 2 / 252)
        assert r.ci_excludes_zero
        assert r.verdict == "inconclusive"
        assert r.mde_pct is None and r.mde_method == "unreachable"
        assert "n=6 per arm" in r.advice[0]


def test_compare_cells_applies_holm_before_verdicts() -> None:
    strong = ([100.0, 101, 102, 103, 104, 105, 106], [130.0, 131, 132, 133, 134, 135, 136])
    weak = ([100.0, 104, 98, 103, 97, 101, 99], [103.0, 99, 106, 102, 105, 100, 104])
    results = compare_cells({"strong": strong, "weak": weak})
    assert holm([r.p_value for r in results]) == [r.p_adjusted for r in results]
    assert results[0].verdict == "improved"
    assert results[1].verdict != "improved"


# ---------------------------------------------------------------- verdicts


def test_identical_arms_are_never_a_change() -> None:
    rng = np.random.default_rng(3)
    runs = lognormal_runs(rng, 5)
    r = compare_arms(runs, list(runs))
    assert r.delta_pct == 0.0
    assert r.hl_delta_pct == pytest.approx(0.0, abs=1e-9)
    assert r.p_value == pytest.approx(1.0)
    assert r.verdict in {"no change", "inconclusive"}
    quiet = lognormal_runs(rng, 7, cv=0.01)
    q = compare_arms(quiet, list(quiet))
    assert q.verdict == "no change", q.reason
    assert "within the +-2% practical threshold" in q.reason


def test_no_change_within_the_mde_says_what_is_not_excluded() -> None:
    z = np.linspace(-1.0, 1.0, 7)
    runs = (1000.0 * np.exp(0.03 * z / np.std(z, ddof=1))).tolist()  # 3% noise
    r = compare_arms(runs, list(runs))
    assert r.verdict == "no change", r.reason
    assert r.mde_pct is not None and 2.0 < r.mde_pct < 10.0
    assert r.equivalence_margin_pct == r.mde_pct
    assert "smaller changes are not excluded" in r.reason
    assert r.advice[0].startswith("run ~") and "2.0% change" in r.advice[0]


def test_no_change_is_not_claimed_when_the_mde_is_too_coarse() -> None:
    """5+5 runs at 12% CV: the MDE is ~30%; a true +10% must not be called no change."""
    rng = np.random.default_rng(12)
    verdicts = [
        compare_arms(lognormal_runs(rng, 5), [1.1 * v for v in lognormal_runs(rng, 5)]).verdict
        for _ in range(100)
    ]
    assert "no change" not in verdicts
    assert "regressed" not in verdicts


def test_known_improvement_is_detected_with_a_ci_around_it() -> None:
    rng = np.random.default_rng(4)
    base = lognormal_runs(rng, 7, cv=0.02)
    cand = [1.2 * v for v in lognormal_runs(rng, 7, cv=0.02)]
    r = compare_arms(base, cand)
    assert r.verdict == "improved", r.reason
    assert r.ci_low_pct is not None and r.ci_high_pct is not None
    assert r.ci_low_pct > 0.0
    assert r.ci_low_pct <= 20.0 <= r.ci_high_pct
    assert r.delta_pct == pytest.approx(20.0, abs=4.0)
    assert r.ci_coverage == pytest.approx(1 - 2 * sum(ranks.u_counts(7, 7)[:9]) / 3432)
    assert r.ci_coverage is not None and r.ci_coverage >= 0.95
    assert r.reason.startswith("+")


def test_lower_is_better_flips_the_verdict() -> None:
    rng = np.random.default_rng(5)
    base = lognormal_runs(rng, 7, cv=0.02)
    slower = [1.2 * v for v in lognormal_runs(rng, 7, cv=0.02)]
    assert compare_arms(base, slower).verdict == "improved"  # TPS up
    assert compare_arms(base, slower, higher_is_better=False).verdict == "regressed"  # latency up
    assert compare_arms(slower, base, higher_is_better=False).verdict == "improved"
    assert compare_arms(slower, base).verdict == "regressed"


def test_a_significant_but_tiny_change_is_not_improved() -> None:
    base = [1000.0, 1001, 1002, 1003, 1004, 1005, 1006]
    cand = [v * 1.01 for v in base[::-1]]
    r = compare_arms(base, cand, practical_threshold_pct=2.0)
    assert r.verdict != "improved"
    assert r.delta_pct == pytest.approx(1.0)


def test_too_few_runs_are_inconclusive_with_advice() -> None:
    r = compare_arms([100.0, 101.0], [120.0, 121.0, 122.0])
    assert r.verdict == "inconclusive"
    assert "too few runs" in r.reason
    assert r.ci_low_pct is None and r.ci_high_pct is None and r.mde_pct is None
    assert "n=5 per arm reaches p=0.0079" in r.advice[0]
    assert r.p_value == pytest.approx(0.2)  # still reported: 2+3 runs, 2 / C(5, 2)


def test_three_runs_per_arm_cannot_reach_95_percent() -> None:
    r = compare_arms([100.0, 101.0, 102.0], [130.0, 131.0, 132.0])
    assert r.verdict == "inconclusive"
    assert r.p_value == pytest.approx(0.1)
    assert r.ci_coverage == pytest.approx(0.9)
    assert r.mde_pct is None and r.mde_method == "unreachable"
    assert "90.0% CI" in r.reason
    assert "n=5 per arm" in r.advice[0]


@pytest.mark.parametrize(
    ("base", "cand"),
    [([], [1.0, 2.0, 3.0]), ([1.0, 2.0, 0.0], [1.0, 2.0, 3.0]), ([1.0, 2.0, -3.0], [1.0, 2, 3])],
)
def test_invalid_values_raise(base: list[float], cand: list[float]) -> None:
    with pytest.raises(ValueError, match="baseline"):
        compare_arms(base, cand)


def test_invalid_parameters_raise() -> None:
    runs = [1.0, 2.0, 3.0]
    with pytest.raises(StatsInputError):
        compare_arms(runs, runs, confidence=1.0)
    with pytest.raises(StatsInputError):
        compare_arms(runs, runs, alpha=0.0)
    with pytest.raises(StatsInputError):
        compare_cells({})


def test_noisy_host_gets_advice() -> None:
    rng = np.random.default_rng(6)
    r = compare_arms(lognormal_runs(rng, 5, cv=0.2), lognormal_runs(rng, 5, cv=0.2))
    assert any(line.startswith("host noisy: ") for line in r.advice)


def test_results_are_deterministic() -> None:
    rng = np.random.default_rng(7)
    cells = {f"c{i}": (lognormal_runs(rng, 6), lognormal_runs(rng, 6)) for i in range(3)}
    assert compare_cells(cells, seed=3) == compare_cells(cells, seed=3)
    first, second = compare_cells(cells), compare_cells(cells)
    assert geomean_ratio(first, seed=9) == geomean_ratio(second, seed=9)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.floats(1.0, 1e6), min_size=3, max_size=8),
    st.lists(st.floats(1.0, 1e6), min_size=3, max_size=8),
    st.sampled_from([2.0**-10, 0.25, 0.5, 2.0, 8.0, 2.0**20]),  # exact in binary floating point
)
def test_scale_invariance_and_antisymmetry(base: list[float], cand: list[float], k: float) -> None:
    r = compare_arms(base, cand)
    scaled = compare_arms([k * v for v in base], [k * v for v in cand])
    assert scaled.p_value == pytest.approx(r.p_value)
    assert scaled.delta_pct == pytest.approx(r.delta_pct, rel=1e-6, abs=1e-6)
    assert scaled.verdict == r.verdict
    swapped = compare_arms(cand, base)
    assert swapped.p_value == pytest.approx(r.p_value)
    assert (1 + swapped.delta_pct / 100) * (1 + r.delta_pct / 100) == pytest.approx(1.0)
    assert r.ci_low_pct is not None and swapped.ci_high_pct is not None
    assert (1 + swapped.ci_high_pct / 100) * (1 + r.ci_low_pct / 100) == pytest.approx(1.0)
    assert r.verdict in {"improved", "regressed", "no change", "inconclusive"}


# ---------------------------------------------------------------- simulations


def test_ci_coverage_by_simulation() -> None:
    """400 pairs of lognormal samples, CV 12%, n=7 per arm, true ratio 1.1."""
    rng = np.random.default_rng(2024)
    true_delta_pct, covered, reps = 10.0, 0, 400
    for _ in range(reps):
        base = lognormal_runs(rng, 7)
        cand = [1.1 * v for v in lognormal_runs(rng, 7)]
        r = compare_arms(base, cand)
        assert r.ci_low_pct is not None and r.ci_high_pct is not None
        covered += r.ci_low_pct <= true_delta_pct <= r.ci_high_pct
    coverage = covered / reps
    print(f"simulated coverage of the 95% CI (n=7, CV 12%, ratio 1.1): {coverage:.3f}")
    assert 0.90 <= coverage <= 0.99


def test_mde_gives_about_80_percent_power() -> None:
    """At the reported MDE, the exact test rejects in ~80% of simulated comparisons."""
    z = np.linspace(-1.0, 1.0, 7)
    runs = (1000.0 * np.exp(LOG_SD * z / np.std(z, ddof=1))).tolist()
    r = compare_arms(runs, list(runs))
    assert r.noise_log_sd == pytest.approx(LOG_SD)
    assert r.mde_pct is not None and r.noise_log_sd is not None
    shift = math.log1p(r.mde_pct / 100)
    rng = np.random.default_rng(8)
    base = rng.normal(0.0, r.noise_log_sd, (600, 7))
    cand = rng.normal(shift, r.noise_log_sd, (600, 7))
    p = scipy_stats.mannwhitneyu(cand, base, axis=1, method="exact").pvalue
    power = float(np.mean(p < 0.05))
    print(f"power at the MDE ({r.mde_pct:.1f}%): {power:.3f}")
    assert 0.72 <= power <= 0.88


def test_mde_shrinks_with_more_runs_and_grows_with_cells() -> None:
    rng = np.random.default_rng(9)
    runs = {n: (lognormal_runs(rng, n), lognormal_runs(rng, n)) for n in (5, 20)}
    mdes = {}
    for n, (b, c) in runs.items():
        # same noise for both sizes: rescale the standardized MDE
        r = compare_arms(b, c)
        assert r.mde_pct is not None and r.noise_log_sd is not None
        mdes[n] = math.log1p(r.mde_pct / 100) / r.noise_log_sd
    assert mdes[20] < mdes[5] / 1.8
    b, c = runs[5]
    single = compare_arms(b, c)
    family = compare_cells({"a": (b, c), "b": (b, c)})[0]
    assert single.mde_pct is not None and family.mde_pct is not None
    assert family.mde_pct > single.mde_pct


# ---------------------------------------------------------------- geometric mean


def test_geomean_of_known_ratios() -> None:
    rng = np.random.default_rng(10)
    cells = {}
    for name, ratio in (("a", 1.10), ("b", 1.21), ("c", 1.0)):
        base = lognormal_runs(rng, 7, cv=0.01)
        cells[name] = (base, [ratio * v for v in base])
    g = geomean_ratio(compare_cells(cells), seed=1)
    expected = ((1.10 * 1.21 * 1.0) ** (1 / 3) - 1) * 100
    assert g.n_cells == 3
    assert g.delta_pct == pytest.approx(expected, rel=1e-9)
    assert g.ci_low_pct <= g.delta_pct <= g.ci_high_pct
    assert g.ci_high_pct - g.ci_low_pct < 3.0
    assert g.higher_is_better


def test_geomean_rejects_mixed_directions_and_empty() -> None:
    up = compare_arms([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    down = compare_arms([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], higher_is_better=False)
    with pytest.raises(StatsInputError):
        geomean_ratio([up, down])
    with pytest.raises(StatsInputError):
        geomean_ratio([])


def test_a_coarse_mde_is_said_as_a_ratio_both_ways() -> None:
    """Issue 35 defect 2: "only changes beyond +-502.2% are excluded" where the printed CI
    excluded more, and a -502% change in TPS does not exist. The MDE is a ratio: +502% up
    is -83% down."""
    base = [100.0, 180.0, 60.0, 140.0, 75.0]
    cand = [95.0, 170.0, 70.0, 150.0, 65.0]
    r = compare_arms(base, cand)
    assert r.verdict == "inconclusive", r.reason
    assert r.mde_pct is not None and r.mde_pct > 100.0, r.mde_pct
    assert "-" + f"{r.mde_pct:.1f}%" not in r.reason, r.reason
    down = (1 / (1 + r.mde_pct / 100) - 1) * 100
    assert f"+{r.mde_pct:.1f}% or {down:.1f}%" in r.reason, r.reason
    assert -100.0 < down < 0.0
