"""`myaccel tune` on a real MariaDB sandbox, shortened: one knob and the process layer, one
screening trial of 1-second runs on 1,000 rows, the A/A noise floor and the final interleaved
A/B of 5 runs per arm; it ends with a verdict and its report, and its plan.json is a plan
`apply` takes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from myaccel.artifacts import load
from myaccel.cli.main import cli
from myaccel.rules.model import Plan
from myaccel.server.sandbox import Sandbox
from myaccel.tune.result import TuneResult

pytestmark = pytest.mark.integration

SHORT = [
    "-w",
    "ro",
    "-t",
    "2",
    "--time",
    "1",
    "--warmup",
    "0",
    "--tables",
    "1",
    "--table-size",
    "1000",
    "--cleanup",  # the session's sandbox may hold another test's dataset
]


def test_tune_short_run_ends_with_a_verdict_and_an_applicable_plan(
    sandbox_env: Sandbox, tmp_path: Path
) -> None:
    out = tmp_path / "tune"
    args = ["tune", "--sandbox", sandbox_env.name, *SHORT, "--trials", "1"]
    args += ["--knob", "innodb_io_capacity", "--no-ablation", "--out", str(out)]
    args += ["--layers", "server,process"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.stderr
    assert "**Verdict:** " in r.stdout
    assert "incumbent:" in r.stderr and "== noise floor" in r.stderr
    result = load(out / "tune.json", TuneResult)
    assert result.verdict.startswith(("improved", "no configuration better than the plan"))
    stages = [t.stage for t in result.trials]
    assert stages[0] == "plan" and "screen" in stages
    assert result.noise is not None and result.noise.cv_pct >= 0
    if result.winner:
        assert result.final is not None and result.final.runs_per_arm >= 5
        cmp = json.loads(Path(str(result.final.comparison)).read_text())
        assert cmp["schema_version"] == "myaccel.comparison/1"
    assert (out / "study.db").is_file() and (out / "tune.md").is_file()
    assert {"innodb_io_capacity", "thread_handling"} <= set(result.searched)
    assert result.layers == ["server", "process"]
    assert "numa_policy" in result.searched or "NUMA" in result.left_out["numa_policy"]
    report = (out / "report.md").read_text()
    assert "## Tuning" in report and f"**Verdict:** {result.verdict}" in report
    plan = load(out / "plan.json", Plan)
    assert plan.digest_ok
    assert sandbox_env.is_running()  # back on its own configuration
    dry = CliRunner().invoke(
        cli, ["apply", str(out / "plan.json"), "--sandbox", sandbox_env.name, "--dry-run"]
    )
    assert dry.exit_code == 0, dry.stderr
