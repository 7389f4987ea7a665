"""``myaccel clone`` as one function: read the source, check before any side effect,
register the clone as a sandbox, copy the data, write its configuration, start it under
its fence, and compare its variables with the source's. Each step goes into the clone's
record as it is taken; a failure or an interrupt (SIGINT, SIGTERM, SIGHUP) removes the
clone again (the source is left as it was: a clone plugin installed for the copy is
uninstalled in any case). A clone is marked incomplete until its last step
(``clone.incomplete``): one whose maker was killed with SIGKILL is removed by the next
clone."""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from myaccel import signals
from myaccel.clone import incomplete
from myaccel.clone.accounts import first_start_sql
from myaccel.clone.config import CloneConfig, derive_config, options_read
from myaccel.clone.copy import hot_copy
from myaccel.clone.defaults import compiled_defaults
from myaccel.clone.errors import CloneError
from myaccel.clone.fence import Fence, choose_fence
from myaccel.clone.generate import Cap, generate
from myaccel.clone.preflight import Preflight, preflight
from myaccel.clone.record import (
    CloneRecord,
    DataCopy,
    ServerChoice,
    SourceInfo,
    StepState,
    save_record,
)
from myaccel.clone.rewrite import Target
from myaccel.clone.schema import replay_schema, table_shapes
from myaccel.clone.source import SourceServer, read_source
from myaccel.clone.verify import UNEXPLAINED, global_variables, variable_diff
from myaccel.server.connection import ConnectParams
from myaccel.server.sandbox import Sandbox, ServerInstall, find_server
from myaccel.server.sandbox.layout import resolve_home, sandboxes_root, validate_name
from myaccel.server.sandbox.state import now_iso
from myaccel.units import format_bytes

Say = Callable[[str], None]
CONFIG_FILE = "clone.cnf"
INIT_FILE = "first-start.sql"
# what the clone may take of the memory the host has available beside its source
MEMORY_SHARE = 0.5


@dataclass(frozen=True)
class CloneRequest:
    source: ConnectParams
    name: str
    source_sandbox: str | None = None
    port: int | None = None
    cpus: list[int] | None = None
    nice: int | None = None
    schema_only: bool = False
    # schema only: the cap on the rows of the source's shape generated into the clone
    generate_cap: Cap = field(default_factory=Cap)
    timeout_s: float = 180.0
    home: Path | None = None
    # the memory knobs (bytes) of a plan to A/B on the clone: scaled with the clone's own
    candidate_memory: dict[str, int] | None = None


@dataclass(frozen=True)
class CloneResult:
    sandbox: Sandbox
    record: CloneRecord
    record_path: Path
    preflight: Preflight
    duration_s: float

    @property
    def unexplained(self) -> list[str]:
        return [d.variable for d in self.record.variable_diff if d.reason == UNEXPLAINED]


def choose_install(src: SourceServer, home: Path | None) -> tuple[ServerInstall, ServerChoice]:
    """The source's own binary, else another install of the same version (said so)."""
    install: ServerInstall | None = None
    note = "the source's own binary"
    if src.sandbox is not None:
        sb = Sandbox.load(src.sandbox, home=home)
        install = (
            find_server(Path(sb.state.basedir))
            if sb.state.custom_basedir
            else find_server(binary=sb.binary_path)
        )
        note = f"the binary of sandbox '{src.sandbox}'"
    elif src.binary is not None and src.binary.exists():
        basedir = Path(src.variables.get("basedir", "/usr"))
        custom = basedir != Path("/usr") and any(
            (basedir / c).exists() for c in src.adapter.binary_candidates()
        )
        install = find_server(basedir) if custom else find_server(binary=src.binary)
    if install is None or install.version.text != src.version.text:
        other = find_server(flavor=src.adapter.name)
        if other.version.text != src.version.text:
            raise CloneError(
                f"no {src.version.label} binary to run the clone with (found {other.label} "
                f"at {other.binary})",
                hint="run myaccel clone on the database host, or install that version",
            )
        install = other
        note = f"another install of the same version ({src.version.text}): {other.binary}"
    same = src.binary is not None and install.binary.resolve() == src.binary.resolve()
    return install, ServerChoice(
        binary=str(install.binary),
        basedir=str(install.basedir),
        same_binary=same or src.sandbox is not None,
        note=note,
    )


def _source_info(src: SourceServer) -> SourceInfo:
    return SourceInfo(
        connection=src.params.describe(),
        sandbox=src.sandbox,
        flavor=src.adapter.name,
        version=src.version.text,
        version_string=src.version.raw,
        pid=src.pid,
        binary=str(src.binary) if src.binary else None,
        basedir=src.variables.get("basedir", ""),
        datadir=str(src.datadir),
        data_bytes=src.data_bytes,
    )


def make_clone(req: CloneRequest, say: Say, *, disk_hint: str | None = None) -> CloneResult:
    """Make the clone; every check first (``disk_hint``: what the caller's user can do
    when the copy does not fit on the disk)."""
    t0 = time.monotonic()
    validate_name(req.name)
    home = resolve_home(req.home)
    incomplete.remove_abandoned(home, say)
    if Sandbox.exists(req.name, home=home):
        raise CloneError(
            f"a sandbox named '{req.name}' already exists",
            hint=f"pick another --name, or `myaccel sandbox destroy {req.name}` first",
        )
    say(f"reading the source server ({req.source.describe()})")
    src = read_source(req.source, req.source_sandbox)
    pre = preflight(
        src,
        purpose="clone",
        target=sandboxes_root(home),
        schema_only=req.schema_only,
        disk_hint=disk_hint,
    )
    pre.require()
    install, choice = choose_install(src, home)
    say(f"server: {install.label} at {install.binary} ({choice.note})")
    defaults = compiled_defaults(install)
    read = options_read(src)
    fence = choose_fence(src.cpus, cpus=req.cpus, nice=req.nice)
    sb: Sandbox | None = None
    try:
        with signals.shielded():  # registered and marked, or neither
            sb = Sandbox.reserve(req.name, install, home=home, port=req.port)
            incomplete.mark(sb.dir)
        say(f"registered sandbox '{req.name}' (port {sb.port}); fence: {fence.reason}")
        record = _build(
            sb, src, pre, (install, choice), defaults, read, fence, req.schema_only, req, say
        )
        incomplete.unmark(sb.dir)
    except BaseException as exc:
        if sb is not None:  # ours (a name taken meanwhile is not)
            why = "interrupted" if isinstance(exc, KeyboardInterrupt) else "clone failed"
            _tell(say, f"{why}: removing the half-made clone '{req.name}'")
            with signals.shielded():
                try:
                    Sandbox.destroy_named(req.name, home=home)
                except Exception as cleanup:  # the marker stays: the next clone retries
                    _tell(
                        say,
                        f"could not remove '{req.name}' ({cleanup}); the next `myaccel "
                        f"clone` removes it, or: myaccel sandbox destroy {req.name}",
                    )
        raise
    path = sb.dir / "clone.json"
    return CloneResult(sb, record, path, pre, time.monotonic() - t0)


def _tell(say: Say, message: str) -> None:
    """Progress during a clean-up: a closed stderr (a pipe whose reader went away) must
    not stop the clean-up."""
    with contextlib.suppress(OSError):
        say(message)


def _target(sb: Sandbox, src: SourceServer, candidate: dict[str, int] | None) -> Target:
    server_id = sb.port if str(sb.port) != src.variables.get("server_id") else sb.port + 1
    budget = int(psutil.virtual_memory().available * MEMORY_SHARE)
    return Target(sb.dir, sb.datadir, sb.port, server_id, budget, dict(candidate or {}))


def _build(
    sb: Sandbox,
    src: SourceServer,
    pre: Preflight,
    server: tuple[ServerInstall, ServerChoice],
    defaults: dict[str, str],
    read: list[tuple[str, str | None, str]],
    fence: Fence,
    schema_only: bool,
    req: CloneRequest,
    say: Say,
) -> CloneRecord:
    install, choice = server
    target = _target(sb, src, req.candidate_memory)
    cfg = derive_config(src, defaults, read, target)
    record = CloneRecord(
        name=sb.name,
        created_at=now_iso(),
        source=_source_info(src),
        server=choice,
        config_file=str(sb.dir / CONFIG_FILE),
        options=cfg.entries,
        rewritten=cfg.rewritten,
        memory_factor=cfg.memory_factor,
        fence=fence.info(),
        notes=list(src.notes),
    )
    if pre.disk is not None:
        record.notes.append(pre.disk.describe())
    record.notes.append(f"restart method of the source: {pre.restart.describe()}")

    def journal(step: str, state: StepState, detail: str) -> None:
        record.step(step, state, detail)
        save_record(sb.dir, record)

    journal("register", "done", f"sandbox '{sb.name}' at {sb.dir}")
    t_copy = time.monotonic()
    if schema_only:
        journal("copy", "started", "schema only (an empty datadir)")
        sb.init_datadir(install, say)
        copied = 0
    else:
        journal("copy", "started", src.adapter.hot_copy)
        copied = hot_copy(
            src,
            sb.datadir,
            sb.dir,
            fence_prefix=fence.argv_prefix(),
            journal=journal,
            say=say,
        )
    record.data = DataCopy(
        method="schema-only" if schema_only else src.adapter.hot_copy,
        bytes_copied=copied,
        duration_s=round(time.monotonic() - t_copy, 2),
        schema_only=schema_only,
    )
    journal("copy", "done", f"{copied} bytes")
    _first_start(sb, src, cfg, fence, req, say)
    journal("start", "done", f"pid {sb.pid}")
    if any(s.name == "install-clone-plugin" and s.state == "done" for s in record.steps):
        # the copy holds the mysql.plugin row of the install made for it
        sb.query("UNINSTALL PLUGIN clone")
        journal("uninstall-clone-plugin-in-clone", "done", "as on the source")
    if schema_only:
        _schema_only(sb, src, record, req.generate_cap, say)
        journal("schema", "done", record.data.note)
    record.variable_diff = variable_diff(
        src,
        global_variables(src.params),
        global_variables(sb.connect_params()),
        cfg.rewritten,
        target,
    )
    journal("compare", "done", f"{len(record.variable_diff)} variables differ")
    return record


def _first_start(
    sb: Sandbox, src: SourceServer, cfg: CloneConfig, fence: Fence, req: CloneRequest, say: Say
) -> None:
    """Start with an init_file that makes the accounts, then restart without it."""
    header = (
        f"The configuration of the server at {src.params.describe()} for clone '{sb.name}',\n"
        "written by myaccel clone (see clone.json for the origin of each line and every\n"
        "rewrite). The sandbox's own keys (paths, port, socket) follow it in my.cnf."
    )
    init = sb.dir / INIT_FILE
    init.touch(mode=0o600)
    init.write_text(
        first_start_sql(
            src.adapter,
            user=sb.state.bench_user,
            password=sb.state.bench_password,
            database=sb.state.bench_database,
        )
    )
    conf = sb.dir / CONFIG_FILE
    conf.write_text(cfg.render(header) + f"# -- first start only\ninit_file={init}\n")
    sb.set_base(conf, fence.argv_prefix())
    try:
        say(sb.start(timeout_s=req.timeout_s, progress=say).message)
    finally:
        conf.write_text(cfg.render(header))
        init.unlink(missing_ok=True)
    # once more without the init_file: the first start after a copy also rebuilds the
    # redo log (MariaDB then runs it buffered until a restart)
    say(sb.restart(timeout_s=req.timeout_s, progress=say).message)


def _schema_only(sb: Sandbox, src: SourceServer, record: CloneRecord, cap: Cap, say: Say) -> None:
    shapes = table_shapes(src.params)
    n, failed = replay_schema(src.params, sb.connect_params())
    rows = sum(s.rows for s in shapes)
    size = sum(s.data_bytes + s.index_bytes for s in shapes)
    # the generated rows must fit beside the rest: a quarter of the free disk at most
    free = shutil.disk_usage(sb.dir).free // 4
    cap = Cap(max_bytes=min(cap.max_bytes, free), max_rows=cap.max_rows)
    gen = generate(sb.connect_params(), shapes, cap, say)
    assert record.data is not None
    record.data.generated = gen
    made = sum(t.rows for t in gen.tables)
    skipped = [f"{t.database}.{t.table} ({t.skipped})" for t in gen.tables if t.skipped]
    refused = [
        f"{t.database}.{t.table}: {t.target_rows - t.rows} ({t.refused_because})"
        for t in gen.tables
        if t.refused_because
    ]
    record.data.note = (
        f"schema only: {len(shapes)} tables created ({n} statements"
        + (f", {len(failed)} failed: {'; '.join(failed)[:300]}" if failed else "")
        + f"); the source holds about {rows} rows, {size} bytes in them; {made} rows of "
        "the same shape generated (row counts and average row sizes from "
        "information_schema.TABLES, values typed by column) in "
        f"{gen.duration_s:.1f} s"
        + (
            f", the counts scaled by {gen.factor:.3f} to the cap of {cap.max_rows} rows / "
            f"{format_bytes(cap.max_bytes)}"
            if gen.factor < 1.0
            else f" (cap: {cap.max_rows} rows / {format_bytes(cap.max_bytes)}, not reached)"
        )
        + (f"; left empty: {', '.join(skipped)[:300]}" if skipped else "")
        + (f"; rows refused by the server: {', '.join(refused)[:300]}" if refused else "")
    )
    say(record.data.note)
