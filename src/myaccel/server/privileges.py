"""The privileges of the connected account, as the server's ``information_schema`` lists
them (``USER_PRIVILEGES``, ``SCHEMA_PRIVILEGES``, ``TABLE_PRIVILEGES`` of
``CURRENT_USER()``), and whether they cover what a piece of work needs: a global privilege
covers every schema and table, a schema's privilege its tables.

Shared by the clone/apply preflight (``clone.preflight``) and ``myaccel capture``. Roles
are not expanded (a privilege held only through a role is reported missing)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pymysql

from myaccel.server.connection import query_rows

GRANTEE = (
    "GRANTEE = CONCAT('''', SUBSTRING_INDEX(CURRENT_USER(), '@', 1), '''@''', "
    "SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')"
)
# a privilege the server also grants through another (MariaDB's BINLOG MONITOR was
# REPLICATION CLIENT; MySQL still honours SUPER for SET GLOBAL, with a warning)
ALIASES: dict[str, frozenset[str]] = {
    "BINLOG MONITOR": frozenset({"REPLICATION CLIENT", "SUPER"}),
    "SYSTEM_VARIABLES_ADMIN": frozenset({"SUPER"}),
}


# SET GLOBAL on a variable (MySQL >= 8: SYSTEM_VARIABLES_ADMIN; MariaDB: SUPER), per flavor
SET_GLOBAL = {
    "mysql": "SYSTEM_VARIABLES_ADMIN",
    "percona": "SYSTEM_VARIABLES_ADMIN",
    "mariadb": "SUPER",
}


@dataclass(frozen=True)
class Need:
    """A privilege on ``*.*`` (``schema`` None), on ``schema.*`` or on ``schema.table``."""

    privilege: str
    schema: str | None = None
    table: str | None = None

    @property
    def on(self) -> str:
        if self.schema is None:
            return "*.*"
        return f"{self.schema}.{self.table or '*'}"

    def describe(self) -> str:
        return f"{self.privilege} on {self.on}"


@dataclass
class AccountPrivileges:
    """What ``CURRENT_USER()`` holds, upper case, per level."""

    user: str = ""  # CURRENT_USER(): 'name@host'
    global_: set[str] = field(default_factory=set)
    schemas: dict[str, set[str]] = field(default_factory=dict)
    tables: dict[tuple[str, str], set[str]] = field(default_factory=dict)

    def holds(self, need: Need) -> bool:
        wanted = {need.privilege} | ALIASES.get(need.privilege, frozenset())
        have = set(self.global_)
        if need.schema is not None:
            have |= self.schemas.get(need.schema.lower(), set())
            if need.table is not None:
                have |= self.tables.get((need.schema.lower(), need.table.lower()), set())
        return bool(wanted & have)

    def missing(self, needs: list[Need]) -> list[Need]:
        return [n for n in needs if not self.holds(n)]


def read_privileges(conn: pymysql.connections.Connection[Any]) -> AccountPrivileges:
    """The connected account's privileges at every level (``information_schema``)."""
    user = query_rows(conn, "SELECT CURRENT_USER()")
    out = AccountPrivileges(user=str(user[0][0]) if user else "")
    out.global_ = {
        str(r[0]).upper()
        for r in query_rows(
            conn, f"SELECT PRIVILEGE_TYPE FROM information_schema.USER_PRIVILEGES WHERE {GRANTEE}"
        )
    }
    for schema, priv in query_rows(
        conn,
        "SELECT TABLE_SCHEMA, PRIVILEGE_TYPE FROM information_schema.SCHEMA_PRIVILEGES "
        f"WHERE {GRANTEE}",
    ):
        out.schemas.setdefault(str(schema).lower(), set()).add(str(priv).upper())
    for schema, table, priv in query_rows(
        conn,
        "SELECT TABLE_SCHEMA, TABLE_NAME, PRIVILEGE_TYPE FROM information_schema.TABLE_PRIVILEGES "
        f"WHERE {GRANTEE}",
    ):
        key = (str(schema).lower(), str(table).lower())
        out.tables.setdefault(key, set()).add(str(priv).upper())
    return out


def grant_statements(missing: list[Need], user: str) -> list[str]:
    """``GRANT ... ON ... TO 'name'@'host'`` per object, in the order first needed."""
    by_on: dict[str, list[str]] = {}
    for n in missing:
        privs = by_on.setdefault(n.on, [])
        if n.privilege not in privs:
            privs.append(n.privilege)
    name, _, host = user.partition("@")
    who = f"'{name}'@'{host or '%'}'"
    return [f"GRANT {', '.join(p)} ON {on} TO {who}" for on, p in by_on.items()]


# the server's answers to a SELECT the account may not run: on the schema, on the table
DENIED = (1044, 1142)


def may_select(conn: pymysql.connections.Connection[Any], table: str) -> bool:
    """Whether the account may SELECT from ``table`` (``schema.table``, quoted as needed),
    asked of the server itself, so that a global, schema or table grant and a role all
    count; no row is read. Without SELECT the server says "denied" whether the table exists
    or not; a missing table or schema (1146, 1049) is an answer the account may see."""
    try:
        query_rows(conn, f"SELECT 1 FROM {table} LIMIT 0")
    except pymysql.err.MySQLError as exc:
        if exc.args and exc.args[0] in DENIED:
            return False
        if exc.args and exc.args[0] in (1146, 1049):
            return True
        raise
    return True
