"""The quiet-machine gate on a real sandbox: a host kept busy by this test's own busy
loops (bounded in time) makes `myaccel ab` wait, then lead every output with it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from myaccel.cli.main import cli
from myaccel.server.sandbox import Sandbox

pytestmark = pytest.mark.integration

TINY = ["--tables", "1", "--table-size", "1000", "--time", "2", "--warmup", "0"]
BUSY = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end:\n    pass\n"


@pytest.fixture
def busy_host() -> Iterator[None]:
    """One busy loop per CPU for at most 90 s (ended sooner when the test is done)."""
    loops = [
        subprocess.Popen([sys.executable, "-c", BUSY.format(s=90)])
        for _ in range(os.cpu_count() or 1)
    ]
    try:
        yield
    finally:
        for p in loops:
            p.kill()
            p.wait()


@pytest.fixture
def own_sandbox(myaccel_home: Path) -> Iterator[str]:
    """A sandbox of this test's own: the session's holds the datasets of other tests."""
    yield "quietgate"
    if Sandbox.exists("quietgate"):
        Sandbox.load("quietgate").destroy()


def test_a_busy_host_is_waited_for_then_every_output_leads_with_it(
    own_sandbox: str, tmp_path: Path, busy_host: None
) -> None:
    out = tmp_path / "ab"
    args = ["ab", "--sandbox", own_sandbox, "--create", "-w", "ps", "-t", "1", "--runs", "1"]
    r = CliRunner().invoke(cli, [*args, *TINY, "--quiet-wait", "12", "--out", str(out)])
    assert r.exit_code == 0, r.stderr
    # it waited, saying so, and gave up within the bound
    assert "host busy: other processes use" in r.stderr and "--quiet-wait" in r.stderr
    assert "warning: host still busy" in r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith("**Disturbed**: the host was busy before the first run"), r.stdout
    assert (out / "comparison.md").read_text().splitlines()[0] == first
    summary = (out / "report.md").read_text().split("## Summary", 1)[1].strip()
    assert summary.startswith("**Disturbed**: the host was busy before the first run"), summary
    from myaccel.artifacts import load
    from myaccel.bench.run_record import CampaignIndex

    gate = load(out / "campaign.json", CampaignIndex).quiet_gate
    assert gate is not None and gate.verdict == "loud" and gate.waited_s <= 12
    assert gate.others_pct is not None and gate.others_pct > gate.threshold_pct
    assert f"{gate.others_pct:.0f}% of its CPU" in first
