"""Where a sandbox lives and what it listens on: names, homes, ports and socket paths."""

from __future__ import annotations

import errno
import hashlib
import os
import re
import socket
import zlib
from collections.abc import Mapping
from pathlib import Path

from myaccel.errors import SandboxError, UsageError
from myaccel.paths import myaccel_home

DEFAULT_NAME = "default"
SYSTEM_PORT = 3306
# Below the Linux ephemeral range (32768-60999), so a client's outgoing connection never
# takes the port of a stopped sandbox; the start point is spread by a hash (see pick_port).
PORT_RANGE = (13307, 16999)
# sun_path is 108 bytes including the terminating NUL.
SOCKET_PATH_MAX_BYTES = 107
# Never run anything in these, whatever MYACCEL_HOME says.
SYSTEM_DIRS = (Path("/var/lib/mysql"), Path("/run/mysqld"), Path("/var/run/mysqld"))

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def validate_name(name: str, what: str = "sandbox") -> str:
    if not _NAME_RE.match(name or ""):
        raise UsageError(
            f"invalid {what} name '{name}'",
            hint="use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
        )
    return name


def resolve_home(home: Path | str | None = None) -> Path:
    """An explicit home (absolute: the server runs with cwd in the sandbox), else
    ``$MYACCEL_HOME``."""
    return Path(home).expanduser().resolve() if home is not None else myaccel_home()


def sandboxes_root(home: Path | None = None) -> Path:
    # resolved: a symlinked sandboxes dir must give the paths the server was started with
    return (resolve_home(home) / "sandboxes").resolve()


def lock_path(home: Path, name: str) -> Path:
    return sandboxes_root(home) / ".locks" / f"{name}.lock"


def refuse_system_dirs(path: Path) -> None:
    resolved = path.resolve()
    for d in SYSTEM_DIRS:
        if resolved == d or d in resolved.parents:
            raise SandboxError(
                f"refusing to put a sandbox under {d} (the system server's directory)",
                hint="set MYACCEL_HOME to a directory of your own",
            )


def ensure_private_dir(path: Path) -> None:
    """Create a 0700 directory we own (refuse a symlink or someone else's directory)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.lstat()
    if not path.is_dir() or path.is_symlink() or st.st_uid != os.getuid():
        raise SandboxError(
            f"'{path}' is not a private directory owned by you",
            hint=f"remove it, or set MYACCEL_HOME to a directory with a shorter path than {path}",
        )


def socket_path_for(sandbox_dir: Path, uid: int | None = None) -> tuple[Path, bool]:
    """The socket path for a sandbox directory, and whether it is the short /tmp fallback."""
    preferred = sandbox_dir / "mysqld.sock"
    if len(os.fsencode(str(preferred))) <= SOCKET_PATH_MAX_BYTES:
        return preferred, False
    digest = hashlib.sha256(str(sandbox_dir).encode()).hexdigest()[:16]
    user = os.getuid() if uid is None else uid
    return Path(f"/tmp/myaccel-{user}") / f"{digest}.sock", True


# ------------------------------------------------------------------ ports


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """True when something listens on ``host:port`` (a bind with SO_REUSEADDR fails).

    SO_REUSEADDR as the server itself uses it, so TIME_WAIT leftovers of our own previous
    run do not count as "in use"."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return True
            raise
    return False


def validate_port(port: int) -> int:
    if port == SYSTEM_PORT:
        raise UsageError(
            "port 3306 is reserved for the system's own server",
            hint="omit --port to pick a free port, or choose another one (e.g. --port 13306)",
        )
    if not 1 <= port <= 65535:
        raise UsageError(f"port {port} is out of range", hint="use a port between 1024 and 65535")
    return port


def check_requested_port(port: int, owners: Mapping[int, str]) -> None:
    """Refuse a port another sandbox (``owners``: port -> sandbox name) or program holds."""
    owner = owners.get(port)
    if owner is not None:
        raise UsageError(
            f"port {port} belongs to sandbox '{owner}'",
            hint="omit --port to pick a free port, or choose another one",
        )
    if port_in_use(port):
        raise UsageError(
            f"port {port} on 127.0.0.1 is in use",
            hint="omit --port to pick a free port, or choose another one",
        )


def pick_port(taken: set[int], seed: str) -> int:
    lo, hi = PORT_RANGE
    span = hi - lo + 1
    start = zlib.crc32(seed.encode()) % span
    for i in range(span):
        port = lo + (start + i) % span
        if port == SYSTEM_PORT or port in taken:
            continue
        if not port_in_use(port):
            return port
    raise SandboxError(
        f"no free port between {lo} and {hi} on 127.0.0.1",
        hint="pass --port N with a free port",
    )
