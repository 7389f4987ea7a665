"""MySQL (and Percona Server, which initializes, starts and stops the same way).

Quirks a real MySQL 9.x shows (issue 16): the datadir is made by the server itself
(``--initialize-insecure``, MySQL >= 5.7); ``--initialize`` aborts when the built-in
``secure_file_priv`` directory is missing (the sandbox always sets its own, see
``sandbox.options.OWNED_KEYS``); the X plugin listens on port 33060 unless
``mysqlx=OFF``; ``SET PERSIST`` writes ``mysqld-auto.cnf`` in the datadir, which
``--no-defaults`` would skip; ``mariadb-admin shutdown`` (COM_SHUTDOWN) is gone, SQL
``SHUTDOWN`` works.
"""

from __future__ import annotations

from pathlib import Path

from myaccel.errors import SandboxError
from myaccel.server.flavors.base import Install, OptionPairs, ServerFlavor


class MySQLFlavor(ServerFlavor):
    name = "mysql"
    # Percona Server differs from MySQL in features, not in how a sandbox runs it
    handles = frozenset({"mysql", "percona"})
    server_binaries = ("mysqld",)
    hot_copy = "clone-plugin"
    hot_copy_privileges = ("BACKUP_ADMIN",)  # CLONE LOCAL DATA DIRECTORY
    skip_replica_start = "skip_replica_start"

    def init_argv(self, install: Install, option_file: Path) -> list[str]:
        v = install.version
        if not v.at_least(5, 7):
            raise SandboxError(
                f"{v.label} is too old for a sandbox",
                hint="MySQL 5.7 or newer is needed (mysqld --initialize-insecure)",
            )
        return [str(install.binary), f"--defaults-file={option_file}", "--initialize-insecure"]

    def start_options(self) -> OptionPairs:
        # loose-: servers built without the X plugin would refuse an unknown option
        return [("loose-mysqlx", "OFF")]  # X plugin would take port 33060

    def persisted_options_file(self, datadir: Path) -> Path | None:
        return datadir / "mysqld-auto.cnf"
