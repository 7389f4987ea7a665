"""Connections to a server, following MySQL client conventions.

Resolution order (later wins): option files (``/etc/my.cnf``, ``/etc/mysql/my.cnf``,
``~/.my.cnf``; groups ``[client]``, ``[client-server]``, ``[client-mariadb]``), or only
``--defaults-file`` when given; then ``MYSQL_PWD``; then explicit command-line options.
``--sandbox NAME`` is resolved by the caller (``myaccel.cli.common.resolve``): this module
knows nothing of sandboxes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from myaccel.errors import ConnectionFailed, UsageError
from myaccel.server.optionfile import OptionFile, read_option_file

if TYPE_CHECKING:  # pymysql is imported by connect(): the CLI's options need none of it
    import pymysql.connections

CLIENT_GROUPS = ["client", "client-server", "client-mariadb", "mysql"]
DEFAULT_SOCKETS = ("/run/mysqld/mysqld.sock", "/var/run/mysqld/mysqld.sock", "/tmp/mysql.sock")


@dataclass(frozen=True)
class ConnectionOptions:
    """What the user asked for on the command line (None = not given)."""

    host: str | None = None
    port: int | None = None
    socket: str | None = None
    user: str | None = None
    password: str | None = None
    defaults_file: str | None = None
    sandbox: str | None = None  # a sandbox name: the cli resolves it, ``resolve`` refuses it

    @property
    def given(self) -> bool:
        return any(v is not None for v in self.__dict__.values())


@dataclass(frozen=True)
class ConnectParams:
    """Fully resolved parameters."""

    host: str | None
    port: int
    socket: str | None
    user: str
    password: str | None
    database: str | None = None
    connect_timeout_s: float = 5.0

    def describe(self) -> str:
        where = f"socket {self.socket}" if self.socket else f"{self.host}:{self.port}"
        return f"{self.user}@{where}"


def _option_files(opts: ConnectionOptions) -> OptionFile:
    if opts.defaults_file:
        p = Path(opts.defaults_file).expanduser()
        if not p.is_file():
            raise UsageError(
                f"defaults file '{opts.defaults_file}' does not exist",
                hint="pass an existing option file with a [client] group",
            )
        return read_option_file(p)
    of = OptionFile()
    for cand in ("/etc/my.cnf", "/etc/mysql/my.cnf", str(Path.home() / ".my.cnf")):
        read_option_file(cand, of, missing_ok=True)
    return of


def resolve(opts: ConnectionOptions) -> ConnectParams:
    """Parameters from option files, ``MYSQL_PWD`` and the explicit options."""
    if opts.sandbox is not None:
        raise ValueError("a sandbox name is resolved by myaccel.cli.common.resolve")
    of = _option_files(opts)
    host = opts.host or of.get(CLIENT_GROUPS, "host")
    port_s = opts.port if opts.port is not None else of.get(CLIENT_GROUPS, "port")
    sock = opts.socket or of.get(CLIENT_GROUPS, "socket")
    user = opts.user or of.get(CLIENT_GROUPS, "user") or os.environ.get("USER") or "root"
    password = opts.password
    if password is None:
        password = os.environ.get("MYSQL_PWD") or of.get(CLIENT_GROUPS, "password")
    try:
        port = int(port_s) if port_s is not None else 3306
    except ValueError as exc:
        raise UsageError(f"port '{port_s}' is not a number", hint="use --port N") from exc
    # As the mysql client: "localhost" (or nothing) means the unix socket.
    if host in (None, "localhost") and (opts.port is None or sock):
        if sock is None:
            sock = next((s for s in DEFAULT_SOCKETS if Path(s).exists()), DEFAULT_SOCKETS[0])
        return ConnectParams(host=None, port=port, socket=sock, user=user, password=password)
    return ConnectParams(
        host=host or "127.0.0.1", port=port, socket=None, user=user, password=password
    )


def connect(params: ConnectParams) -> pymysql.connections.Connection[Any]:
    """Open a connection; every failure becomes a ``ConnectionFailed`` with a hint."""
    import pymysql

    try:
        return pymysql.connect(
            host=params.host or "localhost",
            port=params.port,
            unix_socket=params.socket,
            user=params.user,
            password=params.password or "",
            database=params.database,
            connect_timeout=params.connect_timeout_s,
            autocommit=True,
            charset="utf8mb4",
        )
    except pymysql.err.OperationalError as exc:
        code = exc.args[0] if exc.args else 0
        msg = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
        where = params.describe()
        if code == 1045:
            raise ConnectionFailed(
                f"access denied for {where}",
                hint="check --user/--password, MYSQL_PWD or the [client] group of ~/.my.cnf",
            ) from exc
        if code in (2002, 2003, 2005, 2013):
            raise ConnectionFailed(
                f"cannot reach a server at {where}: {msg.split('(')[0].strip()}",
                hint="is the server running? check --host/--port/--socket, "
                "or use --sandbox NAME (see `myaccel sandbox list`)",
            ) from exc
        raise ConnectionFailed(
            f"connection to {where} failed: {msg}", hint="see the server's error log"
        ) from exc
    except pymysql.err.MySQLError as exc:
        raise ConnectionFailed(
            f"connection to {params.describe()} failed: {exc}", hint="see the server's error log"
        ) from exc


def query_rows(conn: pymysql.connections.Connection[Any], sql: str) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return list(cur.fetchall())


def query_value(conn: pymysql.connections.Connection[Any], sql: str) -> Any:
    rows = query_rows(conn, sql)
    return rows[0][0] if rows else None
