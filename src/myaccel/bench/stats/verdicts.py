"""Verdicts: from one cell's analysis to ``improved``, ``regressed``, ``no change`` or
``inconclusive``, with a one-line reason and advice that says what to do next."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from myaccel.bench.stats.descriptive import ArmSummary
from myaccel.bench.stats.ranks import (
    MIN_RUNS_PER_ARM,
    POWER,
    MdeMethod,
    PMethod,
    min_p_value,
    runs_needed,
    runs_to_reach,
)
from myaccel.model import same_named

Verdict = Literal["improved", "regressed", "no change", "inconclusive"]
RECOMMENDED_RUNS_PER_ARM = 5


@dataclass(frozen=True, slots=True)
class CellArms:
    """One cell's two arms: what an analysis starts from and a comparison reports."""

    name: str
    baseline: ArmSummary
    candidate: ArmSummary
    baseline_values: tuple[float, ...]
    candidate_values: tuple[float, ...]


# The fields an analysis hands on to its comparison unchanged.
CARRIED_FIELDS = (
    "name",
    "baseline",
    "candidate",
    "baseline_values",
    "candidate_values",
    "delta_pct",
    "hl_delta_pct",
    "p_value",
    "p_method",
    "min_p_value",
    "noise_log_sd",
    "mde_pct",
    "mde_method",
    "mde_note",
)


@dataclass(frozen=True, slots=True)
class Analysis(CellArms):
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

    def carried(self) -> dict[str, Any]:
        """The ``CARRIED_FIELDS`` by name, for the comparison's constructor."""
        return same_named(self, CARRIED_FIELDS)


DEFAULT_MAX_CV_PCT = 10.0
# "no change" on the strength of the MDE only when the MDE is at most this: a larger MDE
# would let "no change" hide a real gain of that size (at 5+5 runs and 12% CV the MDE is
# ~30%, and a true +10% would be called "no change" about 40% of the time without the cap).
DEFAULT_MAX_MDE_PCT = 10.0


class RuleOptions(TypedDict, total=False):
    """``VerdictRules`` as keyword arguments (``compare_cells`` takes them)."""

    alpha: float
    higher_is_better: bool
    confidence: float
    practical_threshold_pct: float
    max_cv_pct: float
    max_mde_pct: float


@dataclass(frozen=True, slots=True)
class VerdictRules:
    """What verdicts are drawn against: the significance level, the direction, the CI's
    coverage, the practical threshold, the CV above which a host is noisy and the largest
    MDE at which a non-result may be called "no change"."""

    alpha: float = 0.05
    higher_is_better: bool = True
    confidence: float = 0.95
    practical_threshold_pct: float = 2.0
    max_cv_pct: float = DEFAULT_MAX_CV_PCT
    max_mde_pct: float = DEFAULT_MAX_MDE_PCT

    def margin(self, mde_pct: float | None) -> float:
        """The +- band a "no change" CI must lie in: the MDE when it is adequate (at most
        ``max_mde_pct``) and larger than the practical threshold, else the threshold."""
        threshold = self.practical_threshold_pct
        if mde_pct is not None and mde_pct <= self.max_mde_pct:
            return max(threshold, mde_pct)
        return threshold


def draw_verdict(
    a: Analysis, rules: VerdictRules, *, p_adjusted: float, family_size: int
) -> tuple[Verdict, str, list[str]]:
    alpha, higher_is_better, confidence = rules.alpha, rules.higher_is_better, rules.confidence
    threshold, max_mde_pct = rules.practical_threshold_pct, rules.max_mde_pct
    margin = rules.margin(a.mde_pct)
    m, n = a.baseline.n, a.candidate.n
    noise_advice = _noise_advice(a.baseline, a.candidate, rules.max_cv_pct)
    holm_note = f", Holm over {family_size} cells" if family_size > 1 else ""
    p_text = f"p={fmt_p(a.p_value)} ({a.p_method}{holm_note}"
    p_text += f": {fmt_p(p_adjusted)})" if family_size > 1 else ")"
    best_n = max(RECOMMENDED_RUNS_PER_ARM, runs_to_reach(a.alpha_per_test))
    more_runs = (
        f"run more repetitions (n={best_n} per arm reaches "
        f"p={fmt_p(min_p_value(best_n, best_n))} at best)"
    )

    if a.ci is None:
        return (
            "inconclusive",
            f"too few runs: baseline n={m}, candidate n={n}; need >= {MIN_RUNS_PER_ARM} per arm",
            [more_runs, *noise_advice],
        )

    low, high, coverage = a.ci
    delta = a.delta_pct
    ci_text = f"{ci_label(coverage, confidence, m, n)}: {low:+.1f}% to {high:+.1f}%"
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
    elif a.mde_pct > max_mde_pct and mde_down(a.mde_pct) <= low and high <= a.mde_pct:
        reason = (
            f"{head}: at {m}+{n} runs only a change of at least {mde_text(a.mde_pct)} (the "
            f"MDE) would be seen, more than max_mde_pct {max_mde_pct:g}%"
        )
        advice.append(_runs_advice(a, max(threshold, max_mde_pct)))
    else:
        reason = f"{head}: the CI is wider than the +-{margin:.1f}% equivalence margin"
        advice.append(_runs_advice(a, max(threshold, abs(delta))))
    return "inconclusive", reason, [*advice, *noise_advice]


def mde_down(mde_pct: float) -> float:
    """The MDE as a decrease: the MDE is a ratio (on the log scale), so +100% up is -50%
    down, and no decrease reaches -100%."""
    return (1.0 / (1.0 + mde_pct / 100.0) - 1.0) * 100.0


def mde_text(mde_pct: float) -> str:
    """``+502.2% or -83.4%``: the smallest visible change either way."""
    return f"+{mde_pct:.1f}% or {mde_down(mde_pct):.1f}%"


def _runs_advice(a: Analysis, effect_pct: float) -> str:
    """'run about N per arm to resolve X%' for the observed noise."""
    effect_pct = max(effect_pct, 0.1)
    noise = a.noise_log_sd or 0.0
    needed = runs_needed(noise, effect_pct, a.alpha_per_test, POWER)
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


def fmt_p(p: float) -> str:
    if p >= 0.1:
        return f"{p:.2f}"
    return f"{p:.4f}" if p >= 0.001 else f"{p:.1e}"


def ci_label(coverage: float, confidence: float, m: int, n: int) -> str:
    if coverage >= confidence - 1e-12:
        return f"{confidence * 100:g}% CI"
    return f"{coverage * 100:.1f}% CI, the most {m}+{n} runs allow"
