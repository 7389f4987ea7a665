"""The instruction figure beside TPS (``bench/instructions.py``): its verdict from the
repeats' own spread, when it may decide an inconclusive cell, and the ABBA order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from myaccel.bench.ab import Arm
from myaccel.bench.compare import Comparison, format_markdown
from myaccel.bench.instructions import (
    arm_settings,
    decides,
    instruction_figure,
    measure,
    pair_figures,
    with_instructions,
)

DEMO = Path(__file__).parents[1] / "fixtures" / "report" / "accelerate-demo" / "ab"


def _comparison() -> Comparison:
    return Comparison.model_validate(json.loads((DEMO / "comparison.json").read_text()))


@pytest.mark.parametrize(
    ("base", "cand", "verdict"),
    [
        ([1_000_000, 1_001_000], [950_000, 950_500], "improved"),  # -5%, repeats 0.1%
        ([1_000_000, 1_001_000], [1_050_000, 1_050_500], "regressed"),
        ([1_000_000, 1_001_000], [995_000, 996_000], "no change"),  # -0.5% < 1%
        # -5%, but one arm's repeats differ by 2%: a change must pass 6%
        ([1_000_000, 1_020_000], [960_000, 960_500], "no change"),
    ],
)
def test_the_verdict_follows_the_repeats_spread(
    base: list[float], cand: list[float], verdict: str
) -> None:
    f = instruction_figure("oltp_read_only", 300, base, cand, tool="callgrind")
    assert f.verdict == verdict
    assert f.delta_pct == pytest.approx(
        100 * (sum(cand) / 2 - sum(base) / 2) / (sum(base) / 2), abs=1e-3
    )


def test_it_decides_between_builds_and_cpu_side_knobs_only(tmp_path: Path) -> None:
    assert decides(({}, "/usr"), ({}, "/opt/pgo")) == "the arms differ by their server build"
    assert "innodb_adaptive_hash_index" in str(
        decides(({}, None), ({"innodb-adaptive-hash-index": "OFF"}, None))
    )
    assert decides(({}, None), ({"innodb_buffer_pool_size": "1G"}, None)) is None
    assert decides(({}, None), ({}, None)) is None  # an A/A: nothing to decide
    cnf = tmp_path / "tuned.cnf"
    cnf.write_text("[mysqld]\ninnodb_buffer_pool_size = 2G\n[client]\nuser = x\n")
    sets, basedir = arm_settings(Arm("candidate", config=cnf, sets={"performance_schema": "OFF"}))
    assert sets == {"innodb_buffer_pool_size": "2G", "performance_schema": "OFF"}
    assert basedir is None


def test_an_inconclusive_cell_is_decided_only_when_the_figure_may() -> None:
    cmp = _comparison()
    cell = cmp.cells[0].model_copy(update={"verdict": "inconclusive", "reason": "CI spans 0"})
    cmp = cmp.model_copy(update={"cells": [cell]})
    fig = instruction_figure(cell.workload, 300, [1e6, 1e6], [9e5, 9.01e5], tool="callgrind")
    shown = with_instructions(cmp, [fig], None)
    assert shown.cells[0].verdict == "inconclusive" and shown.instructions == [fig]
    decided = with_instructions(cmp, [fig], "the arms differ by their server build")
    assert decided.cells[0].verdict == "improved"
    assert decided.cells[0].decided_by == "instructions"
    md = format_markdown(decided)
    assert "improved (instructions)" in md and "Instructions per transaction" in md
    # another workload's figure decides nothing
    other = fig.model_copy(update={"workload": "oltp_point_select"})
    assert with_instructions(cmp, [other], "x").cells[0].verdict == "inconclusive"


def test_the_arms_are_counted_in_abba_order(tmp_path: Path) -> None:
    calls: list[str] = []

    def count(arm: str, wl: str, out: Path) -> tuple[float, int]:
        calls.append(arm)
        return (1000.0 if arm == "baseline" else 900.0) + len(calls), 300

    got = measure(["baseline", "candidate", "build"], ["oltp_read_only"], count, tmp_path, print)
    assert calls == ["baseline", "candidate", "build", "build", "candidate", "baseline"]
    arms = {n: Arm(n) for n in ("baseline", "candidate")} | {
        "build": Arm("build", basedir=tmp_path)
    }
    figs, why = pair_figures(got, arms, "candidate", "build", "callgrind")
    assert figs[0].baseline == [902.0, 905.0] and figs[0].events == 300
    assert why == "the arms differ by their server build"


def test_the_simulation_runs_the_arms_own_cpu_side_knobs() -> None:
    from myaccel.profile.simulate.arms import arm_simulation_settings

    plain = {"baseline": Arm("baseline"), "candidate": Arm("candidate", sets={"x": "1"})}
    assert arm_simulation_settings(plain) is None
    ahi = {
        "baseline": Arm("baseline"),
        "candidate": Arm("candidate", sets={"performance_schema": "ON"}),
    }
    got = arm_simulation_settings(ahi)
    assert got is not None and "loose-performance_schema" not in got
    assert got["innodb_adaptive_hash_index"] == "0"  # the others stay the simulation's


SYSROOTS = Path(__file__).parents[1] / "fixtures" / "sysroots"
PERFSTAT = Path(__file__).parents[1] / "fixtures" / "perfstat"


def test_the_pmu_counts_where_one_counts_instructions_else_callgrind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from myaccel import proc
    from myaccel.facts.sysroot import Sysroot
    from myaccel.profile.perfstat.arms import counting_for, has_pmu

    assert has_pmu(Sysroot(str(SYSROOTS / "graviton2-m6g")))
    assert has_pmu(Sysroot(str(SYSROOTS / "kunpeng920-2s")))
    assert not has_pmu(Sysroot(str(SYSROOTS / "this-vm")))
    monkeypatch.setattr(proc, "require", lambda name: f"/usr/bin/{name}")
    assert counting_for(100, Sysroot(str(SYSROOTS / "graviton2-m6g"))).tool.startswith("perf")
    assert counting_for(100, Sysroot(str(SYSROOTS / "this-vm"))).tool.startswith("callgrind")


def test_instructions_per_transaction_from_perf_stat() -> None:
    from myaccel.errors import ProcessFailed
    from myaccel.profile.perfstat.arms import instructions_per_transaction

    assert instructions_per_transaction("123456789,,instructions,1000,100.00,,\n", 1000) == (
        pytest.approx(123456.789)
    )
    with pytest.raises(ProcessFailed, match="did not count instructions"):  # a VM: no PMU
        instructions_per_transaction((PERFSTAT / "vm-cycles-instructions.csv").read_text(), 10)
