"""Take a profile of a running server: ``perf record`` -> folded stacks -> flame graph.

One recording window, several views of it:

- ``perf record -e cycles`` (``cpu-clock`` without a CPU PMU, as on most VMs) at ``-F HZ``
  with call graphs, on one process (``-p PID``) for ``duration_s``;
- ``/proc/stat`` sampled every second in a thread (per-CPU user/system/softirq/iowait
  shares, per NUMA node, context switches from ``ctxt``);
- ``SHOW GLOBAL STATUS`` before and after when a connection is given (counter deltas);
- ``perf stat`` with the CPU family's metric set, in parallel, when the PMU has events.

Then ``perf script`` -> ``inferno-collapse-perf`` (folded stacks) -> ``inferno-flamegraph``
(an interactive SVG; inferno is the maintained Rust port of Brendan Gregg's FlameGraph
scripts, installed from crates.io by ``scripts/ensure-profile-tools.sh``) ->
``folded.summarize`` -> a ``myaccel.profile/1`` JSON with the folded file and the SVG next
to it.

Call graphs: frame pointers (``-g``) by default. MariaDB builds keep frame pointers
(Debian's mariadbd starts its functions with ``push %rbp; mov %rsp,%rbp``), so ``fp``
stacks run from ``start_thread`` down to the sampled function; only frames in glibc
(built without them) cut a stack short. ``dwarf`` (``--call-graph dwarf``, unwinding with
``.eh_frame`` from 8 KiB stack copies) loses the root of MariaDB's deep connection
stacks instead: measured here under sysbench, 46% of stacks began in ``[unknown]`` with
dwarf against 1% with fp (docs/profiling.md).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from myaccel import proc
from myaccel.errors import MyaccelError, ProcessFailed, ToolMissing, UsageError
from myaccel.model import same_named
from myaccel.profile import folded as folded_mod
from myaccel.profile.diagnose import diagnose
from myaccel.profile.perfrecord import (
    SCRIPT_FIELDS,
    annotate_dsos,
    build_record_argv,
    dso_map_from_script,
    record_counts,
    record_error,
)
from myaccel.profile.perfstat import PerfPermissionDenied
from myaccel.profile.records import (
    Profile,
    Recording,
    StatusWindow,
    build_profile,
    save_profile,
    status_window,
)
from myaccel.profile.sampling import (
    NO_PMU_NOTE,
    MicroarchResult,
    ProcStatSampler,
    has_cpu_pmu,
    microarch_counter,
    numa_nodes,
    read_status,
)

if TYPE_CHECKING:
    from myaccel.model import Facts
    from myaccel.server.connection import ConnectParams

PARANOID_PATH = "/proc/sys/kernel/perf_event_paranoid"
PROC_SELF_STATUS = "/proc/self/status"

# inferno from crates.io, pinned (the latest release when this was written).
INFERNO_VERSION = "0.12.8"
INFERNO_INSTALL_HINT = (
    f"install it with: cargo install inferno --locked --version {INFERNO_VERSION} --root .venv "
    "(from the project directory; `make system-deps` does this), or put "
    "inferno-collapse-perf and inferno-flamegraph on PATH"
)

PROFILE_JSON = "profile.json"
FOLDED_FILE = "profile.folded"
FLAMEGRAPH_FILE = "flamegraph.svg"

# Commands of the processes we accept as a MySQL-family server.
SERVER_COMMS = frozenset({"mariadbd", "mysqld", "mariadbd-debug", "mysqld-debug"})

# Capabilities (linux/capability.h) that lift perf_event_paranoid limits or allow
# observing another user's process.
CAP_SYS_PTRACE = 19
CAP_SYS_ADMIN = 21
CAP_PERFMON = 38

MIN_FREQUENCY_HZ = 1
MAX_FREQUENCY_HZ = 10_000


# ---------------------------------------------------------------- checks


def _euid() -> int:
    return os.geteuid()


def read_paranoid(path: str | Path | None = None) -> int | None:
    """``kernel.perf_event_paranoid`` (None when the file is missing or unreadable)."""
    p = Path(path or PARANOID_PATH)
    try:
        return int(p.read_text().strip())
    except (OSError, ValueError):
        return None


def effective_caps(status_path: str | Path | None = None) -> int:
    """The CapEff bit mask of this process (0 when unreadable)."""
    try:
        text = Path(status_path or PROC_SELF_STATUS).read_text()
    except OSError:
        return 0
    m = re.search(r"^CapEff:\s*([0-9a-fA-F]+)\s*$", text, re.M)
    return int(m.group(1), 16) if m else 0


def _has_cap(caps: int, cap: int) -> bool:
    return bool(caps >> cap & 1)


def check_perf_access(
    pid: int,
    *,
    paranoid_path: str | Path | None = None,
    status_path: str | Path | None = None,
    euid: int | None = None,
) -> int | None:
    """Refuse before recording when the kernel would refuse ``perf record -p PID``.

    Root, CAP_PERFMON or CAP_SYS_ADMIN may sample anything. Others need
    ``kernel.perf_event_paranoid`` <= 1 (2 allows user space only: no kernel frames; 3
    and more, a Debian/Android patch, allows nothing) and a process of their own (or
    CAP_SYS_PTRACE). Returns the paranoid level read.
    """
    uid = _euid() if euid is None else euid
    caps = effective_caps(status_path)
    level = read_paranoid(paranoid_path)
    privileged = uid == 0 or _has_cap(caps, CAP_PERFMON) or _has_cap(caps, CAP_SYS_ADMIN)
    if privileged:
        return level
    if level is not None and level > 1:
        raise PerfPermissionDenied(
            f"kernel.perf_event_paranoid is {level}: perf cannot sample a process with its "
            "kernel stacks (needs 1 or less)",
            hint="run myaccel as root (or with CAP_PERFMON), or lower the limit: "
            "sysctl -w kernel.perf_event_paranoid=1 (persist it in /etc/sysctl.d/)",
            context={"paranoid": str(level)},
        )
    try:
        owner = Path(f"/proc/{pid}").stat().st_uid
    except OSError:
        owner = uid
    if owner != uid and not _has_cap(caps, CAP_SYS_PTRACE):
        raise PerfPermissionDenied(
            f"pid {pid} belongs to uid {owner}, not to you (uid {uid}): perf may not sample it",
            hint="run myaccel as root or as the server's user, or grant CAP_PERFMON and "
            "CAP_SYS_PTRACE",
            context={"pid": str(pid), "owner": str(owner)},
        )
    return level


def process_comm(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def check_server_pid(pid: int) -> str:
    """The command name of ``pid`` when it is a MySQL/MariaDB server; raise otherwise."""
    if pid <= 0:
        raise UsageError(f"invalid pid {pid}", hint="pass the server's process id: pidof mariadbd")
    comm = process_comm(pid)
    if comm is None:
        raise UsageError(
            f"no process with pid {pid} on this machine",
            hint="pass the pid of a running server (pidof mariadbd), or --sandbox NAME",
        )
    exe = ""
    with contextlib.suppress(OSError):
        exe = Path(os.readlink(f"/proc/{pid}/exe")).name
    if comm not in SERVER_COMMS and exe not in SERVER_COMMS:
        raise UsageError(
            f"pid {pid} ({comm}) is not a MySQL/MariaDB server",
            hint="pass the pid of mariadbd or mysqld (pidof mariadbd), or --sandbox NAME",
            context={"pid": str(pid), "comm": comm},
        )
    return comm if comm in SERVER_COMMS else exe


def inferno_dirs() -> list[Path]:
    """Where inferno's binaries may be besides PATH: the venv (``cargo install --root
    .venv``), the project's ``.tools/bin`` and cargo's own bin directory."""
    venv_bin = Path(sys.prefix) / "bin"
    dirs = [venv_bin, Path.cwd() / ".venv" / "bin", Path.cwd() / ".tools" / "bin"]
    dirs.append(Path(os.environ.get("CARGO_HOME") or Path.home() / ".cargo") / "bin")
    return dirs


def find_inferno(name: str, dirs: Sequence[Path] | None = None) -> str:
    """Path of an inferno binary (``inferno-collapse-perf``, ``inferno-flamegraph``)."""
    found = proc.which(name)
    if found:
        return found
    for d in inferno_dirs() if dirs is None else dirs:
        cand = d / name
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    raise ToolMissing(
        f"'{name}' (inferno, flame graphs) is not installed", hint=INFERNO_INSTALL_HINT
    )


@dataclass(frozen=True)
class Tools:
    perf: str
    collapse: str
    flamegraph: str


def require_tools() -> Tools:
    """perf and inferno, or a ToolMissing naming how to install the missing one."""
    perf = proc.require("perf")
    return Tools(
        perf=perf,
        collapse=find_inferno("inferno-collapse-perf"),
        flamegraph=find_inferno("inferno-flamegraph"),
    )


# ---------------------------------------------------------------- one recording


@dataclass(frozen=True)
class RecordOptions:
    pid: int
    duration_s: float
    out_dir: Path
    frequency_hz: int = 99
    call_graph: str = "fp"
    event: str | None = None  # None: cycles with a CPU PMU, else cpu-clock
    status_params: ConnectParams | None = None  # ConnectParams for SHOW GLOBAL STATUS
    microarch: bool = True
    top_n: int = 30
    title: str | None = None
    facts: Facts | None = None  # refine the findings (flavor, NUMA, binary)


@dataclass
class RecordResult:
    profile: Profile
    profile_path: Path
    folded_path: Path
    flamegraph_path: Path


def validate_options(duration_s: float, frequency_hz: int) -> None:
    if not duration_s > 0 or duration_s > 3600:
        raise UsageError(
            f"--duration {duration_s:g} s is out of range",
            hint="record between 1 and 3600 seconds, e.g. --duration 10",
        )
    if not MIN_FREQUENCY_HZ <= frequency_hz <= MAX_FREQUENCY_HZ:
        raise UsageError(
            f"--frequency {frequency_hz} Hz is out of range",
            hint=f"use {MIN_FREQUENCY_HZ}..{MAX_FREQUENCY_HZ} Hz; 99 avoids lockstep with timers",
        )


def record_profile(
    opts: RecordOptions,
    *,
    tools: Tools | None = None,
    on_event: Callable[[str], None] | None = None,
) -> RecordResult:
    """Record ``opts.pid`` for ``opts.duration_s`` and write profile.json, the folded
    stacks and the flame graph into ``opts.out_dir``."""

    def note(msg: str) -> None:
        if on_event is not None:
            on_event(msg)

    validate_options(opts.duration_s, opts.frequency_hz)
    comm = check_server_pid(opts.pid)
    t = tools or require_tools()
    check_perf_access(opts.pid)
    pmu = has_cpu_pmu()
    event = opts.event or ("cycles" if pmu else "cpu-clock")
    out = opts.out_dir
    out.mkdir(parents=True, exist_ok=True)
    data = out / "perf.data"
    warnings: list[str] = []

    counter = microarch_counter(opts.pid, opts.duration_s) if opts.microarch else None
    if not pmu:
        warnings.append(NO_PMU_NOTE)

    status_before = _status_before(opts, warnings)

    argv = build_record_argv(
        t.perf,
        pid=opts.pid,
        duration_s=opts.duration_s,
        frequency_hz=opts.frequency_hz,
        event=event,
        call_graph=opts.call_graph,
        output=data,
    )
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    sampler = ProcStatSampler()
    micro = MicroarchResult()
    micro_thread: threading.Thread | None = None
    if counter is not None:

        def _count() -> None:
            nonlocal micro
            micro = counter()

        micro_thread = threading.Thread(target=_count, name="perf-stat", daemon=True)
    note(f"recording pid {opts.pid} ({comm}) for {opts.duration_s:g} s: {' '.join(argv[1:])}")
    t0 = time.monotonic()
    sampler.start()
    if micro_thread is not None:
        micro_thread.start()
    try:
        done = proc.run(argv, timeout_s=opts.duration_s + 120)
    finally:
        samples = sampler.stop()
    window_s = time.monotonic() - t0
    if micro_thread is not None:
        micro_thread.join(timeout=opts.duration_s + 120)
    err = record_error(done.returncode, done.stderr, pid=opts.pid)
    if err is not None:
        raise err
    status: StatusWindow | None = None
    if status_before and opts.status_params is not None:
        try:
            status = status_window(status_before, read_status(opts.status_params), window_s)
        except MyaccelError as exc:
            warnings.append(f"no status counters after the window: {exc.message}")
    captured, lost = record_counts(done.stderr)

    note("perf script | inferno-collapse-perf")
    script, collapsed = _script_and_collapse(t, data, opts)
    # profile.folded carries each frame's DSO; the flame graph is drawn without them
    annotated = annotate_dsos(collapsed, dso_map_from_script(script))
    folded_path = out / FOLDED_FILE
    folded_path.write_text(annotated)
    stacks = folded_mod.parse_folded(annotated, source=str(folded_path))
    summary = folded_mod.summarize(stacks, top_n=opts.top_n)

    title = opts.title or f"{comm} (pid {opts.pid}): {event}, {opts.duration_s:g} s"
    subtitle = (
        f"{summary.total_samples} samples at {opts.frequency_hz} Hz, "
        f"{opts.call_graph} call graphs, {socket.gethostname()} {started}"
    )
    svg_path = out / FLAMEGRAPH_FILE
    svg_path.write_text(_flamegraph(t, collapsed, title=title, subtitle=subtitle))
    for raw in (data, data.with_name(data.name + ".old")):
        with contextlib.suppress(OSError):
            raw.unlink()  # raw samples: large, and everything derived from them is kept

    if counter is None and opts.microarch and pmu:
        warnings.append("micro-architecture metrics not collected")
    if micro.note and not micro.values and counter is not None:
        warnings.append(micro.note)
    recording = Recording(
        tool="perf record",
        event=event,
        **same_named(opts, ("frequency_hz", "call_graph", "duration_s", "pid")),
        system_wide=False,
        command=[Path(argv[0]).name, *argv[1:]],
        target=comm,
        started_at=started,
        samples=captured if captured is not None else summary.total_samples,
        lost_samples=lost,
        folded_path=FOLDED_FILE,
        flamegraph_path=FLAMEGRAPH_FILE,
    )
    profile = build_profile(
        recording,
        stacks=summary,
        proc_stat=samples,
        numa_nodes=numa_nodes(),
        microarch=micro.values,
        status=status,
        hostname=socket.gethostname(),
        warnings=warnings,
    )
    profile = profile.model_copy(update={"findings": diagnose(profile, opts.facts)})
    path = save_profile(profile, out / PROFILE_JSON)
    return RecordResult(
        profile=profile, profile_path=path, folded_path=folded_path, flamegraph_path=svg_path
    )


def _status_before(opts: RecordOptions, warnings: list[str]) -> dict[str, str]:
    """The server's status counters at the start of the window (none without a server
    connection; a warning when they cannot be read)."""
    if opts.status_params is None:
        return {}
    try:
        return read_status(opts.status_params)
    except MyaccelError as exc:
        warnings.append(f"no status counters: {exc.message}")
        return {}


def _script_and_collapse(t: Tools, data: Path, opts: RecordOptions) -> tuple[str, str]:
    """``perf script`` of the raw samples, and its stacks collapsed by inferno."""
    script = proc.run(
        [t.perf, "script", "-i", str(data), "--no-inline", "-F", SCRIPT_FIELDS],
        timeout_s=300 + 20 * opts.duration_s,
    )
    if not script.ok:
        tail = " | ".join(script.stderr.strip().splitlines()[-3:])
        raise ProcessFailed(
            f"perf script failed with exit code {script.returncode}: {tail}",
            hint="rerun with --debug; the raw samples are in " + str(data),
        )
    if not script.stdout.strip():
        raise ProcessFailed(
            f"perf recorded no samples of pid {opts.pid} in {opts.duration_s:g} s",
            hint="the server was idle: profile it under load (--workload quick) or longer",
        )
    collapsed = proc.run([t.collapse, "--all"], input_text=script.stdout, timeout_s=300)
    if not collapsed.ok or not collapsed.stdout.strip():
        tail = " | ".join(collapsed.stderr.strip().splitlines()[-3:]) or "no output"
        raise ProcessFailed(
            f"inferno-collapse-perf failed (exit {collapsed.returncode}): {tail}",
            hint=INFERNO_INSTALL_HINT,
        )
    return script.stdout, collapsed.stdout


def _flamegraph(t: Tools, collapsed: str, *, title: str, subtitle: str) -> str:
    """The flame graph SVG of the collapsed stacks (inferno-flamegraph)."""
    flame = proc.run(
        [
            t.flamegraph,
            "--title",
            title,
            "--subtitle",
            subtitle,
            "--countname",
            "samples",
            "--hash",
            "--minwidth",
            "0.1",
        ],
        input_text=collapsed,
        timeout_s=300,
    )
    if not flame.ok or "<svg" not in flame.stdout:
        tail = " | ".join(flame.stderr.strip().splitlines()[-3:]) or "no output"
        raise ProcessFailed(
            f"inferno-flamegraph failed (exit {flame.returncode}): {tail}",
            hint=INFERNO_INSTALL_HINT,
        )
    return flame.stdout


def resolve_profile_path(path: str | Path) -> Path:
    """A profile JSON, or a directory holding ``profile.json``."""
    p = Path(path)
    if p.is_dir():
        return p / PROFILE_JSON
    return p


def latest_profile(root: Path) -> Path | None:
    """The newest ``profile.json`` under ``root`` (``$MYACCEL_HOME/profiles``)."""
    found = [q for q in root.glob(f"*/{PROFILE_JSON}") if q.is_file()]
    return max(found, key=lambda q: q.stat().st_mtime) if found else None
