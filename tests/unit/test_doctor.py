"""`myaccel doctor`: each command's needs checked on a host made to lack them (PATH without
the tools), the exit code when a named command lacks what it needs, and the install line
for the host's package manager."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from myaccel.cli.main import cli
from myaccel.doctor.checks import fixes, package_manager
from myaccel.doctor.needs import COMMANDS


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, ["doctor", *args])
    return r.exit_code, r.stdout, r.stderr


def test_every_command_of_the_cli_that_runs_tools_is_known() -> None:
    for name in ("probe", "plan", "apply", "bench", "ab", "accelerate", "clone", "profile"):
        assert name in COMMANDS


def test_a_host_without_sysbench_fails_for_bench_and_says_how_to_fix_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("MYACCEL_HOME", str(tmp_path / "home"))
    code, out, err = run("bench", "--json")
    doc = json.loads(out)
    (sysbench,) = [n for n in doc["commands"]["bench"] if n["need"] == "sysbench"]
    if sysbench["ok"]:
        pytest.skip(f"sysbench found outside PATH here: {sysbench['found']}")
    assert code == 4, err
    assert "missing for bench: sysbench (bench)" in err
    assert "install sysbench" in err
    # probe needs nothing it cannot do without: exit 0, the optional ones listed
    code, out, _ = run("probe")
    assert code == 0 and "missing (optional)" in out


def test_unknown_command_is_a_usage_error() -> None:
    code, _, err = run("nosuch")
    assert code == 2 and "doctor knows no command 'nosuch'" in err and "probe" in err


def test_the_package_manager_and_its_line() -> None:
    assert package_manager('ID=debian\nVERSION_ID="12"\n') == "apt-get"
    assert package_manager("ID=ubuntu\nID_LIKE=debian\n") == "apt-get"
    assert package_manager('ID="rocky"\nID_LIKE="rhel centos fedora"\n') == "dnf"
    from myaccel.doctor.checks import Finding
    from myaccel.doctor.needs import GXX, PERF, SYSBENCH

    missing = [Finding(n, False, "not installed") for n in (SYSBENCH, PERF, GXX)]
    assert fixes(missing, "apt-get") == ["apt-get install sysbench linux-perf g++"]
    assert fixes(missing, "dnf") == ["dnf install sysbench perf gcc-c++"]


def test_a_user_who_is_not_root_is_told_what_needs_root() -> None:
    if os.geteuid() != 0:
        code, out, _ = run("apply")
        assert code == 0 and "only for the host layers" in out
        return
    code, out, _ = run("apply", "--json")
    (root,) = [n for n in json.loads(out)["commands"]["apply"] if n["need"] == "root"]
    assert root["ok"] and not root["required"]


def test_a_debugfs_only_root_may_read_is_a_finding_not_a_crash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found in the lab: as a user, /sys/kernel/debug (mode 0700) made Path.is_dir raise
    PermissionError and `doctor` exit 8; now it says debugfs is mounted for root only."""
    real = Path.is_dir

    def is_dir(self: Path) -> bool:
        if str(self).startswith("/sys/kernel/debug"):
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "is_dir", is_dir)
    code, out, err = run("apply", "--json")
    assert code == 0, err
    (dbg,) = [n for n in json.loads(out)["commands"]["apply"] if n["need"] == "debugfs"]
    assert not dbg["ok"] and dbg["found"] == "mounted, readable by root only"


def test_the_disk_line_is_said_once() -> None:
    from myaccel.doctor.checks import Finding
    from myaccel.doctor.needs import Need

    disk = Need("disk", "disk", "room for a clone")
    lines = fixes(
        [Finding(disk, False, "1 GiB free"), Finding(disk, False, "1 GiB free")], "apt-get"
    )
    assert lines == ["free some space, or set MYACCEL_HOME to a larger disk"]
