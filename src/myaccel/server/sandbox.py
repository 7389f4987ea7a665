"""Sandboxes: private MariaDB/MySQL instances for benchmarks and experiments.

A sandbox lives in ``$MYACCEL_HOME/sandboxes/NAME/``::

    state.json      what the sandbox is (schema ``myaccel.sandbox/1``): flavor, version,
                    binary, port, socket, benchmark user, active configuration
    my.cnf          the option file the server runs with; rewritten at every start
    data/           the datadir
    mysqld.err      error log (the server's and ours), mysqld.pid, mysqld.sock
    snapshots/SNAP/ copies of a stopped datadir (``cp -a --reflink=auto``)

Isolation: the server only ever gets ``--defaults-file=<our my.cnf>`` (so ``/etc/mysql``
and ``~/.my.cnf`` are never read), listens on 127.0.0.1 on a port we chose (never 3306),
and every path it writes is under the sandbox directory. A user's configuration
(``--config``/``--set``) can change tuning but never those keys: the sandbox-owned keys are
written last (last one wins in option files) and the user's copies are dropped and reported.

This module never prints; progress goes to an optional callback and failures are
``SandboxError``/``UsageError`` with a hint.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from myaccel import proc
from myaccel.errors import ConnectionFailed, MyaccelError, SandboxError, ToolMissing, UsageError
from myaccel.paths import myaccel_home
from myaccel.server.connection import ConnectParams, connect, query_rows
from myaccel.server.optionfile import iter_option_text, normalize_key

log = logging.getLogger(__name__)

SANDBOX_SCHEMA = "myaccel.sandbox/1"
SNAPSHOT_SCHEMA = "myaccel.sandbox-snapshot/1"
DEFAULT_NAME = "default"
SYSTEM_PORT = 3306
# Below the Linux ephemeral range (32768-60999), so a client's outgoing connection never
# takes the port of a stopped sandbox; the start point is spread by a hash (see _pick_port).
PORT_RANGE = (13307, 16999)
# sun_path is 108 bytes including the terminating NUL.
SOCKET_PATH_MAX_BYTES = 107
DEFAULT_TIMEOUT_S = 60.0
# A server started under a wrapper (valgrind) starts 10-50x slower: wait at least this long.
WRAPPED_TIMEOUT_S = 600.0
INIT_TIMEOUT_S = 600.0
COPY_TIMEOUT_S = 6 * 3600.0
LOG_TAIL_LINES = 15
BENCH_USER = "sbtest"
BENCH_DATABASE = "sbtest"
ADMIN_USER = "root"
# Never run anything in these, whatever MYACCEL_HOME says.
SYSTEM_DIRS = (Path("/var/lib/mysql"), Path("/run/mysqld"), Path("/var/run/mysqld"))

Flavor = Literal["mariadb", "mysql"]
RunState = Literal["running", "stopped", "crashed"]
Progress = Callable[[str], None]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_SET_KEY_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
_VERSION_RE = re.compile(r"\bVer\s+(\d+)\.(\d+)\.(\d+)(\S*)")


def _noop(_msg: str) -> None:
    pass


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def flavor_label(flavor: str) -> str:
    return {"mariadb": "MariaDB", "mysql": "MySQL"}.get(flavor, flavor)


# ------------------------------------------------------------------ names and ports


def validate_name(name: str, what: str = "sandbox") -> str:
    if not _NAME_RE.match(name or ""):
        raise UsageError(
            f"invalid {what} name '{name}'",
            hint="use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
        )
    return name


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


def socket_path_for(sandbox_dir: Path, uid: int | None = None) -> tuple[Path, bool]:
    """The socket path for a sandbox directory, and whether it is the short /tmp fallback."""
    preferred = sandbox_dir / "mysqld.sock"
    if len(os.fsencode(str(preferred))) <= SOCKET_PATH_MAX_BYTES:
        return preferred, False
    digest = hashlib.sha256(str(sandbox_dir).encode()).hexdigest()[:16]
    user = os.getuid() if uid is None else uid
    return Path(f"/tmp/myaccel-{user}") / f"{digest}.sock", True


def _ensure_private_dir(path: Path) -> None:
    """Create a 0700 directory we own (refuse a symlink or someone else's directory)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.lstat()
    if not path.is_dir() or path.is_symlink() or st.st_uid != os.getuid():
        raise SandboxError(
            f"'{path}' is not a private directory owned by you",
            hint=f"remove it, or set MYACCEL_HOME to a directory with a shorter path than {path}",
        )


# ------------------------------------------------------------------ server binaries


@dataclass(frozen=True)
class ServerVersion:
    flavor: Flavor
    major: int
    minor: int
    patch: int
    suffix: str
    raw: str

    @property
    def number(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    @property
    def major_minor(self) -> str:
        return f"{self.major}.{self.minor}"

    @property
    def label(self) -> str:
        return f"{flavor_label(self.flavor)} {self.number}"


def parse_version_output(text: str) -> ServerVersion:
    """Parse ``mariadbd --version`` / ``mysqld --version``.

    ``/usr/sbin/mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64``
    ``/usr/sbin/mysqld  Ver 8.0.36 for Linux on x86_64 (MySQL Community Server - GPL)``
    Percona Server and other MySQL derivatives count as ``mysql`` (same datadir and init).
    """
    line = next((ln for ln in text.splitlines() if " Ver " in ln), text.strip())
    m = _VERSION_RE.search(line)
    if not m:
        raise SandboxError(
            f"cannot read the server version from: {line.strip()[:120]!r}",
            hint="is this a mariadbd/mysqld binary? pass --basedir of a MariaDB/MySQL build",
        )
    flavor: Flavor = "mariadb" if "mariadb" in line.lower() else "mysql"
    return ServerVersion(
        flavor=flavor,
        major=int(m.group(1)),
        minor=int(m.group(2)),
        patch=int(m.group(3)),
        suffix=m.group(4),
        raw=line.strip(),
    )


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


@dataclass(frozen=True)
class ServerInstall:
    """A server binary and the files around it."""

    binary: Path
    basedir: Path
    version: ServerVersion
    install_db: Path | None = None  # mariadb-install-db / mysql_install_db (MariaDB only)
    custom: bool = False  # from --basedir (then the paths below are set when found)
    lc_messages_dir: Path | None = None
    plugin_dir: Path | None = None
    charsets_dir: Path | None = None

    @property
    def flavor(self) -> Flavor:
        return self.version.flavor


_BINARY_CANDIDATES = (
    "bin/mariadbd",
    "sbin/mariadbd",
    "libexec/mariadbd",
    "bin/mysqld",
    "sbin/mysqld",
    "libexec/mysqld",
)
_INSTALL_DB_CANDIDATES = (
    "scripts/mariadb-install-db",
    "bin/mariadb-install-db",
    "scripts/mysql_install_db",
    "bin/mysql_install_db",
)


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _first_dir(base: Path, candidates: Sequence[str], marker: str = "") -> Path | None:
    for rel in candidates:
        d = base / rel
        if d.is_dir() and (not marker or (d / marker).exists()):
            return d
    return None


def read_server_version(binary: Path) -> ServerVersion:
    done = proc.run([str(binary), "--version"], timeout_s=30.0)
    if not done.ok:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
        raise SandboxError(
            f"'{binary} --version' failed with exit code {done.returncode}"
            + (f": {tail[0]}" if tail else ""),
            hint="check that the binary runs on this machine (architecture, shared libraries)",
        )
    return parse_version_output(done.stdout or done.stderr)


def find_server(
    basedir: Path | None = None, *, binary: Path | None = None, flavor: Flavor | None = None
) -> ServerInstall:
    """The server to use: an explicit binary, a build tree (``--basedir``), or the installed
    ``mariadbd`` then ``mysqld`` on PATH/sbin, then the MySQL that scripts/ensure-mysql.sh
    installs; ``flavor`` keeps only servers of that flavor."""
    if binary is not None:
        if not _executable(binary):
            raise SandboxError(
                f"server binary '{binary}' is missing or not executable",
                hint="reinstall it, start with --basedir DIR of another build of the same "
                "version, or destroy and re-init the sandbox",
            )
        version = read_server_version(binary)
        return ServerInstall(
            binary=binary,
            basedir=binary.resolve().parent.parent,
            version=version,
            install_db=_system_install_db(version.flavor),
        )
    if basedir is not None:
        base = basedir.expanduser().resolve()
        if not base.is_dir():
            raise UsageError(
                f"basedir '{basedir}' is not a directory",
                hint="pass the install prefix of a build: a directory with bin/ or sbin/ "
                "holding mariadbd or mysqld, and share/",
            )
        found = next((base / c for c in _BINARY_CANDIDATES if _executable(base / c)), None)
        if found is None:
            raise UsageError(
                f"no mariadbd or mysqld under '{base}'",
                hint="looked in bin/, sbin/ and libexec/; pass the install prefix of the build "
                "(cmake --install . --prefix DIR)",
            )
        version = read_server_version(found)
        install_db = None
        if version.flavor == "mariadb":
            install_db = next(
                (base / c for c in _INSTALL_DB_CANDIDATES if _executable(base / c)), None
            )
        share = _first_dir(base, ("share/mariadb", "share/mysql", "share"), "english")
        return ServerInstall(
            binary=found,
            basedir=base,
            version=version,
            install_db=install_db,
            custom=True,
            lc_messages_dir=share,
            plugin_dir=_first_dir(
                base, ("lib/plugin", "lib/mysql/plugin", "lib/mariadb/plugin", "lib64/plugin")
            ),
            charsets_dir=_first_dir(
                base, ("share/charsets", "share/mysql/charsets", "share/mariadb/charsets")
            ),
        )
    names = {"mariadb": ("mariadbd",), "mysql": ("mysqld",)}.get(
        flavor or "", ("mariadbd", "mysqld")
    )
    for name in names:
        path = proc.which(name)
        if not path:
            continue
        on_path = find_server(binary=Path(path))
        # Debian's mariadb-server installs /usr/sbin/mysqld as a link to mariadbd.
        if flavor is None or on_path.flavor == flavor:
            return on_path
    if flavor in (None, "mysql"):
        prefix = myaccel_mysql_prefix()
        if _executable(prefix / "bin" / "mysqld"):
            return find_server(prefix)
    if flavor == "mysql":
        raise ToolMissing(
            f"no MySQL server found (no mysqld on PATH that is MySQL, nothing in {prefix})",
            hint="install MySQL 9.7 with: bash scripts/ensure-mysql.sh (or pass --basedir DIR)",
        )
    raise ToolMissing(
        "no MariaDB or MySQL server binary found (looked for mariadbd, then mysqld)",
        hint="install one with: apt-get install mariadb-server  (or pass --basedir DIR of a build)",
    )


def myaccel_mysql_prefix() -> Path:
    """Where scripts/ensure-mysql.sh installs MySQL 9.7 (``$MYACCEL_MYSQL_ROOT/mysql-9.7``,
    default ``/opt/myaccel/mysql-9.7``): an install prefix like any ``--basedir``."""
    return Path(os.environ.get("MYACCEL_MYSQL_ROOT") or "/opt/myaccel") / "mysql-9.7"


def _system_install_db(flavor: Flavor) -> Path | None:
    if flavor != "mariadb":
        return None
    for name in ("mariadb-install-db", "mysql_install_db"):
        path = proc.which(name)
        if path:
            return Path(path)
    return None


def init_argv(install: ServerInstall, option_file: Path) -> list[str]:
    """The command that creates the datadir named in ``option_file``.

    ``--defaults-file`` must come first for both tools; it also keeps /etc/mysql out.
    """
    v = install.version
    defaults = f"--defaults-file={option_file}"
    if v.flavor == "mariadb":
        if install.install_db is None:
            raise ToolMissing(
                f"mariadb-install-db not found for {v.label}",
                hint="install it with: apt-get install mariadb-server, or pass --basedir of a "
                "build that has scripts/mariadb-install-db",
            )
        argv = [str(install.install_db), defaults, f"--basedir={install.basedir}"]
        if (v.major, v.minor) >= (10, 4):
            argv.append("--auth-root-authentication-method=normal")
        if (v.major, v.minor) >= (10, 5):
            argv.append("--skip-test-db")
        return argv
    if (v.major, v.minor) < (5, 7):
        raise SandboxError(
            f"{v.label} is too old for a sandbox",
            hint="MySQL 5.7 or newer is needed (mysqld --initialize-insecure)",
        )
    return [str(install.binary), defaults, "--initialize-insecure"]


def server_argv(install: ServerInstall, option_file: Path) -> list[str]:
    return [str(install.binary), f"--defaults-file={option_file}"]


# ------------------------------------------------------------------ datadir markers


@dataclass(frozen=True)
class DatadirMarkers:
    flavor: Flavor | None
    version: str | None  # x.y.z when a marker file records it
    evidence: tuple[str, ...]


def detect_datadir(datadir: Path) -> DatadirMarkers:
    """Which server made a datadir, from the files it leaves behind."""
    evidence: list[str] = []
    flavor: Flavor | None = None
    version: str | None = None
    for marker in ("mariadb_upgrade_info", "mysql_upgrade_info"):
        p = datadir / marker
        if p.is_file():
            text = p.read_text(errors="replace").strip()
            evidence.append(f"{marker}={text}")
            m = re.match(r"(\d+)\.(\d+)\.(\d+)", text)
            if m:
                version = m.group(0)
            if "mariadb" in text.lower() or marker.startswith("mariadb"):
                flavor = "mariadb"
            elif m:
                flavor = "mysql"
            break
    if (datadir / "aria_log_control").exists():
        evidence.append("aria_log_control")
        flavor = "mariadb"
    if flavor is None and (datadir / "mysql.ibd").exists():
        evidence.append("mysql.ibd")
        flavor = "mysql"
    if flavor is None and (datadir / "auto.cnf").exists():
        evidence.append("auto.cnf")
        flavor = "mysql"
    return DatadirMarkers(flavor=flavor, version=version, evidence=tuple(evidence))


def check_compatible(
    name: str,
    recorded_flavor: str,
    recorded_version: str,
    install: ServerInstall,
    markers: DatadirMarkers | None = None,
) -> None:
    """Refuse to run a datadir with a server of another flavor or another major.minor."""
    v = install.version
    rec_mm = ".".join(str(x) for x in _version_tuple(recorded_version)[:2])
    hint = (
        f"start it with the server that created it (`myaccel sandbox start {name} "
        f"--basedir DIR` of a {flavor_label(recorded_flavor)} {rec_mm} build), or "
        f"`myaccel sandbox destroy {name}` and `myaccel sandbox init {name}`"
    )
    if recorded_flavor != v.flavor:
        raise SandboxError(
            f"sandbox '{name}' holds a {flavor_label(recorded_flavor)} datadir; "
            f"{install.binary} is {v.label}",
            hint=hint,
        )
    if rec_mm != v.major_minor:
        raise SandboxError(
            f"sandbox '{name}' holds a {flavor_label(recorded_flavor)} {rec_mm} datadir "
            f"(created by {recorded_version}); {install.binary} is {v.label}",
            hint=hint,
        )
    if markers is not None and markers.flavor is not None and markers.flavor != v.flavor:
        raise SandboxError(
            f"the datadir of sandbox '{name}' was made by {flavor_label(markers.flavor)} "
            f"({', '.join(markers.evidence)}); {install.binary} is {v.label}",
            hint=hint,
        )
    if markers is not None and markers.version is not None:
        mm = ".".join(markers.version.split(".")[:2])
        if mm != v.major_minor:
            raise SandboxError(
                f"the datadir of sandbox '{name}' was made by {flavor_label(v.flavor)} "
                f"{markers.version}; {install.binary} is {v.label}",
                hint=hint,
            )


# ------------------------------------------------------------------ option files

# Keys the sandbox sets itself: written last, and the user's copies are dropped.
OWNED_KEYS = frozenset(
    {
        "basedir",
        "datadir",
        "socket",
        "port",
        "bind_address",
        "pid_file",
        "log_error",
        "user",
        "secure_file_priv",
        "lc_messages_dir",
        "language",
        "plugin_dir",
        "character_sets_dir",
    }
)
# Keys that would reach outside the sandbox (other ports, clusters): dropped.
FORBIDDEN_KEYS = frozenset(
    {
        "extra_port",
        "admin_address",
        "admin_port",
        "mysqlx_port",
        "mysqlx_socket",
        "mysqlx_bind_address",
    }
)
FORBIDDEN_PREFIXES = ("wsrep_", "group_replication_")
# Paths the server writes: an absolute value outside the sandbox is dropped (relative
# values are inside the datadir).
PATH_KEYS = frozenset(
    {
        "innodb_data_home_dir",
        "innodb_log_group_home_dir",
        "innodb_undo_directory",
        "innodb_tmpdir",
        "innodb_temp_tablespaces_dir",
        "innodb_doublewrite_dir",
        "tmpdir",
        "log_bin",
        "log_bin_index",
        "relay_log",
        "relay_log_index",
        "general_log_file",
        "slow_query_log_file",
        "log_slow_query_file",
        "log_tc",
        "aria_log_dir_path",
        "server_audit_file_path",
    }
)
_PREFIXES = ("loose_", "skip_", "enable_", "disable_")


def canonical_key(key: str) -> str:
    """``--loose-skip-log-error`` and ``log-error`` both name ``log_error``."""
    k = normalize_key(key)
    if k.startswith("loose_"):
        k = k[len("loose_") :]
    for p in _PREFIXES[1:]:
        if k.startswith(p) and k[len(p) :] in OWNED_KEYS | PATH_KEYS | FORBIDDEN_KEYS:
            return k[len(p) :]
    return k


def _unquoted(value: str) -> str:
    v = value.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
        return v[1:-1]
    return v


def drop_reason(key: str, value: str | None, sandbox_dir: Path) -> str | None:
    """Why a user's option must not reach the server, or None."""
    k = canonical_key(key)
    if k in OWNED_KEYS:
        return "managed by the sandbox"
    if k in FORBIDDEN_KEYS or k.startswith(FORBIDDEN_PREFIXES):
        return "would reach outside the sandbox"
    if k in PATH_KEYS and value is not None:
        v = _unquoted(value)
        if os.path.isabs(v):
            p = Path(os.path.normpath(v))
            if p != sandbox_dir and sandbox_dir not in p.parents:
                return "absolute path outside the sandbox"
    return None


@dataclass(frozen=True)
class OptionLine:
    key: str
    value: str | None  # raw text after '=', None for a bare flag
    origin: str

    def render(self) -> str:
        return self.key if self.value is None else f"{self.key}={self.value}"


@dataclass(frozen=True)
class Override:
    key: str
    value: str | None
    reason: str
    origin: str

    def describe(self) -> str:
        shown = self.key if self.value is None else f"{self.key}={self.value}"
        return f"{shown} ({self.reason})"


def server_groups(flavor: Flavor, major_minor: str) -> tuple[str, ...]:
    """Option-file groups the server reads, as in the MySQL/MariaDB documentation."""
    groups = ["mysqld", "server", f"mysqld-{major_minor}"]
    if flavor == "mariadb":
        groups += [
            "mariadb",
            f"mariadb-{major_minor}",
            "mariadbd",
            f"mariadbd-{major_minor}",
            "client-server",
        ]
    return tuple(groups)


def read_server_options(path: Path, groups: Sequence[str]) -> list[OptionLine]:
    """The server options of an option file, in file order (duplicates kept: the server
    applies them in order, last wins, and some options such as plugin-load-add add up).
    Follows ``!include`` and ``!includedir`` (through the shared option-file reader)."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError as exc:
        raise UsageError(
            f"config file '{path}' does not exist",
            hint="pass an existing option file (my.cnf) with a [mysqld] section",
        ) from exc
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UsageError(
            f"cannot read config file '{path}': {reason}",
            hint="pass a readable option file (my.cnf) with a [mysqld] section",
        ) from exc
    wanted = {g.lower() for g in groups}
    return [
        OptionLine(o.key, o.value, o.origin)
        for o in iter_option_text(text, origin=str(path))
        if o.group in wanted
    ]


def parse_sets(items: Sequence[str]) -> dict[str, str]:
    """``--set key=value`` items (later ones win); malformed items are a UsageError."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not _SET_KEY_RE.match(key):
            raise UsageError(
                f"malformed --set '{item}': expected KEY=VALUE",
                hint="for example --set innodb_buffer_pool_size=1G (repeat --set for more keys)",
            )
        if any(c in value for c in "\n\r\0"):
            raise UsageError(
                f"malformed --set '{key}=...': the value has a line break",
                hint="values must fit on one line",
            )
        out[key] = value.strip()
    return out


def check_sets(sets: Mapping[str, str], sandbox_dir: Path) -> None:
    hints = {
        "managed by the sandbox": "the sandbox sets datadir, socket, port, bind-address, "
        "pid-file, log-error, basedir, user and the plugin/message dirs itself",
        "would reach outside the sandbox": "extra ports, the X protocol and cluster "
        "replication (wsrep_*, group_replication_*) are not allowed in a sandbox",
        "absolute path outside the sandbox": "use a relative path (inside the datadir) or "
        f"one under {sandbox_dir}",
    }
    for key, value in sets.items():
        reason = drop_reason(key, value, sandbox_dir)
        if reason is not None:
            raise UsageError(f"--set {key}: {reason}", hint=hints.get(reason, ""))


def _quote_value(value: str) -> str:
    """A value as option-file text: backslashes are escapes there, so double them, and
    quote values with spaces or '#'."""
    v = value.replace("\\", "\\\\")
    if v == "" or any(c in v for c in " \t#'\""):
        return '"' + v.replace('"', '\\"') + '"'
    return v


@dataclass(frozen=True)
class ComposedOptions:
    text: str
    overridden: tuple[Override, ...]
    user_keys: tuple[str, ...]


def compose_option_file(
    *,
    sandbox_name: str,
    sandbox_dir: Path,
    client: Sequence[tuple[str, str]],
    base: Sequence[tuple[str, str | None]],
    owned: Sequence[tuple[str, str | None]],
    user_options: Sequence[OptionLine] = (),
    config_file: Path | None = None,
    sets: Mapping[str, str] | None = None,
) -> ComposedOptions:
    """Base settings, then the user's file, then ``--set``, then the sandbox-owned keys.

    Everything goes into one ``[mysqld]`` group in that order, so the server's "last one
    wins" rule gives exactly that precedence."""
    overridden: list[Override] = []
    lines = [
        f"# Generated by myaccel for sandbox '{sandbox_name}'. Rewritten at every start: do",
        f"# not edit. Other settings: myaccel sandbox start {sandbox_name} --config FILE "
        "--set KEY=VALUE",
        "# Admin client: mariadb --defaults-file=<this file>  (or mysql --defaults-file=...)",
        "",
        "[client]",
    ]
    lines += [f"{k}={v}" for k, v in client]
    lines += ["", "[mysqld]", "# -- base settings"]
    lines += [k if v is None else f"{k}={v}" for k, v in base]
    user_keys: list[str] = []
    if config_file is not None:
        lines.append(f"# -- from {config_file}")
        for opt in user_options:
            reason = drop_reason(opt.key, opt.value, sandbox_dir)
            if reason is not None:
                overridden.append(Override(opt.key, opt.value, reason, opt.origin))
                lines.append(f"# ignored ({reason}): {opt.render()}")
                continue
            user_keys.append(normalize_key(opt.key))
            lines.append(opt.render())
    if sets:
        lines.append("# -- from --set")
        for k, v in sets.items():
            user_keys.append(normalize_key(k))
            lines.append(f"{k}={_quote_value(v)}")
    lines.append("# -- owned by the sandbox: last, so they always win")
    lines += [k if v is None else f"{k}={v}" for k, v in owned]
    return ComposedOptions("\n".join(lines) + "\n", tuple(overridden), tuple(user_keys))


# ------------------------------------------------------------------ state


class ActiveConfig(BaseModel):
    """The configuration the server runs (or last ran) with; empty = the base config."""

    model_config = ConfigDict(extra="forbid")

    config_file: str | None = None
    sets: dict[str, str] = {}
    basedir: str | None = None  # another build of the same version (A/B of builds)
    binary: str | None = None
    version: str | None = None  # version string of the binary that runs it
    overridden: list[str] = []
    started_at: str | None = None
    wrapper: list[str] = []  # argv prefix the server runs under (valgrind), [] = none

    @property
    def is_base(self) -> bool:
        return self.config_file is None and not self.sets and self.basedir is None

    def describe(self) -> str:
        if self.is_base:
            return "base"
        parts = []
        if self.basedir:
            parts.append(f"basedir {self.basedir}")
        if self.config_file:
            parts.append(self.config_file)
        parts += [f"{k}={v}" for k, v in self.sets.items()]
        if self.wrapper:
            parts.append(f"under {Path(self.wrapper[0]).name}")
        return ", ".join(parts)


class SandboxState(BaseModel):
    """``state.json``: everything needed to run the sandbox again."""

    model_config = ConfigDict(extra="forbid")

    schema_version: str = SANDBOX_SCHEMA
    name: str
    flavor: Flavor
    version: str  # x.y.z of the server that created the datadir
    version_string: str
    binary: str
    basedir: str
    custom_basedir: bool = False
    install_db: str | None = None
    port: int
    socket: str
    socket_fallback: bool = False
    datadir: str
    created_at: str
    bench_user: str = BENCH_USER
    bench_password: str
    bench_database: str = BENCH_DATABASE
    active_config: ActiveConfig = ActiveConfig()


@dataclass(frozen=True)
class SandboxStatus:
    name: str
    state: RunState
    pid: int | None
    port: int
    socket: str
    version: str
    datadir: str
    active_config: ActiveConfig
    flavor: str = ""
    binary: str = ""
    error_log: str = ""
    option_file: str = ""

    @property
    def running(self) -> bool:
        return self.state == "running"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state,
            "pid": self.pid,
            "flavor": self.flavor,
            "version": self.version,
            "port": self.port,
            "socket": self.socket,
            "datadir": self.datadir,
            "binary": self.binary,
            "error_log": self.error_log,
            "option_file": self.option_file,
            "active_config": self.active_config.model_dump(),
        }


@dataclass(frozen=True)
class StartResult:
    already_running: bool
    pid: int
    port: int
    socket: str
    duration_s: float
    overridden: tuple[Override, ...] = ()
    cleaned: tuple[str, ...] = ()  # stale files of a crashed server we removed
    message: str = ""
    config_has_server_options: bool = True


@dataclass(frozen=True)
class StopResult:
    was_running: bool
    killed: bool
    message: str


@dataclass(frozen=True)
class SnapshotInfo:
    name: str
    path: str
    size_bytes: int
    created_at: str
    version: str = ""
    active_config: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": self.path,
            "size_bytes": self.size_bytes,
            "created_at": self.created_at,
            "version": self.version,
            "active_config": self.active_config,
        }


# ------------------------------------------------------------------ processes

# Servers we spawned from this process: kept so they can be reaped (a dead child would
# otherwise stay a zombie and look alive) and so Popen does not warn at exit.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def pid_alive(pid: int) -> bool:
    child = _CHILDREN.get(pid)
    if child is not None and child.poll() is not None:
        _CHILDREN.pop(pid, None)
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    # state is the field after the parenthesised command name
    return stat.rsplit(")", 1)[-1].split()[:1] != ["Z"]


def _cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _same_path(a: str, b: Path) -> bool:
    """Whether two spellings name the same file (symlinked homes and sandboxes dirs)."""
    if a == str(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them is gone: compare what they resolve to
        return os.path.realpath(a) == os.path.realpath(b)


def _uses_option_file(args: Sequence[str], option_file: Path) -> bool:
    prefix = "--defaults-file="
    return any(a.startswith(prefix) and _same_path(a[len(prefix) :], option_file) for a in args)


def _runs_option_file(pid: int, option_file: Path) -> bool:
    args = _cmdline(pid)
    if args is None:  # no /proc: trust the pid
        return True
    return _uses_option_file(args, option_file)


def _find_server_pids(option_file: Path) -> list[int]:
    pids = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        args = _cmdline(int(entry))
        if (
            args
            and "--bootstrap" not in args
            and _uses_option_file(args, option_file)
            and pid_alive(int(entry))
        ):
            pids.append(int(entry))
    return pids


def _server_env() -> dict[str, str]:
    env = dict(os.environ)
    for var in ("MYSQL_HOME", "MARIADB_HOME", "MYSQL_UNIX_PORT", "MYSQL_TCP_PORT", "MYSQL_PWD"):
        env.pop(var, None)
    return env


def _spawn_detached(argv: Sequence[str], log_path: Path, cwd: Path) -> subprocess.Popen[bytes]:
    """Start a long-running server in its own session with output to its log.

    proc.run is for commands that finish; a daemon needs Popen, so it lives here."""
    log.debug("spawn: %s", " ".join(argv))
    with open(log_path, "ab") as log_fh:
        try:
            child = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log_fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
                cwd=cwd,
                env=_server_env(),
            )
        except (FileNotFoundError, PermissionError) as exc:
            raise ToolMissing(
                f"cannot execute '{argv[0]}': {exc.strerror}",
                hint="check the server binary (reinstall it, or pass --basedir DIR)",
            ) from exc
    _CHILDREN[child.pid] = child
    return child


def _read_pid(pid_file: Path) -> int | None:
    try:
        text = pid_file.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _tail(path: Path, lines: int = LOG_TAIL_LINES, since: int = 0) -> list[str]:
    try:
        with open(path, "rb") as fh:
            fh.seek(since)
            data = fh.read()
    except OSError:
        return []
    return data.decode(errors="replace").rstrip().splitlines()[-lines:]


def _dir_size_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += (Path(root) / f).lstat().st_size
    return total


@contextlib.contextmanager
def _file_lock(path: Path, what: str, timeout_s: float = 300.0) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError as exc:
                if time.monotonic() > deadline:
                    raise SandboxError(
                        f"another myaccel command is working on {what}",
                        hint="wait for it to finish, then retry",
                    ) from exc
                time.sleep(0.1)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _refuse_system_dirs(path: Path) -> None:
    resolved = path.resolve()
    for d in SYSTEM_DIRS:
        if resolved == d or d in resolved.parents:
            raise SandboxError(
                f"refusing to put a sandbox under {d} (the system server's directory)",
                hint="set MYACCEL_HOME to a directory of your own",
            )


# ------------------------------------------------------------------ the sandbox


def resolve_home(home: Path | str | None = None) -> Path:
    """An explicit home (absolute: the server runs with cwd in the sandbox), else
    ``$MYACCEL_HOME``."""
    return Path(home).expanduser().resolve() if home is not None else myaccel_home()


def sandboxes_root(home: Path | None = None) -> Path:
    # resolved: a symlinked sandboxes dir must give the paths the server was started with
    return (resolve_home(home) / "sandboxes").resolve()


class Sandbox:
    """One private server instance. Get one with ``Sandbox.load(name)`` or
    ``Sandbox.init(name)``; every method re-reads ``state.json`` first."""

    def __init__(self, home: Path, state: SandboxState) -> None:
        self.home = resolve_home(home)
        self.state = state

    # -------------------------------------------------------------- paths and properties

    @property
    def name(self) -> str:
        return self.state.name

    @property
    def dir(self) -> Path:
        return sandboxes_root(self.home) / self.name

    @property
    def state_file(self) -> Path:
        return self.dir / "state.json"

    @property
    def datadir(self) -> Path:
        return Path(self.state.datadir)

    @property
    def option_file(self) -> Path:
        return self.dir / "my.cnf"

    @property
    def error_log(self) -> Path:
        return self.dir / "mysqld.err"

    @property
    def pid_file(self) -> Path:
        return self.dir / "mysqld.pid"

    @property
    def socket(self) -> Path:
        return Path(self.state.socket)

    @property
    def port(self) -> int:
        return self.state.port

    @property
    def snapshots_dir(self) -> Path:
        return self.dir / "snapshots"

    @property
    def flavor(self) -> Flavor:
        return self.state.flavor

    @property
    def version(self) -> str:
        return self.state.version

    @property
    def binary_path(self) -> Path:
        """The binary of the active configuration (another build after ``--basedir``)."""
        return Path(self.state.active_config.binary or self.state.binary)

    @property
    def pid(self) -> int | None:
        """The server's pid while it runs, else None."""
        state, pid = self._probe()
        return pid if state == "running" else None

    def __repr__(self) -> str:
        return f"Sandbox({self.name!r}, port={self.port}, home={str(self.home)!r})"

    # -------------------------------------------------------------- loading

    @staticmethod
    def _lock_path(home: Path, name: str) -> Path:
        return sandboxes_root(home) / ".locks" / f"{name}.lock"

    @classmethod
    def exists(cls, name: str, *, home: Path | None = None) -> bool:
        return (sandboxes_root(home) / name).exists()

    @classmethod
    def _read_state(cls, name: str, home: Path) -> SandboxState:
        path = sandboxes_root(home) / name / "state.json"
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError as exc:
            if path.parent.exists():
                raise SandboxError(
                    f"sandbox '{name}' is damaged: {path} is missing",
                    hint=f"remove it with `myaccel sandbox destroy {name}`",
                ) from exc
            raise SandboxError(
                f"no sandbox named '{name}'",
                hint=f"create it with `myaccel sandbox init {name}` (see `myaccel sandbox list`)",
            ) from exc
        except (OSError, ValueError) as exc:
            raise SandboxError(
                f"sandbox '{name}' is damaged: cannot read {path}",
                hint=f"remove it with `myaccel sandbox destroy {name}`",
            ) from exc
        schema = data.get("schema_version") if isinstance(data, dict) else None
        if schema != SANDBOX_SCHEMA:
            raise SandboxError(
                f"sandbox '{name}' has state schema {schema!r}; this myaccel reads "
                f"{SANDBOX_SCHEMA!r}",
                hint=f"use the myaccel that created it, or `myaccel sandbox destroy {name}`",
            )
        try:
            return SandboxState.model_validate(data)
        except ValidationError as exc:
            raise SandboxError(
                f"sandbox '{name}' is damaged: {path} is invalid "
                f"({exc.errors()[0].get('loc')}: {exc.errors()[0].get('msg')})",
                hint=f"remove it with `myaccel sandbox destroy {name}`",
            ) from exc

    @classmethod
    def load(cls, name: str, *, home: Path | None = None) -> Sandbox:
        validate_name(name)
        h = resolve_home(home)
        return cls(h, cls._read_state(name, h))

    @classmethod
    def list_all(cls, *, home: Path | None = None) -> list[Sandbox]:
        h = resolve_home(home)
        root = sandboxes_root(h)
        out: list[Sandbox] = []
        if not root.is_dir():
            return out
        for entry in sorted(root.iterdir()):
            if entry.name.startswith(".") or not entry.is_dir():
                continue
            try:
                out.append(cls(h, cls._read_state(entry.name, h)))
            except MyaccelError as exc:
                log.warning("skipping sandbox %s: %s", entry.name, exc)
        return out

    def _reload(self) -> None:
        self.state = self._read_state(self.name, self.home)

    def _save_state(self) -> None:
        tmp = self.state_file.with_suffix(".json.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(self.state.model_dump_json(indent=2) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.state_file)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with _file_lock(self._lock_path(self.home, self.name), f"sandbox '{self.name}'"):
            self._reload()
            yield

    # -------------------------------------------------------------- init

    @classmethod
    def init(
        cls,
        name: str = DEFAULT_NAME,
        basedir: Path | str | None = None,
        port: int | None = None,
        *,
        home: Path | None = None,
        start: bool = True,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        progress: Progress | None = None,
        flavor: Flavor | None = None,
    ) -> Sandbox:
        """Create a datadir, start the server, create ``sbtest`` and the benchmark user.

        The server is left running unless ``start`` is False. On failure nothing is left
        behind."""
        say = progress or _noop
        validate_name(name)
        if port is not None:
            validate_port(port)
        h = resolve_home(home)
        root = sandboxes_root(h)
        sdir = root / name
        _refuse_system_dirs(root)
        if sdir.exists():
            raise SandboxError(
                f"sandbox '{name}' already exists",
                hint=f"use it (`myaccel sandbox start {name}`), pick another name, or remove it "
                f"with `myaccel sandbox destroy {name}`",
            )
        if port is not None:  # fail before any work; checked again under the lock
            _check_requested_port(port, cls.list_all(home=h))
        install = find_server(Path(basedir) if basedir is not None else None, flavor=flavor)
        if flavor is not None and install.flavor != flavor:
            raise UsageError(
                f"--flavor {flavor} but {install.binary} is {install.version.label}",
                hint="pass --basedir of a build of that flavor, or leave out --flavor",
            )
        init_argv(install, Path("/dev/null"))  # fail early when no init tool exists
        say(f"using {install.version.label} at {install.binary}")
        root.mkdir(parents=True, exist_ok=True)
        with _file_lock(root / ".locks" / "ports.lock", "sandbox ports"):
            existing = cls.list_all(home=h)
            if port is not None:
                _check_requested_port(port, existing)
                chosen = port
            else:
                chosen = _pick_port({sb.port for sb in existing}, seed=f"{h}/{name}")
            if sdir.exists():
                raise SandboxError(f"sandbox '{name}' already exists", hint="pick another name")
            _ensure_private_dir(sdir)
            try:
                sb = cls._create(
                    name=name,
                    home=h,
                    sdir=sdir,
                    install=install,
                    port=chosen,
                    timeout_s=timeout_s,
                    say=say,
                )
            except BaseException:
                _remove_half_made(sdir, name, h)
                raise
        if not start:
            say(sb.stop())
        return sb

    @classmethod
    def _create(
        cls,
        *,
        name: str,
        home: Path,
        sdir: Path,
        install: ServerInstall,
        port: int,
        timeout_s: float,
        say: Progress,
    ) -> Sandbox:
        sock, fallback = socket_path_for(sdir)
        if fallback:
            _ensure_private_dir(sock.parent)
            say(f"socket path under {sdir} is too long; using {sock}")
        state = SandboxState(
            name=name,
            flavor=install.flavor,
            version=install.version.number,
            version_string=install.version.raw,
            binary=str(install.binary),
            basedir=str(install.basedir),
            custom_basedir=install.custom,
            install_db=str(install.install_db) if install.install_db else None,
            port=port,
            socket=str(sock),
            socket_fallback=fallback,
            datadir=str(sdir / "data"),
            created_at=_now_iso(),
            bench_password=secrets.token_hex(12),
        )
        sb = cls(home, state)
        (sdir / "tmp").mkdir(mode=0o700, exist_ok=True)
        (sdir / "files").mkdir(mode=0o700, exist_ok=True)
        sb.option_file.write_text(sb._compose(install).text)
        argv = init_argv(install, sb.option_file)
        tool = Path(argv[0]).name
        say(f"initializing {sb.datadir} with {tool}")
        done = proc.run(argv, timeout_s=INIT_TIMEOUT_S, cwd=sdir)
        with open(sb.error_log, "a") as fh:
            fh.write(f"--- {_now_iso()} myaccel: {' '.join(argv)}\n{done.stdout}{done.stderr}\n")
        if not done.ok or not (sb.datadir / "mysql").is_dir():
            tail = (done.stderr + done.stdout).strip().splitlines()[-LOG_TAIL_LINES:]
            err = next((ln for ln in reversed(tail) if "ERROR" in ln), tail[-1] if tail else "")
            raise SandboxError(
                f"{tool} failed (exit code {done.returncode}): {err.strip()[:200]}",
                hint="last lines of its output:\n  " + "\n  ".join(tail),
            )
        sb._save_state()
        say("starting the server")
        sb._start_unlocked(install=install, timeout_s=timeout_s, say=say)
        say(f"creating database {BENCH_DATABASE} and user {BENCH_USER}")
        sb._setup_users()
        say(f"sandbox '{name}' ready: port {port}, socket {sock}")
        return sb

    def _setup_users(self) -> None:
        conn = connect(self.connect_params())
        try:
            pw = self.state.bench_password
            user, db = self.state.bench_user, self.state.bench_database
            with conn.cursor() as cur:
                # Admin is root@localhost over the 0700-protected socket only.
                cur.execute(
                    "SELECT user, host FROM mysql.user WHERE (user = 'root' AND host <> "
                    "'localhost') OR user = ''"
                )
                for u, hst in cur.fetchall():
                    cur.execute("DROP USER %s@%s", (u, hst))
                cur.execute("DROP DATABASE IF EXISTS test")
                cur.execute(f"CREATE DATABASE IF NOT EXISTS `{db}`")
                for host in ("localhost", "127.0.0.1"):
                    cur.execute(
                        f"CREATE USER IF NOT EXISTS '{user}'@'{host}' IDENTIFIED BY %s", (pw,)
                    )
                    cur.execute(f"GRANT ALL PRIVILEGES ON `{db}`.* TO '{user}'@'{host}'")
                    # SHOW ENGINE INNODB STATUS / processlist (PROCESS), FLUSH (RELOAD),
                    # SHOW BINARY LOG STATUS (REPLICATION CLIENT); SHOW GLOBAL STATUS needs none.
                    cur.execute(
                        f"GRANT PROCESS, RELOAD, REPLICATION CLIENT ON *.* TO '{user}'@'{host}'"
                    )
                    cur.execute(f"GRANT SELECT ON performance_schema.* TO '{user}'@'{host}'")
                cur.execute("FLUSH PRIVILEGES")
        finally:
            conn.close()

    # -------------------------------------------------------------- option file

    def _owned_options(self, install: ServerInstall) -> list[tuple[str, str | None]]:
        owned: list[tuple[str, str | None]] = []
        if os.geteuid() == 0:
            owned.append(("user", "root"))  # mysqld/mariadbd refuse to run as root otherwise
        owned += [
            ("basedir", str(install.basedir)),
            ("datadir", str(self.datadir)),
            ("socket", str(self.socket)),
            ("port", str(self.port)),
            ("bind-address", "127.0.0.1"),
            ("pid-file", str(self.pid_file)),
            ("log-error", str(self.error_log)),
            ("secure-file-priv", str(self.dir / "files")),
        ]
        if install.custom:
            if install.lc_messages_dir:
                owned.append(("lc-messages-dir", str(install.lc_messages_dir)))
            if install.plugin_dir:
                owned.append(("plugin-dir", str(install.plugin_dir)))
            if install.charsets_dir:
                owned.append(("character-sets-dir", str(install.charsets_dir)))
        return owned

    def _base_options(self, install: ServerInstall) -> list[tuple[str, str | None]]:
        base: list[tuple[str, str | None]] = [
            # no DNS lookups per connection (and no timeouts in offline containers)
            ("skip-name-resolve", None),
            ("tmpdir", str(self.dir / "tmp")),
        ]
        if install.flavor == "mysql":
            base.append(("loose-mysqlx", "OFF"))  # X plugin would take port 33060
        return base

    def _compose(
        self,
        install: ServerInstall,
        config: Path | None = None,
        sets: Mapping[str, str] | None = None,
    ) -> ComposedOptions:
        user_options: list[OptionLine] = []
        if config is not None:
            user_options = read_server_options(
                config, server_groups(install.flavor, install.version.major_minor)
            )
        return compose_option_file(
            sandbox_name=self.name,
            sandbox_dir=self.dir,
            client=[("socket", str(self.socket)), ("port", str(self.port)), ("user", ADMIN_USER)],
            base=self._base_options(install),
            owned=self._owned_options(install),
            user_options=user_options,
            config_file=config,
            sets=sets,
        )

    # -------------------------------------------------------------- status

    def _probe(self) -> tuple[RunState, int | None]:
        pid = _read_pid(self.pid_file)
        if pid is not None and pid_alive(pid) and _runs_option_file(pid, self.option_file):
            return "running", pid
        found = _find_server_pids(self.option_file)
        if found:
            return "running", found[0]
        if pid is not None or self.pid_file.exists() or self.socket.exists():
            return "crashed", pid
        return "stopped", None

    def status(self) -> SandboxStatus:
        with contextlib.suppress(SandboxError):
            self._reload()
        state, pid = self._probe()
        ac = self.state.active_config
        version = self.state.version
        if ac.version:
            with contextlib.suppress(SandboxError):
                version = parse_version_output(ac.version).number
        return SandboxStatus(
            name=self.name,
            state=state,
            pid=pid,
            port=self.port,
            socket=str(self.socket),
            version=version,
            datadir=str(self.datadir),
            active_config=ac,
            flavor=self.flavor,
            binary=str(self.binary_path),
            error_log=str(self.error_log),
            option_file=str(self.option_file),
        )

    def is_running(self) -> bool:
        return self._probe()[0] == "running"

    def _clean_stale(self) -> list[str]:
        removed = []
        for p in (self.pid_file, self.socket, Path(str(self.socket) + ".lock")):
            if p.exists() or p.is_symlink():
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
                removed.append(str(p))
        return removed

    # -------------------------------------------------------------- start

    def _install_for(self, basedir: str | None) -> ServerInstall:
        if basedir is not None:
            return find_server(Path(basedir))
        if self.state.custom_basedir:
            return find_server(Path(self.state.basedir))
        install = find_server(binary=Path(self.state.binary))
        if self.state.install_db:
            install = ServerInstall(
                binary=install.binary,
                basedir=Path(self.state.basedir),
                version=install.version,
                install_db=Path(self.state.install_db),
            )
        return install

    def start(
        self,
        config: Path | str | None = None,
        sets: Mapping[str, str] | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        *,
        basedir: Path | str | None = None,
        progress: Progress | None = None,
        wrapper: Sequence[str] = (),
    ) -> StartResult:
        """Start the server with the base config plus ``config`` and ``sets`` (None = base).

        ``wrapper`` is an argv prefix the server runs under, e.g. ``["valgrind",
        "--tool=callgrind"]`` (myaccel.profile.simulate); the wait for readiness is then at
        least ``WRAPPED_TIMEOUT_S``. ``restart`` and snapshot resumes start without it.

        Idempotent: a running server is left alone (``already_running``) unless another
        configuration or a wrapper is asked for, which is an error (use ``restart``, or
        ``stop`` first)."""
        cfg, set_map, bdir = self._validate_request(config, sets, basedir)
        with self._locked():
            state, pid = self._probe()
            if state == "running" and pid is not None:
                ac = self.state.active_config
                if wrapper and list(wrapper) != ac.wrapper:
                    raise SandboxError(
                        f"sandbox '{self.name}' is already running (pid {pid}); cannot start "
                        f"it under {Path(wrapper[0]).name}",
                        hint=f"stop it first (`myaccel sandbox stop {self.name}`)",
                    )
                wanted = (cfg, set_map, bdir)
                if (config is not None or sets or basedir is not None) and wanted != (
                    ac.config_file,
                    ac.sets,
                    ac.basedir,
                ):
                    raise SandboxError(
                        f"sandbox '{self.name}' is already running with config: {ac.describe()}",
                        hint=f"use `myaccel sandbox restart {self.name}` with the new options",
                    )
                return StartResult(
                    already_running=True,
                    pid=pid,
                    port=self.port,
                    socket=str(self.socket),
                    duration_s=0.0,
                    message=f"sandbox '{self.name}' is already running (pid {pid}, "
                    f"config: {ac.describe()})",
                )
            return self._start_unlocked(
                config=cfg,
                sets=set_map,
                basedir=bdir,
                timeout_s=timeout_s,
                say=progress or _noop,
                wrapper=wrapper,
            )

    def _validate_request(
        self,
        config: Path | str | None,
        sets: Mapping[str, str] | None,
        basedir: Path | str | None,
    ) -> tuple[str | None, dict[str, str], str | None]:
        cfg: str | None = None
        if config is not None:
            p = Path(config).expanduser().resolve()
            if not p.exists():
                raise UsageError(
                    f"config file '{config}' does not exist",
                    hint="pass an existing option file (my.cnf) with a [mysqld] section",
                )
            if not p.is_file() or not os.access(p, os.R_OK):
                raise UsageError(
                    f"config file '{config}' is not a readable file",
                    hint="pass a readable option file (my.cnf) with a [mysqld] section",
                )
            cfg = str(p)
        set_map = dict(sets or {})
        for k, v in set_map.items():
            parse_sets([f"{k}={v}"])
        check_sets(set_map, self.dir)
        bdir = str(Path(basedir).expanduser().resolve()) if basedir is not None else None
        return cfg, set_map, bdir

    def _start_unlocked(
        self,
        *,
        config: str | None = None,
        sets: Mapping[str, str] | None = None,
        basedir: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        say: Progress = _noop,
        install: ServerInstall | None = None,
        wrapper: Sequence[str] = (),
    ) -> StartResult:
        t0 = time.monotonic()
        if wrapper:
            timeout_s = max(timeout_s, WRAPPED_TIMEOUT_S)
        self._recover_interrupted_restore()
        if not self.datadir.is_dir():
            raise SandboxError(
                f"the datadir of sandbox '{self.name}' is missing: {self.datadir}",
                hint=f"restore a snapshot (`myaccel sandbox snapshot list {self.name}`) or "
                f"`myaccel sandbox destroy {self.name}` and init it again",
            )
        if install is None:
            install = self._install_for(basedir)
            check_compatible(
                self.name,
                self.state.flavor,
                self.state.version,
                install,
                detect_datadir(self.datadir),
            )
        composed = self._compose(install, Path(config) if config else None, sets)
        state, old_pid = self._probe()
        cleaned: list[str] = []
        if state == "crashed":
            cleaned = self._clean_stale()
            say(f"cleaned up after a crashed server (pid {old_pid}): {', '.join(cleaned)}")
        if port_in_use(self.port):
            raise SandboxError(
                f"port {self.port} on 127.0.0.1 is in use by another program",
                hint=f"find it with `ss -ltnp 'sport = :{self.port}'` and stop it, or "
                f"`myaccel sandbox destroy {self.name}` and init again with another --port",
            )
        if self.socket.exists():
            raise SandboxError(
                f"socket {self.socket} exists but no server of sandbox '{self.name}' runs",
                hint="another server may use it; stop that server or remove the file",
            )
        previous_text = self.option_file.read_text() if self.option_file.exists() else None
        self.option_file.write_text(composed.text)
        log_offset = self.error_log.stat().st_size if self.error_log.exists() else 0
        argv = [*wrapper, *server_argv(install, self.option_file)]
        with open(self.error_log, "a") as fh:
            fh.write(f"--- {_now_iso()} myaccel: {' '.join(argv)}\n")
        say(f"starting {install.version.label} on port {self.port}")
        child = _spawn_detached(argv, self.error_log, self.dir)
        try:
            self._wait_ready(child, timeout_s, log_offset)
        except BaseException:
            if previous_text is not None:
                self.option_file.write_text(previous_text)
            raise
        pid = _read_pid(self.pid_file) or child.pid
        self.state.active_config = ActiveConfig(
            config_file=config,
            sets=dict(sets or {}),
            basedir=basedir,
            binary=str(install.binary) if basedir is not None else None,
            version=install.version.raw,
            overridden=[o.key for o in composed.overridden],
            started_at=_now_iso(),
            wrapper=list(wrapper),
        )
        self._save_state()
        duration = time.monotonic() - t0
        return StartResult(
            already_running=False,
            pid=pid,
            port=self.port,
            socket=str(self.socket),
            duration_s=duration,
            overridden=composed.overridden,
            cleaned=tuple(cleaned),
            message=f"started sandbox '{self.name}' (pid {pid}, port {self.port}) "
            f"in {duration:.1f} s",
            config_has_server_options=config is None
            or bool(composed.user_keys)
            or bool(composed.overridden),
        )

    def _wait_ready(
        self, child: subprocess.Popen[bytes], timeout_s: float, log_offset: int
    ) -> None:
        params = ConnectParams(
            host=None,
            port=self.port,
            socket=str(self.socket),
            user=ADMIN_USER,
            password=None,
            connect_timeout_s=2.0,
        )
        deadline = time.monotonic() + timeout_s
        delay = 0.05
        while True:
            code = child.poll()
            if code is not None:
                _CHILDREN.pop(child.pid, None)
                raise self._start_failure(f"the server exited with code {code}", log_offset)
            if self.socket.exists():
                try:
                    conn = connect(params)
                except ConnectionFailed:
                    pass
                else:
                    conn.close()
                    return
            if time.monotonic() > deadline:
                self._terminate(child.pid, grace_s=10.0)
                raise self._start_failure(
                    f"the server was not ready after {timeout_s:.0f} s (stopped it)",
                    log_offset,
                    extra_hint="if it needs longer (crash recovery, a huge buffer pool), "
                    "raise --timeout",
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)

    def _start_failure(self, what: str, log_offset: int, extra_hint: str = "") -> SandboxError:
        tail = _tail(self.error_log, since=log_offset)
        # the first error is the cause; the last one is usually just "Aborting"
        errors = [ln for ln in tail if "[ERROR]" in ln] or [ln for ln in tail if "ERROR" in ln]
        err = errors[0] if errors else ""
        err = re.sub(r"^\S+\s+\S+\s+\d+\s+", "", err.strip())  # drop the timestamp prefix
        msg = f"sandbox '{self.name}' failed to start: {what}"
        if err:
            msg += f": {err[:200]}"
        hint = f"last lines of {self.error_log}:\n  " + "\n  ".join(tail or ["(empty)"])
        hint += "\nfix the option named there (--config/--set), or run `myaccel sandbox start "
        hint += f"{self.name}` without them to get the base config back"
        if extra_hint:
            hint += f"; {extra_hint}"
        return SandboxError(msg, hint=hint, context={"error_log": str(self.error_log)})

    # -------------------------------------------------------------- stop

    def _terminate(self, pid: int, grace_s: float) -> bool:
        """SIGTERM (a clean shutdown for mysqld/mariadbd), then SIGKILL. True if killed."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if self._wait_gone(pid, grace_s):
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        self._wait_gone(pid, 10.0)
        return True

    @staticmethod
    def _wait_gone(pid: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while pid_alive(pid):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def stop(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
        """Shut the server down cleanly; kill -9 only after ``timeout_s``. The message
        says what happened (including a kill)."""
        with self._locked():
            return self._stop_unlocked(timeout_s).message

    def stop_result(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> StopResult:
        with self._locked():
            return self._stop_unlocked(timeout_s)

    def _stop_unlocked(self, timeout_s: float) -> StopResult:
        state, pid = self._probe()
        if state == "crashed":
            stale = ", ".join(Path(r).name for r in self._clean_stale())
            who = f"the server (pid {pid})" if pid is not None else "the server"
            return StopResult(
                False,
                False,
                f"sandbox '{self.name}' was not running: {who} had crashed; removed stale "
                f"{stale or 'files'}",
            )
        if state == "stopped" or pid is None:
            return StopResult(False, False, f"sandbox '{self.name}' is not running")
        t0 = time.monotonic()
        killed = self._terminate(pid, grace_s=timeout_s)
        removed = self._clean_stale() if killed else []
        if killed:
            msg = (
                f"sandbox '{self.name}' did not shut down within {timeout_s:.0f} s; killed pid "
                f"{pid} with SIGKILL (kill -9). InnoDB will run crash recovery at the next start"
            )
            if removed:
                msg += f"; removed stale {', '.join(Path(r).name for r in removed)}"
        else:
            msg = f"stopped sandbox '{self.name}' (pid {pid}) in {time.monotonic() - t0:.1f} s"
        return StopResult(True, killed, msg)

    def restart(
        self,
        config: Path | str | None = None,
        sets: Mapping[str, str] | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        *,
        basedir: Path | str | None = None,
        reset: bool = False,
        progress: Progress | None = None,
    ) -> StartResult:
        """Stop and start. Keeps the active config, basedir and --set values unless new ones
        are given (each given one replaces its part); ``reset`` returns to the base config."""
        say = progress or _noop
        cfg, set_map, bdir = self._validate_request(config, sets, basedir)
        with self._locked():
            ac = self.state.active_config
            if not reset:
                cfg = cfg if config is not None else ac.config_file
                set_map = set_map if sets else dict(ac.sets)
                bdir = bdir if basedir is not None else ac.basedir
            if cfg is not None and not Path(cfg).is_file():
                raise UsageError(
                    f"the active config file '{cfg}' no longer exists",
                    hint="pass --config FILE, or restart with --base-config to drop it",
                )
            # Check the new server before stopping the running one.
            install = self._install_for(bdir)
            check_compatible(
                self.name,
                self.state.flavor,
                self.state.version,
                install,
                detect_datadir(self.datadir),
            )
            stopped = self._stop_unlocked(timeout_s)
            say(stopped.message)
            return self._start_unlocked(
                config=cfg,
                sets=set_map,
                basedir=bdir,
                timeout_s=timeout_s,
                say=say,
                install=install,
            )

    # -------------------------------------------------------------- destroy

    def destroy(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
        """Stop the server (if running) and remove the sandbox with its snapshots."""
        with _file_lock(self._lock_path(self.home, self.name), f"sandbox '{self.name}'"):
            with contextlib.suppress(SandboxError):
                self._reload()
            stopped = self._stop_unlocked(timeout_s)
            if self.state.socket_fallback:
                with contextlib.suppress(FileNotFoundError):
                    self.socket.unlink()
            shutil.rmtree(self.dir, ignore_errors=False)
        with contextlib.suppress(FileNotFoundError):
            self._lock_path(self.home, self.name).unlink()
        msg = f"destroyed sandbox '{self.name}' ({self.dir})"
        if stopped.was_running:
            msg = stopped.message + "; " + msg
        return msg

    @classmethod
    def destroy_named(
        cls, name: str, *, home: Path | None = None, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> str:
        """Destroy by name, including a damaged sandbox whose state.json is unreadable."""
        validate_name(name)
        h = resolve_home(home)
        sdir = sandboxes_root(h) / name
        try:
            return cls.load(name, home=h).destroy(timeout_s)
        except SandboxError:
            if not sdir.is_dir():
                raise
        # damaged: stop whatever runs with its option file, then remove it
        with _file_lock(cls._lock_path(h, name), f"sandbox '{name}'"):
            for pid in _find_server_pids(sdir / "my.cnf"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
                if not cls._wait_gone(pid, timeout_s):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                    cls._wait_gone(pid, 10.0)
            shutil.rmtree(sdir)
        return f"destroyed damaged sandbox '{name}' ({sdir})"

    # -------------------------------------------------------------- snapshots

    def _snapshot_dir(self, snap: str) -> Path:
        validate_name(snap, "snapshot")
        return self.snapshots_dir / snap

    def _require_stopped(self, action: str, stop: bool, say: Progress) -> bool:
        """Stop the server for a snapshot action if allowed; True when it was running."""
        state, pid = self._probe()
        if state == "crashed":
            self._clean_stale()
            return False
        if state != "running":
            return False
        if not stop:
            raise SandboxError(
                f"cannot {action} while sandbox '{self.name}' is running (pid {pid})",
                hint=f"stop it first (`myaccel sandbox stop {self.name}`) or pass --stop to "
                "stop it and start it again afterwards",
            )
        say(self._stop_unlocked(DEFAULT_TIMEOUT_S).message)
        return True

    def _resume(self, say: Progress) -> None:
        ac = self.state.active_config
        res = self._start_unlocked(config=ac.config_file, sets=ac.sets, basedir=ac.basedir, say=say)
        say(res.message)

    def snapshot_save(
        self, snap: str, *, stop: bool = False, progress: Progress | None = None
    ) -> SnapshotInfo:
        """Copy the stopped datadir to ``snapshots/SNAP`` (reflinks where the filesystem
        has them). With ``stop``, a running server is stopped and started again."""
        say = progress or _noop
        target = self._snapshot_dir(snap)
        with self._locked():
            if target.exists():
                raise SandboxError(
                    f"snapshot '{snap}' of sandbox '{self.name}' already exists",
                    hint=f"pick another name, or `myaccel sandbox snapshot delete {self.name} "
                    f"{snap}` first",
                )
            was_running = self._require_stopped("take a snapshot", stop, say)
            try:
                self.snapshots_dir.mkdir(exist_ok=True)
                tmp = self.snapshots_dir / f".{snap}.tmp-{os.getpid()}"
                shutil.rmtree(tmp, ignore_errors=True)
                tmp.mkdir()
                try:
                    say(f"copying {self.datadir} to snapshot '{snap}'")
                    proc.run(
                        ["cp", "-a", "--reflink=auto", str(self.datadir), str(tmp / "data")],
                        timeout_s=COPY_TIMEOUT_S,
                        check=True,
                    )
                    info = SnapshotInfo(
                        name=snap,
                        path=str(target),
                        size_bytes=_dir_size_bytes(tmp / "data"),
                        created_at=_now_iso(),
                        version=self.state.version_string,
                        active_config=self.state.active_config.describe(),
                    )
                    meta = {"schema_version": SNAPSHOT_SCHEMA, **info.to_dict()}
                    meta["flavor"] = self.state.flavor
                    (tmp / "snapshot.json").write_text(json.dumps(meta, indent=2) + "\n")
                    os.rename(tmp, target)
                except BaseException:
                    shutil.rmtree(tmp, ignore_errors=True)
                    raise
            finally:
                if was_running:
                    self._resume(say)
        return info

    def snapshot_restore(
        self, snap: str, *, stop: bool = False, progress: Progress | None = None
    ) -> SnapshotInfo:
        """Replace the datadir by a snapshot: copy to a temporary directory, then swap with
        two renames (an interrupted swap is repaired at the next start)."""
        say = progress or _noop
        source = self._snapshot_dir(snap)
        with self._locked():
            info = self._snapshot_info(source)
            if info is None:
                raise SandboxError(
                    f"no snapshot named '{snap}' in sandbox '{self.name}'",
                    hint=f"see `myaccel sandbox snapshot list {self.name}`",
                )
            was_running = self._require_stopped("restore a snapshot", stop, say)
            try:
                tmp = self.dir / f".data.restore-{os.getpid()}"
                old = self.dir / ".data.old"
                shutil.rmtree(tmp, ignore_errors=True)
                say(f"copying snapshot '{snap}' to {self.datadir}")
                try:
                    proc.run(
                        ["cp", "-a", "--reflink=auto", str(source / "data"), str(tmp)],
                        timeout_s=COPY_TIMEOUT_S,
                        check=True,
                    )
                except BaseException:
                    shutil.rmtree(tmp, ignore_errors=True)
                    raise
                shutil.rmtree(old, ignore_errors=True)
                if self.datadir.exists():
                    os.rename(self.datadir, old)
                os.rename(tmp, self.datadir)
                shutil.rmtree(old, ignore_errors=True)
            finally:
                if was_running:
                    self._resume(say)
        return info

    def _recover_interrupted_restore(self) -> None:
        old = self.dir / ".data.old"
        if not self.datadir.exists() and old.is_dir():
            log.warning("sandbox %s: finishing an interrupted restore", self.name)
            os.rename(old, self.datadir)

    @staticmethod
    def _snapshot_info(path: Path) -> SnapshotInfo | None:
        if not (path / "data").is_dir():
            return None
        meta: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError):
            loaded = json.loads((path / "snapshot.json").read_text())
            if isinstance(loaded, dict):
                meta = loaded
        size = meta.get("size_bytes")
        created = meta.get("created_at")
        if not isinstance(created, str):
            created = datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat(
                timespec="seconds"
            )
        return SnapshotInfo(
            name=path.name,
            path=str(path),
            size_bytes=size if isinstance(size, int) else _dir_size_bytes(path / "data"),
            created_at=created,
            version=str(meta.get("version", "")),
            active_config=str(meta.get("active_config", "")),
        )

    def snapshot_list(self) -> list[SnapshotInfo]:
        if not self.snapshots_dir.is_dir():
            return []
        out = []
        for entry in sorted(self.snapshots_dir.iterdir()):
            if entry.name.startswith(".") or not entry.is_dir():
                continue
            info = self._snapshot_info(entry)
            if info is not None:
                out.append(info)
        return out

    def snapshot_delete(self, snap: str) -> None:
        target = self._snapshot_dir(snap)
        with self._locked():
            if not target.is_dir():
                raise SandboxError(
                    f"no snapshot named '{snap}' in sandbox '{self.name}'",
                    hint=f"see `myaccel sandbox snapshot list {self.name}`",
                )
            shutil.rmtree(target)

    # -------------------------------------------------------------- connections

    def connect_params(self) -> ConnectParams:
        """Admin: root@localhost over the socket, no password."""
        return ConnectParams(
            host=None, port=self.port, socket=str(self.socket), user=ADMIN_USER, password=None
        )

    def bench_params(self, *, tcp: bool = True) -> ConnectParams:
        """The benchmark user on database ``sbtest``; over TCP 127.0.0.1 unless ``tcp`` is
        False (then over the socket)."""
        return ConnectParams(
            host="127.0.0.1" if tcp else None,
            port=self.port,
            socket=None if tcp else str(self.socket),
            user=self.state.bench_user,
            password=self.state.bench_password,
            database=self.state.bench_database,
        )

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        """Run one statement as admin (tests, setup)."""
        conn = connect(self.connect_params())
        try:
            return query_rows(conn, sql)
        finally:
            conn.close()

    def error_log_tail(self, lines: int = LOG_TAIL_LINES) -> list[str]:
        return _tail(self.error_log, lines)


def _check_requested_port(port: int, existing: Sequence[Sandbox]) -> None:
    owner = next((sb.name for sb in existing if sb.port == port), None)
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


def _pick_port(taken: set[int], seed: str) -> int:
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


def _remove_half_made(sdir: Path, name: str, home: Path) -> None:
    """After a failed init: stop a server we may have started and remove the directory."""
    for pid in _find_server_pids(sdir / "my.cnf"):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        Sandbox._wait_gone(pid, 10.0)
    with contextlib.suppress(OSError, ValueError):
        st = json.loads((sdir / "state.json").read_text())
        if st.get("socket_fallback"):
            Path(st["socket"]).unlink(missing_ok=True)
    shutil.rmtree(sdir, ignore_errors=True)
    log.debug("removed half-made sandbox %s in %s", name, home)
