"""The clone's accounts, made by an ``init_file`` at its first start (the copied grant
tables are the source's: its root may have a password or socket-only login):
``root@localhost`` with every privilege and no password (reachable only through the
sandbox's 0700 socket), and the sandbox's benchmark user and database. Nothing of the
copied accounts is dropped."""

from __future__ import annotations

from myaccel.server.flavors import ServerFlavor
from myaccel.server.sandbox.state import ADMIN_USER


def first_start_sql(adapter: ServerFlavor, *, user: str, password: str, database: str) -> str:
    """One statement per line (``init_file`` reads lines)."""
    lines = adapter.admin_account_sql(ADMIN_USER)
    lines.append(f"CREATE DATABASE IF NOT EXISTS `{database}`;")
    for host in ("localhost", "127.0.0.1"):
        who = f"'{user}'@'{host}'"
        lines += [
            f"CREATE USER IF NOT EXISTS {who} IDENTIFIED BY '{password}';",
            f"ALTER USER {who} IDENTIFIED BY '{password}';",
            f"GRANT ALL PRIVILEGES ON `{database}`.* TO {who};",
            f"GRANT PROCESS, RELOAD, REPLICATION CLIENT ON *.* TO {who};",
            f"GRANT SELECT ON performance_schema.* TO {who};",
        ]
    return "\n".join(lines) + "\n"
