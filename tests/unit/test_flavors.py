"""Flavor adapters: init argv, server argv, option groups, start options, shutdown, accounts."""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from myaccel.errors import SandboxError, ToolMissing, UsageError
from myaccel.server.flavor import ServerVersion, parse_server_version
from myaccel.server.flavors import ADAPTERS, adapter_for
from myaccel.server.flavors.mariadb import MariaDBFlavor
from myaccel.server.flavors.mysql import MySQLFlavor


@dataclass(frozen=True)
class _Install:
    binary: Path
    basedir: Path
    version: ServerVersion
    install_db: Path | None = None


def _version(text: str, comment: str = "") -> ServerVersion:
    v = parse_server_version(text, comment)
    assert v is not None
    return v


def _install(text: str, comment: str = "", install_db: str | None = None) -> _Install:
    return _Install(
        binary=Path("/opt/x/bin/mysqld"),
        basedir=Path("/opt/x"),
        version=_version(text, comment),
        install_db=Path(install_db) if install_db else None,
    )


CNF = Path("/s/my.cnf")


def test_adapter_for_names_and_versions() -> None:
    assert isinstance(adapter_for("mariadb"), MariaDBFlavor)
    assert isinstance(adapter_for("mysql"), MySQLFlavor)
    # Percona Server runs as MySQL (same datadir, initialize and options)
    percona = _version("8.0.35-27", "Percona Server (GPL), Release 27")
    assert percona.flavor == "percona"
    assert adapter_for(percona).name == "mysql"
    assert adapter_for(_version("10.11.6-MariaDB")).name == "mariadb"
    with pytest.raises(UsageError, match="unknown server flavor"):
        adapter_for("postgres")
    assert [ad.name for ad in ADAPTERS] == ["mariadb", "mysql"]
    assert [ad.label for ad in ADAPTERS] == ["MariaDB", "MySQL"]


def test_binaries_and_install_db_candidates() -> None:
    maria, mysql = adapter_for("mariadb"), adapter_for("mysql")
    assert maria.binary_candidates() == ("bin/mariadbd", "sbin/mariadbd", "libexec/mariadbd")
    assert mysql.binary_candidates() == ("bin/mysqld", "sbin/mysqld", "libexec/mysqld")
    assert maria.install_db_candidates() == (
        "scripts/mariadb-install-db",
        "bin/mariadb-install-db",
        "scripts/mysql_install_db",
        "bin/mysql_install_db",
    )
    assert mysql.install_db_candidates() == ()
    assert mysql.system_install_db() is None  # the server initializes its own datadir


def test_mariadb_init_argv_by_version() -> None:
    ad = adapter_for("mariadb")
    new = _install("10.11.19-MariaDB-0+deb12u1", install_db="/usr/bin/mariadb-install-db")
    assert ad.init_argv(new, CNF) == [
        "/usr/bin/mariadb-install-db",
        "--defaults-file=/s/my.cnf",
        "--basedir=/opt/x",
        "--auth-root-authentication-method=normal",
        "--skip-test-db",
    ]
    v104 = _install("10.4.30-MariaDB", install_db="/x/mysql_install_db")
    assert ad.init_argv(v104, CNF)[-1] == "--auth-root-authentication-method=normal"
    old = _install("10.3.39-MariaDB", install_db="/x/mysql_install_db")
    assert ad.init_argv(old, CNF) == [
        "/x/mysql_install_db",
        "--defaults-file=/s/my.cnf",
        "--basedir=/opt/x",
    ]
    with pytest.raises(ToolMissing, match=r"mariadb-install-db not found for MariaDB 10\.11\.19"):
        ad.init_argv(_install("10.11.19-MariaDB"), CNF)


@pytest.mark.parametrize(
    ("version", "comment"),
    [("9.7.4", ""), ("8.0.36", ""), ("5.7.44", ""), ("8.0.35-27", "Percona Server (GPL)")],
)
def test_mysql_init_argv(version: str, comment: str) -> None:
    inst = _install(version, comment)
    assert adapter_for(inst.version).init_argv(inst, CNF) == [
        "/opt/x/bin/mysqld",
        "--defaults-file=/s/my.cnf",
        "--initialize-insecure",
    ]


def test_mysql_too_old() -> None:
    with pytest.raises(SandboxError, match="too old"):
        adapter_for("mysql").init_argv(_install("5.6.51"), CNF)


@pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
def test_server_argv_has_only_defaults_file(flavor: str) -> None:
    # never --no-defaults: MySQL would then skip mysqld-auto.cnf (SET PERSIST)
    argv = adapter_for(flavor).server_argv(_install("9.7.4"), CNF)
    assert argv == ["/opt/x/bin/mysqld", "--defaults-file=/s/my.cnf"]


def test_option_groups() -> None:
    assert adapter_for("mysql").option_groups("9.7") == ("mysqld", "server", "mysqld-9.7")
    assert adapter_for("mariadb").option_groups("10.11") == (
        "mysqld",
        "server",
        "mysqld-10.11",
        "mariadb",
        "mariadb-10.11",
        "mariadbd",
        "mariadbd-10.11",
        "client-server",
    )


def test_start_options_and_quirks(tmp_path: Path) -> None:
    # the X plugin would listen on 33060; loose- for builds without it
    assert adapter_for("mysql").start_options() == [("loose-mysqlx", "OFF")]
    assert adapter_for("mariadb").start_options() == []
    assert adapter_for("mysql").persisted_options_file(tmp_path) == tmp_path / "mysqld-auto.cnf"
    assert adapter_for("mariadb").persisted_options_file(tmp_path) is None


@pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
def test_shutdown(flavor: str) -> None:
    ad = adapter_for(flavor)
    # the sandbox stops its server with a signal (clean shutdown on both), and a connected
    # client with SQL SHUTDOWN (MySQL 9.x has no COM_SHUTDOWN for mariadb-admin shutdown)
    assert ad.shutdown_signal == signal.SIGTERM
    assert ad.shutdown_sql == "SHUTDOWN"


class _Cursor:
    def __init__(self, existing: list[tuple[str, str]]) -> None:
        self.existing = existing
        self.calls: list[tuple[str, Any]] = []

    def execute(self, query: str, args: Any = None) -> int:
        self.calls.append((query, args))
        return 0

    def fetchall(self) -> Any:
        return tuple(self.existing)


@pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
def test_setup_accounts(flavor: str) -> None:
    cur = _Cursor([("root", "%"), ("", "localhost")])
    adapter_for(flavor).setup_accounts(cur, user="sbtest", password="pw", database="sbtest")
    sql = [q for q, _ in cur.calls]
    assert sql[0].startswith("SELECT user, host FROM mysql.user")
    assert cur.calls[1:3] == [
        ("DROP USER %s@%s", ("root", "%")),
        ("DROP USER %s@%s", ("", "localhost")),
    ]
    assert "DROP DATABASE IF EXISTS test" in sql
    assert "CREATE DATABASE IF NOT EXISTS `sbtest`" in sql
    creates = [(q, a) for q, a in cur.calls if q.startswith("CREATE USER")]
    assert [q.split("'")[3] for q, _ in creates] == ["localhost", "127.0.0.1"]
    assert all(a == ("pw",) for _, a in creates)  # the password is a parameter, never inlined
    assert sum(q.startswith("GRANT") for q in sql) == 6
    assert sql[-1] == "FLUSH PRIVILEGES"
