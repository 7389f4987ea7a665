"""`tune` plumbing on a deterministic objective (no server): the search space and its
limits, the memory budget and the durability exclusion on every measured configuration,
the noise floor, successive halving, the verdicts, resume, a killed run, the tuned plan that
apply accepts, and the CLI start without Optuna."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tune_fixtures import (
    FakeObjective,
    fixture_facts,
    fixture_plan,
    fixture_space,
    search,
    server_knobs,
    with_memory,
)

from myaccel.actions.guard import DurabilityRefused, ServerId, check_plan
from myaccel.errors import UsageError
from myaccel.knobs.catalog import Catalog
from myaccel.tune.constraint import durability_changes
from myaccel.tune.halving import Halving, Measured
from myaccel.tune.objective import Sample, score
from myaccel.tune.result import TuneResult, tuned_plan
from myaccel.tune.search import Budget
from myaccel.tune.space import SEARCH_RANGES
from myaccel.tune.study import Study
from myaccel.tune.summary import format_markdown
from myaccel.units import GiB, MiB

MARIADB = ServerId("mariadb", "10.11.19-MariaDB-0+deb12u1", "server")
DURABILITY = {n for n in SEARCH_RANGES if Catalog.load().is_durability(n)}
QUICK = Budget(trials=6, aa_pairs=3, final_runs=5, max_pairs=3, ablation=False)


# ---------------------------------------------------------------- the space


def test_space_is_the_catalogs_knobs_without_durability_when_strict() -> None:
    facts = fixture_facts()
    space, _ = fixture_space(facts, fixture_plan(facts))
    names = set(space.names())
    assert names and not names & DURABILITY
    assert "innodb_redo_log_capacity" not in names  # MySQL only: not on MariaDB 10.11
    assert "not on" in space.left_out["innodb_redo_log_capacity"]
    assert all("durability" in space.left_out[n] for n in DURABILITY)
    sk = server_knobs()
    for d in space.dims:  # every range inside the catalog's
        k = sk.knob(d.name)
        if d.kind in ("int", "float"):
            assert k.min is None or d.knob_value(d.low) >= k.min
            assert k.max is None or d.knob_value(d.high) <= k.max
        else:
            for c in d.choices:
                sk.parse_value(d.name, c)
    # the plan is a point of the space: its parameters make no change
    assert space.changes(space.base_params()) == {}


def test_relaxed_durability_searches_the_durability_knobs() -> None:
    facts = fixture_facts()
    space, _ = fixture_space(facts, fixture_plan(facts, "relaxed"), "relaxed")
    assert {"innodb_flush_log_at_trx_commit", "sync_binlog"} <= set(space.names())


def test_buffer_pool_range_stops_at_the_memory_budget() -> None:
    facts = with_memory(fixture_facts(), 2 * GiB)
    plan = fixture_plan(facts)
    space, constraint = fixture_space(facts, plan)
    d = space.dim("innodb_buffer_pool_size")
    top = constraint.largest_buffer_pool()
    assert top is not None and d.knob_value(d.high) <= max(top, int(space.base[d.name]))
    assert not constraint.check({"innodb_buffer_pool_size": str(4 * GiB)}).ok
    assert constraint.check({"innodb_buffer_pool_size": str(256 * MiB)}).ok


def test_strict_constraint_refuses_durability_changes() -> None:
    facts = fixture_facts()
    _, constraint = fixture_space(facts, fixture_plan(facts))
    v = constraint.check({"innodb_flush_log_at_trx_commit": "2"})
    assert not v.ok and "durability" in v.reason
    assert durability_changes({"sync_binlog": "0", "innodb_io_capacity": "500"}) == ["sync_binlog"]


# ---------------------------------------------------------------- the limits always hold


MEMORY_KNOBS = (
    "innodb_buffer_pool_size",
    "innodb_log_buffer_size",
    "sort_buffer_size",
    "join_buffer_size",
    "innodb_io_capacity",
)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), ram_gib=st.sampled_from([2, 3, 4, 8]))
def test_every_measured_configuration_fits_the_budget_and_keeps_durability(
    tmp_path_factory: pytest.TempPathFactory, seed: int, ram_gib: int
) -> None:
    """Small RAM makes many TPE proposals infeasible: they are pruned, never measured."""
    facts = with_memory(fixture_facts(), ram_gib * GiB)
    obj = FakeObjective()
    ran = search(
        tmp_path_factory.mktemp("s"), obj, QUICK, seed=seed, facts=facts, only=MEMORY_KNOBS
    )
    _, constraint = fixture_space(facts, fixture_plan(facts))
    assert obj.seen
    for changes in obj.seen[1:]:  # after the plan's A/A
        assert constraint.check(changes).ok, changes
        assert not set(changes) & DURABILITY
    for r in ran.records:
        if r.state == "PRUNED":
            assert r.note and not constraint.check(r.changes).ok
    m = constraint.memory(ran.outcome.winner)
    assert m is not None and m.within


# ---------------------------------------------------------------- noise, halving, verdicts


def test_a_real_effect_wins_the_final_ab_with_ablation(tmp_path: Path) -> None:
    obj = FakeObjective()
    budget = Budget(trials=10, aa_pairs=3, final_runs=5, max_pairs=3)
    ran = search(
        tmp_path / "s",
        obj,
        budget,
        only=("innodb_io_capacity", "innodb_adaptive_hash_index", "innodb_flush_neighbors"),
    )
    o = ran.outcome
    assert ran.records[0].stage == "plan" and ran.records[0].changes == {}  # the plan first
    assert o.improved and o.verdict.startswith("improved"), o.verdict
    assert int(o.winner["innodb_io_capacity"]) >= 2000
    assert o.final is not None and o.final.runs_per_arm >= 5
    assert o.final.ci_low_pct is not None and o.final.ci_low_pct > 0
    assert {r.stage for r in ran.records} >= {"plan", "screen", "final"}
    knobs = {a.knob: a for a in o.ablation}
    assert set(knobs) == set(o.winner)
    assert knobs["innodb_io_capacity"].contribution_pct > 5  # the +8% knob carries the gain
    assert ran.progress.trials and ran.progress.phases[0].startswith("noise floor")
    text = format_markdown(
        TuneResult(
            created_at="now",
            target="fake",
            durability="strict",
            workload=["oltp_read_write@8"],
            searched=ran.space.names(),
            trials=o.trials,
            winner=o.winner,
            final=o.final,
            improved=o.improved,
            verdict=o.verdict,
            ablation=o.ablation,
            study="study.db",
            plan="plan.json",
        )
    )
    assert "**Verdict:** improved" in text and "| innodb_io_capacity |" in text
    assert "## Final A/B" in text and "| final |" in text


def test_no_effect_gives_the_honest_verdict(tmp_path: Path) -> None:
    obj = FakeObjective(effect=lambda _c: 1.0, sigma=0.03)
    ran = search(tmp_path / "s", obj, QUICK, only=MEMORY_KNOBS)
    o = ran.outcome
    assert not o.improved
    assert o.verdict.startswith(
        "no configuration better than the plan by more than the minimum detectable effect"
    ), o.verdict
    assert o.verdict.endswith("%")


def test_a_winner_that_does_not_beat_the_plan_gets_no_ablation(tmp_path: Path) -> None:
    """Measured on a 60-minute run: the halving's survivor lost the final A/B (-8.6%),
    and its ablation (22 knobs x 2 arms x 3 runs) would have taken the rest of the hour."""
    obj = FakeObjective(effect=lambda _c: 1.0, sigma=0.05)  # screens win by noise alone
    budget = Budget(trials=8, aa_pairs=3, final_runs=5, max_pairs=3, ablation=True)
    ran = search(tmp_path / "s", obj, budget, only=MEMORY_KNOBS)
    o = ran.outcome
    assert o.final is not None and o.winner  # a survivor reached the final A/B...
    assert not o.improved  # ...and did not beat the plan there
    assert o.ablation == []
    assert "ablation" not in {r.stage for r in ran.records}


def test_noise_floor_and_halving_keep_the_best() -> None:
    def m(key: str, rung: int, gain: float, n: int) -> Measured:
        return Measured(key, rung, Sample({"c": ([100.0] * n, [100.0 * gain] * n)}))

    ms = [m("a", 0, 1.10, 1), m("b", 0, 1.05, 1), m("c", 0, 1.01, 1), m("d", 0, 0.97, 1)]
    h = Halving(screen_pairs=1, eta=2, max_pairs=4, floor_pct=2.0)
    assert h.screened(ms) == ["a", "b"]  # c is under the floor, d lost
    step = h.next_step(ms)
    assert step is not None and step.key == "a" and step.rung == 1 and step.pairs == 1
    ms.append(m("a", 1, 1.02, 1))  # a's confirmation disappoints
    assert h.next_step(ms) is None  # rung 1 keeps 1 of 2: done
    assert h.winner(ms) == "a"
    sc = score(Sample({"c": ([100.0, 101.0, 99.0], [100.0, 100.5, 99.5])}))
    assert abs(sc.delta_pct) < 1.0 and sc.noise_log_sd is not None


# ---------------------------------------------------------------- the study


def test_resume_continues_the_study(tmp_path: Path) -> None:
    out = tmp_path / "s"
    only = ("innodb_io_capacity",)
    first = search(out, FakeObjective(), Budget(trials=3, ablation=False), only=only)
    screens = [r for r in first.records if r.stage == "screen" and r.state == "COMPLETE"]
    assert len(screens) == 3
    obj = FakeObjective()
    second = search(out, obj, Budget(trials=5, ablation=False), resume=True, only=only)
    screens2 = [r for r in second.records if r.stage == "screen" and r.state == "COMPLETE"]
    assert len(screens2) == 5  # two more, the first three kept
    assert [r.number for r in second.records[: len(first.records)]] == [
        r.number for r in first.records
    ]
    assert sum(1 for r in second.records if r.stage == "plan") == 1  # not measured again
    with pytest.raises(UsageError, match="already holds a tune study"):
        search(out, FakeObjective(), QUICK, only=only)
    with pytest.raises(UsageError, match="this study searched innodb_io_capacity"):
        search(out, FakeObjective(), QUICK, resume=True, only=("innodb_flush_neighbors",))
    with pytest.raises(UsageError, match="no tune study to resume"):
        search(tmp_path / "none", FakeObjective(), QUICK, resume=True, only=only)


def test_a_killed_run_loses_only_the_running_trial(tmp_path: Path) -> None:
    out = tmp_path / "s"
    marker = tmp_path / "running"
    here = Path(__file__).parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(here), *sys.path])}
    child = subprocess.Popen(
        [sys.executable, str(here / "tune_fixtures.py"), str(out), "3"], env=env, cwd=here
    )
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert child.poll() is None, "the search ended before trial 3"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(30)
    with Study.open(out, resume=True, seed=0, startup_trials=3) as study:
        states = {r.number: r.state for r in study.records()}
    assert states[3] == "FAIL"  # the running trial, marked on resume
    assert all(states[n] in ("COMPLETE", "PRUNED") for n in range(3))
    ran = search(
        out,
        FakeObjective(),
        Budget(trials=6, ablation=False),
        resume=True,
        only=("innodb_io_capacity",),
    )
    assert [r.state for r in ran.records[:3]] == [states[n] for n in range(3)]
    assert sum(1 for r in ran.records if r.stage == "screen" and r.state == "COMPLETE") == 6


def test_interrupt_fails_the_running_trial_and_keeps_the_rest(tmp_path: Path) -> None:
    class Stop(FakeObjective):
        def measure(self, label: str, changes, pairs):  # type: ignore[no-untyped-def]
            if label == "trial-002":
                raise KeyboardInterrupt
            return super().measure(label, changes, pairs)

    out = tmp_path / "s"
    with pytest.raises(KeyboardInterrupt):
        search(out, Stop(), QUICK, only=("innodb_io_capacity",))
    with Study.open(out, resume=True, seed=0, startup_trials=3) as study:
        recs = study.records()
    assert [r.state for r in recs] == ["COMPLETE", "COMPLETE", "FAIL"]


# ---------------------------------------------------------------- the result is a plan


def test_the_tuned_plan_passes_applys_guard() -> None:
    facts = fixture_facts()
    plan = fixture_plan(facts)
    changes = {"innodb_io_capacity": "4000", "innodb_adaptive_hash_index": "OFF"}
    tp = tuned_plan(plan, changes, server_knobs())
    assert tp.digest_ok and tp.durability == "strict"
    check_plan(tp, MARIADB)  # no refusal
    got = {r.target: r.proposed for r in tp.recommendations}
    assert got["mysql:innodb_io_capacity"] == "4000"
    assert len([r for r in tp.recommendations if r.target == "mysql:innodb_io_capacity"]) == 1
    assert tuned_plan(plan, {}, server_knobs()) is plan
    with pytest.raises(DurabilityRefused):  # strict plans never carry durability changes
        check_plan(
            tuned_plan(plan, {"innodb_flush_log_at_trx_commit": "2"}, server_knobs()), MARIADB
        )
    relaxed = tuned_plan(
        fixture_plan(facts, "relaxed"), {"innodb_flush_log_at_trx_commit": "2"}, server_knobs()
    )
    check_plan(relaxed, MARIADB)  # a sealed relaxed plan may


def test_cli_start_does_not_import_optuna() -> None:
    code = (
        "import sys, myaccel.cli.main, myaccel.cli.tune, myaccel.tune; "
        "sys.exit(1 if 'optuna' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
