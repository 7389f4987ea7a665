"""Which settings carry each recommendation, and privilege handling (no server needed)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from myaccel.actions.errors import ApplyError
from myaccel.actions.plan_apply import build_changes
from myaccel.actions.target import SandboxServer, ServerTarget, UnmanagedServer
from plans import plan, rec


def handle(tmp_path: Path) -> ServerTarget:
    return UnmanagedServer(params=None, conf_dir=tmp_path)


def test_online_knob_is_runtime_plus_option_file(tmp_path: Path) -> None:
    from myaccel.server.connection import ConnectParams

    h = UnmanagedServer(
        params=ConnectParams(None, 3306, "/x.sock", "root", None), conf_dir=tmp_path
    )
    pc = build_changes(
        plan(
            rec("a", "mysql:innodb_io_capacity", "2000"),
            rec("b", "mysql:innodb_log_buffer_size", "64M", risk="restart"),
        ),
        h,
    )
    targets = [s.target for s, _ in pc.changes]
    assert targets == [
        "mysql:innodb_io_capacity",
        "mycnf:mysqld/innodb_io_capacity",
        "mycnf:mysqld/innodb_log_buffer_size",
    ]
    assert pc.restart_needed and pc.server_values == {
        "innodb_io_capacity": "2000",
        "innodb_log_buffer_size": "64M",
    }


def test_advisory_and_unautomated_are_skipped(tmp_path: Path) -> None:
    pc = build_changes(
        plan(
            rec("x", "build:lse", "y", layer="build", action="advisory"),
            rec("n", "bios:prefetch", "z", layer="hardware"),
        ),
        handle(tmp_path),
    )
    assert [r.id for r, _ in pc.skipped] == ["x", "n"] and not pc.changes


def test_root_layers_without_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    p = plan(rec("os-swappiness", "sysctl:vm.swappiness", "1", layer="os"))
    with pytest.raises(ApplyError) as ei:
        build_changes(p, handle(tmp_path))
    assert "needs root" in ei.value.message and "--partial" in ei.value.hint
    pc = build_changes(p, handle(tmp_path), partial=True)
    assert not pc.changes and "skipped (--partial)" in pc.skipped[0][1]


def test_a_sandbox_apply_never_touches_the_hosts_server_unit(tmp_path: Path) -> None:
    """systemd:server/... names the unit that runs the server: a sandbox has none, so the
    recommendation is skipped rather than written into the host's mariadb.service."""
    sb: Any = SimpleNamespace(name="sb")  # build_changes never touches the sandbox itself
    h = SandboxServer(sandbox=sb, params=None, conf_dir=tmp_path)
    pc = build_changes(
        plan(rec("numa-policy", "systemd:server/NUMAPolicy", "interleave", layer="numa")), h
    )
    assert not pc.changes and not pc.recs
    assert [r.id for r, _ in pc.skipped] == ["numa-policy"]
    assert "not run by systemd" in pc.skipped[0][1]


def test_a_server_unit_drop_in_restarts_that_unit(tmp_path: Path) -> None:
    """The lab found a NUMA drop-in written and the unit never restarted, so the binding
    never reached the server: a restart-risk systemd:server/ change now restarts it, and
    without a unit that runs the server it is skipped with the reason."""
    from myaccel.actions.target import SystemdServer

    unit_dir = tmp_path / "etc/systemd/system"
    unit_dir.mkdir(parents=True)
    (unit_dir / "mariadb.service").write_text("[Service]\nExecStart=/usr/sbin/mariadbd\n")
    p = plan(
        rec("numa-binding", "systemd:server/NUMAPolicy", "bind", layer="numa", risk="restart"),
        rec("numa-binding", "systemd:server/NUMAMask", "0", layer="numa", risk="restart"),
    )
    pc = build_changes(p, SystemdServer(params=None, conf_dir=None, unit="mariadb.service"))
    assert [s.target for s, _ in pc.changes] == [
        "systemd:mariadb.service/NUMAPolicy",
        "systemd:mariadb.service/NUMAMask",
    ]
    assert pc.restart_needed
    unmanaged = build_changes(p, handle(tmp_path))
    assert not unmanaged.changes and not unmanaged.restart_needed
    assert all("--server-unit" in why for _r, why in unmanaged.skipped)
