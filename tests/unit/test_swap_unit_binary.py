"""Swapping a real server's binary through systemd (``systemd-binary:UNIT``), at the file and
journal level: a fixture unit shaped like Debian's ``mariadb.service`` under a temporary
root, versions and ``systemctl`` answered by the fake runner (``myaccel.env``), daemon-reload
through the setting's runner. No systemd runs here (it is not PID 1 on this machine)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from fake_runner import Recording, ReplayRunner

from myaccel.accelerate.swap_unit import swap_unit_binary
from myaccel.actions import (
    ApplyError,
    Journal,
    apply_changes,
    rollback,
    setting_for,
    setting_from_spec,
)
from myaccel.actions.settings.server_binary import (
    DROPIN_NAME,
    ServerBinarySetting,
    exec_start,
    server_path,
)
from myaccel.actions.target import CommandServer, ServerTarget, SystemdServer
from myaccel.env import Environment, using
from myaccel.errors import UsageError

UNIT = "mariadb.service"
# the shape of Debian 12's unit: a shell wrapper, continuation lines, other Exec* lines
UNIT_TEXT = """\
[Unit]
Description=MariaDB database server (fixture)

[Service]
Type=notify
User=mysql
ExecStartPre=/usr/bin/install -m 755 -o mysql -g root -d /run/mysqld
ExecStart=/bin/sh -c "set -f; [ ! -e /usr/bin/galera_recovery ] && VAR= || \\
 VAR=`/usr/bin/galera_recovery`; [ $? -eq 0 ] || exit 1; \\
 exec /usr/sbin/mariadbd $MYSQLD_OPTS $_WSREP_NEW_CLUSTER $VAR"
ExecStartPost=!/etc/mysql/debian-start
KillSignal=SIGTERM

[Install]
WantedBy=multi-user.target
"""
OLD = "/usr/sbin/mariadbd"
NEW = "/opt/build/install/bin/mariadbd"
DROPIN = f"/etc/systemd/system/{UNIT}.d/{DROPIN_NAME}"


def _exe(root: Path, logical: str) -> None:
    p = root / logical.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("#!/bin/false\n")
    p.chmod(0o755)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "root"
    unit = r / "lib/systemd/system" / UNIT
    unit.parent.mkdir(parents=True)
    unit.write_text(UNIT_TEXT)
    (r / "etc/systemd/system").mkdir(parents=True)
    _exe(r, OLD)
    _exe(r, NEW)
    return r


@pytest.fixture
def jdir(tmp_path: Path) -> Path:
    return tmp_path / "journals"


def versions(root: Path, old: str = "10.11.18", new: str = "10.11.18") -> ReplayRunner:
    line = "mariadbd  Ver {}-MariaDB for Linux on x86_64 (Source distribution)"
    fake = ReplayRunner()
    fake.on([str(root) + OLD, "--version"], Recording(stdout=line.format(old)))
    fake.on([str(root) + NEW, "--version"], Recording(stdout=line.format(new)))
    return fake


def tree(root: Path) -> dict[str, tuple[Any, ...]]:
    out: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            st = p.lstat()
            data = p.read_bytes() if stat.S_ISREG(st.st_mode) else b""
            out[str(p.relative_to(root))] = (stat.S_IFMT(st.st_mode), st.st_mode & 0o7777, data)
    return out


def test_the_server_is_found_inside_the_shell_wrapper(root: Path) -> None:
    command = exec_start(root, UNIT)
    assert command is not None and command.startswith('/bin/sh -c "set -f;')
    assert server_path(command) == OLD
    assert ServerBinarySetting(UNIT, root=root).read() == OLD
    assert server_path("numactl --interleave=all /usr/sbin/mysqld --x") == "/usr/sbin/mysqld"


def test_swap_writes_one_override_and_rollback_removes_it_byte_identically(
    root: Path, jdir: Path
) -> None:
    before = tree(root)
    reloads: list[list[str]] = []
    s = ServerBinarySetting(UNIT, root=root, runner=lambda argv: reloads.append(list(argv)))
    with using(Environment(runner=versions(root))):
        change = s.plan(NEW)
        assert change is not None and change.takes_effect == "unit restart"
        assert change.current == OLD and change.writes == (DROPIN,)
        apply_changes([(s, NEW)], jdir)
    text = (root / DROPIN.lstrip("/")).read_text()
    lines = text.splitlines()
    assert lines[0].startswith("# Managed by myaccel")
    i = lines.index("[Service]")
    # the unit's ExecStart cleared, then the same command line with only the server swapped
    assert lines[i + 1 : i + 2] == ["ExecStart="]
    assert lines[i + 2].startswith('ExecStart=/bin/sh -c "set -f;')
    assert f"exec {NEW} $MYSQLD_OPTS $_WSREP_NEW_CLUSTER $VAR" in lines[i + 2]
    assert OLD not in text
    assert s.read() == NEW
    assert reloads == [["systemctl", "daemon-reload"]]
    # the journal rebuilds the setting (another process may roll back)
    entry = Journal.load(next(jdir.glob("*.json"))).entries[0]
    assert entry.kind == "systemd-binary" and entry.target == f"systemd-binary:{UNIT}"
    rollback(journal_dir=jdir, runner=lambda argv: reloads.append(list(argv)))
    assert tree(root) == before  # the drop-in and its directory are gone
    assert reloads == [["systemctl", "daemon-reload"]] * 2
    assert s.read() == OLD


def test_an_admin_override_is_kept_and_ours_sorts_after_it(root: Path, jdir: Path) -> None:
    d = root / f"etc/systemd/system/{UNIT}.d"
    d.mkdir(parents=True)
    (d / "override.conf").write_text("[Service]\nExecStart=\nExecStart=/usr/sbin/mariadbd --x\n")
    s = ServerBinarySetting(UNIT, root=root)
    assert s.read() == OLD
    with using(Environment(runner=versions(root))):
        apply_changes([(s, NEW)], jdir)
    assert (d / DROPIN_NAME).read_text().endswith(f"ExecStart=\nExecStart={NEW} --x\n")
    assert sorted(p.name for p in d.iterdir()) == ["override.conf", DROPIN_NAME]
    assert s.read() == NEW


def test_refusals(root: Path) -> None:
    s = ServerBinarySetting(UNIT, root=root)
    with using(Environment(runner=versions(root, new="10.11.19"))):
        with pytest.raises(
            UsageError, match=r"is MariaDB 10\.11\.19, mariadb\.service runs MariaDB 10\.11\.18"
        ):
            s.plan(NEW)
        with pytest.raises(UsageError, match="not an executable"):
            s.plan("/opt/nothing/bin/mariadbd")
        with pytest.raises(UsageError, match="without spaces"):
            s.plan("bin/mariadbd")
    foreign = root / DROPIN.lstrip("/")
    foreign.parent.mkdir(parents=True)
    foreign.write_text("[Service]\nExecStart=\nExecStart=/usr/sbin/mariadbd\n")
    with using(Environment(runner=versions(root))), pytest.raises(UsageError, match="not myaccel"):
        s.plan(NEW)
    with pytest.raises(UsageError, match="no ExecStart"):
        ServerBinarySetting("mysql.service", root=root).plan(NEW)


def test_uri_and_journal_spec(root: Path) -> None:
    s = setting_for(f"systemd-binary:{UNIT}", root=root)
    assert isinstance(s, ServerBinarySetting) and s.unit == UNIT
    again = setting_from_spec(s.kind, json.loads(json.dumps(s.spec())))
    assert isinstance(again, ServerBinarySetting) and again.target == s.target


def _handle() -> ServerTarget:
    return SystemdServer(params=None, conf_dir=None, unit=UNIT)


def test_swap_restarts_the_unit_and_finishes_the_journal(root: Path, myaccel_home: Path) -> None:
    fake = versions(root).on(["systemctl"], Recording())
    notes: list[str] = []
    with using(Environment(runner=fake)):
        jpath = swap_unit_binary(
            _handle(), Path(NEW), plan_id="p", facts_digest="d", note=notes.append,
            root=root, runner=lambda argv: None,
        )  # fmt: skip
    assert jpath is not None and Journal.load(jpath).status == "applied"
    restarts = [a for a in fake.argvs("run") if a[0] == "systemctl"]
    assert restarts == [("systemctl", "stop", UNIT), ("systemctl", "start", UNIT)]
    assert ServerBinarySetting(UNIT, root=root).read() == NEW
    assert "undo with: myaccel rollback" in notes[-1]


def test_a_unit_that_does_not_start_is_rolled_back_to_its_own_binary(
    root: Path, myaccel_home: Path
) -> None:
    before = tree(root)
    starts: list[str] = []

    def start(argv: tuple[str, ...]) -> Recording:
        starts.append(ServerBinarySetting(UNIT, root=root).read() or "")
        first = len(starts) == 1
        return Recording(returncode=1 if first else 0, stderr="Job failed" if first else "")

    fake = versions(root).on(["systemctl"], Recording()).on(["systemctl", "start"], start)
    with using(Environment(runner=fake)), pytest.raises(ApplyError, match="rolled back"):
        swap_unit_binary(
            _handle(), Path(NEW), plan_id="p", facts_digest="d", note=lambda m: None,
            root=root, runner=lambda argv: None,
        )  # fmt: skip
    assert starts == [NEW, OLD]  # the second start runs the unit's own binary again
    assert tree(root) == before
    jpath = next((myaccel_home / "journals").glob("*.json"))
    assert Journal.load(jpath).status == "rolled-back"


def test_a_server_without_a_unit_is_refused(root: Path) -> None:
    handle = CommandServer(params=None, conf_dir=None, restart_command="x")
    with pytest.raises(UsageError, match="systemd unit"):
        swap_unit_binary(
            handle, Path(NEW), plan_id="p", facts_digest="d", note=lambda m: None, root=root
        )


def test_myaccel_rollback_restarts_the_unit_on_its_own_binary(
    root: Path, myaccel_home: Path
) -> None:
    from click.testing import CliRunner

    from myaccel.cli.main import cli

    before = tree(root)
    fake = versions(root).on(["systemctl"], Recording())
    with using(Environment(runner=fake)):
        jpath = swap_unit_binary(
            _handle(), Path(NEW), plan_id="p", facts_digest="d", note=lambda m: None,
            root=root, runner=lambda argv: None,
        )  # fmt: skip
        res = CliRunner().invoke(cli, ["rollback"])
    assert res.exit_code == 0, res.output
    assert f"reverted systemd-binary:{UNIT}" in res.output
    assert tree(root) == before
    restarts = [a[1:] for a in fake.argvs("run") if a[0] == "systemctl"]
    assert restarts == [("stop", UNIT), ("start", UNIT)] * 2  # the swap, then the rollback
    assert jpath is not None and Journal.load(jpath).status == "rolled-back"
