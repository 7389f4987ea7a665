"""The single gateway for subprocesses: timeouts, logging and clear errors.

Everything myaccel runs (mariadbd, sysbench, perf, objdump, ...) goes through here so that
timeouts are always bounded and a missing tool becomes a ``ToolMissing`` with a hint.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

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
    "taskset": "util-linux",
}


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def which(name: str) -> str | None:
    """Find an executable on PATH or in the sbin directories."""
    found = shutil.which(name)
    if found:
        return found
    for d in _EXTRA_PATH:
        cand = Path(d) / name
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    return None


def require(name: str) -> str:
    path = which(name)
    if path is None:
        pkg = PACKAGE_OF.get(name, name)
        raise ToolMissing(
            f"'{name}' is not installed",
            hint=f"install it with: apt-get install {pkg}  (or run `make demo`, which does)",
        )
    return path


def run(
    argv: Sequence[str],
    *,
    timeout_s: float = 60.0,
    check: bool = False,
    env: Mapping[str, str] | None = None,
    input_text: str | None = None,
    cwd: str | Path | None = None,
) -> Completed:
    """Run a command to completion with a timeout; never raises for a non-zero exit unless
    ``check``. A missing executable raises ``ToolMissing``."""
    args = tuple(str(a) for a in argv)
    full_env = None
    if env is not None:
        full_env = dict(os.environ)
        full_env.update(env)
    t0 = time.monotonic()
    log.debug("run: %s", " ".join(args))
    try:
        cp = subprocess.run(
            args,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
            env=full_env,
            input=input_text,
            cwd=cwd,
            check=False,
        )
    except FileNotFoundError as exc:
        pkg = PACKAGE_OF.get(Path(args[0]).name, Path(args[0]).name)
        raise ToolMissing(
            f"cannot execute '{args[0]}': not found",
            hint=f"install it with: apt-get install {pkg}",
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise ProcessFailed(
            f"'{Path(args[0]).name}' did not finish within {timeout_s:.0f} s",
            hint="the machine may be overloaded; retry, or raise the timeout",
        ) from exc
    done = Completed(args, cp.returncode, cp.stdout, cp.stderr, time.monotonic() - t0)
    if check and not done.ok:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise ProcessFailed(
            f"'{Path(args[0]).name}' failed with exit code {done.returncode}: "
            + (" | ".join(tail) or "no output"),
            hint="see the message above; rerun with --debug for the full command",
        )
    return done
