"""Replay a captured workload through sysbench: ``bench --workload-file`` and ``ab
--workload-file``.

The workload file (``bench.workload``) becomes a small generated Lua script, the replay's
statement classes as data followed by ``lua/myaccel_replay.lua`` (the engine), so that the
replay is an ordinary ``.lua`` workload for the runner, its records, ``ab`` (which restores
its snapshot before every run of a ``.lua`` workload, as for write workloads) and reports.
"""

from __future__ import annotations

import atexit
import hashlib
import itertools
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from myaccel.artifacts import write_text
from myaccel.bench import placeholders, pool
from myaccel.bench.choices import ReplayMode
from myaccel.bench.keys import TableKey, key_span, table_keys
from myaccel.bench.profiles import Profile
from myaccel.bench.trace_gaps import timed_traces
from myaccel.bench.workload import TraceGaps, Workload, check_replayable, issued
from myaccel.capture import sqlguard
from myaccel.errors import UsageError
from myaccel.paths import entries, myaccel_home
from myaccel.proclife import boot_id, process_start_ticks, still_runs
from myaccel.server.connection import ConnectParams, connect, query_rows

# Examples of a class the replay draws from (the capture keeps a few per class).
MAX_EXAMPLES = 50

StatementFn = Callable[[str, str], str]


def engine_script() -> Path:
    return Path(str(resources.files("myaccel.bench") / "lua" / "myaccel_replay.lua"))


def lua_string(text: str) -> str:
    """``text`` as a Lua long string (``[==[...]==]``) whose level no ``]=*]`` inside
    closes early; a leading newline is doubled (Lua drops the first one)."""
    level = 0
    while "]" + "=" * level + "]" in text:
        level += 1
    eq = "=" * level
    lead = "\n" if text.startswith("\n") else ""
    return f"[{eq}[{lead}{text}]{eq}]"


@dataclass(frozen=True)
class Step:
    """One statement of a replayed trace; ``gap_us``: what a timed replay waits before it
    (``bench.trace_gaps``), the time of the statements left out before it included;
    ``class_id``: its class (the replay counts statements and errors per class)."""

    schema: str
    sql: str
    gap_us: float
    class_id: str = ""


def trace_steps(workload: Workload) -> tuple[list[list[Step]], TraceGaps]:
    """The connections' traces as the replay issues them: the replayable statements in
    order, each with its gap. A statement the replay leaves out (``SET``, ``USE``, DDL)
    gives its time to the next one: its gap (and, end-to-start, its latency, which the
    replay does not spend)."""
    traces, kind, _ = _traces(workload)
    return traces, kind


def _traces(workload: Workload) -> tuple[list[list[Step]], TraceGaps, list[pool.Span]]:
    """``trace_steps`` and each kept trace's span (seconds: first start, last end)."""
    classes = {c.id: c for c in workload.replay_classes()}
    traces, kind = timed_traces(workload)
    out: list[list[Step]] = []
    spans: list[pool.Span] = []
    for t in traces:
        steps: list[Step] = []
        carry = 0.0
        for s in t.statements:
            gap = carry + (s.gap_us or 0.0)
            c = classes.get(s.class_id)
            if c is None:
                carry = gap + ((s.latency_us or 0.0) if kind == "end-to-start" else 0.0)
                continue
            steps.append(Step(c.schema_name, s.sql, gap, c.id))
            carry = 0.0
        if steps:
            out.append(steps)
            first, last = t.statements[0], t.statements[-1]
            spans.append((first.t_ms / 1000, last.t_ms / 1000 + (last.latency_us or 0.0) / 1e6))
    return out, kind, spans


@dataclass(frozen=True)
class Plan:
    """How the script replays the workload: the pool's size and, sequence and timed, the
    sessions of each pool thread (indexes into the traces)."""

    observed: pool.Observed
    threads: int  # the pool's size (the observed concurrency)
    sessions: int  # the captured sessions (connections) with statements to replay
    pool: list[list[int]]
    reconnect: bool  # more sessions than threads: a new connection per session
    session_len: float | None  # mix mode: statements per session (a reconnect after them)


def plan(workload: Workload, mode: ReplayMode = "mix") -> Plan:
    """The pool the replay runs (``bench.pool``): its size is the observed concurrency,
    the traces are mapped onto it (sequence and timed modes)."""
    seen = workload.observed()
    size = max(1, seen.concurrency)
    traces, _, spans = _traces(workload)
    sessions = len(traces) if traces else workload.concurrency.connections
    reconnect = sessions > size
    session_len: float | None = None
    if reconnect and traces:
        session_len = max(1.0, round(sum(len(t) for t in traces) / len(traces), 3))
    lanes = pool.assign(spans, size) if mode != "mix" and traces else []
    return Plan(seen, size, sessions, lanes, reconnect, session_len)


def _statement(sql: str, span: tuple[int, int, int] | None, templated: bool) -> str:
    """A statement as Lua data: a string, or a template (``lua/myaccel_replay.lua``) when
    it holds typed placeholders or an insert's primary key to shift (``span``: the key's
    number in the script's ``keys`` and where its value is)."""
    parts: list[str] = []
    if span is not None:
        k, a, b = span
        parts = [*_parts(sql[:a], templated), f"{{ k = [[key]], t = {k} }}"]
        parts += _parts(sql[b:], templated)
    elif templated and placeholders.has_placeholders(sql):
        parts = _parts(sql, templated)
    else:
        return lua_string(sql)
    return "{ " + ", ".join(parts) + " }"


def _parts(text: str, templated: bool) -> list[str]:
    if not text:
        return []
    if not templated:
        return [lua_string(text)]
    out: list[str] = []
    for p in placeholders.parse(text):
        if isinstance(p, str):
            out.append(lua_string(p))
        else:
            neg = ", neg = true" if p.negative else ""
            out.append(f"{{ k = [[{p.kind}]], n = {p.size}, f = {p.frac}{neg} }}")
    return out


def _trace_lines(workload: Workload, mode: ReplayMode, p: Plan, stmt: StatementFn) -> list[str]:
    """The connections' traces as Lua data: each replayable statement with its schema and
    class (and, timed, its gap in whole microseconds and what the gaps measure), then the
    pool: the traces each thread replays, one after another."""
    timed = mode == "timed"
    traces, kind, spans = _traces(workload)
    index = {c.id: i for i, c in enumerate(workload.replay_classes(), 1)}
    first_gap: dict[int, float] = {}
    if timed:
        # a pool thread's next session waits what the capture left between them
        # (end-to-start: from the previous one's end; start-to-start, where a span ends
        # with its last statement's start, from that start)
        for lane in p.pool:
            for prev, nxt in itertools.pairwise(lane):
                first_gap[nxt] = max(0.0, (spans[nxt][0] - spans[prev][1]) * 1e6)
    lines = [f"gap_from = {lua_string(kind.split('-')[0])}, timed = true,"] if timed else []
    lines.append("traces = {")
    for ti, steps in enumerate(traces):
        items = []
        for si, s in enumerate(steps):
            g = first_gap.get(ti, s.gap_us) if si == 0 else s.gap_us
            items.append(
                f"{{ schema = {lua_string(s.schema)}, sql = {stmt(s.sql, s.schema)}, "
                f"c = {index.get(s.class_id, 0)}" + (f", g = {round(g)}" if timed else "") + " }"
            )
        lines += ["  {", *(f"    {x}," for x in items), "  },"]
    lines.append("},")
    lines.append(
        "pool = { "
        + ", ".join("{ " + ", ".join(str(i + 1) for i in lane) + " }" for lane in p.pool)
        + " },"
    )
    if p.reconnect:
        lines.append("reconnect = true,")
    return lines


def _non_ascii(workload: Workload) -> bool:
    """Whether a statement or schema the replay issues holds text outside ASCII."""
    return any(not c.schema_name.isascii() for c in workload.replay_classes()) or any(
        not sql.isascii() for _, _, sql in issued(workload)
    )


def replay_lua(workload: Workload, mode: ReplayMode = "mix", *, shift_keys: bool = True) -> str:
    """The generated script: the classes of ``workload`` as Lua data (and, in sequence and
    timed modes, each connection's statements in order, timed with their gaps, and the
    pool's sessions), then the engine. Every statement it holds is one a replay may issue
    (``check_replayable``, again here: whatever the workload came from, nothing else
    reaches the script); a redacted workload's typed placeholders and the primary keys of
    its inserts (``shift_keys``, ``bench.keys``) are filled at each execution."""
    check_replayable(workload)
    if mode != "mix" and not trace_steps(workload)[0]:
        raise UsageError(
            f"--replay-mode {mode} replays each captured connection's statements in order: "
            "this workload holds no connection traces",
            hint="use --replay-mode mix (the default) or capture again",
        )
    p = plan(workload, mode)
    keys = table_keys(workload.schemas) if shift_keys else {}
    used: list[TableKey] = []
    templated = workload.placeholders

    def stmt(sql: str, schema: str) -> str:
        found = key_span(sql, schema, keys)
        if found is None:
            return _statement(sql, None, templated)
        key, a, b = found
        if key not in used:
            used.append(key)
        return _statement(sql, (used.index(key) + 1, a, b), templated)

    lines = [
        "-- generated by myaccel from a captured workload (myaccel.workload/1); do not edit",
        "MYACCEL_REPLAY = { classes = {",
    ]
    for c in workload.replay_classes():
        sql = ", ".join(stmt(s, c.schema_name) for s in c.examples[:MAX_EXAMPLES])
        lines.append(
            f"  {{ w = {c.count}, id = {lua_string(c.id)}, schema = {lua_string(c.schema_name)},"
            f" sql = {{ {sql} }} }},"
        )
    lines.append("},")
    if _non_ascii(workload):
        # the statements are UTF-8: the server must read them so (under another client
        # character set a multi-byte character can swallow the quote or backslash after it)
        lines.append("names = [[utf8mb4]],")
    if mode != "mix":
        lines += _trace_lines(workload, mode, p, stmt)
    elif p.session_len is not None:
        lines.append(f"session_len = {p.session_len},")
    if used:
        lines.append("keys = {")
        lines += [
            f"  {{ db = {lua_string(k.schema)}, tbl = {lua_string(k.table)}, col = {lua_string(k.column)} }},"
            for k in used
        ]
        lines.append("},")
    lines += [
        f"-- observed concurrency {p.threads} ({p.observed.basis}), {p.sessions} session(s)",
        "}",
        f"dofile({lua_string(str(engine_script()))})",
        "",
    ]
    return "\n".join(lines)


class _Scratch:
    """The private directory of one command's replay scripts, made when the first script
    is written (a command refused before that leaves nothing behind)."""

    def __init__(self) -> None:
        self.path: Path | None = None

    def get(self) -> Path:
        if self.path is None:
            base = myaccel_home() / "replay"
            base.mkdir(parents=True, exist_ok=True, mode=0o700)
            _sweep(base)
            d = Path(tempfile.mkdtemp(prefix="run-", dir=base))
            pid = os.getpid()
            owner = f"{pid} {process_start_ticks(pid) or 0} {boot_id() or '-'}\n"
            write_text(d / OWNER_FILE, owner, private=True)
            self.path = d
        return self.path

    def remove(self) -> None:
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            self.path = None


_SCRATCH: ContextVar[_Scratch | None] = ContextVar("myaccel_replay_scratch", default=None)
OWNER_FILE = "owner"


def _sweep(base: Path) -> None:
    """Remove the script directories of commands that no longer run (killed before they
    could remove their own)."""
    for d in entries(base):
        if not d.name.startswith("run-"):
            continue
        try:
            pid, started, boot = (d / OWNER_FILE).read_text().split()
            alive = still_runs(int(pid), started, boot)
        except (OSError, ValueError):
            # no owner yet: another command may be between making it and naming itself
            try:
                alive = time.time() - d.stat().st_mtime < 60
            except OSError:
                alive = True
        if not alive:
            shutil.rmtree(d, ignore_errors=True)


@contextmanager
def replay_scripts() -> Iterator[None]:
    """Scripts written meanwhile go to one private directory (``$MYACCEL_HOME/replay/
    run-*``), removed when the block ends: a command's bench, ab or accelerate campaign,
    a ``capture --check`` (also on an error or Ctrl-C; a killed command's is removed by
    the next one that writes a script). The scripts hold the capture's literals: they do
    not outlive the campaign that ran them."""
    scratch = _Scratch()
    token = _SCRATCH.set(scratch)
    try:
        yield
    finally:
        _SCRATCH.reset(token)
        scratch.remove()


def write_replay_script(
    workload: Workload,
    directory: Path | None = None,
    mode: ReplayMode = "mix",
    *,
    shift_keys: bool = True,
) -> Path:
    """Write the replay script (private, named by its content: the same workload gives the
    same name) into ``directory``, else the command's ``replay_scripts`` directory; a
    caller with neither gets one removed when the process exits."""
    text = replay_lua(workload, mode, shift_keys=shift_keys)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    if directory is not None:
        where = directory
    else:
        scratch = _SCRATCH.get()
        if scratch is None:  # no command around it: removed when the process exits
            scratch = _Scratch()
            atexit.register(scratch.remove)
        where = scratch.get()
    where.mkdir(parents=True, exist_ok=True, mode=0o700)
    return write_text(where / f"replay-{digest}.lua", text, private=True)


def check_pacing(mode: str, paced: bool) -> None:
    """Refuse ``--paced`` with ``--replay-mode timed``: both decide when statements go."""
    if paced and mode == "timed":
        raise UsageError(
            "--paced and --replay-mode timed both set when statements are issued",
            hint="timed replays each connection's captured timing, --paced the captured "
            "overall rate: choose one",
        )


def replay_profile(
    prof: Profile,
    workload: Workload,
    script: Path,
    *,
    threads_given: bool,
    rate_per_s: float | None = None,
) -> Profile:
    """``prof`` running the replay script, at the captured concurrency unless ``--threads``
    was given; ``rate_per_s`` paces it (sysbench ``--rate``: statements per second over
    all threads) instead of running as fast as the server answers."""
    threads = prof.threads if threads_given else (workload.replay_threads,)
    extra = dict(prof.extra)
    if rate_per_s is not None:
        extra["rate"] = str(max(1, round(rate_per_s)))
    return replace(prof, workloads=(str(script),), threads=threads, extra=extra)


def captured_rate(workload: Workload) -> float:
    """The replayable statements per second of the capture (what a paced replay issues)."""
    n = sum(c.count for c in workload.replay_classes())
    return n / workload.window_s if workload.window_s else 0.0


def _tables(target: ConnectParams) -> dict[str, set[str]]:
    conn = connect(target)
    try:
        rows = query_rows(
            conn,
            "SELECT table_schema, table_name FROM information_schema.TABLES",
        )
    finally:
        conn.close()
    have: dict[str, set[str]] = {}
    for schema, table in rows:
        have.setdefault(str(schema), set()).add(str(table))
    return have


def create_schemas(
    target: ConnectParams, workload: Workload, *, allow_ddl: bool = True
) -> list[str]:
    """Create, from the DDL the capture stored, the schemas the replay touches that
    ``target`` lacks entirely (empty tables: no data was captured); the names created.
    A schema that exists is left as it is (``check_schemas`` judges it).

    Only on a sandbox (or a clone, a sandbox too): its callers are ``accelerate``'s
    sandbox mode, which passes its ``--allow-ddl`` (without it a missing schema is an
    error, before any DDL runs), and ``build --train``'s training server, a sandbox
    myaccel made for it. The DDL is checked again here (``sqlguard.check_schema_ddl``:
    the schema's CREATE DATABASE and CREATE TABLE of its tables, nothing else)."""
    have = _tables(target)
    todo = [s for s in workload.schemas if s.name in workload.schema_names and s.name not in have]
    if not todo:
        return []
    if not allow_ddl:
        raise UsageError(
            f"the sandbox lacks schema(s) {', '.join(s.name for s in todo)}, which the "
            "captured workload uses; creating them runs the capture's DDL",
            hint="add --allow-ddl to create them (empty) from the capture's CREATE statements, "
            "or load a dump of them into the sandbox first",
        )
    for s in todo:
        try:
            sqlguard.check_schema_ddl(s.name, s.tables, s.ddl)
        except sqlguard.Refused as exc:
            raise UsageError(
                f"the DDL of schema '{s.name}' in the capture is refused: {exc}",
                hint="capture the workload again with `myaccel capture`",
            ) from None
    conn = connect(target)
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION foreign_key_checks = 0")
            for s in todo:
                if not s.ddl:
                    raise UsageError(
                        f"the server lacks schema '{s.name}' and the capture holds no DDL "
                        "for it (an older capture)",
                        hint="capture again (captures store the touched schemas' DDL), or "
                        "load a dump of the schema into the sandbox first",
                    )
                quoted = "`" + s.name.replace("`", "``") + "`"
                first, *tables = s.ddl
                if not re.match(r"\s*CREATE\s+(?:DATABASE|SCHEMA)\s+IF\s", first, re.IGNORECASE):
                    first = re.sub(
                        r"^\s*CREATE\s+(DATABASE|SCHEMA)\b",
                        r"CREATE \1 IF NOT EXISTS",
                        first,
                        count=1,
                        flags=re.IGNORECASE,
                    )
                cur.execute(first)
                cur.execute(f"USE {quoted}")
                for sql in tables:
                    cur.execute(sql)
    finally:
        conn.close()
    return [s.name for s in todo]


def check_schemas(target: ConnectParams, workload: Workload) -> None:
    """Refuse a server that lacks a schema (or a table of one) the replay touches, and a
    workload whose statements name another schema of this server (``sbtest.sbtest1``:
    a replay stays in the schemas it captured)."""
    want = {s.name: s.tables for s in workload.schemas if s.name in workload.schema_names}
    have = _tables(target)
    ours = {s.casefold() for s in (*workload.schema_names, *(s.name for s in workload.schemas))}
    foreign = [s for s in have if s.casefold() not in ours]
    hit = sqlguard.foreign_qualifiers((sql for _, _, sql in issued(workload)), foreign)
    if hit is not None:
        raise UsageError(
            f"the captured workload names schema '{hit}' of this server, which it did not "
            "capture: a replay runs in its own schemas only",
            hint="replay a capture of this application (its schemas are listed in the file), "
            "or rename the table alias that has the schema's name",
        )
    for name in workload.schema_names:
        missing = [t for t in want.get(name, []) if t not in have.get(name, set())]
        if name not in have or missing:
            what = (
                f"schema '{name}'"
                if name not in have
                else f"tables {', '.join(missing)} of '{name}'"
            )
            raise UsageError(
                f"the server lacks {what}, which the captured workload uses",
                hint="replay against a clone or a sandbox holding the same schema and data "
                "(e.g. mysqldump it from the captured server and load it)",
            )


REPLAY_PREFIX = "MYACCEL_REPLAY "
DUPLICATE_KEY = "1062"  # ER_DUP_ENTRY


def replay_counts(output: str) -> dict[str, Any] | None:
    """The statements a replay run issued after its warm-up, summed over its threads'
    ``MYACCEL_REPLAY`` lines (``lua/myaccel_replay.lua``): per class the successes and the
    errors, the errors per error number, the sessions (connections) opened; None when
    the output holds no such line (not a replay, or a script of an older myaccel)."""
    ok: dict[str, int] = {}
    err: dict[str, int] = {}
    errno: dict[str, int] = {}
    sessions = 0
    seen = False
    for line in output.splitlines():
        if not line.startswith(REPLAY_PREFIX):
            continue
        try:
            doc = json.loads(line[len(REPLAY_PREFIX) :])
        except ValueError:
            continue
        if not isinstance(doc, dict):
            continue
        seen = True
        for into, key in ((ok, "ok"), (err, "err"), (errno, "errno")):
            part = doc.get(key)
            if isinstance(part, dict):
                for k, v in part.items():
                    if isinstance(v, int) and v >= 0:
                        into[str(k)] = into.get(str(k), 0) + v
        n = doc.get("sessions")
        sessions += n if isinstance(n, int) and n >= 0 else 0
    if not seen:
        return None
    total_ok, total_err = sum(ok.values()), sum(err.values())
    issued_n = total_ok + total_err
    return {
        "statements": issued_n,
        "succeeded": total_ok,
        "failed": total_err,
        "duplicate_key_errors": errno.get(DUPLICATE_KEY, 0),
        "error_pct": round(100 * total_err / issued_n, 3) if issued_n else 0.0,
        "errors_by_errno": dict(sorted(errno.items())),
        "succeeded_by_class": dict(sorted(ok.items())),
        "failed_by_class": dict(sorted(err.items())),
        "sessions_opened": sessions,
    }


def replay_info(
    workload: Workload, mode: ReplayMode | None = None, source: str | None = None
) -> dict[str, Any]:
    """What a run record says of the replay besides its counts: the workload, the mode
    (None: not known here), the observed concurrency and the pool's size."""
    p = plan(workload, mode or "mix")
    return {
        "workload_file": source,
        "mode": mode,
        "captured_sessions": workload.concurrency.connections,
        "observed_concurrency": p.observed.concurrency,
        "observed": p.observed.basis,
        "pool_threads": p.threads,
        "reconnect_per_session": p.reconnect,
        "redacted": workload.redacted,
    }


def replay_mix(counts: dict[str, Any]) -> dict[str, float]:
    """Per class, its share (%) of the statements a replay issued (successes and errors:
    a failed statement was issued all the same)."""
    per: dict[str, int] = {}
    for part in ("succeeded_by_class", "failed_by_class"):
        for k, v in counts.get(part, {}).items():
            per[k] = per.get(k, 0) + int(v)
    total = sum(per.values())
    return {k: 100 * v / total for k, v in per.items()} if total else {}
