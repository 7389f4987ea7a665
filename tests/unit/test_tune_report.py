"""`myaccel report` on a `tune` results directory: the Tuning section (verdict, noise floor
and MDE, final A/B, the winning diff with the ablation's contributions, the optimization
history with the incumbent, parameter importances or why there are none), from a study on
the deterministic objective (no server)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tune_fixtures import FakeObjective, Ran, search

from myaccel.artifacts import save
from myaccel.report import write_report
from myaccel.report.content.tuning import tune_view
from myaccel.report.load import Loaded, load_artifacts
from myaccel.tune.history import incumbent_history
from myaccel.tune.objective import Sample
from myaccel.tune.result import TuneResult
from myaccel.tune.search import Budget
from myaccel.tune.session import tune_result
from myaccel.tune.study import TrialRecord

KNOBS = ("innodb_io_capacity", "innodb_adaptive_hash_index", "innodb_flush_neighbors")


def _study(out: Path, obj: FakeObjective, budget: Budget) -> tuple[Ran, TuneResult]:
    ran = search(out, obj, budget, only=KNOBS)
    result = tune_result(
        ran.outcome,
        ran.space,
        out,
        target="fake",
        durability="strict",
        workload=["oltp_read_write@8"],
        layers=["server"],
    )
    save(out / "tune.json", result)
    return ran, result


@pytest.fixture(scope="module")
def won(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Ran, TuneResult]:
    out = tmp_path_factory.mktemp("won") / "tune"
    ran, result = _study(out, FakeObjective(), Budget(trials=10, final_runs=5, max_pairs=3))
    write_report([out], out, html=True, md=True)
    return out, ran, result


def test_report_of_a_study_that_won(won: tuple[Path, Ran, TuneResult]) -> None:
    out, _, result = won
    md = (out / "report.md").read_text()
    assert md.startswith("# myaccel tune report")
    assert "## Tuning" in md and f"**Verdict:** {result.verdict}" in md
    assert result.improved and "improved" in result.verdict
    # the noise floor and the MDE
    assert result.noise is not None
    assert f"{result.noise.floor_pct:.1f}%" in md and "minimum detectable effect" in md
    # the final A/B with its CI and verdict
    f = result.final
    assert f is not None and f.ci_low_pct is not None and f.ci_high_pct is not None
    row = (
        f"| {f.runs_per_arm} | {f.delta_pct:+.1f}% | [{f.ci_low_pct:+.1f}%, {f.ci_high_pct:+.1f}%]"
    )
    assert row in md
    assert "oltp_read_write@8: improved" in md
    # the winning diff with each knob's contribution from the ablation
    for a in result.ablation:
        cells = [a.knob, a.plan_value, a.value, f"{a.delta_without_pct:+.1f}%"]
        assert f"| {' | '.join(cells)} | {a.contribution_pct:+.1f}% |" in md, a
    # importances from Optuna's evaluator over the study
    assert "### Parameter importances" in md and "| innodb_io_capacity |" in md
    # every trial, pruned ones with why
    assert md.count("\n| ") >= len(result.trials)
    html = (out / "report.html").read_text()
    assert 'id="tuning"' in html and 'href="#tuning"' in html
    assert 'aria-label="Optimization history: each trial against the plan"' in html
    assert 'aria-label="Parameter importances"' in html
    assert "incumbent" in html


def test_the_incumbent_line_is_the_searchs_incumbent(won: tuple[Path, Ran, TuneResult]) -> None:
    """The report recomputes the incumbent from study.db as the search did live."""
    out, ran, _ = won
    view = tune_view(load_artifacts([out]).tunes[0])
    assert [p.number for p in view.history] == [r.number for r in ran.records]
    live = {row.number: inc for row, inc in ran.progress.trials}
    for p in view.history:
        if p.number in live:
            inc = live[p.number]
            want = inc.delta_pct if inc is not None and inc.delta_pct is not None else 0.0
            assert p.incumbent_pct == pytest.approx(want), p
    assert view.history[-1].incumbent_pct > 0  # a real effect became the incumbent
    assert not view.notes


def test_honest_verdict_and_no_importances(tmp_path: Path) -> None:
    """No effect: the MDE verdict; a screen and a final A/B are too few for importances."""
    out = tmp_path / "tune"
    budget = Budget(trials=1, final_runs=5, max_pairs=3, ablation=False)
    _, result = _study(out, FakeObjective(effect=lambda _c: 1.0, sigma=0.03), budget)
    assert result.verdict.startswith("no configuration better than the plan by more than")
    write_report([out], out, html=True, md=True)
    md = (out / "report.md").read_text()
    assert f"**Verdict:** {result.verdict}" in md
    assert "not computed: 2 measured trial(s) besides the A/A, the evaluator needs at least 5" in md
    if result.final is None:
        assert "No final A/B" in md
    html = (out / "report.html").read_text()
    assert "Parameter importances: not computed" in html


def test_without_study_db_the_report_uses_tune_json(
    won: tuple[Path, Ran, TuneResult], tmp_path: Path
) -> None:
    out, _, result = won
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(out / "tune.json", copy / "tune.json")
    view = tune_view(load_artifacts([copy]).tunes[0])
    assert any("study.db not found" in n for n in view.notes)
    assert [p.number for p in view.history] == [t.number for t in result.trials]
    assert view.importances == sorted(result.importances.items(), key=lambda kv: -kv[1])
    assert view.history[-1].incumbent_pct > 0


def test_only_the_final_trial_is_an_experiment(tmp_path: Path) -> None:
    """Every trial of a sandbox study is an `ab` campaign: the report shows the final one
    as its Results, not every screen; the rules' plan it started from is not a second plan."""
    out = tmp_path / "tune"
    _, result = _study(out, FakeObjective(), Budget(trials=4, final_runs=5, max_pairs=3))
    fixture = Path(__file__).parents[1] / "fixtures" / "report" / "accelerate-demo"
    src = next(fixture.rglob("comparison.json")).parent
    final_dir = out / "trials" / "trial-009"
    for d in (out / "trials" / "trial-001", final_dir):
        shutil.copytree(src, d)
    shutil.copy(next(fixture.rglob("plan.json")), out / "rules-plan.json")
    shutil.copy(next(fixture.rglob("plan.json")), out / "plan.json")
    assert result.final is not None
    doc = result.model_copy(
        update={
            "final": result.final.model_copy(
                update={"comparison": str(final_dir / "comparison.json")}
            )
        }
    )
    save(out / "tune.json", doc)
    (out / "configs").mkdir()
    for name in ("plan.cnf", "trial-009.cnf"):
        (out / "configs" / name).write_text("[mysqld]\n")
    arts = load_artifacts([out])
    # the plan to apply was measured as the final A/B's candidate (it won) or as the plan
    want = "trial-009.cnf" if doc.improved else "plan.cnf"
    assert [c.name for c in arts.candidate_configs] == [want]
    assert [c.path.parent for c in arts.comparisons] == [final_dir]
    assert all(r.path.is_relative_to(final_dir) for r in arts.runs)
    assert [p.path.name for p in arts.plans] == ["plan.json"]


def test_history_without_samples_weights_by_runs() -> None:
    def rec(n: int, stage: str, changes: dict[str, str], value: float, runs: int) -> TrialRecord:
        sample = Sample({"c": ([100.0] * runs, [100.0 * (1 + value / 100)] * runs)})
        return TrialRecord(n, "COMPLETE", stage, changes, 0, sample, value, "", {})

    recs = [
        rec(0, "plan", {}, 1.0, 3),
        rec(1, "screen", {"a": "1"}, 20.0, 1),
        rec(2, "screen", {"b": "1"}, 1.0, 1),
        rec(3, "confirm", {"a": "1"}, 0.0, 3),
    ]
    exact = incumbent_history(recs, 5.0)
    assert exact[0] is None and exact[2] is not None and exact[2].changes == {"a": "1"}
    bare = [
        TrialRecord(r.number, r.state, r.stage, r.changes, 0, None, r.value, "", {}) for r in recs
    ]
    approx = incumbent_history(bare, 5.0, {0: 3, 1: 1, 2: 1, 3: 3})
    assert approx[1] is not None and approx[1].delta_pct == pytest.approx(20.0)
    # after the confirmation: (1 x +20% and 3 x 0%) -> about +4.7%, under the floor
    assert approx[3] is None


def test_a_damaged_study_db_is_said(won: tuple[Path, Ran, TuneResult], tmp_path: Path) -> None:
    out, _, _ = won
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(out / "tune.json", copy / "tune.json")
    (copy / "study.db").write_bytes(b"not a database")
    view = tune_view(Loaded(copy / "tune.json", load_artifacts([copy]).tunes[0].doc))
    assert any("not a readable tune study" in n for n in view.notes)
