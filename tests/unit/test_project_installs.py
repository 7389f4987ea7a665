"""The servers the project installs (MySQL 9.7, MariaDB 11.8) found by flavor and release
line, after the system's own; fake binaries under a private $MYACCEL_MYSQL_ROOT."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from myaccel import proc
from myaccel.cli.main import cli
from myaccel.errors import ToolMissing, UsageError
from myaccel.server.sandbox.install import find_server, parse_series
from myaccel.server.sandbox.project import PROJECT_INSTALLS, project_installs

SYSTEM_1011 = (
    "/usr/sbin/mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)"
)
# as /opt/myaccel/mariadb-11.8/sbin/mariadbd --version prints it (Debian sid's 1:11.8.9+ds-4)
PROJECT_118 = (
    "/opt/myaccel/mariadb-11.8/sbin/mariadbd  Ver 11.8.9-MariaDB-4 from Debian for "
    "debian-linux-gnu on x86_64 (-- Please help get to 10k stars at https://github.com/MariaDB/Server)"
)
PROJECT_97 = "/opt/myaccel/mysql-9.7/bin/mysqld  Ver 9.7.4-2 for Linux on x86_64 (Debian)"


def _fake_binary(path: Path, version_line: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho '{version_line}'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project root with MariaDB 11.8 (sbin/, as scripts/ensure-mariadb.sh lays it out) and
    MySQL 9.7 (bin/), and a system whose only server is MariaDB 10.11."""
    r = tmp_path / "opt"
    _fake_binary(r / "mariadb-11.8" / "sbin" / "mariadbd", PROJECT_118)
    _fake_binary(r / "mariadb-11.8" / "bin" / "mariadb-install-db", "unused")
    (r / "mariadb-11.8" / "share" / "mariadb" / "english").mkdir(parents=True)
    (r / "mariadb-11.8" / "lib" / "plugin").mkdir(parents=True)
    _fake_binary(r / "mysql-9.7" / "bin" / "mysqld", PROJECT_97)
    system = _fake_binary(tmp_path / "usr" / "sbin" / "mariadbd", SYSTEM_1011)
    monkeypatch.setenv("MYACCEL_MYSQL_ROOT", str(r))
    monkeypatch.setattr(proc, "which", lambda name: str(system) if name == "mariadbd" else None)
    return r


def test_the_table_names_each_prefix_by_flavor_and_line(root: Path) -> None:
    assert [(p.flavor, p.series) for p in PROJECT_INSTALLS] == [
        ("mysql", "9.7"),
        ("mariadb", "11.8"),
    ]
    assert [p.prefix for p in project_installs("mariadb")] == [root / "mariadb-11.8"]
    assert project_installs("mariadb", "10.11") == []


def test_the_system_server_comes_first_without_a_version(root: Path) -> None:
    inst = find_server(flavor="mariadb")
    assert inst.version.text == "10.11.19" and not inst.custom


def test_a_version_picks_the_project_install(root: Path) -> None:
    inst = find_server(flavor="mariadb", series="11.8")
    assert (inst.flavor, inst.version.text, inst.version.series) == ("mariadb", "11.8.9", "11.8")
    assert inst.binary == root / "mariadb-11.8" / "sbin" / "mariadbd"
    assert inst.custom and inst.basedir == root / "mariadb-11.8"
    assert inst.install_db == root / "mariadb-11.8" / "bin" / "mariadb-install-db"
    assert inst.lc_messages_dir == root / "mariadb-11.8" / "share" / "mariadb"
    assert inst.plugin_dir == root / "mariadb-11.8" / "lib" / "plugin"
    # the line alone is enough; the system's own line is still found by its number
    assert find_server(series="11.8").binary == inst.binary
    assert find_server(series="10.11").version.text == "10.11.19"
    assert find_server(flavor="mysql").version.series == "9.7"


def test_a_line_nobody_installs_is_missing_with_a_hint(root: Path) -> None:
    with pytest.raises(ToolMissing, match=r"no MariaDB 12\.3 server found") as exc:
        find_server(flavor="mariadb", series="12.3")
    assert "--basedir" in (exc.value.hint or "") and "MariaDB 11.8" in (exc.value.hint or "")
    (root / "mariadb-11.8" / "sbin" / "mariadbd").unlink()
    with pytest.raises(ToolMissing, match=r"mariadb-11\.8") as exc:
        find_server(flavor="mariadb", series="11.8")
    assert "scripts/ensure-mariadb.sh" in (exc.value.hint or "")


def test_a_basedir_of_another_line_is_refused(root: Path) -> None:
    with pytest.raises(UsageError, match=r"--version 10\.11 but .* is MariaDB 11\.8\.9"):
        find_server(root / "mariadb-11.8", series="10.11")
    assert find_server(root / "mariadb-11.8", series="11.8").version.text == "11.8.9"


@pytest.mark.parametrize(("text", "line"), [("11.8", "11.8"), (" 9.7 ", "9.7"), ("26.10", "26.10")])
def test_parse_series(text: str, line: str) -> None:
    assert parse_series(text) == line


@pytest.mark.parametrize("text", ["11", "11.8.9", "eleven", "", "11.x"])
def test_parse_series_refuses(text: str) -> None:
    with pytest.raises(UsageError, match="is not a release line") as exc:
        parse_series(text)
    assert "MAJOR.MINOR" in (exc.value.hint or "")


def test_cli_bad_version_exits_2_and_leaves_nothing(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("MYACCEL_HOME", str(home))
    res = CliRunner().invoke(cli, ["sandbox", "init", "x", "--version", "eleven"])
    assert res.exit_code == 2
    lines = res.output.strip().splitlines()
    assert lines[0] == "error: --version 'eleven' is not a release line"
    assert lines[1].startswith("hint: ")
    assert not (home / "sandboxes" / "x").exists()
