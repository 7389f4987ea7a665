"""The single gateway for subprocesses: timeouts, logging and clear errors.

Everything myaccel runs (mariadbd, sysbench, perf, objdump, ...) goes through here so that
timeouts are always bounded and a missing tool becomes a ``ToolMissing`` with a hint.
Three shapes: ``run`` (to completion, output captured), ``stream`` (to completion, each
output line handed to a callback as it comes: sysbench, compilers) and ``spawn`` (a
long-running child: servers, ``perf record``) returning a ``Child`` that stops gracefully.
All three go through the ``Runner`` of the current ``Environment`` (``myaccel.env``), so a
test replaces the runner instead of patching module globals.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from myaccel.env import current
from myaccel.errors import ProcessFailed, ToolMissing
from myaccel.runner import (
    PACKAGE_OF,
    Child,
    Completed,
    EnvChanges,
    PopenChild,
    Runner,
    RunRequest,
    SpawnRequest,
    Streamed,
    StreamRequest,
    SystemRunner,
    search_path,
)

__all__ = [
    "PACKAGE_OF",
    "Child",
    "Completed",
    "EnvChanges",
    "PopenChild",
    "RunRequest",
    "Runner",
    "SpawnRequest",
    "StreamRequest",
    "Streamed",
    "SystemRunner",
    "require",
    "run",
    "search_path",
    "spawn",
    "stream",
    "which",
]

log = logging.getLogger(__name__)


def which(name: str) -> str | None:
    """Find an executable on PATH or in the sbin directories (asks the current runner)."""
    return _runner().which(name)


def require(name: str) -> str:
    path = which(name)
    if path is None:
        pkg = PACKAGE_OF.get(name, name)
        raise ToolMissing(
            f"'{name}' is not installed",
            hint=f"install it with: apt-get install {pkg}  (or run `make demo`, which does)",
        )
    return path


def _runner() -> Runner:
    return current().runner


def run(
    argv: Sequence[str],
    *,
    timeout_s: float = 60.0,
    check: bool = False,
    env: EnvChanges | None = None,
    input_text: str | None = None,
    cwd: str | Path | None = None,
    pass_fds: tuple[int, ...] = (),
    die_with_parent: bool = True,
) -> Completed:
    """Run a command to completion with a timeout; never raises for a non-zero exit unless
    ``check``. The command dies with this process unless ``die_with_parent`` is False (a
    restart command that must finish); ``pass_fds`` are inherited under their numbers. A missing executable raises ``ToolMissing``; a timeout ``ProcessFailed``.
    ``env`` adds to (or overrides, or with None removes from) the caller's environment."""
    args = tuple(str(a) for a in argv)
    log.debug("run: %s", " ".join(args))
    done = _runner().run(
        RunRequest(
            argv=args,
            env=env,
            cwd=cwd,
            timeout_s=timeout_s,
            input_text=input_text,
            pass_fds=pass_fds,
            die_with_parent=die_with_parent,
        )
    )
    if check and not done.ok:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise ProcessFailed(
            f"'{Path(args[0]).name}' failed with exit code {done.returncode}: "
            + (" | ".join(tail) or "no output"),
            hint="see the message above; rerun with --debug for the full command",
        )
    return done


def stream(
    argv: Sequence[str],
    *,
    timeout_s: float,
    on_line: Callable[[str], None],
    env: EnvChanges | None = None,
    cwd: str | Path | None = None,
    pass_fds: tuple[int, ...] = (),
) -> Streamed:
    """Run a command to completion, stdout and stderr merged, each line (without its
    newline) handed to ``on_line`` as it arrives. A timeout kills the command and is
    reported in ``Streamed.timed_out`` (the caller words the error: it knows the task)."""
    args = tuple(str(a) for a in argv)
    log.debug("stream: %s", " ".join(args))
    return _runner().stream(
        StreamRequest(
            argv=args, env=env, cwd=cwd, timeout_s=timeout_s, on_line=on_line, pass_fds=pass_fds
        )
    )


def spawn(
    argv: Sequence[str],
    *,
    output: IO[bytes] | IO[str] | None = None,
    env: EnvChanges | None = None,
    cwd: str | Path | None = None,
    new_session: bool = False,
    pass_fds: tuple[int, ...] = (),
    die_with_parent: bool = False,
) -> Child:
    """Start a long-running child (stdin closed, stdout and stderr to ``output`` or
    nowhere); ``new_session`` detaches it from our terminal's signals (servers);
    ``die_with_parent`` kills it when this process ends (a helper tool, not a server)."""
    args = tuple(str(a) for a in argv)
    log.debug("spawn: %s", " ".join(args))
    return _runner().spawn(
        SpawnRequest(
            argv=args,
            env=env,
            cwd=cwd,
            output=output,
            new_session=new_session,
            pass_fds=pass_fds,
            die_with_parent=die_with_parent,
        )
    )
