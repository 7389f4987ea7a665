"""The part of ``Sandbox`` every command needs: its paths, ``state.json`` (read, validated,
saved), the per-sandbox lock, whether its server runs, its option file and connections.

``Sandbox`` (``instance.py``) builds on this through ``lifecycle.py`` and ``snapshots.py``.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Self

from myaccel import artifacts
from myaccel.errors import MyaccelError, SandboxError
from myaccel.paths import Below, Via
from myaccel.server.connection import ConnectParams, connect, query_rows
from myaccel.server.flavor import parse_binary_version
from myaccel.server.flavors import Flavor, ServerFlavor, adapter_for
from myaccel.server.sandbox import process
from myaccel.server.sandbox.install import ServerInstall
from myaccel.server.sandbox.layout import lock_path, resolve_home, sandboxes_root, validate_name
from myaccel.server.sandbox.options import (
    ComposedOptions,
    OptionLine,
    compose_option_file,
    read_server_options,
)
from myaccel.server.sandbox.state import (
    ADMIN_USER,
    RunState,
    SandboxState,
    SandboxStatus,
)

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 60.0
# A server started under a wrapper (valgrind) starts 10-50x slower: wait at least this long.
WRAPPED_TIMEOUT_S = 600.0
INIT_TIMEOUT_S = 600.0
COPY_TIMEOUT_S = 6 * 3600.0

Progress = Callable[[str], None]


def noop(_msg: str) -> None:
    pass


class SandboxCore:
    """Paths, state, lock, status, option file and connections of one sandbox."""

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

    # files and directories of the sandbox
    state_file = Below("dir", "state.json")
    option_file = Below("dir", "my.cnf")
    error_log = Below("dir", "mysqld.err")
    pid_file = Below("dir", "mysqld.pid")
    snapshots_dir = Below("dir", "snapshots")
    # what state.json says
    port = Via[int]("state")
    flavor = Via[Flavor]("state")
    version = Via[str]("state")

    @property
    def datadir(self) -> Path:
        return Path(self.state.datadir)

    @property
    def socket(self) -> Path:
        return Path(self.state.socket)

    @property
    def adapter(self) -> ServerFlavor:
        return adapter_for(self.state.flavor)

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

    # -------------------------------------------------------------- loading and saving

    @classmethod
    def exists(cls, name: str, *, home: Path | None = None) -> bool:
        return (sandboxes_root(home) / name).exists()

    @classmethod
    def _read_state(cls, name: str, home: Path) -> SandboxState:
        path = sandboxes_root(home) / name / "state.json"
        if not path.parent.exists():
            raise SandboxError(
                f"no sandbox named '{name}'",
                hint=f"create it with `myaccel sandbox init {name}` (see `myaccel sandbox list`)",
            )
        return artifacts.load(
            path,
            SandboxState,
            what=f"sandbox '{name}' is damaged: its state",
            hint=f"use the myaccel that created it, or remove it with `myaccel sandbox destroy {name}`",
            error=SandboxError,
        )

    @classmethod
    def load(cls, name: str, *, home: Path | None = None) -> Self:
        validate_name(name)
        h = resolve_home(home)
        return cls(h, cls._read_state(name, h))

    @classmethod
    def list_all(cls, *, home: Path | None = None) -> list[Self]:
        h = resolve_home(home)
        root = sandboxes_root(h)
        out: list[Self] = []
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
        artifacts.save(self.state_file, self.state, private=True)

    def forget_owner(self) -> None:
        """The process that started the server on an arm's configuration is gone and the
        server is stopped (its next start is on the base configuration): forget it."""
        with self._locked():
            if self.state.active_config.owner is not None:
                self.state.active_config.owner = None
                self._save_state()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with process.file_lock(lock_path(self.home, self.name), f"sandbox '{self.name}'"):
            self._reload()
            yield

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
            # our own (it must exist: MySQL's --initialize aborts on a missing one)
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
        base += install.adapter.start_options()
        if self.state.base_config is not None:  # a clone: its source's configuration
            groups = install.adapter.option_groups(install.version.series)
            base += [
                (o.key, o.value) for o in read_server_options(Path(self.state.base_config), groups)
            ]
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
                config, install.adapter.option_groups(install.version.series)
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
        pid = process.read_pid(self.pid_file)
        if (
            pid is not None
            and process.pid_alive(pid)
            and process.runs_option_file(pid, self.option_file)
        ):
            return "running", pid
        found = process.find_server_pids(self.option_file)
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
        running = parse_binary_version(ac.version) if ac.version else None
        if running is not None:
            version = running.text
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

    def error_log_tail(self, lines: int = process.LOG_TAIL_LINES) -> list[str]:
        return process.tail(self.error_log, lines)
