"""`make fleet-test` (ansible/tests/fleet_test.py) itself: a failed run keeps its work
directory, the playbooks' logs included, and says where it is (issue 36: a failure deleted
its own logs, so its cause was lost); a passed run removes it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest

HARNESS = Path(__file__).resolve().parents[2] / "ansible" / "tests" / "fleet_test.py"


def _harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fleet_test_harness", HARNESS)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_failed_run_keeps_its_work_directory_and_says_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    harness = _harness()
    work = tmp_path / "work"
    monkeypatch.setenv("FLEET_TEST_DIR", str(work))
    monkeypatch.setattr(sys, "argv", ["fleet_test.py"])

    def fail(argv: list[str], env: object = None, cwd: object = None) -> NoReturn:
        (work / "logs" / "01-plan.yml.log").write_text("fatal: [db1]: FAILED! => boom\n")
        sys.exit(f"failed: {' '.join(argv)}")

    monkeypatch.setattr(harness, "sh", fail)
    with pytest.raises(SystemExit):
        harness.main()
    assert (work / "logs" / "01-plan.yml.log").is_file(), "the failed run deleted its logs"
    err = capsys.readouterr().err
    assert f"work directory kept: {work}" in err
    assert "fatal: [db1]: FAILED! => boom" in err  # the cause, where CI shows it


def test_a_passed_run_removes_its_work_directory(tmp_path: Path) -> None:
    harness = _harness()
    work = tmp_path / "work"
    (work / "logs").mkdir(parents=True)
    harness.finish(work, [], passed=True, keep=False)
    assert not work.exists()
    work.mkdir()
    harness.finish(work, [], passed=True, keep=True)
    assert work.is_dir()
