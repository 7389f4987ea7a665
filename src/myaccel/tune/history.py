"""The incumbent: the configuration with the best score on all its runs so far, and how it
moved over a study (the line of the report's optimization history).

A configuration's evidence is every screen, confirmation and final A/B measured on it,
pooled (``Sample.merged``) and scored as `ab` scores (``objective.score``); the incumbent is
the best of them when it beats the noise floor, else the plan (None). Without the samples
(a ``tune.json`` whose ``study.db`` is gone) a configuration's score is the runs-weighted
geometric mean of its trials' changes: close, not the same statistic, and said so by the
report.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from myaccel.tune.objective import Sample, score
from myaccel.tune.study import TrialRecord

EVIDENCE_STAGES = ("screen", "confirm", "final")


@dataclass(frozen=True)
class Incumbent:
    changes: dict[str, str]
    delta_pct: float
    runs_per_arm: int


@dataclass
class _Evidence:
    sample: Sample | None
    log_sum: float = 0.0  # runs-weighted sum of log(1 + change)
    weight: int = 0
    complete: bool = True  # every trial had its sample

    def add(self, r: TrialRecord, runs: int) -> None:
        if r.sample is not None and self.complete:
            self.sample = r.sample if self.sample is None else self.sample.merged(r.sample)
        else:
            self.complete = False
        if r.value is not None:
            self.log_sum += runs * math.log1p(r.value / 100.0)
            self.weight += runs

    def delta_pct(self) -> float:
        if self.complete and self.sample is not None:
            return score(self.sample).delta_pct
        return 100.0 * math.expm1(self.log_sum / max(1, self.weight))

    def runs(self) -> int:
        return self.sample.pairs() if self.complete and self.sample is not None else self.weight


def _counts(r: TrialRecord) -> bool:
    return r.state == "COMPLETE" and r.stage in EVIDENCE_STAGES and bool(r.changes)


def incumbent_history(
    records: Sequence[TrialRecord],
    floor_pct: float | None,
    runs: Mapping[int, int] | None = None,
) -> list[Incumbent | None]:
    """The incumbent after each of ``records`` (None: the plan is still the best known).
    ``runs``: trial number -> runs per arm, for records without their sample."""
    evidence: dict[str, _Evidence] = {}
    scores: dict[str, float] = {}
    out: list[Incumbent | None] = []
    for r in records:
        if _counts(r):
            ev = evidence.setdefault(r.key, _Evidence(None))
            n = r.sample.pairs() if r.sample is not None else (runs or {}).get(r.number, 1)
            ev.add(r, n)
            scores[r.key] = ev.delta_pct()  # only the configuration that moved is rescored
        out.append(_best(evidence, scores, floor_pct))
    return out


def incumbent(records: Sequence[TrialRecord], floor_pct: float | None) -> Incumbent | None:
    """The incumbent after all of ``records`` (each configuration scored once)."""
    evidence: dict[str, _Evidence] = {}
    for r in records:
        if _counts(r):
            n = r.sample.pairs() if r.sample is not None else 1
            evidence.setdefault(r.key, _Evidence(None)).add(r, n)
    return _best(evidence, {k: ev.delta_pct() for k, ev in evidence.items()}, floor_pct)


def _best(
    evidence: dict[str, _Evidence], scores: dict[str, float], floor_pct: float | None
) -> Incumbent | None:
    if not scores:
        return None
    key = max(scores, key=lambda k: scores[k])
    if floor_pct is None or scores[key] <= floor_pct:
        return None
    return Incumbent(json.loads(key), scores[key], evidence[key].runs())


__all__ = ["EVIDENCE_STAGES", "Incumbent", "incumbent", "incumbent_history"]
