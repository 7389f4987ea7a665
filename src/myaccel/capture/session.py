"""``myaccel capture`` as one function: the server's throughput before, the source's
switches journaled and turned on, a bounded window sampled (statements, Threads_running),
everything switched back (also on errors and Ctrl-C; ``myaccel rollback`` after a crash),
and the workload assembled."""

from __future__ import annotations

import datetime as dt
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pymysql

from myaccel import __version__, signals
from myaccel.actions.journal import JournalOwner
from myaccel.actions.protocol import apply_with_restart, rollback_with_restart
from myaccel.actions.settings import setting_for
from myaccel.actions.target import ServerTarget
from myaccel.bench import pool
from myaccel.bench.trace_gaps import with_gaps
from myaccel.bench.workload import Concurrency, Overhead, SchemaInfo, Workload
from myaccel.capture import logdir, privileges, sqlguard
from myaccel.capture.assemble import Event, build_classes, percentile
from myaccel.capture.general_log import GeneralLogSource
from myaccel.capture.pfs import PerformanceSchemaSource
from myaccel.capture.redaction import redact_workload
from myaccel.capture.source import CaptureSource, Conn, Ours
from myaccel.errors import MyaccelError, UsageError
from myaccel.server.connection import ConnectParams
from myaccel.server.flavor import parse_server_version

Note = Callable[[str], None]
SourceChoice = Literal["auto", "performance_schema", "general_log"]


@dataclass(frozen=True)
class CaptureRequest:
    target: ConnectParams  # an account with the privileges of capture.privileges
    duration_s: float
    redact: bool = False
    source: SourceChoice = "auto"
    baseline_s: float = 3.0  # throughput measured before anything is switched on
    sample_interval_s: float = 0.25
    server: ServerTarget | None = None  # recorded in the journal, for `myaccel rollback`
    journal_dir: Path | None = None


def _status(ours: Ours, conn: Conn, name: str) -> int:
    rows = ours.query(conn, "SHOW GLOBAL STATUS LIKE %s", name)
    return int(rows[0][1]) if rows else 0


def _variables(ours: Ours, conn: Conn) -> dict[str, str]:
    rows = ours.query(
        conn,
        "SELECT VERSION(), @@version_comment, @@hostname, @@performance_schema, @@log_output, "
        "@@pid_file, @@datadir",
    )
    keys = (
        "version",
        "comment",
        "hostname",
        "performance_schema",
        "log_output",
        "pid_file",
        "datadir",
    )
    return {k: "" if v is None else str(v) for k, v in zip(keys, rows[0], strict=True)}


def _history_size(ours: Ours, conn: Conn) -> int:
    rows = ours.query(conn, "SELECT @@performance_schema_events_statements_history_long_size")
    return int(rows[0][0] or 0)


def choose_source(req: CaptureRequest, ours: Ours, conn: Conn, v: dict[str, str]) -> CaptureSource:
    """performance_schema when it is on (or asked for), else the general log; the
    account's privileges for it are checked (``capture.privileges``) and, for the general
    log, its file made where the server's user writes it (``capture.logdir``), both
    before anything is switched."""
    pfs_on = v["performance_schema"] in ("1", "ON")
    want = req.source
    if want == "performance_schema" and not pfs_on:
        raise UsageError(
            "performance_schema is off on this server",
            hint="switch it on in the option file (needs a restart), or capture with "
            "--source general_log",
        )
    sv = parse_server_version(v["version"], v["comment"])
    flavor = sv.flavor if sv else None
    if want == "performance_schema" or (want == "auto" and pfs_on):
        ours.statements += 4  # the privileges read
        privileges.check(conn, "performance_schema", flavor)
        return PerformanceSchemaSource(ours, _history_size(ours, conn))
    if v["hostname"] != socket.gethostname():
        raise UsageError(
            f"the general log is written on the server's host ({v['hostname']}), not here",
            hint="run myaccel capture on the server's host, or switch performance_schema on",
        )
    ours.statements += 4
    privileges.check(conn, "general_log", flavor)
    return GeneralLogSource(ours, v["log_output"], logdir.prepare(v["pid_file"], v["datadir"]))


def _qps(questions: int, ours_statements: int, seconds: float) -> float | None:
    return max(0, questions - ours_statements) / seconds if seconds > 0 else None


def _measure_qps(ours: Ours, conn: Conn, seconds: float) -> float | None:
    """The server's statements per second (``Questions``, ours excluded) over ``seconds``."""
    q0, n0, t0 = _status(ours, conn, "Questions"), ours.statements, time.monotonic()
    time.sleep(seconds)
    q1 = _status(ours, conn, "Questions")
    return _qps(q1 - q0, ours.statements - n0, time.monotonic() - t0)


def _overhead(
    before: float | None, during: float | None, after: float | None, baseline_s: float
) -> Overhead:
    """The capture's cost: the window's rate against the mean of the rates before and
    after it (which cancels a load that drifts through the three)."""
    around = [x for x in (before, after) if x is not None]
    ref = sum(around) / len(around) if around else None
    pct = round(100 * (ref - during) / ref, 2) if ref and during is not None else None
    return Overhead(
        baseline_s=round(baseline_s, 2),
        qps_before=None if before is None else round(before, 1),
        qps_during=None if during is None else round(during, 1),
        qps_after=None if after is None else round(after, 1),
        overhead_pct=pct,
    )


def _schemas(ours: Ours, conn: Conn, names: list[str], notes: list[str]) -> list[SchemaInfo]:
    """The schemas the statements ran in (no system schema, only names a replay may use),
    their base tables (views and sequences are not recreated) and their DDL; DDL that a
    replay would refuse to run (``sqlguard.check_schema_ddl``: another engine, DATA
    DIRECTORY...) is left out with a note (a sandbox then needs a dump of the schema)."""
    out = []
    for name in names:
        if sqlguard.is_system_schema(name) or not sqlguard.name_ok(name):
            continue
        rows = ours.query(
            conn,
            "SELECT table_name FROM information_schema.TABLES WHERE table_schema = %s "
            "AND table_type IN ('BASE TABLE', 'SYSTEM VERSIONED') ORDER BY table_name",
            name,
        )
        tables = [str(r[0]) for r in rows if sqlguard.name_ok(str(r[0]))]
        q = "`" + name.replace("`", "``") + "`"
        try:
            ddl = [str(r[1]) for r in ours.query(conn, f"SHOW CREATE DATABASE {q}")]
        except pymysql.err.MySQLError as exc:  # 1044: the account holds nothing on it
            notes.append(
                f"the DDL of schema '{name}' is not kept (the server refused it to this "
                f"account: {exc.args[-1]}): GRANT SELECT ON {q}.* to capture it"
            )
            out.append(SchemaInfo(name=name, tables=tables, ddl=[]))
            continue
        for t in tables:
            qt = "`" + t.replace("`", "``") + "`"
            ddl += [str(r[1]) for r in ours.query(conn, f"SHOW CREATE TABLE {q}.{qt}")]
        try:
            sqlguard.check_schema_ddl(name, tables, ddl)
        except sqlguard.Refused as exc:
            notes.append(f"the DDL of schema '{name}' is not kept ({exc}): load a dump of it")
            ddl = []
        out.append(SchemaInfo(name=name, tables=tables, ddl=ddl))
    return out


def _concurrency(events: list[Event], samples: list[int], interval: float) -> Concurrency:
    """The client connections that ran statements in the window (the replay's threads)
    and the Threads_running samples."""
    s = sorted(samples)
    tr_p95 = percentile(s, 95) if s else None
    sessions = len({e.conn_id for e in events})
    spans = pool.spans(
        ((e.conn_id, e.t_s, e.latency_us) for e in events),
        whole_seconds=all(e.latency_us is None for e in events),
    )
    seen = pool.observe(spans, sessions, tr_p95)
    return Concurrency(
        connections=sessions,
        sample_interval_s=interval,
        threads_running=samples,
        threads_running_mean=round(sum(s) / len(s), 2) if s else None,
        threads_running_p95=tr_p95,
        sessions_open_max=seen.open_max,
        sessions_open_p95=seen.open_p95,
        observed=seen.concurrency,
    )


@dataclass
class _Window:
    events: list[Event]
    samples: list[int]
    seconds: float
    questions: int
    ours_statements: int


def _run_window(req: CaptureRequest, src: CaptureSource, ours: Ours, conn: Conn) -> _Window:
    q0, n0 = _status(ours, conn, "Questions"), ours.statements
    t0 = time.monotonic()
    src.begin(conn)
    samples: list[int] = []
    end = t0 + req.duration_s
    while time.monotonic() < end:
        # our own SHOW STATUS is one of the running threads
        samples.append(max(0, _status(ours, conn, "Threads_running") - 1))
        src.poll(conn)
        time.sleep(max(0.0, min(req.sample_interval_s, end - time.monotonic())))
    seconds = time.monotonic() - t0  # the window ends here, not after the source's reading
    q1, n1 = _status(ours, conn, "Questions"), ours.statements
    return _Window(src.finish(conn), samples, seconds, q1 - q0, n1 - n0)


def capture(req: CaptureRequest, note: Note) -> Workload:
    """Capture ``req.duration_s`` seconds of the server's statements."""
    if req.duration_s <= 0:
        raise UsageError("--duration must be positive", hint="e.g. --duration 20")
    ours = Ours(req.target)
    conn = ours.connect()
    try:
        v = _variables(ours, conn)
        src = choose_source(req, ours, conn, v)
        try:
            workload = _capture_with(req, src, ours, conn, v, note)
        finally:
            src.cleanup()
    finally:
        conn.close()
    return redact_workload(workload) if req.redact else workload


def _capture_with(
    req: CaptureRequest, src: CaptureSource, ours: Ours, conn: Conn, v: dict[str, str], note: Note
) -> Workload:
    """The baseline, the switches, the window and switching back, then the workload."""
    before = None
    if req.baseline_s > 0:
        note(f"measuring the server's throughput for {req.baseline_s:g} s before capturing")
        before = _measure_qps(ours, conn, req.baseline_s)
    settings = [(setting_for(t, connect=ours.connect), val) for t, val in src.switches()]
    # The switches last only while this process runs: the journal names it as their
    # owner, so that after a SIGKILL the next myaccel command switches them back
    # (myaccel.actions.orphans); a signal while switching on or back is held until that
    # is done, and one held while switching on still reaches the switch back below.
    journal: Path | None = None
    changed: list[str] = []
    try:
        with signals.shielded():
            res = apply_with_restart(
                req.server,
                settings,
                restart=False,
                note=note,
                journal_dir=req.journal_dir,
                keep_open=True,  # until switched back below (or by the next command)
                owner=JournalOwner.this_process("capture"),
            )
            journal = Path(res.journal_path) if res.journal_path else None
            changed = [c.target for c in res.changes]
        if journal is not None:
            note(f"switched on {', '.join(changed)} (journal {journal})")
        note(f"capturing for {req.duration_s:g} s from {src.name.replace('_', ' ')}")
        win = _run_window(req, src, ours, conn)
    finally:
        if journal is not None:
            with signals.shielded():
                _switch_back(req.server, journal, ours, note)
    if not win.events:
        raise _nothing_captured(src, win)
    after = _measure_qps(ours, conn, req.baseline_s) if req.baseline_s > 0 else None
    classes, traces, truncated = build_classes(win.events)
    traces, gaps = with_gaps(traces)
    during = _qps(win.questions, win.ours_statements, win.seconds)
    names = sorted({c.schema_name for c in classes if c.schema_name})
    notes = list(src.notes)
    sv = parse_server_version(v["version"], v["comment"])
    workload = Workload(
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        myaccel_version=__version__,
        server={
            "version_string": v["version"],
            "flavor": sv.flavor if sv else None,
            "version": sv.text if sv else None,
            "host": v["hostname"],
        },
        source=src.name,
        window_s=round(win.seconds, 3),
        statements_total=len(win.events),
        statements_per_s=round(len(win.events) / win.seconds, 2) if win.seconds else 0.0,
        classes=classes,
        connections=traces,
        connections_truncated=truncated,
        trace_gaps=gaps,
        concurrency=_concurrency(win.events, win.samples, req.sample_interval_s),
        schemas=_schemas(ours, conn, names, notes),
        overhead=_overhead(before, during, after, req.baseline_s),
        settings_changed=changed,
        journal=str(journal) if journal else None,
        notes=notes,
    )
    return workload


class NothingCaptured(MyaccelError, code="capture-empty"):
    """The window ended without one statement of another client: no workload to write."""


def _nothing_captured(src: CaptureSource, win: _Window) -> NothingCaptured:
    """Why the capture holds no statement (its settings are back by then): the server ran
    none but ours, or it counted some that the source did not record."""
    others = max(0, win.questions - win.ours_statements)
    what = src.name.replace("_", " ")
    if others == 0:
        return NothingCaptured(
            f"the capture recorded no statement in {win.seconds:.1f} s from {what}: the "
            "server ran none but the capture's own (is it receiving traffic?)",
            hint="capture while the application runs (or a load: `myaccel bench`), or with "
            "a longer --duration; nothing was written, the settings are back",
        )
    return NothingCaptured(
        f"the capture recorded no statement in {win.seconds:.1f} s from {what}, while the "
        f"server counted {others:,} of other clients (Questions)",
        hint=(
            "check that the statement instruments are enabled "
            "(performance_schema.setup_instruments, 'statement/%'), or capture with "
            "--source general_log"
            if src.name == "performance_schema"
            else "the server wrote no statement to its general log: see its error log"
        )
        + "; nothing was written, the settings are back",
    )


def _switch_back(server: ServerTarget | None, journal: Path, ours: Ours, note: Note) -> None:
    try:
        res = rollback_with_restart(server, journal, restart=False, note=note, connect=ours.connect)
    except MyaccelError as exc:
        raise MyaccelError(
            f"could not switch the capture's settings back: {exc.message}",
            hint=f"run `myaccel rollback --journal {journal}` (with the same server options)",
        ) from exc
    note(f"switched back {', '.join(res.reverted)}")
