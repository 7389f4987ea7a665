"""The noise floor: the plan measured against itself (an A/A) before anything is searched.

On a busy 2-core VM the same configuration measured twice differs by 10-20%; a search that
takes the best single score finds that noise. The A/A trial gives the run-to-run spread
``sigma`` (standard deviation of log TPS, pooled over both arms) and the floor a screening
score must clear to be worth confirming: one standard deviation of the difference of two
k-run medians, ``sigma * sqrt(2 / k)`` (as a percent), or the A/A's own apparent change if
that is larger. Screens at or below the floor are not promoted: from k runs they are not
told apart from the plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from myaccel.tune.objective import Score


@dataclass(frozen=True)
class NoiseFloor:
    aa_delta_pct: float  # the A/A's apparent change (ideally 0)
    sigma_log: float  # run-to-run standard deviation of log(TPS)
    screen_pairs: int
    floor_pct: float  # a screen must beat the plan by more than this to be confirmed
    mde_pct: float | None  # the A/A's minimum detectable effect (None: too few runs)

    @property
    def cv_pct(self) -> float:
        return 100.0 * math.expm1(self.sigma_log)


def noise_floor(aa: Score, screen_pairs: int) -> NoiseFloor:
    sigma = aa.noise_log_sd or 0.0
    spread = 100.0 * math.expm1(sigma * math.sqrt(2.0 / max(1, screen_pairs)))
    return NoiseFloor(
        aa_delta_pct=aa.delta_pct,
        sigma_log=sigma,
        screen_pairs=screen_pairs,
        floor_pct=max(spread, abs(aa.delta_pct)),
        mde_pct=aa.mde_pct,
    )
