"""`myaccel accelerate` end to end on real sandboxes (shortened runs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from myaccel.cli.main import cli
from myaccel.server.sandbox import Sandbox

pytestmark = pytest.mark.integration

SHORT = ["--runs", "3", "--time", "3", "--scale", "0.05"]


def test_accelerate_existing_server_before_after(myaccel_home: Path, tmp_path: Path) -> None:
    """A server reached by socket and user (here a sandbox, treated as any running server):
    baseline runs, journaled apply of the dynamic knobs, tuned runs, comparison with the
    not-interleaved warning, and rollback."""
    sb = Sandbox.init("existing", timeout_s=120)
    try:
        out = tmp_path / "acc"
        r = CliRunner().invoke(
            cli,
            [
                "accelerate",
                "--socket",
                str(sb.socket),
                "--user",
                "root",
                "--yes",
                "--out",
                str(out),
                *SHORT,
            ],
        )
        assert r.exit_code == 0, r.stderr
        assert "| oltp_read_only |" in r.stdout and "tuned TPS" in r.stdout
        assert "arms were not interleaved" in r.stdout
        assert (
            (out / "before").is_dir()
            and (out / "after").is_dir()
            and (out / "comparison.json").is_file()
        )
        assert "not applied server-log-buffer" in r.stderr  # restart-only, no way to restart given
        rb = CliRunner().invoke(cli, ["rollback"])
        assert rb.exit_code == 0, rb.stderr
    finally:
        sb.destroy()
