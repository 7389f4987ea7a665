"""`ab --target`: rounds added until each cell has a sequential decision (bench/adaptive.py),
on run records made from the recorded demo campaign with chosen TPS: a large effect stops
early with "improved", an A/A campaign runs to its round budget or shows "no change", and the
comparison's verdicts are the sequential ones with the reason it stopped."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from myaccel.bench.adaptive import (
    MAX_ROUNDS,
    AdaptiveOptions,
    SequentialStop,
    adaptive_profile,
    sequential_comparison,
)
from myaccel.bench.compare import compare_runs
from myaccel.bench.profiles import get_profile
from myaccel.bench.run_record import RunRecord
from myaccel.errors import UsageError

DEMO = Path(__file__).parents[1] / "fixtures" / "report" / "accelerate-demo" / "ab"
CELL = ("oltp_read_only", 8)


def _template() -> RunRecord:
    return RunRecord.model_validate(json.loads(sorted(DEMO.glob("run-*.json"))[0].read_text()))


def _run(t: RunRecord, arm: str, seed: int, tps: float, index: int) -> RunRecord:
    assert t.summary is not None
    return t.model_copy(
        update={
            "arm": arm,
            "seed": seed,
            "index": index,
            "run_id": f"{t.campaign_id}/{index:03d}",
            "workload": CELL[0],
            "threads": CELL[1],
            "summary": t.summary.model_copy(update={"tps": tps}),
        }
    )


def campaign(
    effect: float, cv: float, opts: AdaptiveOptions, seed: int = 3
) -> tuple[SequentialStop, list[RunRecord]]:
    """Rounds of the ``ab`` loop until the stop says so."""
    t, rng = _template(), np.random.default_rng(seed)
    sigma = math.sqrt(math.log1p(cv * cv))
    stop = SequentialStop(opts, [CELL])
    records: list[RunRecord] = []
    for rnd in range(opts.max_rounds):
        for arm, scale in (("baseline", 1.0), ("candidate", 1.0 + effect)):
            tps = float(1000.0 * scale * rng.lognormal(0.0, sigma))
            records.append(_run(t, arm, 1000 + rnd, tps, len(records) + 1))
        if stop(records):
            break
    return stop, records


def test_a_large_effect_stops_early_as_improved() -> None:
    stop, records = campaign(0.5, 0.05, AdaptiveOptions())
    assert stop.why is not None and stop.why.startswith("every cell decided"), stop.why
    assert stop.rounds <= 8 and len(records) == 2 * stop.rounds
    cmp = compare_runs(
        [r for r in records if r.arm == "baseline"], [r for r in records if r.arm == "candidate"]
    )
    seq = sequential_comparison(cmp, stop)
    (cell,) = seq.cells
    assert cell.verdict == "improved" and cell.reason.startswith("sequential: "), cell.reason
    assert seq.warnings[0].startswith("sequential design (target 5%")
    assert f"stopped after {stop.rounds} rounds" in seq.warnings[0]


def test_an_a_a_campaign_ends_at_its_budget_without_a_verdict() -> None:
    stop, _ = campaign(0.0, 0.15, AdaptiveOptions(max_rounds=6))
    assert stop.why == "the round budget (6) is spent", stop.why
    assert stop.looks[CELL].decision in ("budget", "no change", "continue")


def test_invalid_and_unpaired_runs_are_left_out() -> None:
    t = _template()
    records = [
        _run(t, "baseline", 1000, 1000.0, 1),
        _run(t, "candidate", 1000, 1500.0, 2),
        _run(t, "baseline", 1001, 1010.0, 3),  # its candidate never ran
    ]
    bad = _run(t, "candidate", 1001, 9999.0, 4)
    records.append(
        bad.model_copy(update={"validity": bad.validity.model_copy(update={"valid": False})})
    )
    stop = SequentialStop(AdaptiveOptions(), [CELL])
    assert stop(records) is None  # one pair only: no look yet
    assert CELL not in stop.looks


def test_a_target_makes_the_run_count_a_round_budget() -> None:
    prof = replace(get_profile("quick"), runs_per_arm=7)
    assert adaptive_profile(prof, None, None, runs_given=True) == (prof, None)
    got, opts = adaptive_profile(prof, 5.0, None, runs_given=False)
    assert got.runs_per_arm == MAX_ROUNDS and opts == AdaptiveOptions(5.0, None, MAX_ROUNDS)
    got, opts = adaptive_profile(prof, 3.0, 10.0, runs_given=True)
    assert got.runs_per_arm == 7 and opts == AdaptiveOptions(3.0, 600.0, 7)
    with pytest.raises(UsageError, match="--budget needs --target"):
        adaptive_profile(prof, None, 10.0, runs_given=False)


def test_a_cells_first_verdict_is_final_and_its_runs_stop() -> None:
    """Two cells: a large effect decides the first after a few rounds; the second (no
    effect, noisy) stays open. The first is never looked at again (the look that decided
    stands, however its later data would read) and the campaign's loop skips it."""
    t, rng = _template(), np.random.default_rng(8)
    other = ("oltp_read_write", 8)
    stop = SequentialStop(AdaptiveOptions(max_rounds=10), [CELL, other])
    records: list[RunRecord] = []
    ran: dict[tuple[str, int], int] = {CELL: 0, other: 0}
    for rnd in range(10):
        for cell, effect, cv in ((CELL, 1.0, 0.05), (other, 0.0, 0.20)):
            if stop.decided(cell):
                continue  # what bench/ab.py's loop does with AbPlan.decided
            ran[cell] += 1
            sigma = math.sqrt(math.log1p(cv * cv))
            for arm, scale in (("baseline", 1.0), ("candidate", 1.0 + effect)):
                tps = float(1000.0 * scale * rng.lognormal(0.0, sigma))
                rec = _run(t, arm, 1000 + rnd, tps, len(records) + 1)
                records.append(rec.model_copy(update={"workload": cell[0], "threads": cell[1]}))
        if stop(records):
            break
    first = stop.looks[CELL]
    assert stop.decided(CELL) and first.decision == "improved", first
    assert ran[CELL] == first.pairs < ran[other], ran  # no run of it after its verdict
    # a later call with data that would read otherwise leaves the verdict as it was
    flipped = [
        r.model_copy(update={"summary": r.summary.model_copy(update={"tps": 1.0})})  # type: ignore[union-attr]
        if (r.workload, r.threads) == CELL and r.arm == "candidate"
        else r
        for r in records
    ]
    stop(flipped)
    assert stop.looks[CELL] is first
