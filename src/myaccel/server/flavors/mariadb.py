"""MariaDB: ``mariadb-install-db`` makes the datadir, the server reads the MariaDB groups too."""

from __future__ import annotations

from pathlib import Path

from myaccel.errors import ToolMissing
from myaccel.server.flavors.base import Install, ServerFlavor


class MariaDBFlavor(ServerFlavor):
    name = "mariadb"
    handles = frozenset({"mariadb"})
    server_binaries = ("mariadbd",)
    install_db_names = ("mariadb-install-db", "mysql_install_db")
    hot_copy = "mariadb-backup"
    # what mariadb-backup --backup needs (MariaDB >= 10.5: BINLOG MONITOR, formerly
    # REPLICATION CLIENT)
    hot_copy_privileges = ("RELOAD", "PROCESS", "LOCK TABLES", "BINLOG MONITOR")
    skip_replica_start = "skip_slave_start"
    upgrade_names = ("mariadb-upgrade", "mysql_upgrade")

    def admin_account_sql(self, user: str) -> list[str]:
        return [
            f"CREATE USER IF NOT EXISTS '{user}'@'localhost';",
            f"ALTER USER '{user}'@'localhost' IDENTIFIED VIA mysql_native_password "
            "USING PASSWORD('');",
            f"GRANT ALL PRIVILEGES ON *.* TO '{user}'@'localhost' WITH GRANT OPTION;",
        ]

    def init_argv(self, install: Install, option_file: Path) -> list[str]:
        """``mariadb-install-db --defaults-file=F --basedir=B``; from 10.4 root gets a
        normal (password) account instead of unix_socket only, from 10.5 no test database."""
        v = install.version
        if install.install_db is None:
            raise ToolMissing(
                f"mariadb-install-db not found for {v.label}",
                hint="install it with: apt-get install mariadb-server, or pass --basedir of a "
                "build that has scripts/mariadb-install-db",
            )
        argv = [str(install.install_db), f"--defaults-file={option_file}"]
        argv.append(f"--basedir={install.basedir}")
        if v.at_least(10, 4):
            argv.append("--auth-root-authentication-method=normal")
        if v.at_least(10, 5):
            argv.append("--skip-test-db")
        return argv

    def option_groups(self, series: str) -> tuple[str, ...]:
        return (
            *super().option_groups(series),
            "mariadb",
            f"mariadb-{series}",
            "mariadbd",
            f"mariadbd-{series}",
            "client-server",
        )
