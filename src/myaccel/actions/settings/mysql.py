"""``mysql:VARIABLE``: a global server variable, set with ``SET GLOBAL`` (or MySQL 8's
``SET PERSIST``) on a running server."""

from __future__ import annotations

import contextlib
import os
import re
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pymysql

from myaccel.actions.errors import ApplyError
from myaccel.actions.files import check_value_text, snapshot_file
from myaccel.actions.journal import JournalEntry, OldState
from myaccel.actions.settings.base import Change, Connect, Setting, values_equal
from myaccel.errors import UsageError
from myaccel.knobs.values import ValueSyntaxError, parse_int

_VAR_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_variable_name(name: str) -> str:
    if not _VAR_RE.match(name):
        raise UsageError(
            f"'{name}' is not a server variable name", hint="write it like innodb_io_capacity"
        )
    return name.lower()


def sql_literal(value: str, escape: Callable[[str], str]) -> str:
    """The SQL spelling of a value for ``SET GLOBAL``: integers bare (sizes expanded:
    ``128M`` -> ``134217728``, which the server does not accept in SET), decimals bare,
    ON/OFF/TRUE/FALSE bare, anything else a quoted string (enums, lists like sql_mode)."""
    v = value.strip()
    try:
        return str(parse_int(v))
    except ValueSyntaxError:
        pass
    if re.fullmatch(r"[+-]?\d+\.\d+", v):
        return v
    if v.upper() in ("ON", "OFF", "TRUE", "FALSE"):
        return v.upper()
    return escape(v)


class ServerVariableSetting(Setting):
    """``mysql:innodb_io_capacity``: ``SET GLOBAL`` on a running server through
    ``connect`` (a callable returning a PyMySQL connection). ``persist`` uses MySQL 8's
    ``SET PERSIST`` (and revert restores or resets the persisted value); without it the
    change lasts until the server restarts (pair it with ``mycnf:`` for that)."""

    kind = "mysql"
    spec_fields = ("name", "persist")

    @property
    def survives_reboot(self) -> bool:
        """SET GLOBAL lasts until the server stops; SET PERSIST is read at its start."""
        return self.persist

    def __init__(
        self,
        name: str,
        *,
        connect: Connect,
        persist: bool = False,
        normalize: Callable[[str], object] | None = None,
    ) -> None:
        self.name = check_variable_name(name)
        self.connect = connect
        self.persist = persist
        self.normalize = normalize
        self.target = f"mysql:{self.name}"

    @property
    def needs_root(self) -> bool:
        return False  # needs SUPER / SYSTEM_VARIABLES_ADMIN on the server instead

    def matches(self, actual: str | None, desired: str) -> bool:
        if actual is None:
            return False
        if self.normalize is not None:
            try:
                return self.normalize(actual) == self.normalize(desired)
            except (ValueError, UsageError):
                pass
        return values_equal(actual, desired)

    def _query(self, conn: pymysql.connections.Connection[Any], sql: str) -> list[tuple[Any, ...]]:
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                return list(cur.fetchall())
        except pymysql.err.MySQLError as exc:
            raise self._error(exc, sql) from exc

    def _error(self, exc: pymysql.err.MySQLError, sql: str) -> Exception:
        code = exc.args[0] if exc.args else 0
        msg = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
        if code == 1193:
            return UsageError(
                f"the server has no variable {self.name}",
                hint="it may not exist in this flavor or version: make the plan again on this server (myaccel plan)",
            )
        if code in (1227, 1044, 1045, 1142):
            return ApplyError(
                f"not allowed to change {self.name}: {msg}",
                hint="connect as a user with SUPER or SYSTEM_VARIABLES_ADMIN",
            )
        if code == 1238:
            return ApplyError(
                f"{self.name} cannot be changed at runtime: {msg}",
                hint=f"use mycnf:mysqld/{self.name} and restart the server",
            )
        if code in (1231, 1232):
            return UsageError(
                f"the server rejected the value for {self.name}: {msg}",
                hint="check the allowed values (`myaccel explain` or the server manual)",
            )
        return ApplyError(
            f"{sql.split('=', maxsplit=1)[0].strip()} failed: {msg}",
            hint="see the server's error log",
        )

    def _with_conn(self, fn: Callable[[pymysql.connections.Connection[Any]], Any]) -> Any:
        conn = self.connect()
        try:
            return fn(conn)
        finally:
            with contextlib.suppress(pymysql.err.Error):
                conn.close()

    def _read(self, conn: pymysql.connections.Connection[Any]) -> str | None:
        rows = self._query(conn, f"SELECT @@GLOBAL.{self.name}")
        value = rows[0][0] if rows else None
        if isinstance(value, bytes):
            value = value.decode(errors="replace")
        return None if value is None else str(value)

    def _persisted(self, conn: pymysql.connections.Connection[Any]) -> str | None:
        rows = self._query(
            conn,
            "SELECT VARIABLE_VALUE FROM performance_schema.persisted_variables "
            f"WHERE VARIABLE_NAME = '{self.name}'",
        )
        return None if not rows or rows[0][0] is None else str(rows[0][0])

    def _check_persist(self, conn: pymysql.connections.Connection[Any]) -> None:
        version = str(self._query(conn, "SELECT VERSION()")[0][0])
        if "mariadb" in version.lower():
            raise UsageError(
                "SET PERSIST is MySQL 8 only; MariaDB has no persisted variables",
                hint=f"use mycnf:mysqld/{self.name} to keep the value across restarts",
            )

    def _local_auto_cnf(self, conn: pymysql.connections.Connection[Any]) -> Path | None:
        """``mysqld-auto.cnf`` (where SET PERSIST writes) when the server runs on this host
        and its datadir is readable here; None otherwise (then rollback restores the
        persisted values, not the file's bytes)."""
        rows = self._query(conn, "SELECT @@GLOBAL.datadir, @@GLOBAL.hostname")
        if not rows or rows[0][0] is None or str(rows[0][1]) != socket.gethostname():
            return None
        datadir = Path(str(rows[0][0]))
        return datadir / "mysqld-auto.cnf" if os.access(datadir, os.R_OK | os.X_OK) else None

    def read(self) -> str | None:
        value: str | None = self._with_conn(self._read)
        return value

    def plan(self, desired: str) -> Change | None:
        check_value_text(desired, self.target)
        desired = desired.strip()

        def look(conn: pymysql.connections.Connection[Any]) -> tuple[str | None, str | None]:
            current = self._read(conn)
            persisted = None
            if self.persist:
                self._check_persist(conn)
                persisted = self._persisted(conn)
            return current, persisted

        current, persisted = self._with_conn(look)
        ok = self.matches(current, desired)
        if self.persist:
            ok = ok and persisted is not None and self.matches(persisted, desired)
        if ok:
            return None
        verb = "SET PERSIST" if self.persist else "SET GLOBAL"
        return self._change(current, desired, [f"{verb} {self.name}"])

    def capture(self) -> OldState:
        def look(conn: pymysql.connections.Connection[Any]) -> OldState:
            old = OldState(value=self._read(conn))
            if self.persist:
                persisted = self._persisted(conn)
                old.extra = {"persisted": persisted, "was_persisted": "1" if persisted else "0"}
                auto_cnf = self._local_auto_cnf(conn)
                if auto_cnf is not None:
                    # Rollback puts its bytes back after RESET PERSIST / PERSIST_ONLY, which
                    # rewrite it with new timestamps (or leave '{"Version": 2}' behind).
                    old.files = [snapshot_file(Path("/"), str(auto_cnf))]
            return old

        state: OldState = self._with_conn(look)
        return state

    def _set(self, conn: pymysql.connections.Connection[Any], verb: str, value: str | None) -> None:
        literal = "NULL" if value is None else sql_literal(value, conn.escape)
        self._query(conn, f"{verb} {self.name} = {literal}")

    def apply(self, desired: str) -> None:
        verb = "SET PERSIST" if self.persist else "SET GLOBAL"
        self._with_conn(lambda conn: self._set(conn, verb, desired.strip()))

    def revert(self, entry: JournalEntry) -> None:
        old = entry.old.value

        def undo(conn: pymysql.connections.Connection[Any]) -> None:
            if not values_equal(self._read(conn), old):
                self._set(conn, "SET GLOBAL", old)
            if entry.old.extra.get("was_persisted") == "1":
                self._set(conn, "SET PERSIST_ONLY", entry.old.extra.get("persisted"))
            elif "was_persisted" in entry.old.extra:
                self._query(conn, f"RESET PERSIST IF EXISTS {self.name}")

        self._with_conn(undo)
