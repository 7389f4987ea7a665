"""What every server flavor answers for a sandbox: which binaries, how to initialize a
datadir, which option-file groups it reads, which start options it needs, how it shuts down
and how the benchmark accounts are made.

One subclass per flavor (``mariadb.py``, ``mysql.py``); ``myaccel.server.flavors.adapter_for``
picks it from a flavor name or a ``ServerVersion``. The sandbox calls these methods instead
of testing the flavor itself.
"""

from __future__ import annotations

import signal
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

from myaccel import proc
from myaccel.server.flavor import ServerVersion, flavor_label

# The datadir families a sandbox knows (Percona Server runs as "mysql").
Flavor = Literal["mariadb", "mysql"]
OptionPairs = list[tuple[str, str | None]]


class Install(Protocol):
    """The parts of a server install an adapter needs (``sandbox.install.ServerInstall``)."""

    @property
    def binary(self) -> Path: ...

    @property
    def basedir(self) -> Path: ...

    @property
    def version(self) -> ServerVersion: ...

    @property
    def install_db(self) -> Path | None: ...


class Cursor(Protocol):
    """The part of a DB-API cursor the account set-up uses (pymysql's)."""

    def execute(self, query: str, args: Any = None) -> int: ...

    def fetchall(self) -> Any: ...


class ServerFlavor(ABC):
    """One server flavor as the sandbox drives it."""

    name: ClassVar[Flavor]
    # ``ServerVersion.flavor`` values this adapter runs (Percona Server: the MySQL one)
    handles: ClassVar[frozenset[str]]
    # server binary names, in the order they are looked for
    server_binaries: ClassVar[tuple[str, ...]]
    # datadir initialization tools (MariaDB's mariadb-install-db), in order; () = the server
    install_db_names: ClassVar[tuple[str, ...]] = ()
    # what the sandbox sends to stop the server it runs: a clean shutdown for both
    # flavors (no client needed; see ``shutdown_sql`` for a connected client)
    shutdown_signal: ClassVar[int] = signal.SIGTERM
    # how a connected admin client shuts the server down (``SHUTDOWN`` exists in MySQL
    # >= 5.7.9 and MariaDB >= 10.0.4; the COM_SHUTDOWN packet of ``mariadb-admin shutdown``
    # is gone from MySQL 9.x)
    shutdown_sql: ClassVar[str] = "SHUTDOWN"
    # how a copy of a running server's data is taken without stopping it (myaccel clone)
    hot_copy: ClassVar[str]
    # the global privileges that copy needs on the source server
    hot_copy_privileges: ClassVar[tuple[str, ...]]
    # the option that keeps a copy from connecting to its source's primary
    skip_replica_start: ClassVar[str]
    # the tool that upgrades a datadir once a newer server runs on it (MariaDB's
    # mariadb-upgrade: system tables, table checks); () = the server does it itself when it
    # starts (MySQL >= 8.0.16)
    upgrade_names: ClassVar[tuple[str, ...]] = ()

    @property
    def label(self) -> str:
        return flavor_label(self.name)

    def binary_candidates(self) -> tuple[str, ...]:
        """Where the server binary may be under an install prefix or build tree."""
        return tuple(f"{d}/{b}" for b in self.server_binaries for d in ("bin", "sbin", "libexec"))

    def upgrade_candidates(self) -> tuple[str, ...]:
        """Where the upgrade tool may be under an install prefix or build tree."""
        return tuple(f"{d}/{n}" for n in self.upgrade_names for d in ("bin", "scripts"))

    def install_db_candidates(self) -> tuple[str, ...]:
        return tuple(f"{d}/{n}" for n in self.install_db_names for d in ("scripts", "bin"))

    def system_install_db(self) -> Path | None:
        """The installed datadir tool on PATH, for an installed server (None if not used)."""
        for name in self.install_db_names:
            path = proc.which(name)
            if path:
                return Path(path)
        return None

    @abstractmethod
    def init_argv(self, install: Install, option_file: Path) -> list[str]:
        """The command that creates the datadir named in ``option_file``.

        ``--defaults-file`` must come first for every tool; it also keeps /etc/mysql out."""

    def server_argv(self, install: Install, option_file: Path) -> list[str]:
        """The server command line: only ``--defaults-file`` (never ``--no-defaults``, which
        would also skip MySQL's ``mysqld-auto.cnf``, i.e. every ``SET PERSIST``)."""
        return [str(install.binary), f"--defaults-file={option_file}"]

    def option_groups(self, series: str) -> tuple[str, ...]:
        """Option-file groups the server reads, as in its documentation."""
        return ("mysqld", "server", f"mysqld-{series}")

    def start_options(self) -> OptionPairs:
        """Options the sandbox's base configuration adds for this flavor."""
        return []

    def persisted_options_file(self, datadir: Path) -> Path | None:
        """Where ``SET PERSIST`` writes (None: the flavor has no such file)."""
        return None

    def admin_account_sql(self, user: str) -> list[str]:
        """Statements (one per line, for an ``init_file``) that give ``user``@localhost
        every privilege and an empty password: a clone's admin over its 0700 socket, whatever
        the copied account was."""
        return [
            f"CREATE USER IF NOT EXISTS '{user}'@'localhost';",
            f"ALTER USER '{user}'@'localhost' IDENTIFIED WITH caching_sha2_password BY '';",
            f"GRANT ALL PRIVILEGES ON *.* TO '{user}'@'localhost' WITH GRANT OPTION;",
        ]

    def print_defaults_argv(self, binary: str, defaults_args: list[str]) -> list[str]:
        """What the server reads from its option files (``--print-defaults`` with the
        ``--defaults-*`` options it was started with)."""
        return [binary, *defaults_args, "--print-defaults"]

    def setup_accounts(self, cur: Cursor, *, user: str, password: str, database: str) -> None:
        """Keep only root@localhost as admin (over the 0700 socket), drop the test
        database, create ``database`` and ``user`` (localhost and 127.0.0.1) with what
        benchmarks and probes need. The user gets the server's default authentication
        (MySQL 9.x: caching_sha2_password, which sysbench and PyMySQL speak)."""
        cur.execute(
            "SELECT user, host FROM mysql.user WHERE (user = 'root' AND host <> "
            "'localhost') OR user = ''"
        )
        for u, hst in cur.fetchall():
            cur.execute("DROP USER %s@%s", (u, hst))
        cur.execute("DROP DATABASE IF EXISTS test")
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{database}`")
        for host in ("localhost", "127.0.0.1"):
            cur.execute(
                f"CREATE USER IF NOT EXISTS '{user}'@'{host}' IDENTIFIED BY %s", (password,)
            )
            cur.execute(f"GRANT ALL PRIVILEGES ON `{database}`.* TO '{user}'@'{host}'")
            # SHOW ENGINE INNODB STATUS / processlist (PROCESS), FLUSH (RELOAD),
            # SHOW BINARY LOG STATUS (REPLICATION CLIENT); SHOW GLOBAL STATUS needs none.
            cur.execute(f"GRANT PROCESS, RELOAD, REPLICATION CLIENT ON *.* TO '{user}'@'{host}'")
            cur.execute(f"GRANT SELECT ON performance_schema.* TO '{user}'@'{host}'")
        cur.execute("FLUSH PRIVILEGES")
