"""scripts/rule_ablation.py: recording measured rows into the rules' data file."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from myaccel.rules.measured import MeasuredEffect

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "rule_ablation.py"


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("rule_ablation", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def _row(rule: str, delta: float, workload: str = "oltp_write_only") -> MeasuredEffect:
    return MeasuredEffect(
        rule=rule,
        comparison="without-vs-with",
        setting="x = 1",
        machine="VM guest, 2 CPUs",
        cpus=2,
        flavor="mariadb",
        server="MariaDB 10.11.19",
        workload=workload,
        threads=16,
        dataset="16 x 100,000 rows",
        runs_per_arm=6,
        delta_pct=delta,
        ci_low_pct=delta - 1,
        ci_high_pct=delta + 1,
        verdict="inconclusive",
        measured_on="2026-11-27",
        command="scripts/rule_ablation.py SANDBOX ablate",
    )


def test_a_measured_again_row_is_replaced_where_it_stands(
    script: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "effects.json"
    script._record_rows(f, [_row("a", 1.0), _row("b", 2.0), _row("c", 3.0)])
    script._record_rows(f, [_row("b", 9.0), _row("d", 4.0)])
    rows = json.loads(f.read_text())["rows"]
    assert [(r["rule"], r["delta_pct"]) for r in rows] == [
        ("a", 1.0),
        ("b", 9.0),
        ("c", 3.0),
        ("d", 4.0),
    ]
    assert "# recorded 2 row(s)" in capsys.readouterr().out


def test_another_cell_of_the_same_rule_is_a_row_of_its_own(
    script: ModuleType, tmp_path: Path
) -> None:
    f = tmp_path / "effects.json"
    script._record_rows(f, [_row("a", 1.0)])
    script._record_rows(f, [_row("a", 5.0, workload="oltp_read_write")])
    rows = json.loads(f.read_text())["rows"]
    assert [(r["workload"], r["delta_pct"]) for r in rows] == [
        ("oltp_write_only", 1.0),
        ("oltp_read_write", 5.0),
    ]
