"""What the clone is made from: the source server read through one connection, read-only
(``SELECT`` and ``SHOW`` only), plus its process on this host (``/proc/PID``): binary,
command line, owner, CPU placement, and the size of its datadir."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pymysql

from myaccel.actions.server_files import process_args
from myaccel.clone.errors import CloneError
from myaccel.facts.server import pid_from_file
from myaccel.server.connection import ConnectParams, connect, query_rows
from myaccel.server.flavor import ServerVersion, parse_server_version
from myaccel.server.flavors import ServerFlavor, adapter_for
from myaccel.server.optionfile import normalize_key
from myaccel.server.sandbox.snapshots import dir_size_bytes

# Schemas of the server itself: never replayed by a schema-only clone, never counted as
# the user's data.
SYSTEM_SCHEMAS = ("mysql", "sys", "information_schema", "performance_schema")


@dataclass
class SourceServer:
    """The source server as read once at the start of a clone."""

    params: ConnectParams
    version: ServerVersion
    variables: dict[str, str]
    sandbox: str | None = None  # the source is itself a myaccel sandbox
    pid: int | None = None
    args: list[str] = field(default_factory=list)  # its command line
    uid: int | None = None  # its owner
    cpus: list[int] | None = None  # where it may run
    persisted: dict[str, str] = field(default_factory=dict)  # SET PERSIST
    data_bytes: int = 0
    clone_plugin: str | None = None  # MySQL: the clone plugin's status (None: not loaded)
    notes: list[str] = field(default_factory=list)

    @property
    def adapter(self) -> ServerFlavor:
        return adapter_for(self.version)

    @property
    def datadir(self) -> Path:
        return Path(self.variables.get("datadir", "")).resolve()

    @property
    def binary(self) -> Path | None:
        if self.pid is None:
            return None
        try:
            return Path(os.readlink(f"/proc/{self.pid}/exe"))
        except OSError:
            return None

    @property
    def local(self) -> bool:
        return self.pid is not None


def read_source(params: ConnectParams, sandbox: str | None = None) -> SourceServer:
    """Read the source server (``ConnectionFailed`` when it cannot be reached)."""
    conn = connect(params)
    try:
        vstr, comment = query_rows(conn, "SELECT VERSION(), @@version_comment")[0]
        version = parse_server_version(str(vstr), str(comment or ""))
        if version is None:
            raise CloneError(
                f"cannot tell which server this is from its version {vstr!r}",
                hint="myaccel clone knows MariaDB and MySQL (and Percona Server)",
            )
        variables = {
            normalize_key(str(k)): "" if v is None else str(v)
            for k, v in query_rows(conn, "SHOW GLOBAL VARIABLES")
        }
        src = SourceServer(params=params, version=version, variables=variables, sandbox=sandbox)
        if version.flavor != "mariadb":
            src.persisted = _persisted(conn, src.notes)
            src.clone_plugin = _plugin_status(conn, "clone")
        src.data_bytes = _information_schema_bytes(conn)
    finally:
        conn.close()
    _read_process(src)
    return src


def _persisted(conn: pymysql.connections.Connection[Any], notes: list[str]) -> dict[str, str]:
    try:
        rows = query_rows(
            conn,
            "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM performance_schema.persisted_variables",
        )
    except pymysql.err.MySQLError as exc:
        notes.append(f"SET PERSIST values not readable ({exc.args[-1]}); runtime values used")
        return {}
    return {normalize_key(str(k)): "" if v is None else str(v) for k, v in rows}


def _plugin_status(conn: pymysql.connections.Connection[Any], name: str) -> str | None:
    rows = query_rows(
        conn,
        f"SELECT PLUGIN_STATUS FROM information_schema.PLUGINS WHERE PLUGIN_NAME = '{name}'",
    )
    return str(rows[0][0]) if rows else None


def _information_schema_bytes(conn: pymysql.connections.Connection[Any]) -> int:
    rows = query_rows(
        conn,
        "SELECT COALESCE(SUM(data_length + index_length), 0) FROM information_schema.TABLES",
    )
    return int(rows[0][0]) if rows else 0


def _read_process(src: SourceServer) -> None:
    pid = pid_from_file(src.variables.get("pid_file", ""))
    if not pid.known or pid.value is None:
        src.notes.append(f"the server's process is not on this host ({pid.unknown})")
        return
    src.pid = pid.value
    src.args = process_args(pid.value) or []
    try:
        p = psutil.Process(pid.value)
        src.uid = p.uids().real
        src.cpus = sorted(p.cpu_affinity() or [])
    except (psutil.Error, AttributeError):
        pass
    if src.datadir.is_dir() and os.access(src.datadir, os.R_OK | os.X_OK):
        # the files a copy takes (redo, undo, system tablespace), not only the tables
        src.data_bytes = max(src.data_bytes, dir_size_bytes(src.datadir))


def defaults_args(args: list[str]) -> list[str]:
    """The ``--defaults-*``/``--no-defaults`` options at the head of a server command line
    (the server honours them only there)."""
    out = []
    for a in args[1:]:
        if a == "--no-defaults" or re.match(r"--defaults-(file|extra-file|group-suffix)=", a):
            out.append(a)
        else:
            break
    return out


def command_line_options(args: list[str]) -> list[str]:
    """The options of a server command line after its ``--defaults-*`` head."""
    head = len(defaults_args(args))
    return [a for a in args[1 + head :] if a.startswith("--")]
