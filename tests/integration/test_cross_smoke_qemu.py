"""The smoke run of a real aarch64 cross build of MariaDB under qemu-user: it answers with
its version and machine, writes and reads an InnoDB table, and stays small (a few seconds,
under 400 MiB). Skipped where no cross build exists (CI builds none: the build takes 16
minutes on 2 cores); ``MYACCEL_ARM64_INSTALL`` names its install tree, by default the one
docs/building.md describes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from myaccel import proc
from myaccel.builder.smoke import run_smoke
from myaccel.cli.main import cli

pytestmark = pytest.mark.integration

INSTALL = Path(os.environ.get("MYACCEL_ARM64_INSTALL", "/work/srcs/b/arm64-lse/install"))


@pytest.fixture
def arm64_server() -> Path:
    binary = INSTALL / "bin" / "mariadbd"
    if not binary.is_file():
        pytest.skip(f"no aarch64 cross build of MariaDB at {INSTALL} (MYACCEL_ARM64_INSTALL)")
    for tool in ("qemu-aarch64", "prlimit"):
        if proc.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    return binary


def test_the_cross_built_server_answers_under_qemu(arm64_server: Path, tmp_path: Path) -> None:
    res = run_smoke(arm64_server, INSTALL, tmp_path, target_arch="aarch64", cross=True)
    assert res.machine == "aarch64" and "MariaDB" in res.version
    assert (res.rows, res.id_sum) == (3, 6)
    assert "-R" in res.argv and "--loose-innodb-buffer-pool-size-max=128M" in res.argv
    assert res.peak_rss_kib is not None and res.peak_rss_kib < 400 * 1024
    assert res.answered_s < 60


def test_verify_build_smoke_json(arm64_server: Path, myaccel_home: Path) -> None:
    out = CliRunner().invoke(cli, ["verify-build", str(arm64_server), "--smoke", "--json"])
    assert out.exit_code == 0, out.output
    import json

    doc = json.loads(out.stdout)
    assert doc["smoke"]["machine"] == "aarch64"
    assert any(c["id"] == "atomics" for c in doc["checks"])
