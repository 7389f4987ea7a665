"""`myaccel ab` says when an arm trades durability (issue 38, item 4): a warning line on
stderr naming the knob before anything runs, the arm's ``durability`` in the campaign's
arm description, and a warning in the comparison."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from myaccel.bench import ab
from myaccel.bench.compare import Comparison
from myaccel.cli.main import cli
from myaccel.errors import UsageError


def arm(sets: dict[str, str], config: Path | None = None, name: str = "candidate") -> ab.Arm:
    return ab.Arm(name=name, config=config, sets=sets)


@pytest.mark.parametrize(
    ("sets", "trades"),
    [
        ({"innodb_flush_log_at_trx_commit": "0"}, ["innodb_flush_log_at_trx_commit=0"]),
        ({"innodb-flush-log-at-trx-commit": "2"}, ["innodb-flush-log-at-trx-commit=2"]),
        ({"loose-skip-innodb-doublewrite": ""}, ["loose-skip-innodb-doublewrite="]),
        ({"SYNC_BINLOG": "0", "innodb_io_capacity": "2000"}, ["SYNC_BINLOG=0"]),
        ({"innodb_flush_method": "O_DIRECT_NO_FSYNC"}, ["innodb_flush_method=O_DIRECT_NO_FSYNC"]),
        ({"innodb_buffer_pool_size": "1G"}, []),
    ],
)
def test_durability_trades_of_sets(sets: dict[str, str], trades: list[str]) -> None:
    assert ab.durability_trades(arm(sets)) == trades


def test_durability_trades_of_a_config_file(tmp_path: Path) -> None:
    cnf = tmp_path / "fast.cnf"
    cnf.write_text("[client]\nsync_binlog=0\n[mysqld]\ninnodb_io_capacity=2000\nsync-binlog = 0\n")
    a = arm({}, config=cnf)
    assert ab.durability_trades(a) == ["sync-binlog = 0"]
    assert a.describe()["durability"] == ["sync-binlog = 0"]
    assert "durability" not in arm({"innodb_io_capacity": "2000"}).describe()


def test_warning_names_the_arm_and_the_knob() -> None:
    assert ab.durability_warning("candidate", []) is None
    line = ab.durability_warning("candidate", ["innodb_flush_log_at_trx_commit=0"])
    assert line is not None and "\n" not in line
    assert line.startswith("candidate arm changes durability: innodb_flush_log_at_trx_commit=0")
    assert "a crash can lose committed transactions" in line


def test_comparison_carries_the_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_compare(*_a: object, **kw: object) -> Comparison:
        return Comparison(
            created_at="2026-01-01T00:00:00Z",
            baseline_label=str(kw["baseline_label"]),
            candidate_label=str(kw["candidate_label"]),
            baseline_runs=[],
            candidate_runs=[],
            cells=[],
            warnings=["forced: x"],
        )

    monkeypatch.setattr(ab, "compare_runs", fake_compare)
    arms = {
        "baseline": arm({}, name="baseline"),
        "candidate": arm({"innodb_flush_log_at_trx_commit": "2"}),
    }
    pair = ab.ArmPair("", "baseline", "candidate", "baseline", "tuned")
    cmp = ab.compare_pair([], arms, pair)
    assert cmp.warnings[0] == "forced: x"
    assert cmp.warnings[1].startswith("tuned arm changes durability: innodb_flush_log")
    assert len(cmp.warnings) == 2


def _stopped(*_a: object, **_kw: object) -> ab.AbResult:
    raise UsageError("stopped by the test", hint="-")


def test_cli_warns_on_stderr_before_anything_runs(
    myaccel_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ab, "run", _stopped)
    args = ["ab", "--candidate-set", "innodb_flush_log_at_trx_commit=0"]
    r = CliRunner().invoke(cli, [*args, "--baseline-set", "skip-innodb-doublewrite=1"])
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("warning: ")]
    assert warnings == [
        "warning: baseline arm changes durability: skip-innodb-doublewrite=1: a crash can "
        "lose committed transactions, so its speed is not one a durable server gets",
        "warning: candidate arm changes durability: innodb_flush_log_at_trx_commit=0: a crash "
        "can lose committed transactions, so its speed is not one a durable server gets",
    ]
    assert "error: stopped by the test" in r.stderr


def test_cli_says_nothing_for_durable_arms(
    myaccel_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ab, "run", _stopped)
    r = CliRunner().invoke(cli, ["ab", "--candidate-set", "innodb_io_capacity=2000"])
    assert "durability" not in r.stderr and "error: stopped by the test" in r.stderr
