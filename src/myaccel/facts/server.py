"""Facts about a running server: flavor, version, variables, status, process placement."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pymysql

from myaccel.facts.process import ProcessFacts, process_facts
from myaccel.facts.sysroot import Sysroot
from myaccel.model import Fact, ServerFacts, known, unknown
from myaccel.server.connection import ConnectParams, connect, query_rows
from myaccel.server.flavor import parse_server_version


def collect_server(params: ConnectParams, sr: Sysroot | None = None) -> ServerFacts:
    """Connect and read the server. Connection failures raise ``ConnectionFailed``."""
    conn = connect(params)
    try:
        return _collect(conn, params, sr or Sysroot("/"))
    finally:
        conn.close()


def _collect(
    conn: pymysql.connections.Connection[Any], params: ConnectParams, sr: Sysroot
) -> ServerFacts:
    q = "SELECT VERSION(), @@version_comment"
    rows = query_rows(conn, q)
    vstr, vcomment = str(rows[0][0]), str(rows[0][1] or "")
    sv = parse_server_version(vstr, vcomment)
    variables = {str(k): str(v) for k, v in query_rows(conn, "SHOW GLOBAL VARIABLES")}
    status = {str(k): str(v) for k, v in query_rows(conn, "SHOW GLOBAL STATUS")}
    flavor: Fact[str] = known(sv.flavor, q) if sv else unknown(f"unrecognized version {vstr!r}", q)
    version: Fact[str] = known(sv.text, q) if sv else unknown(f"unrecognized version {vstr!r}", q)
    uptime: Fact[int] = (
        known(int(status["Uptime"]), "SHOW GLOBAL STATUS")
        if status.get("Uptime", "").isdigit()
        else unknown("no Uptime", "SHOW GLOBAL STATUS")
    )
    datadir: Fact[str] = (
        known(variables["datadir"], "@@datadir")
        if "datadir" in variables
        else unknown("no datadir", "@@datadir")
    )
    data_size = _data_size(conn, sv.flavor if sv else "mysql")

    local = params.socket is not None or (params.host or "") in ("127.0.0.1", "localhost", "::1")
    proc = ProcessFacts.unknown("server is remote", "/proc/PID")
    pid: Fact[int] = unknown("server is remote", "@@pid_file")
    if local:
        pid = pid_from_file(variables.get("pid_file", ""))
        if pid.known and pid.value is not None:
            proc = process_facts(sr, pid.value)
        else:
            proc = ProcessFacts.unknown(pid.unknown or "no pid", "@@pid_file")
    return ServerFacts(
        connection=params.describe(),
        flavor=flavor,
        version=version,
        version_string=known(vstr, q),
        version_comment=known(vcomment, q),
        uptime_s=uptime,
        datadir=datadir,
        data_size_bytes=data_size,
        pid=pid,
        binary_path=proc.binary_path,
        cpus_allowed=proc.cpus_allowed,
        mems_allowed=proc.mems_allowed,
        cgroup_limit_bytes=proc.cgroup_limit_bytes,
        cpu_quota_cpus=proc.cpu_quota_cpus,
        variables=known(variables, "SHOW GLOBAL VARIABLES"),
        status=known(status, "SHOW GLOBAL STATUS"),
    )


def pid_from_file(pid_file: str) -> Fact[int]:
    if not pid_file:
        return unknown("@@pid_file is empty", "@@pid_file")
    try:
        text = Path(pid_file).read_text().strip()
        pid = int(text)
    except (OSError, ValueError) as exc:
        return unknown(f"cannot read pid file {pid_file}: {exc}", pid_file)
    if not Path(f"/proc/{pid}").exists():
        return unknown(f"pid {pid} from {pid_file} is not running here (remote server?)", pid_file)
    return known(pid, pid_file)


def _data_size(conn: pymysql.connections.Connection[Any], flavor: str) -> Fact[int]:
    q = "SELECT COALESCE(SUM(data_length + index_length), 0) FROM information_schema.TABLES"
    try:
        with conn.cursor() as cur:
            # Bound the cost on servers with very many tables.
            if flavor == "mariadb":
                cur.execute("SET SESSION max_statement_time = 3")
            else:
                cur.execute("SET SESSION max_execution_time = 3000")
            cur.execute(q)
            row = cur.fetchone()
        return known(int(row[0]) if row else 0, "information_schema.TABLES")
    except pymysql.err.MySQLError as exc:
        return unknown(f"query failed: {exc}", "information_schema.TABLES")
