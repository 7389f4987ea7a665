"""Descriptive statistics of one arm, and the checks every input goes through."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from myaccel.errors import UsageError

FloatArray = NDArray[np.float64]


class StatsInputError(UsageError, ValueError, code="stats-input"):
    """Values or parameters the statistics cannot work with."""


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


def summarize(values: Sequence[float]) -> ArmSummary:
    """n, median, mean, sample stdev, CV, min and max of one arm."""
    array = as_finite_array(values, "values")
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


def as_finite_array(values: Sequence[float], what: str) -> FloatArray:
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise StatsInputError(f"{what} are not numbers: {exc}") from exc
    if array.ndim != 1 or array.size == 0:
        raise StatsInputError(f"{what}: need a non-empty flat list of numbers")
    if not np.all(np.isfinite(array)):
        raise StatsInputError(f"{what}: contains NaN or infinity")
    return array


def as_positive_array(values: Sequence[float], what: str) -> FloatArray:
    array = as_finite_array(values, what)
    if np.any(array <= 0.0):
        raise StatsInputError(
            f"{what}: values must be positive (ratios are compared)",
            hint="drop failed runs (0 TPS) before comparing; they are invalid, not slow",
        )
    return array


def log_to_pct(log_ratio: float) -> float:
    return math.expm1(log_ratio) * 100.0


def pooled_log_sd(log_base: FloatArray, log_cand: FloatArray) -> float:
    m, n = log_base.size, log_cand.size
    ss = float(np.var(log_base, ddof=1)) * (m - 1) + float(np.var(log_cand, ddof=1)) * (n - 1)
    return math.sqrt(ss / (m + n - 2))
