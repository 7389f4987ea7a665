"""Run sysbench 1.0.20: argv, preflight, dataset preparation and verification, one run
with live progress, and the measurements around it (CPU seconds, host quietness)."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import pymysql

from myaccel import proc
from myaccel.bench.profiles import normalize_workload
from myaccel.errors import MyaccelError, UsageError
from myaccel.redact import redact_argv
from myaccel.server.connection import ConnectParams, connect, query_rows, query_value

DB = "sbtest"
MARKER_TABLE = "myaccel_dataset"
# On-disk bytes of one sysbench row with its secondary index, InnoDB: 8 x 100,000 rows
# took 184.5 MiB of data_length + index_length (242 B/row) on MariaDB 10.11 here.
ROW_BYTES = 240
# Prepared statements per table a sysbench oltp thread may hold (point, simple, sum, order,
# distinct ranges, index and non-index updates, delete, insert) plus begin/commit.
STMTS_PER_TABLE = 9
STMTS_PER_THREAD = 2


def wrapper_script() -> Path:
    return Path(str(resources.files("myaccel.bench") / "lua" / "myaccel_wrapper.lua"))


@dataclass(frozen=True)
class RunSpec:
    workload: str
    threads: int
    duration_s: int
    warmup_s: int
    tables: int
    table_size: int
    report_interval_s: int = 1
    rand_type: str = "uniform"
    seed: int | None = None
    ps_mode: str = "auto"
    ignore_errors: str | None = None
    percentile: int = 95
    db: str = DB
    extra: tuple[str, ...] = ()
    client_cpus: str | None = None  # pin sysbench with taskset (an explicit, recorded choice)

    @property
    def total_s(self) -> int:
        return self.duration_s + self.warmup_s


def connection_args(target: ConnectParams) -> list[str]:
    """How sysbench reaches ``target``: never the password (see ``password_file``)."""
    args = ["--db-driver=mysql", f"--mysql-user={target.user}"]
    if target.socket:
        args.append(f"--mysql-socket={target.socket}")
    else:
        args += [f"--mysql-host={target.host or '127.0.0.1'}", f"--mysql-port={target.port}"]
    return args


def run_argv(spec: RunSpec, target: ConnectParams) -> tuple[list[str], dict[str, str]]:
    """The sysbench command for one measured run, and its environment."""
    sysbench = proc.require("sysbench")
    argv = [sysbench, str(wrapper_script()), *connection_args(target)]
    if spec.client_cpus:
        argv = [proc.require("taskset"), "-c", spec.client_cpus, *argv]
    argv += [
        f"--mysql-db={spec.db}",
        f"--tables={spec.tables}",
        f"--table-size={spec.table_size}",
        f"--threads={spec.threads}",
        f"--time={spec.total_s}",
        f"--report-interval={spec.report_interval_s}",
        f"--rand-type={spec.rand_type}",
        f"--percentile={spec.percentile}",
        "--histogram=off",
    ]
    if spec.warmup_s > 0:
        # 1.0.20 has no --warmup-time: a checkpoint at W resets the statistics, so the
        # final summary covers only the window after the warm-up.
        argv.append(f"--report-checkpoints={spec.warmup_s}")
    if spec.seed is not None:
        argv.append(f"--rand-seed={spec.seed}")
    if spec.ps_mode == "disable":
        argv.append("--db-ps-mode=disable")
    if spec.ignore_errors is not None:
        argv.append(f"--mysql-ignore-errors={spec.ignore_errors}")
    argv += list(spec.extra)
    argv.append("run")
    env = {"MYACCEL_WORKLOAD": normalize_workload(spec.workload)}
    return argv, env


def mask_password(argv: list[str]) -> list[str]:
    """A sysbench command as it may be recorded (kept for callers: ``redact_argv``)."""
    return redact_argv(argv)


# ------------------------------------------------------------------ the password

# sysbench 1.0.20 reads its --config-file with fgets() into a 256-byte buffer: the line
# `mysql-password="..."` must stay within 255 bytes (measured: 237 bytes pass, 240 fail,
# and a longer line makes sysbench carry on without any password).
PASSWORD_MAX_BYTES = 236


def _config_line(password: str) -> str:
    quote = '"' if '"' not in password else "'"
    if quote in password or "\n" in password or "\r" in password or "\0" in password:
        raise UsageError(
            "this password cannot be handed to sysbench without putting it on its command line "
            "(it holds both quote characters or a line break)",
            hint="use a benchmark user whose password has no line break and not both ' and \"",
        )
    if len(password.encode()) > PASSWORD_MAX_BYTES:
        raise UsageError(
            f"this password is longer than the {PASSWORD_MAX_BYTES} bytes sysbench 1.0.20 reads "
            "from its --config-file",
            hint=f"use a benchmark user with a password of at most {PASSWORD_MAX_BYTES} bytes",
        )
    return f"mysql-password={quote}{password}{quote}\n"


@dataclass(frozen=True)
class SecretArgs:
    """How sysbench gets the password: the arguments to add and the descriptors it must
    inherit (both empty without a password)."""

    args: tuple[str, ...] = ()
    pass_fds: tuple[int, ...] = ()


@contextlib.contextmanager
def password_file(password: str | None) -> Iterator[SecretArgs]:
    """Hand ``password`` to sysbench without writing it anywhere: the line
    ``mysql-password="..."`` goes into a pipe whose read end sysbench inherits and opens as
    ``--config-file=/dev/fd/N`` (sysbench 1.0.20 reads its config file once, at start;
    measured: it logs in with it). Nothing reaches a disk or ``/dev/shm``, so no signal,
    not even SIGKILL, can leave the password behind; the pipe's end is closed when the
    block ends. Yields no argument when there is no password."""
    if not password:
        yield SecretArgs()
        return
    line = _config_line(password).encode()
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, line)  # < 256 bytes: far below a pipe's buffer, never blocks
        os.close(write_fd)
        write_fd = -1
        yield SecretArgs(args=(f"--config-file=/dev/fd/{read_fd}",), pass_fds=(read_fd,))
    finally:
        for fd in (read_fd, write_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)


def with_args(argv: Sequence[str], extra: Sequence[str]) -> list[str]:
    """``argv`` with ``extra`` options before its last word (the sysbench command)."""
    return [*argv[:-1], *extra, argv[-1]] if extra else list(argv)


# sysbench does not read MYSQL_PWD; keep it out of its environ (None removes it)
NO_PASSWORD_ENV: dict[str, str | None] = {"MYSQL_PWD": None}


def run_sysbench(argv: Sequence[str], password: str | None, *, timeout_s: float) -> proc.Completed:
    """``proc.run`` for a sysbench command that needs ``password`` (see ``password_file``)."""
    with password_file(password) as secret:
        return proc.run(
            with_args(argv, secret.args),
            timeout_s=timeout_s,
            env=NO_PASSWORD_ENV,
            pass_fds=secret.pass_fds,
        )


# ------------------------------------------------------------------ preflight


def preflight(target: ConnectParams, spec: RunSpec) -> dict[str, int]:
    """Check the server can take this run; raise with the fix named otherwise."""
    conn = connect(target)
    try:
        rows = dict(
            (str(k), str(v))
            for k, v in query_rows(
                conn,
                "SHOW GLOBAL VARIABLES WHERE Variable_name IN "
                "('max_connections','max_prepared_stmt_count')",
            )
        )
    finally:
        conn.close()
    max_conn = int(rows.get("max_connections", "0"))
    max_ps = int(rows.get("max_prepared_stmt_count", "0"))
    need_conn = spec.threads + 2
    if max_conn < need_conn:
        raise UsageError(
            f"{spec.threads} threads need max_connections >= {need_conn}, the server has {max_conn}",
            hint=f"raise it: SET GLOBAL max_connections = {need_conn + 50}; (or --set max_connections={need_conn + 50} on a sandbox), or use fewer threads",
        )
    need_ps = spec.threads * (spec.tables * STMTS_PER_TABLE + STMTS_PER_THREAD)
    if spec.ps_mode != "disable" and max_ps < need_ps:
        raise UsageError(
            f"{spec.threads} threads x {spec.tables} tables may prepare {need_ps} statements, "
            f"max_prepared_stmt_count is {max_ps}",
            hint=f"raise it: SET GLOBAL max_prepared_stmt_count = {need_ps}; or run with --ps-mode disable (in both arms of a comparison)",
        )
    return {"max_connections": max_conn, "max_prepared_stmt_count": max_ps}


# ------------------------------------------------------------------ dataset


@dataclass(frozen=True)
class DatasetState:
    tables: int
    table_size: int | None
    marker: dict[str, str] = field(default_factory=dict)
    size_bytes: int = 0


def _table_names(conn: pymysql.connections.Connection[Any], db: str) -> list[str]:
    """The names of the tables in schema ``db``."""
    rows = query_rows(
        conn,
        "SELECT table_name FROM information_schema.TABLES WHERE table_schema = " + conn.escape(db),
    )
    return [str(r[0]) for r in rows]


def read_dataset_tables(
    conn: pymysql.connections.Connection[Any], db: str
) -> tuple[list[str], dict[str, str]]:
    """The numbered sysbench tables in schema ``db`` and myaccel's marker (what it was
    prepared with; empty without the marker table), read with SELECT only."""
    names = _table_names(conn, db)
    numbered = [n for n in names if n.startswith("sbtest") and n[6:].isdigit()]
    marker: dict[str, str] = {}
    if MARKER_TABLE in names:
        marker = {
            str(k): str(v) for k, v in query_rows(conn, f"SELECT k, v FROM `{db}`.`{MARKER_TABLE}`")
        }
    return numbered, marker


def dataset_state(target: ConnectParams, db: str = DB) -> DatasetState:
    conn = connect(target)
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{db}`")
        numbered, marker = read_dataset_tables(conn, db)
        size = query_value(
            conn,
            "SELECT COALESCE(SUM(data_length + index_length), 0) FROM information_schema.TABLES "
            "WHERE table_schema = " + conn.escape(db),
        )
        ts = int(marker["table_size"]) if marker.get("table_size", "").isdigit() else None
        return DatasetState(
            tables=len(numbered), table_size=ts, marker=marker, size_bytes=int(size or 0)
        )
    finally:
        conn.close()


def verify_dataset(target: ConnectParams, tables: int, table_size: int, db: str = DB) -> str:
    """'ready' when the schema holds exactly this dataset, 'empty' when it holds none;
    raise when it holds another (never dropped without --cleanup)."""
    st = dataset_state(target, db)
    if st.tables == 0 and not st.marker:
        return "empty"
    want = f"{tables} x {table_size:,} rows"
    have = (
        f"{st.marker.get('tables', st.tables)} x {int(st.marker['table_size']):,} rows"
        if st.table_size is not None
        else f"{st.tables} sbtest tables not prepared by myaccel"
    )
    if (
        st.table_size != table_size
        or int(st.marker.get("tables", -1)) != tables
        or st.tables != tables
    ):
        raise UsageError(
            f"schema '{db}' holds a dataset of {have}; this run needs {want}",
            hint="add --cleanup to drop it and prepare a new one, or match --tables/--table-size to it",
        )
    conn = connect(target)
    try:
        for t in sorted({1, tables}):
            n = query_value(
                conn, f"SELECT COUNT(*) FROM `{db}`.`sbtest{t}` WHERE id <= {table_size}"
            )
            if int(n or 0) != table_size:
                raise UsageError(
                    f"table {db}.sbtest{t} holds {n} of the {table_size:,} rows it was prepared with",
                    hint="it was changed (a write workload without snapshot restore?); re-prepare with --cleanup",
                )
    finally:
        conn.close()
    return "ready"


def cleanup_dataset(target: ConnectParams, db: str = DB) -> None:
    conn = connect(target)
    try:
        names = _table_names(conn, db)
        with conn.cursor() as cur:
            for n in names:
                if (n.startswith("sbtest") and n[6:].isdigit()) or n == MARKER_TABLE:
                    cur.execute(f"DROP TABLE IF EXISTS `{db}`.`{n}`")
    finally:
        conn.close()


def prepare_dataset(
    target: ConnectParams,
    tables: int,
    table_size: int,
    *,
    db: str = DB,
    jobs: int | None = None,
    log: Callable[[str], None] | None = None,
) -> float:
    """Create the tables with sysbench (in parallel: one thread per table up to the CPUs)
    and write the marker. Returns seconds taken."""
    sysbench = proc.require("sysbench")
    threads = max(1, min(tables, jobs or os.cpu_count() or 1))
    argv = [
        sysbench,
        "oltp_common",
        *connection_args(target),
        f"--mysql-db={db}",
        f"--tables={tables}",
        f"--table-size={table_size}",
        f"--threads={threads}",
        "prepare",
    ]
    if log:
        log(f"preparing {tables} x {table_size:,} rows with {threads} thread(s)")
    t0 = time.monotonic()
    est = tables * table_size / 50_000 + 120  # generous: ~50k rows/s on this VM
    r = run_sysbench(argv, target.password, timeout_s=est * 4)
    if not r.ok:
        tail = " | ".join((r.stdout + r.stderr).strip().splitlines()[-3:])
        raise MyaccelError(
            f"sysbench prepare failed (exit {r.returncode}): {tail}",
            hint="check the server's error log and free disk space",
        )
    conn = connect(target)
    try:
        with conn.cursor() as cur:
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS `{db}`.`{MARKER_TABLE}` (k VARCHAR(64) PRIMARY KEY, v TEXT)"
            )
            for k, v in (
                ("tables", str(tables)),
                ("table_size", str(table_size)),
                ("prepared_at", time.strftime("%Y-%m-%dT%H:%M:%S%z")),
            ):
                cur.execute(f"REPLACE INTO `{db}`.`{MARKER_TABLE}` (k, v) VALUES (%s, %s)", (k, v))
    finally:
        conn.close()
    return time.monotonic() - t0


# ------------------------------------------------------------------ measurements


def process_cpu_s(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks
    except (OSError, IndexError, ValueError):
        return None


def host_quietness(sample_s: float = 1.0) -> dict[str, float]:
    """Load average and CPU steal/busy share over a short sample before a run."""

    def cpu_times() -> list[int]:
        line = Path("/proc/stat").read_text().splitlines()[0]
        return [int(x) for x in line.split()[1:]]

    try:
        a = cpu_times()
        time.sleep(sample_s)
        b = cpu_times()
        d = [y - x for x, y in zip(a, b, strict=False)]
        total = sum(d) or 1
        idle = d[3] + (d[4] if len(d) > 4 else 0)
        steal = d[7] if len(d) > 7 else 0
        load1 = float(Path("/proc/loadavg").read_text().split()[0])
        return {
            "load1": load1,
            "busy_pct": 100.0 * (total - idle) / total,
            "steal_pct": 100.0 * steal / total,
        }
    except (OSError, ValueError):
        return {}


# ------------------------------------------------------------------ one run


@dataclass
class RawRun:
    argv: list[str]
    output: str
    exit_code: int
    started_at: float
    wall_s: float
    client_cpu_s: float
    timed_out: bool = False


ProgressFn = Callable[[dict[str, Any]], None]


def execute(
    argv: list[str],
    env: dict[str, str],
    *,
    timeout_s: float,
    on_report: ProgressFn | None = None,
    password: str | None = None,
) -> RawRun:
    """Run sysbench, streaming its output; each MYACCEL line goes to ``on_report``.
    ``password`` reaches sysbench through a private file (``password_file``), never its
    argv or environment; the recorded ``argv`` is the one given, without that file."""
    with password_file(password) as secret:
        return _execute(
            argv, with_args(argv, secret.args), env, timeout_s, on_report, secret.pass_fds
        )


def _execute(
    argv: list[str],
    run: list[str],
    env: dict[str, str],
    timeout_s: float,
    on_report: ProgressFn | None,
    pass_fds: tuple[int, ...] = (),
) -> RawRun:
    changes: dict[str, str | None] = {**NO_PASSWORD_ENV, **env}
    lines: list[str] = []

    def _line(line: str) -> None:
        lines.append(line + "\n")
        if on_report is not None and line.startswith("MYACCEL "):
            with contextlib.suppress(ValueError):
                on_report(json.loads(line[8:]))

    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    m0 = time.monotonic()
    done = proc.stream(run, timeout_s=timeout_s, on_line=_line, env=changes, pass_fds=pass_fds)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return RawRun(
        argv=argv,
        output="".join(lines),
        exit_code=done.returncode,
        started_at=t0,
        wall_s=time.monotonic() - m0,
        client_cpu_s=cpu,
        timed_out=done.timed_out,
    )
