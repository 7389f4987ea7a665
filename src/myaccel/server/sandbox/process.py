"""The server process of a sandbox: spawn it through the subprocess gateway, find it in the
process table (psutil), stop it, and lock a sandbox against concurrent commands (filelock).

A sandbox's server is recognised by its command line: ``--defaults-file=<its my.cnf>``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import filelock
import psutil

from myaccel import proc
from myaccel.errors import SandboxError

log = logging.getLogger(__name__)

LOG_TAIL_LINES = 15
LOCK_TIMEOUT_S = 300.0
# Variables that would point a server (or a client it runs) somewhere else.
_SERVER_ENV_BLANKED = (
    "MYSQL_HOME",
    "MARIADB_HOME",
    "MYSQL_UNIX_PORT",
    "MYSQL_TCP_PORT",
    "MYSQL_PWD",
)

# Servers we spawned from this process: kept so they can be reaped (a dead child would
# otherwise stay a zombie and look alive).
_CHILDREN: dict[int, proc.Child] = {}


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not; our own dead children are reaped)."""
    child = _CHILDREN.get(pid)
    if child is not None and child.poll() is not None:
        _CHILDREN.pop(pid, None)
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def _cmdline(pid: int) -> list[str] | None:
    try:
        return [a for a in psutil.Process(pid).cmdline() if a]
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def _same_path(a: str, b: Path) -> bool:
    """Whether two spellings name the same file (symlinked homes and sandboxes dirs)."""
    if a == str(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them is gone: compare what they resolve to
        return os.path.realpath(a) == os.path.realpath(b)


def uses_option_file(args: Sequence[str], option_file: Path) -> bool:
    prefix = "--defaults-file="
    return any(a.startswith(prefix) and _same_path(a[len(prefix) :], option_file) for a in args)


def runs_option_file(pid: int, option_file: Path) -> bool:
    args = _cmdline(pid)
    if args is None:  # cannot read its command line: trust the pid
        return True
    return uses_option_file(args, option_file)


def find_server_pids(option_file: Path) -> list[int]:
    """Live servers started with ``option_file`` (not the bootstrap of an initialization)."""
    pids = []
    for p in psutil.process_iter(["cmdline"]):
        args = [a for a in (p.info.get("cmdline") or []) if a]
        if (
            args
            and "--bootstrap" not in args
            and uses_option_file(args, option_file)
            and pid_alive(p.pid)
        ):
            pids.append(p.pid)
    return pids


def server_env() -> dict[str, str | None]:
    """What the server's environment changes: variables that could point it elsewhere
    (another socket, port, option-file home, or a password) are removed."""
    return {var: None for var in _SERVER_ENV_BLANKED if var in os.environ}


def spawn_server(argv: Sequence[str], log_path: Path, cwd: Path) -> proc.Child:
    """Start a long-running server in its own session with output to its log."""
    with open(log_path, "ab") as log_fh:
        child = proc.spawn(argv, output=log_fh, new_session=True, env=server_env(), cwd=cwd)
    _CHILDREN[child.pid] = child
    return child


def forget_child(pid: int) -> None:
    """A spawned server that has ended and been reaped."""
    _CHILDREN.pop(pid, None)


def send_signal(pid: int, sig: int) -> None:
    """Signal ``pid`` if it still runs."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def terminate(pid: int, grace_s: float, sig: int = signal.SIGTERM) -> bool:
    """``sig`` (SIGTERM: a clean shutdown for mysqld/mariadbd), then SIGKILL after
    ``grace_s``. True if it had to be killed."""
    send_signal(pid, sig)
    if wait_gone(pid, grace_s):
        return False
    send_signal(pid, signal.SIGKILL)
    wait_gone(pid, 10.0)
    return True


def read_pid(pid_file: Path) -> int | None:
    try:
        text = pid_file.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def tail(path: Path, lines: int = LOG_TAIL_LINES, since: int = 0) -> list[str]:
    try:
        with open(path, "rb") as fh:
            fh.seek(since)
            data = fh.read()
    except OSError:
        return []
    return data.decode(errors="replace").rstrip().splitlines()[-lines:]


@contextlib.contextmanager
def file_lock(path: Path, what: str, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """An exclusive lock on ``path`` (flock), waiting up to ``timeout_s``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(path, timeout=timeout_s, poll_interval=0.1)
    try:
        lock.acquire()
    except filelock.Timeout as exc:
        raise SandboxError(
            f"another myaccel command is working on {what}",
            hint="wait for it to finish, then retry",
        ) from exc
    try:
        yield
    finally:
        lock.release()
