"""What executes subprocesses: the ``Runner`` protocol, its result types and the real
``SystemRunner``. ``myaccel.proc`` is the gateway everything calls; ``myaccel.env`` says
which runner is in effect (a test swaps in one that replays recorded outputs)."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from myaccel.errors import ProcessFailed, ToolMissing

log = logging.getLogger(__name__)

# Server binaries live in sbin on Debian; a non-root PATH often lacks it.
_EXTRA_PATH = ("/usr/sbin", "/sbin", "/usr/local/sbin", "/usr/libexec")

# Debian package that provides each tool we call, for hints.
PACKAGE_OF = {
    "mariadbd": "mariadb-server",
    "mysqld": "mysql-server",
    "mariadb-install-db": "mariadb-server",
    "mariadb": "mariadb-client",
    "mysql": "mariadb-client",
    "sysbench": "sysbench",
    "perf": "linux-perf",
    "numactl": "numactl",
    "valgrind": "valgrind",
    "objdump": "binutils",
    "aarch64-linux-gnu-gcc": "gcc-aarch64-linux-gnu",
    "aarch64-linux-gnu-objdump": "binutils-aarch64-linux-gnu",
    "qemu-aarch64": "qemu-user",
    "mysqltuner": "mysqltuner",
    "ethtool": "ethtool",
    "fio": "fio",
    "taskset": "util-linux",
}


@dataclass(frozen=True)
class Exited:
    """How a command that ran to its end ended."""

    argv: tuple[str, ...]
    returncode: int


@dataclass(frozen=True)
class Completed(Exited):
    stdout: str
    stderr: str
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def failure(self, what: str) -> str:
        """``'what' failed with exit code N: <the last line it printed>``, for an error."""
        tail = (self.stderr or self.stdout).strip().splitlines()[-1:]
        return f"'{what}' failed with exit code {self.returncode}" + (
            f": {tail[0]}" if tail else ""
        )


def search_path(name: str) -> str | None:
    """``which`` on this machine: PATH, then the sbin directories."""
    found = shutil.which(name)
    if found:
        return found
    for d in _EXTRA_PATH:
        cand = Path(d) / name
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    return None


@dataclass(frozen=True)
class Streamed(Exited):
    """A streamed command's end: its exit code, whether the timeout killed it, wall time."""

    timed_out: bool
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


class Child(Protocol):
    """A long-running child started by ``spawn``."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None:
        """The exit code once it has ended (reaped), else None."""
        ...

    def wait(self, timeout_s: float | None = None) -> int | None:
        """Wait for the end; None if still running after ``timeout_s``."""
        ...

    def send_signal(self, sig: int) -> None: ...

    def stop(self, grace_s: float = 10.0, sig: int = signal.SIGTERM) -> int:
        """Ask it to end (``sig``), then SIGKILL after ``grace_s``; returns the exit code."""
        ...


# An ``env`` adds to (or overrides) the caller's environment; a value of None removes the
# variable from what the child inherits (e.g. a password variable the child must not see).
EnvChanges = Mapping[str, str | None]


@dataclass(frozen=True, kw_only=True)
class Command:
    """What every way of starting a program is given: the program with its arguments,
    the environment changes and the working directory."""

    argv: tuple[str, ...]
    env: EnvChanges | None = None
    cwd: str | Path | None = None
    # descriptors the child inherits under the same numbers (a pipe holding a secret)
    pass_fds: tuple[int, ...] = ()
    # the child gets SIGKILL when this process ends, even by SIGKILL (PR_SET_PDEATHSIG)
    die_with_parent: bool = True


@dataclass(frozen=True, kw_only=True)
class RunRequest(Command):
    """``run``: to completion within ``timeout_s``, output captured."""

    timeout_s: float
    input_text: str | None = None


@dataclass(frozen=True, kw_only=True)
class StreamRequest(Command):
    """``stream``: to completion within ``timeout_s``, each output line to ``on_line``."""

    timeout_s: float
    on_line: Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class SpawnRequest(Command):
    """``spawn``: a long-running child, its output to ``output`` (or nowhere)."""

    output: IO[bytes] | IO[str] | None = None
    new_session: bool = False
    die_with_parent: bool = False  # a server outlives myaccel; a helper tool sets True


class Runner(Protocol):
    """What executes subprocesses; ``SystemRunner`` for real, a fake in tests."""

    def which(self, name: str) -> str | None: ...

    def run(self, req: RunRequest) -> Completed: ...

    def stream(self, req: StreamRequest) -> Streamed: ...

    def spawn(self, req: SpawnRequest) -> Child: ...


def _merged_env(env: EnvChanges | None) -> dict[str, str] | None:
    if env is None:
        return None
    full = dict(os.environ)
    for key, value in env.items():
        if value is None:
            full.pop(key, None)
        else:
            full[key] = value
    return full


def _not_found(args: Sequence[str], exc: OSError) -> ToolMissing:
    pkg = PACKAGE_OF.get(Path(args[0]).name, Path(args[0]).name)
    what = "not found" if isinstance(exc, FileNotFoundError) else (exc.strerror or str(exc))
    return ToolMissing(
        f"cannot execute '{args[0]}': {what}",
        hint=f"install it with: apt-get install {pkg}",
    )


@contextlib.contextmanager
def _launching(args: Sequence[str]) -> Iterator[None]:
    """Start a program inside this block: one that is missing or not executable becomes a
    ``ToolMissing`` naming the package to install."""
    try:
        yield
    except (FileNotFoundError, PermissionError) as exc:
        raise _not_found(args, exc) from exc


_PR_SET_PDEATHSIG = 1


def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl``, resolved in the parent (the child must not load anything)."""
    try:
        fn: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return fn


def _child_setup(req: Command) -> Callable[[], None] | None:
    """What the child runs between fork and exec: ask the kernel for SIGKILL when this
    process (its parent) dies, then check the parent did not die before that was asked.
    Set only where a child must not outlive myaccel: sysbench holding a password, a
    backup copying a server's data, a capture's load; not for a server started as a
    daemon (``SpawnRequest.die_with_parent`` is False by default).

    A ``preexec_fn`` is unsafe in general with threads (the child may wait forever on a
    lock another thread held at the fork); this one takes no lock: ``prctl`` was looked
    up before the fork, and the two calls it makes are plain system calls."""
    if not req.die_with_parent:
        return None
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def _setup() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(137)

    return _setup


class PopenChild:
    """A ``Child`` backed by ``subprocess.Popen``."""

    def __init__(self, popen: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
        self._p = popen

    @property
    def pid(self) -> int:
        return self._p.pid

    def poll(self) -> int | None:
        return self._p.poll()

    def wait(self, timeout_s: float | None = None) -> int | None:
        try:
            return self._p.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def send_signal(self, sig: int) -> None:
        if self._p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._p.send_signal(sig)

    def stop(self, grace_s: float = 10.0, sig: int = signal.SIGTERM) -> int:
        self.send_signal(sig)
        rc = self.wait(grace_s)
        if rc is None:
            log.debug(
                "pid %d did not end within %.0f s of signal %d: SIGKILL", self.pid, grace_s, sig
            )
            self._p.kill()
            rc = self._p.wait()
        return rc


class SystemRunner:
    """Runs commands for real."""

    def which(self, name: str) -> str | None:
        return search_path(name)

    def run(self, req: RunRequest) -> Completed:
        args, timeout_s = req.argv, req.timeout_s
        t0 = time.monotonic()
        try:
            with _launching(args):
                cp = subprocess.run(
                    args,
                    capture_output=True,
                    text=True,
                    errors="replace",
                    timeout=timeout_s,
                    env=_merged_env(req.env),
                    input=req.input_text,
                    cwd=req.cwd,
                    check=False,
                    pass_fds=req.pass_fds,
                    preexec_fn=_child_setup(req),
                )
        except subprocess.TimeoutExpired as exc:
            raise ProcessFailed(
                f"'{Path(args[0]).name}' did not finish within {timeout_s:.0f} s",
                hint="the machine may be overloaded; retry, or raise the timeout",
            ) from exc
        return Completed(args, cp.returncode, cp.stdout, cp.stderr, time.monotonic() - t0)

    def stream(self, req: StreamRequest) -> Streamed:
        args = req.argv
        t0 = time.monotonic()
        with _launching(args):
            p = subprocess.Popen(
                args,
                cwd=req.cwd,
                env=_merged_env(req.env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                bufsize=1,
                pass_fds=req.pass_fds,
                preexec_fn=_child_setup(req),  # noqa: PLW1509 (see _child_setup)
            )
        timed_out = threading.Event()

        def _kill() -> None:
            if p.poll() is None:
                timed_out.set()
                p.kill()

        timer = threading.Timer(req.timeout_s, _kill)
        timer.daemon = True
        timer.start()
        try:
            assert p.stdout is not None
            for line in p.stdout:
                req.on_line(line.rstrip("\n"))
            rc = p.wait()
        finally:
            timer.cancel()
            if p.poll() is None:
                p.kill()
                p.wait()
        return Streamed(args, rc, timed_out.is_set(), time.monotonic() - t0)

    def spawn(self, req: SpawnRequest) -> Child:
        args = list(req.argv)
        with _launching(args):
            p = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=req.output if req.output is not None else subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
                start_new_session=req.new_session,
                close_fds=True,
                cwd=req.cwd,
                env=_merged_env(req.env),
                pass_fds=req.pass_fds,
                preexec_fn=_child_setup(req),  # noqa: PLW1509 (see _child_setup)
            )
        return PopenChild(p)
