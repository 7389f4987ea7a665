"""What a trial measures and how it is scored.

A measurement is always *paired with the plan*: the plan's configuration and the trial's run
interleaved (A B B A ..., as `ab`), so that drift of a busy host hits both alike and the score
is a relative change, not an absolute TPS that moves 10-20% between minutes. ``Sample``
holds the TPS of each arm per cell (workload@threads); ``score`` compares them with the same
statistics as `ab` (``bench.stats.compare_cells``: Mann-Whitney, Hodges-Lehmann shift, its
CI, the MDE, Holm across cells).

``Objective`` is what `tune` needs from a measuring backend: the sandbox one
(``sandbox_objective``) runs sysbench; tests pass a deterministic function.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from myaccel.bench.stats import CellComparison, compare_cells

Cells = dict[str, tuple[list[float], list[float]]]  # cell -> (plan TPS, trial TPS)


@dataclass(frozen=True)
class Sample:
    cells: Cells = field(default_factory=dict)

    def pairs(self) -> int:
        """Runs per arm (the smallest over cells and arms)."""
        if not self.cells:
            return 0
        return min(min(len(b), len(c)) for b, c in self.cells.values())

    def merged(self, other: Sample) -> Sample:
        """Both samples' runs together (evidence on one configuration over several trials)."""
        out: Cells = {k: (list(b), list(c)) for k, (b, c) in self.cells.items()}
        for k, (b, c) in other.cells.items():
            mine = out.setdefault(k, ([], []))
            mine[0].extend(b)
            mine[1].extend(c)
        return Sample(out)

    def to_json(self) -> dict[str, list[list[float]]]:
        return {k: [list(b), list(c)] for k, (b, c) in self.cells.items()}

    @classmethod
    def from_json(cls, doc: Mapping[str, Sequence[Sequence[float]]]) -> Sample:
        return cls({k: (list(v[0]), list(v[1])) for k, v in doc.items()})


class Objective(Protocol):
    def measure(self, label: str, changes: Mapping[str, str], pairs: int) -> Sample:
        """``pairs`` interleaved runs per arm of the plan vs the plan with ``changes``
        (``label`` names the trial's results). Raises on a configuration the server
        refuses (the trial fails; the search goes on)."""


@dataclass(frozen=True)
class Score:
    """A sample's verdict: ``delta_pct`` the Hodges-Lehmann shift of the trial vs the
    plan (the mean over cells of the log shifts, as a percent), the cells as `ab` draws
    them."""

    delta_pct: float
    cells: tuple[CellComparison, ...]

    @property
    def ci_low_pct(self) -> float | None:
        lows = [c.ci_low_pct for c in self.cells]
        return None if any(v is None for v in lows) else min(v for v in lows if v is not None)

    @property
    def mde_pct(self) -> float | None:
        m = [c.mde_pct for c in self.cells]
        return None if any(v is None for v in m) else max(v for v in m if v is not None)

    @property
    def noise_log_sd(self) -> float | None:
        s = [c.noise_log_sd for c in self.cells if c.noise_log_sd is not None]
        return max(s) if s else None

    @property
    def improved(self) -> bool:
        """Every cell improved with its CI above zero (what the final `ab` must show)."""
        return bool(self.cells) and all(
            c.verdict == "improved" and c.ci_low_pct is not None and c.ci_low_pct > 0
            for c in self.cells
        )


def score(sample: Sample) -> Score:
    usable = {k: (b, c) for k, (b, c) in sample.cells.items() if b and c}
    if not usable:
        raise ValueError("a sample without runs in both arms cannot be scored")
    cells = tuple(compare_cells(usable, seed=0))
    logs = [math.log1p(c.hl_delta_pct / 100.0) for c in cells]
    return Score(delta_pct=100.0 * math.expm1(sum(logs) / len(logs)), cells=cells)
