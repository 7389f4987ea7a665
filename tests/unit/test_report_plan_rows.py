"""The plan's rows in a report: a note that keeps a value is not "not applied" (issue 35
defect 6: "performance_schema ON -> ON" was listed among the changes not applied)."""

from __future__ import annotations

from pathlib import Path

from test_rules import MYSQL_80, host, server

from myaccel.report.content.plans import not_applied_rows, plan_view
from myaccel.report.load import Loaded
from myaccel.rules.engine import make_plan


def test_a_kept_value_is_not_listed_as_not_applied() -> None:
    srv = server("8.0.34", "MySQL Community Server - GPL", {**MYSQL_80, "performance_schema": "ON"})
    plan = make_plan(host("kunpeng920-2s").model_copy(update={"server": srv}))
    note = next(r for r in plan.recommendations if r.id == "server-performance-schema")
    assert (note.current, note.proposed, note.action) == ("ON", "ON", "advisory")
    view = plan_view(Loaded(Path("plan.json"), plan), [], [])
    rows = {r.id: r.status for r in view.rows}
    assert rows["server-performance-schema"] == "kept"
    listed = [what for what, _ in not_applied_rows([view])]
    assert not any(w.startswith("server-performance-schema") for w in listed), listed
    assert any(w.startswith("build-") for w in listed), "a real advisory is still listed"


def test_a_profile_changed_by_options_says_so() -> None:
    """Issue 35 defect 6: "profile quick" of runs whose every setting options changed."""
    from dataclasses import asdict

    from myaccel.bench.profiles import get_profile
    from myaccel.report.content.experiments import profile_label

    quick = asdict(get_profile("quick"))
    assert profile_label(quick) == "profile quick"
    ran = {**quick, "duration_s": 2, "runs_per_arm": 3, "table_size": 5000}
    assert profile_label(ran) == (
        "profile quick changed by options: 2 s runs; 3 runs per arm; 5,000 rows per table"
    )
    assert profile_label({"name": "mine"}) == "profile mine"
