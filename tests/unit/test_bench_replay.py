"""A measured sysbench run with no sysbench: the fake runner replays recorded outputs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from fake_runner import Recording, ReplayRunner

from myaccel.bench import campaign
from myaccel.bench.campaign import BenchContext, measure_run
from myaccel.bench.runner import ProgressFn, RunSpec, execute
from myaccel.bench.sysbench_output import parse_output
from myaccel.env import Environment, using
from myaccel.server.connection import ConnectParams

RECORDED = "hooks_oltp_read_only_t4"  # sysbench 1.0.20 through our Lua hooks, 4 threads, 6 s


def _nowhere(tmp_path: Path, password: str | None = None) -> ConnectParams:
    return ConnectParams(
        host=None,
        port=3306,
        socket=str(tmp_path / "no-server.sock"),
        user="sbtest",
        password=password,
        connect_timeout_s=1.0,
    )


def _context(tmp_path: Path, on_report: ProgressFn | None = None) -> BenchContext:
    """A campaign whose server is unreachable: only the replayed sysbench answers."""
    nowhere = _nowhere(tmp_path)
    return BenchContext(
        target=nowhere,
        admin=nowhere,
        out_dir=tmp_path,
        campaign_id="c1",
        host={},
        server={},
        dataset={},
        on_report=on_report,
    )


def test_execute_streams_reports_and_keeps_the_output(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MYSQL_PWD", "must-not-reach-sysbench")
    rec = Recording.sysbench(RECORDED)
    seen_config: list[str] = []

    def sysbench(argv: tuple[str, ...]) -> Recording:
        cfg = next(a for a in argv if a.startswith("--config-file="))
        seen_config.append(Path(cfg.split("=", 1)[1]).read_text())
        return rec

    fake = ReplayRunner().on(["sysbench"], sysbench)
    reports: list[dict[str, Any]] = []
    argv = ["sysbench", "wrapper.lua", "--threads=4", "run"]
    with using(Environment(runner=fake)):
        raw = execute(
            argv,
            {"MYACCEL_WORKLOAD": "oltp_read_only"},
            timeout_s=60,
            on_report=reports.append,
            password="pw",
        )
    assert raw.output == rec.stdout and raw.exit_code == 0 and not raw.timed_out
    assert raw.argv == argv  # the recorded command never names the password file
    want = [json.loads(ln[8:]) for ln in rec.stdout.splitlines() if ln.startswith("MYACCEL ")]
    assert reports == want and len(want) > 6
    (call,) = fake.calls
    assert call.kind == "stream"
    assert call.argv[:2] == ("sysbench", "wrapper.lua") and call.argv[-1] == "run"
    assert call.env == {"MYSQL_PWD": None, "MYACCEL_WORKLOAD": "oltp_read_only"}
    assert seen_config and "pw" in seen_config[0]  # the password went through the 0600 file
    cfg_path = next(a for a in call.argv if a.startswith("--config-file=")).split("=", 1)[1]
    assert not os.path.exists(cfg_path)  # and the file is gone


def test_execute_reports_a_timeout() -> None:
    fake = ReplayRunner().on(
        ["sysbench"], Recording("Threads started!\n", returncode=-9, timed_out=True)
    )
    with using(Environment(runner=fake)):
        raw = execute(["sysbench", "x.lua", "run"], {}, timeout_s=1)
    assert raw.timed_out and raw.exit_code == -9 and raw.output == "Threads started!\n"


def test_measure_run_parses_a_replayed_sysbench_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(campaign, "host_quietness", lambda sample_s=1.0: {})
    rec = Recording.sysbench(RECORDED)
    fake = ReplayRunner().on(["sysbench"], rec)
    reports: list[dict[str, Any]] = []
    ctx = _context(tmp_path, on_report=reports.append)
    spec = RunSpec(
        workload="oltp_read_only", threads=4, duration_s=6, warmup_s=0, tables=4, table_size=10000
    )
    with using(Environment(runner=fake)):
        run = measure_run(ctx, spec, index=1)

    (argv,) = fake.argvs("stream")
    assert argv[0] == "/usr/bin/sysbench" and argv[-1] == "run"
    assert "--threads=4" in argv and f"--mysql-socket={tmp_path / 'no-server.sock'}" in argv
    assert (
        fake.calls[0].env is not None and fake.calls[0].env["MYACCEL_WORKLOAD"] == "oltp_read_only"
    )

    parsed = parse_output(rec.stdout, exit_code=rec.returncode)
    assert parsed.summary is not None
    assert run.validity.valid, run.validity.reasons
    assert run.validity.exit_code == 0
    assert run.summary is not None and run.summary.tps == pytest.approx(
        parsed.summary.transactions_per_s
    )
    assert run.summary.transactions == parsed.summary.transactions > 0
    assert [p.tps for p in run.series] == [i.tps for i in parsed.intervals]
    assert len(run.series) == 6
    assert len(reports) == len(run.series) + 1  # one MYACCEL line a second, then the summary
    assert (tmp_path / "run-001.out").read_text() == rec.stdout
    assert (tmp_path / "run-001.json").is_file()


def test_measure_run_marks_a_failed_replay_invalid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(campaign, "host_quietness", lambda sample_s=1.0: {})
    fake = ReplayRunner().on(["sysbench"], Recording.sysbench("fatal_missing_table_ps"))
    ctx = _context(tmp_path)
    spec = RunSpec(
        workload="oltp_read_only", threads=2, duration_s=5, warmup_s=0, tables=1, table_size=10
    )
    with using(Environment(runner=fake)):
        run = measure_run(ctx, spec, index=2)
    assert not run.validity.valid and run.validity.exit_code != 0
    assert run.validity.reasons and run.validity.failure != "ok"
