"""Confirmation by successive halving: short screens find candidates, repeated interleaved
runs keep the ones that stay ahead.

Rung 0 is the screen (``screen_pairs`` runs per arm). Of the screened configurations that
beat the noise floor, the best ``1/eta`` (at least one) are measured again at rung 1 until
each holds ``screen_pairs * eta`` runs per arm (capped at ``max_pairs``); the best ``1/eta``
of those go to rung 2, and so on until one is left: the winner, which the final `ab` then
puts against the plan.

Everything is recomputed from the measurements (each carries its rung), so a resumed study
picks up where it stopped: ``next_step`` says which configuration to measure next at which
rung, or that the halving is done.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from myaccel.tune.objective import Sample, score


@dataclass(frozen=True)
class Measured:
    key: str  # the configuration (canonical JSON of its changes)
    rung: int  # 0: screen; 1, 2, ...: confirmation
    sample: Sample


@dataclass(frozen=True)
class Step:
    key: str
    rung: int
    pairs: int  # runs per arm to add


@dataclass(frozen=True)
class Halving:
    screen_pairs: int
    eta: int = 3
    max_pairs: int = 6
    floor_pct: float = 0.0

    def evidence(self, ms: Sequence[Measured], key: str, upto_rung: int) -> Sample:
        out = Sample()
        for m in ms:
            if m.key == key and m.rung <= upto_rung:
                out = out.merged(m.sample)
        return out

    def ranked(self, ms: Sequence[Measured], keys: Sequence[str], upto_rung: int) -> list[str]:
        """``keys`` best first by their score on the evidence up to ``upto_rung``."""
        scored = [(score(self.evidence(ms, k, upto_rung)).delta_pct, k) for k in keys]
        return [k for _, k in sorted(scored, key=lambda t: (-t[0], t[1]))]

    def target_pairs(self, rung: int) -> int:
        return int(min(self.max_pairs, self.screen_pairs * self.eta**rung))

    def screened(self, ms: Sequence[Measured]) -> list[str]:
        """Screened configurations above the noise floor, best first."""
        keys = sorted({m.key for m in ms if m.rung == 0})
        ranked = self.ranked(ms, keys, 0)
        return [k for k in ranked if score(self.evidence(ms, k, 0)).delta_pct > self.floor_pct]

    def next_step(self, ms: Sequence[Measured]) -> Step | None:
        """The next measurement of the halving, or None when it is done."""
        prev = self.screened(ms)
        rung = 1
        while len(prev) > 1 and self.target_pairs(rung) > self.target_pairs(rung - 1):
            size = max(1, math.ceil(len(prev) / self.eta))
            members = [k for k in prev if any(m.key == k and m.rung == rung for m in ms)]
            if len(members) < size:
                pick = next(k for k in self.ranked(ms, prev, rung - 1) if k not in members)
                have = self.evidence(ms, pick, rung - 1).pairs()
                return Step(pick, rung, max(1, self.target_pairs(rung) - have))
            prev = members
            rung += 1
        return None

    def winner(self, ms: Sequence[Measured]) -> str | None:
        """The configuration the halving ends on (None: no screen beat the noise floor)."""
        prev = self.screened(ms)
        rung = 1
        while len(prev) > 1:
            members = [k for k in prev if any(m.key == k and m.rung == rung for m in ms)]
            if not members:
                break
            prev = members
            rung += 1
        if not prev:
            return None
        return self.ranked(ms, prev, rung)[0]
