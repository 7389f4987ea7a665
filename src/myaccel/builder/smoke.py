"""The smoke run of a built MariaDB server: start it (under qemu-user when it was built for
another architecture) with a small configuration on an empty datadir, and check that it
answers: its version and machine, an InnoDB table created, written and read.

Memory is bounded three ways, each found by the run that grew to 23.6 GB before the
kernel killed it:

- ``--innodb-buffer-pool-size-max``: MariaDB 10.11.12+ reserves the buffer pool's largest
  size as address space up front, 8 TiB by default on 64-bit. Natively that costs nothing;
  qemu-user keeps a descriptor per guest page of every mapping, so the host pays about
  12 MB per reserved GiB (64 GiB -> 0.8 GB). 128 MiB here (``loose-``: older servers
  lack the variable).
- ``qemu -R`` (``SmokeLimits.reserved_va``): the guest's whole address space, so any
  other large reservation fails inside the guest instead of growing the host.
- ``prlimit --as`` on the process (qemu, or the server itself natively): a ceiling on its
  address space, enforced by the kernel without root or cgroups.

The datadir is empty and the server runs with ``--skip-grant-tables``: InnoDB creates its
system tablespace and redo log under qemu, no bootstrap of the system tables is needed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import pymysql

from myaccel import proc
from myaccel.builder.cross import qemu_argv
from myaccel.builder.errors import DependencyMissing, SmokeFailed
from myaccel.builder.runner import BuildContext, Stage
from myaccel.errors import ConnectionFailed
from myaccel.server.connection import ConnectParams, connect, query_rows

# what the smoke run asks, in order; the last answer is (rows, sum of ids)
SMOKE_SQL = (
    "SELECT VERSION(), @@version_compile_machine",
    "CREATE DATABASE smoke",
    "CREATE TABLE smoke.t (id INT PRIMARY KEY AUTO_INCREMENT, v VARCHAR(20)) ENGINE=InnoDB",
    "INSERT INTO smoke.t (v) VALUES ('a'), ('b'), ('c')",
    "SELECT COUNT(*), SUM(id) FROM smoke.t",
)


@dataclass(frozen=True)
class SmokeLimits:
    """The small configuration and the bounds of a smoke run."""

    buffer_pool: str = "64M"
    buffer_pool_max: str = "128M"  # the address space InnoDB reserves for its pool
    reserved_va: str = "4G"  # qemu -R: the guest's address space (cross only)
    address_space: int = 8 << 30  # prlimit --as, bytes: qemu's own (-R included)
    start_timeout_s: float = 300.0


@dataclass
class SmokeResult:
    binary: str
    argv: list[str]
    answered_s: float  # from the start to the first answered connection
    version: str
    machine: str
    rows: int
    id_sum: int
    queries_s: float
    peak_rss_kib: int | None  # VmHWM of the process (qemu's when cross)
    shutdown_s: float
    error_log: str
    limits: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        rss = f"{self.peak_rss_kib / 1024:.0f} MiB peak RSS" if self.peak_rss_kib else "RSS unknown"
        return (
            f"{self.version} ({self.machine}) answered after {self.answered_s:.1f} s, "
            f"InnoDB table {self.rows} rows; {rss}"
        )


def launcher(target_arch: str, cross: bool, limits: SmokeLimits) -> list[str]:
    """``prlimit --as=N -- [qemu-<arch> -R 4G -L ... -E ...]``: what the server runs under."""
    prlimit = proc.which("prlimit")
    if prlimit is None:
        raise DependencyMissing(
            "the smoke run bounds the server's memory with prlimit",
            hint="apt-get install util-linux",
        )
    bound = [prlimit, f"--as={limits.address_space}", "--"]
    if not cross:
        return bound
    return [*bound, *qemu_argv(target_arch, reserved_va=limits.reserved_va)]


def server_options(
    basedir: Path, datadir: Path, rundir: Path, limits: SmokeLimits, *, cross: bool
) -> list[str]:
    """The server's options: no option files, the small configuration, a private socket
    and pid file in ``rundir``; the error log next to the datadir."""
    opts = [
        "--no-defaults",
        f"--basedir={basedir}",
        f"--datadir={datadir}",
        f"--socket={rundir / 's.sock'}",
        f"--pid-file={rundir / 'server.pid'}",
        f"--log-error={datadir.parent / 'error.log'}",
        "--skip-networking",
        "--skip-grant-tables",
        f"--innodb-buffer-pool-size={limits.buffer_pool}",
        f"--loose-innodb-buffer-pool-size-max={limits.buffer_pool_max}",
        "--performance-schema=OFF",
        "--max-connections=10",
    ]
    if cross:  # qemu-user has neither io_uring nor libaio (ENOSYS): say it, skip the fallbacks
        opts.append("--innodb-use-native-aio=0")
    if os.geteuid() == 0:
        opts.append("--user=root")
    return opts


def smoke_argv(
    binary: Path, basedir: Path, datadir: Path, rundir: Path, *, target_arch: str, cross: bool,
    limits: SmokeLimits,
) -> list[str]:  # fmt: skip
    return [
        *launcher(target_arch, cross, limits),
        str(binary),
        *server_options(basedir, datadir, rundir, limits, cross=cross),
    ]


def peak_rss_kib(pid: int) -> int | None:
    """``VmHWM`` of a running process, in KiB (None when it cannot be read)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return None


def error_lines(log: Path, limit: int = 4) -> list[str]:
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return []
    return [ln.strip() for ln in lines if "[ERROR]" in ln][:limit]


def _wait_answer(params: ConnectParams, child: proc.Child, log: Path, limits: SmokeLimits) -> Any:
    deadline = time.monotonic() + limits.start_timeout_s
    while True:
        rc = child.poll()
        if rc is not None:
            errs = error_lines(log)
            raise SmokeFailed(
                f"the server {_how_it_ended(rc)} before answering"
                + (f": {errs[0]}" if errs else ""),
                hint=_ILL_HINT if rc == -signal.SIGILL else f"see {log}",
            )
        if Path(params.socket or "").exists():
            with contextlib.suppress(ConnectionFailed):
                return connect(params)
        if time.monotonic() > deadline:
            raise SmokeFailed(
                f"the server did not answer within {limits.start_timeout_s:.0f} s",
                hint=f"see {log}; under qemu a start takes seconds, not minutes",
            )
        time.sleep(0.25)


def _ask(conn: Any, errlog: Path) -> list[list[tuple[Any, ...]]]:
    answers = []
    for q in SMOKE_SQL:
        try:
            answers.append(query_rows(conn, q))
        except pymysql.err.MySQLError as exc:
            raise SmokeFailed(f"the server failed '{q}': {exc}", hint=f"see {errlog}") from exc
    return answers


_ILL_HINT = (
    "this CPU lacks an instruction the build uses (an inline-LSE build needs ARMv8.1+ "
    "atomics: see verify-build's atomics line); build for it: myaccel build --atomics "
    "outline (runs on every aarch64 CPU), or --target-cpu of this CPU"
)


def _how_it_ended(rc: int) -> str:
    """``exited (N)``, or the signal that killed it by name (SIGILL: an instruction the
    CPU does not have)."""
    if rc < 0:
        try:
            return f"was killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"was killed by signal {-rc}"
    return f"exited ({rc})"


def run_smoke(
    binary: Path,
    basedir: Path,
    work: Path,
    *,
    target_arch: str,
    cross: bool,
    limits: SmokeLimits | None = None,
    say: Callable[[str], None] | None = None,
) -> SmokeResult:
    """Start ``binary`` on a fresh datadir under ``work/smoke``, ask ``SMOKE_SQL``, shut it
    down; raise ``SmokeFailed`` with the error log's first error when it does not answer."""
    lim = limits or SmokeLimits()
    base = work / "smoke"
    if base.exists():
        shutil.rmtree(base)
    datadir = base / "data"
    datadir.mkdir(parents=True)
    # a short directory for the socket (a unix socket path has at most 107 bytes)
    rundir = Path(tempfile.mkdtemp(prefix="myaccel-smoke-"))
    argv = smoke_argv(
        binary, basedir, datadir, rundir, target_arch=target_arch, cross=cross, limits=lim
    )
    errlog = base / "error.log"
    params = ConnectParams(host=None, port=0, socket=str(rundir / "s.sock"), user="root",
                           password=None, connect_timeout_s=10.0)  # fmt: skip
    t0 = time.monotonic()
    with (base / "server.out").open("w") as out:
        child = proc.spawn(argv, output=out, new_session=True)
    try:
        if say:
            say(f"smoke run: {Path(argv[0]).name} ... {binary.name} (pid {child.pid})")
        conn = _wait_answer(params, child, errlog, lim)
        answered = time.monotonic() - t0
        try:
            answers = _ask(conn, errlog)
            queries_s = time.monotonic() - t0 - answered
            rss = peak_rss_kib(child.pid)
            t1 = time.monotonic()
            with contextlib.suppress(pymysql.err.MySQLError):  # it may hang up first
                query_rows(conn, "SHUTDOWN")
        finally:
            with contextlib.suppress(pymysql.err.MySQLError):
                conn.close()
        if child.wait(120.0) is None:
            raise SmokeFailed("the server did not shut down within 120 s", hint=f"see {errlog}")
        shutdown_s = time.monotonic() - t1
    except BaseException:
        child.stop(grace_s=30.0)
        raise
    finally:
        shutil.rmtree(rundir, ignore_errors=True)
    version, machine = answers[0][0]
    count, total = answers[-1][0]
    if int(count) != 3 or int(total) != 6:
        raise SmokeFailed(
            f"the InnoDB table answered {count} rows (id sum {total}), expected 3 (6)",
            hint=f"see {errlog}",
        )
    return SmokeResult(
        binary=str(binary),
        argv=argv,
        answered_s=round(answered, 2),
        version=str(version),
        machine=str(machine),
        rows=int(count),
        id_sum=int(total),
        queries_s=round(queries_s, 2),
        peak_rss_kib=rss,
        shutdown_s=round(shutdown_s, 2),
        error_log=str(errlog),
        limits=asdict(lim),
    )


class SmokeStage(Stage):
    """Cross builds: the installed server starts under qemu and answers queries."""

    name = "smoke"
    title = "smoke run: start the server (under qemu) and answer queries"

    def inputs(self, ctx: BuildContext) -> dict[str, Any]:
        return {"binaries": dict(ctx.manifest.binaries), "limits": asdict(SmokeLimits())}

    def skip_reason(self, ctx: BuildContext) -> str | None:
        if ctx.tree.flavor != "mariadb":
            return f"smoke runs start MariaDB trees (a {ctx.tree.adapter.label} datadir needs --initialize)"
        return None

    def run(self, ctx: BuildContext, log: IO[str]) -> dict[str, Any]:
        from myaccel.builder.stages import server_binary

        binary = server_binary(ctx, ctx.layout.install)
        if binary is None:
            raise SmokeFailed("no server binary in the install tree", hint="rerun the build")

        def note(msg: str) -> None:
            log.write(f"# {msg}\n")
            log.flush()

        res = run_smoke(
            binary,
            ctx.layout.install,
            ctx.layout.work,
            target_arch=ctx.toolchain.target_arch,
            cross=ctx.toolchain.cross,
            say=note,
        )
        log.write(f"$ {' '.join(res.argv)}\n{res.summary()}\n")
        ctx.manifest.measurements.smoke = res.to_dict()
        return {"summary": res.summary()}


def smoke_applies(ctx: BuildContext) -> bool:
    """The pipeline runs the smoke stage on cross builds of SQL servers."""
    return ctx.toolchain.cross and ctx.tree.adapter.trainer == "sandbox"


def smoke_binary(
    binary: Path, machine: str, basedir: Path | None, work: Path, say: Callable[[str], None]
) -> SmokeResult:
    """``verify-build --smoke``: the smoke run of a binary of ``machine`` (under qemu when
    that is not this machine's); ``basedir`` defaults to the install tree above ``bin/``."""
    import platform

    cross = machine != platform.machine()
    return run_smoke(
        binary,
        basedir or binary.resolve().parent.parent,
        work,
        target_arch=machine,
        cross=cross,
        say=say,
    )
