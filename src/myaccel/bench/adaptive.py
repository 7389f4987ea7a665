"""An A/B that adds interleaved rounds until each cell has a sequential decision
(``stats/sequential.py``), a time budget runs out, or the round budget is spent.

After every round (one run of each arm per cell, the same seed), each cell's valid runs are
paired by seed and looked at with the design; alpha is split evenly over the cells
(Bonferroni), so the family's chance of a false verdict stays at most alpha. A cell's first
verdict is final: it is not looked at again and its runs stop, so the rounds after it are
spent on the cells still open (each cell's design is its own: stopping one leaves the
others' error rates as they were). When every cell has decided, or the next round would
pass the time budget, the campaign stops; the
cells' verdicts are then the sequential ones (the fixed-design Mann-Whitney verdict would
not be valid after looking at the data to decide when to stop), and the comparison says why
it stopped."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from myaccel.bench.compare import CellResult, Comparison
from myaccel.bench.run_record import RunRecord
from myaccel.bench.stats.sequential import Look, SequentialDesign, look, pairs_needed
from myaccel.errors import UsageError

if TYPE_CHECKING:
    from myaccel.bench.profiles import Profile

MAX_ROUNDS = 20


@dataclass(frozen=True)
class AdaptiveOptions:
    target_pct: float = 5.0  # the smallest effect worth knowing
    budget_s: float | None = None  # wall time for the rounds (None: only the round budget)
    max_rounds: int = MAX_ROUNDS


def adaptive_profile(
    prof: Profile, target_pct: float | None, budget_min: float | None, *, runs_given: bool
) -> tuple[Profile, AdaptiveOptions | None]:
    """``--target``/``--budget`` of ab and accelerate: the profile whose run count is the
    round budget (``--runs`` when given, else ``MAX_ROUNDS``) and the options, or ``prof``
    as it is and None without a target."""
    if target_pct is None:
        if budget_min is not None:
            raise UsageError("--budget needs --target", hint="add --target PCT (e.g. --target 5)")
        return prof, None
    rounds = prof.runs_per_arm if runs_given else MAX_ROUNDS
    return replace(prof, runs_per_arm=rounds), AdaptiveOptions(
        target_pct=target_pct,
        budget_s=budget_min * 60 if budget_min is not None else None,
        max_rounds=rounds,
    )


def _paired(records: Sequence[RunRecord], cell: tuple[str, int]) -> tuple[list[float], list[float]]:
    """The cell's valid baseline and candidate TPS of the rounds that have both, by seed."""
    runs: dict[str, dict[int, float]] = {"baseline": {}, "candidate": {}}
    for r in records:
        if (r.workload, r.threads) != cell or r.arm not in runs or r.summary is None:
            continue
        if r.validity.valid and r.summary.tps > 0 and r.seed is not None:
            runs[r.arm][r.seed] = r.summary.tps
    seeds = sorted(set(runs["baseline"]) & set(runs["candidate"]))
    return [runs["baseline"][s] for s in seeds], [runs["candidate"][s] for s in seeds]


@dataclass
class SequentialStop:
    """Called after each round with the campaign's records: a reason to stop, or None."""

    options: AdaptiveOptions
    cells: list[tuple[str, int]]
    started_s: float = field(default_factory=time.monotonic)
    looks: dict[tuple[str, int], Look] = field(default_factory=dict)
    rounds: int = 0
    why: str | None = None

    @property
    def design(self) -> SequentialDesign:
        return SequentialDesign(
            alpha=0.05 / max(1, len(self.cells)),
            target_pct=self.options.target_pct,
            max_pairs=self.options.max_rounds,
        )

    def __call__(self, records: Sequence[RunRecord]) -> str | None:
        self.rounds += 1
        design = self.design
        for cell in self.cells:
            if self.decided(cell):
                continue  # its first verdict stands
            base, cand = _paired(records, cell)
            if len(base) >= 2:
                self.looks[cell] = look(design, base, cand)
        open_cells = [c for c in self.cells if not self.decided(c)]
        if not open_cells:
            self.why = f"every cell decided after {self.rounds} rounds"
        elif self.rounds >= self.options.max_rounds:
            self.why = f"the round budget ({self.options.max_rounds}) is spent"
        elif self.options.budget_s is not None:
            spent = time.monotonic() - self.started_s
            if spent + spent / self.rounds > self.options.budget_s:
                self.why = (
                    f"the time budget ({self.options.budget_s / 60:g} min) would pass in the "
                    f"next round ({spent / 60:.1f} min spent in {self.rounds} rounds)"
                )
        return self.why

    def decided(self, cell: tuple[str, int]) -> bool:
        """Whether ``cell`` has its verdict (improved, regressed or no change)."""
        got = self.looks.get(cell)
        return got is not None and got.decision not in ("continue", "budget")


def _cell(c: CellResult, stop: SequentialStop) -> CellResult:
    got = stop.looks.get((c.workload, c.threads))
    if got is None:
        return c.model_copy(
            update={"verdict": "inconclusive", "reason": "fewer than 2 paired rounds"}
        )
    verdict = (
        got.decision if got.decision in ("improved", "regressed", "no change") else ("inconclusive")
    )
    advice: list[str] = []
    cvs = [v for v in (c.baseline_cv_pct, c.candidate_cv_pct) if v]
    if verdict == "inconclusive" and cvs:
        noise = sum(cvs) / len(cvs) / 100.0
        need = pairs_needed(noise, stop.options.target_pct, stop.design.alpha)
        advice.append(
            f"about {need} rounds would resolve a {stop.options.target_pct:g}% change at this "
            f"noise ({100 * noise:.1f}%)"
        )
    return c.model_copy(
        update={"verdict": verdict, "reason": f"sequential: {got.reason}", "advice": advice}
    )


def sequential_comparison(cmp: Comparison, stop: SequentialStop) -> Comparison:
    """``cmp`` with each cell's verdict the sequential design's, and why it stopped."""
    note = (
        f"sequential design (target {stop.options.target_pct:g}%, alpha 0.05 over "
        f"{len(stop.cells)} cell(s), Pocock-type spending): stopped after "
        f"{stop.rounds} rounds: {stop.why or 'the campaign ended'}"
    )
    return cmp.model_copy(
        update={
            "cells": [_cell(c, stop) for c in cmp.cells],
            "warnings": [note, *cmp.warnings],
        }
    )
