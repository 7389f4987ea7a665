"""`ab --instructions` on a real sandbox: each arm's server counted under callgrind, the
figure beside TPS, and an inconclusive TPS cell decided by it between arms that differ
only in a CPU-side knob."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from myaccel.cli.main import cli
from myaccel.server.sandbox import Sandbox

# two arms under callgrind, ~90 s: `make system-test`
pytestmark = [pytest.mark.integration, pytest.mark.system]


def test_the_instruction_count_decides_what_tps_cannot(myaccel_home: Path, tmp_path: Path) -> None:
    """performance_schema ON costs instructions per point select (+28% measured here); two
    short runs per arm can give no TPS verdict, the count can."""
    out = tmp_path / "ins"
    r = CliRunner().invoke(
        cli,
        ["ab", "--sandbox", "ins", "--create", "-w", "ps", "-t", "1", "--runs", "2",
         "--time", "2", "--warmup", "0", "--tables", "1", "--table-size", "1000",
         "--candidate-set", "performance_schema=ON", "--instructions",
         "--instructions-events", "100", "--out", str(out)],
    )  # fmt: skip
    try:
        assert r.exit_code == 0, r.stderr
        cmp = json.loads((out / "comparison.json").read_text())
        (fig,) = cmp["instructions"]
        assert fig["workload"] == "oltp_point_select" and fig["events"] == 100
        assert len(fig["baseline"]) == len(fig["candidate"]) == 2
        assert fig["spread_pct"] < 1.0, fig  # a count: the repeats agree
        assert fig["delta_pct"] > 5.0 and fig["verdict"] == "regressed", fig
        (cell,) = cmp["cells"]
        assert cell["decided_by"] == "instructions" and cell["verdict"] == "regressed", cell
        assert "performance_schema" in cell["reason"]
        assert "Instructions per transaction" in (out / "comparison.md").read_text()
        assert "the instruction count decided" in (out / "report.md").read_text()
        assert len(list((out / "instructions").iterdir())) == 4  # 2 arms x 2 repeats
    finally:
        if Sandbox.exists("ins"):
            Sandbox.load("ins").destroy()
