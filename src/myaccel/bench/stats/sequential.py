"""When to stop adding run pairs: a group-sequential design over interleaved rounds.

A campaign runs the two arms in rounds (one run of each per round, the same seed, in
alternating order), so after ``n`` rounds each arm has ``n`` runs taken over the same stretch
of time; machine drift that spans the campaign lands on both arms alike. After every round
from ``min_pairs`` on, ``look`` decides: improved, regressed, no change, continue, or budget.

Error control under optional stopping, by alpha spending (Lan and DeMets, "Discrete
sequential boundaries for clinical trials", Biometrika 70(3), 1983) with their Pocock-type
spending function ``alpha(t) = alpha ln(1 + (e - 1) t)`` over the information fraction ``t =
pairs / max_pairs``: the first look that crosses its boundary does so after pair ``n`` with
probability ``alpha(n/N) - alpha((n-1)/N)`` under no effect, so a false verdict over every
look has probability ``alpha``. Pocock-type spending gives the early looks a fair share of
alpha, so a large effect stops after 3 or 4 rounds; the price is a little power at the last
look against O'Brien-Fleming-type spending (which kept an effect of +77% running for 7
rounds on this machine: docs/benchmarking.md).

The statistic at a look is the two-sample t on the runs' log TPS (equal run counts, pooled
variance, ``2n - 2`` degrees of freedom). A paired t on per-round differences would cancel
drift within a round, but has only ``n - 1`` degrees of freedom: with 3 rounds its boundary is
about twice as high, and no early look could stop. Interleaving already spreads drift over
both arms, where it widens the pooled variance (the cautious direction). Its sequence of
values under no effect does not depend on the noise level (for log-normal run noise, what
the rank statistics in ``compare.py`` also assume for their MDE), so the boundaries are
computed once per design from 100,000 simulated null campaigns with a fixed seed: each
look's critical |t| is the one that the share of still-running campaigns its spending allows
would first cross (the exact boundaries, up to simulation error, that recursive integration
would give for a z statistic; here for t with few degrees of freedom, where no closed form
exists). A verdict needs the boundary crossed and a change of at least ``practical_pct``;
"no change" needs the look's interval (the change +- the boundary's |t| standard errors)
inside ``+-target_pct``, the smallest effect worth knowing. ``tests/unit/test_sequential.py``
shows by simulation, on log-normal noise of CV 5-25% and on the recorded runs' own shape,
that false verdicts stay under ``alpha``.

Written here: scipy has the t distribution, but no library in the project's dependencies
implements alpha-spending designs for this per-round setting (the Python packages that do
target clinical trials and pull in their own stacks)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import Literal

import numpy as np
from scipy import stats as scipy_stats  # type: ignore[import-untyped]

NULL_CAMPAIGNS = 100_000

Decision = Literal["continue", "improved", "regressed", "no change", "budget"]


@dataclass(frozen=True)
class SequentialDesign:
    alpha: float = 0.05
    target_pct: float = 5.0  # the smallest effect worth knowing
    practical_pct: float = 2.0  # a verdict below this change is not worth acting on
    min_pairs: int = 3
    max_pairs: int = 20
    higher_is_better: bool = True

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha {self.alpha} is not in (0, 1)")
        if not 2 <= self.min_pairs <= self.max_pairs:
            raise ValueError(f"pairs: need 2 <= min ({self.min_pairs}) <= max ({self.max_pairs})")
        if self.target_pct <= 0:
            raise ValueError(f"target {self.target_pct}% must be positive")

    def spent(self, pairs: int) -> float:
        """The alpha spent by the looks up to ``pairs`` (none before ``min_pairs``)."""
        if pairs < self.min_pairs:
            return 0.0
        t = min(1.0, pairs / self.max_pairs)
        return self.alpha * math.log1p((math.e - 1.0) * t)

    def increment(self, pairs: int) -> float:
        """What the look after pair ``pairs`` may spend."""
        return self.spent(pairs) - self.spent(pairs - 1)

    def boundary(self, pairs: int) -> float:
        """The |t| the look after pair ``pairs`` must exceed (inf: it may not stop yet)."""
        crit = _boundaries(self.alpha, self.min_pairs, self.max_pairs)
        return crit[min(pairs, self.max_pairs) - self.min_pairs]


@lru_cache(maxsize=16)
def _boundaries(alpha: float, min_pairs: int, max_pairs: int) -> tuple[float, ...]:
    design = SequentialDesign(alpha=alpha, min_pairs=min_pairs, max_pairs=max_pairs)
    rng = np.random.default_rng(20261202)
    arms = rng.standard_normal((2, NULL_CAMPAIGNS, max_pairs))
    sums, squares = np.cumsum(arms, axis=2), np.cumsum(arms * arms, axis=2)
    running = np.ones(NULL_CAMPAIGNS, dtype=bool)
    out: list[float] = []
    for n in range(min_pairs, max_pairs + 1):
        mean = sums[:, :, n - 1] / n
        var = (squares[:, :, n - 1] - n * mean * mean) / (n - 1)
        se = np.sqrt(np.maximum(var.sum(axis=0), 1e-300) / n)
        t = np.abs((mean[1] - mean[0]) / se)
        allowed = int(design.increment(n) * NULL_CAMPAIGNS)
        alive = np.sort(t[running])[::-1]
        crit = float(alive[allowed]) if 0 < allowed < alive.size else math.inf
        out.append(crit)
        running &= t <= crit
    return tuple(out)


@dataclass(frozen=True)
class Look:
    pairs: int
    delta_pct: float  # the geometric mean change of the candidate over the pairs
    ci_low_pct: float
    ci_high_pct: float  # the look's 1 - 2 x level interval
    p_value: float
    level: float  # the alpha this look spent
    decision: Decision
    reason: str


def _variance(xs: list[float]) -> float:
    m = sum(xs) / len(xs)
    return sum((x - m) ** 2 for x in xs) / (len(xs) - 1)


def _pct(log_ratio: float) -> float:
    return math.expm1(log_ratio) * 100.0


def look(design: SequentialDesign, baseline: list[float], candidate: list[float]) -> Look:
    """The decision after ``len(baseline)`` rounds (index i of each: the runs of round i)."""
    if len(baseline) != len(candidate):
        raise ValueError(f"unpaired: {len(baseline)} baseline and {len(candidate)} candidate runs")
    if any(not (v > 0 and math.isfinite(v)) for v in (*baseline, *candidate)):
        raise ValueError("every run's figure must be a positive finite number")
    n = len(baseline)
    logs_b, logs_c = [math.log(v) for v in baseline], [math.log(v) for v in candidate]
    mean = (sum(logs_c) - sum(logs_b)) / n if n else 0.0
    level = design.increment(n) if n >= design.min_pairs else 0.0
    if n < design.min_pairs:
        return Look(n, _pct(mean), -math.inf, math.inf, 1.0, 0.0, "continue",
                    f"{n} of the {design.min_pairs} pairs a first look needs")  # fmt: skip
    se = math.sqrt((_variance(logs_b) + _variance(logs_c)) / n)
    crit = design.boundary(n)
    t = math.inf if se == 0.0 and mean != 0.0 else (0.0 if se == 0.0 else abs(mean) / se)
    p = float(2.0 * scipy_stats.t.sf(t, 2 * n - 2)) if math.isfinite(t) else 0.0
    half = crit * se if math.isfinite(crit) else math.inf
    delta, lo, hi = _pct(mean), _pct(mean - half), _pct(mean + half)
    bound = f"|t| {t:.2f} against {crit:.2f}" if math.isfinite(crit) else f"|t| {t:.2f}"
    head = f"{delta:+.1f}% after {n} pairs [{lo:+.1f}%, {hi:+.1f}%], {bound}"
    if t > crit and abs(delta) >= design.practical_pct:
        better = (delta > 0) == design.higher_is_better
        return Look(n, delta, lo, hi, p, level, "improved" if better else "regressed",
                    f"{head}: past this look's boundary (alpha {design.alpha:g} over all looks)")  # fmt: skip
    target = design.target_pct
    if -target <= lo and hi <= target:
        return Look(n, delta, lo, hi, p, level, "no change",
                    f"{head}: no change of {target:g}% or more either way")  # fmt: skip
    if n >= design.max_pairs:
        return Look(n, delta, lo, hi, p, level, "budget",
                    f"{head}: the run budget ({design.max_pairs} pairs) is spent")  # fmt: skip
    return Look(n, delta, lo, hi, p, level, "continue", head)


def pairs_needed(noise_log_sd: float, effect_pct: float, alpha: float, power: float = 0.8) -> int:
    """Rounds of a fixed two-arm design for ``power`` against ``effect_pct`` at ``noise_log_sd``
    per run (the difference of two arms has sqrt(2) of it): what a budget stop says is missing."""
    shift = math.log1p(effect_pct / 100.0)
    z = NormalDist().inv_cdf(1.0 - alpha / 2.0) + NormalDist().inv_cdf(power)
    return max(3, math.ceil(2.0 * (z * noise_log_sd / shift) ** 2))
