"""``Sandbox``: one private MariaDB/MySQL instance for benchmarks and experiments.

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
(``--config``/``--set``) can change tuning but never those keys (``options.py``).

The class is built in layers, one concern each: ``core.SandboxCore`` (paths, state, lock,
status, option file, connections), ``lifecycle.SandboxLifecycle`` (start, stop, restart),
``snapshots.SandboxSnapshots``; this module adds init and destroy. What differs per flavor
is asked of ``server/flavors/``. Nothing here prints; progress goes to an optional callback
and failures are ``SandboxError``/``UsageError`` with a hint.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import shutil
import signal
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Self

from myaccel import proc
from myaccel.errors import SandboxError, UsageError
from myaccel.server.connection import connect
from myaccel.server.flavors import Flavor
from myaccel.server.sandbox import process
from myaccel.server.sandbox.core import (
    DEFAULT_TIMEOUT_S,
    INIT_TIMEOUT_S,
    Progress,
    SandboxCore,
    noop,
)
from myaccel.server.sandbox.install import ServerInstall, find_server, init_argv, parse_series
from myaccel.server.sandbox.layout import (
    DEFAULT_NAME,
    check_requested_port,
    ensure_private_dir,
    lock_path,
    pick_port,
    refuse_system_dirs,
    resolve_home,
    sandboxes_root,
    socket_path_for,
    validate_name,
    validate_port,
)
from myaccel.server.sandbox.process import LOG_TAIL_LINES
from myaccel.server.sandbox.snapshots import SandboxSnapshots
from myaccel.server.sandbox.state import BENCH_DATABASE, BENCH_USER, SandboxState, now_iso

log = logging.getLogger(__name__)


class Sandbox(SandboxSnapshots):
    """One private server instance. Get one with ``Sandbox.load(name)`` or
    ``Sandbox.init(name)``; every method re-reads ``state.json`` first."""

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
        series: str | None = None,
    ) -> Self:
        """Create a datadir, start the server, create ``sbtest`` and the benchmark user.
        ``flavor`` and ``series`` (a release line, ``11.8``) choose among the installed
        servers and the project's (``install.find_server``).

        The server is left running unless ``start`` is False. On failure nothing is left
        behind."""
        say = progress or noop
        validate_name(name)
        if port is not None:
            validate_port(port)
        h = resolve_home(home)
        root = sandboxes_root(h)
        sdir = root / name
        refuse_system_dirs(root)
        if sdir.exists():
            raise SandboxError(
                f"sandbox '{name}' already exists",
                hint=f"use it (`myaccel sandbox start {name}`), pick another name, or remove it "
                f"with `myaccel sandbox destroy {name}`",
            )
        if port is not None:  # fail before any work; checked again under the lock
            check_requested_port(port, _port_owners(cls.list_all(home=h)))
        install = find_server(
            Path(basedir) if basedir is not None else None,
            flavor=flavor,
            series=parse_series(series) if series is not None else None,
        )
        if flavor is not None and install.flavor != flavor:
            raise UsageError(
                f"--flavor {flavor} but {install.binary} is {install.label}",
                hint="pass --basedir of a build of that flavor, or leave out --flavor",
            )
        init_argv(install, Path("/dev/null"))  # fail early when no init tool exists
        say(f"using {install.label} at {install.binary}")
        with cls._allocated(name, h, port) as (sdir, chosen):
            sb = cls._create(
                name=name,
                home=h,
                sdir=sdir,
                install=install,
                port=chosen,
                timeout_s=timeout_s,
                say=say,
            )
        if not start:
            say(sb.stop())
        return sb

    @classmethod
    @contextlib.contextmanager
    def _allocated(cls, name: str, home: Path, port: int | None) -> Iterator[tuple[Path, int]]:
        """A new sandbox's private directory and port, under the ports lock; the directory
        is removed again (with a server started in it) when the body fails."""
        root = sandboxes_root(home)
        sdir = root / name
        root.mkdir(parents=True, exist_ok=True)
        with process.file_lock(root / ".locks" / "ports.lock", "sandbox ports"):
            existing = cls.list_all(home=home)
            if port is not None:
                check_requested_port(port, _port_owners(existing))
                chosen = port
            else:
                chosen = pick_port({sb.port for sb in existing}, seed=f"{home}/{name}")
            if sdir.exists():
                raise SandboxError(f"sandbox '{name}' already exists", hint="pick another name")
            ensure_private_dir(sdir)
            try:
                yield sdir, chosen
            except BaseException:
                _remove_half_made(sdir, name, home)
                raise

    @classmethod
    def reserve(
        cls,
        name: str,
        install: ServerInstall,
        *,
        home: Path | None = None,
        port: int | None = None,
    ) -> Self:
        """A registered sandbox without a datadir yet: its directory, port, socket and
        ``state.json`` (a clone fills the datadir and its base configuration, then starts
        it). From here on ``destroy`` removes everything under its directory."""
        validate_name(name)
        if port is not None:
            validate_port(port)
        h = resolve_home(home)
        refuse_system_dirs(sandboxes_root(h))
        if (sandboxes_root(h) / name).exists():
            raise SandboxError(
                f"sandbox '{name}' already exists",
                hint=f"pick another name, or remove it with `myaccel sandbox destroy {name}`",
            )
        with cls._allocated(name, h, port) as (sdir, chosen):
            sb = cls(h, cls._new_state(name, sdir, install, chosen))
            (sdir / "tmp").mkdir(mode=0o700, exist_ok=True)
            (sdir / "files").mkdir(mode=0o700, exist_ok=True)
            if sb.state.socket_fallback:
                ensure_private_dir(sb.socket.parent)
            sb._save_state()
        return sb

    def set_base(self, base_config: Path | None, launch_prefix: Sequence[str] = ()) -> None:
        """The option file joined to the base configuration and the argv prefix of every
        start (see ``SandboxState``); they take effect at the next start."""
        with self._locked():
            self.state.base_config = str(base_config) if base_config is not None else None
            self.state.launch_prefix = list(launch_prefix)
            self._save_state()

    @staticmethod
    def _new_state(name: str, sdir: Path, install: ServerInstall, port: int) -> SandboxState:
        sock, fallback = socket_path_for(sdir)
        return SandboxState(
            name=name,
            flavor=install.flavor,
            version=install.version.text,
            version_string=install.version.raw,
            binary=str(install.binary),
            basedir=str(install.basedir),
            custom_basedir=install.custom,
            install_db=str(install.install_db) if install.install_db else None,
            port=port,
            socket=str(sock),
            socket_fallback=fallback,
            datadir=str(sdir / "data"),
            created_at=now_iso(),
            bench_password=secrets.token_hex(12),
        )

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
    ) -> Self:
        state = cls._new_state(name, sdir, install, port)
        if state.socket_fallback:
            ensure_private_dir(Path(state.socket).parent)
            say(f"socket path under {sdir} is too long; using {state.socket}")
        sb = cls(home, state)
        (sdir / "tmp").mkdir(mode=0o700, exist_ok=True)
        (sdir / "files").mkdir(mode=0o700, exist_ok=True)
        sb.init_datadir(install, say)
        sb._save_state()
        say("starting the server")
        sb._start_unlocked(install=install, timeout_s=timeout_s, say=say)
        say(f"creating database {BENCH_DATABASE} and user {BENCH_USER}")
        sb._setup_users()
        say(f"sandbox '{name}' ready: port {port}, socket {state.socket}")
        return sb

    def init_datadir(self, install: ServerInstall, progress: Progress | None = None) -> None:
        """Create an empty datadir with the flavor's tool (the server stays stopped)."""
        say = progress or noop
        self.option_file.write_text(self._compose(install).text)
        argv = init_argv(install, self.option_file)
        tool = Path(argv[0]).name
        say(f"initializing {self.datadir} with {tool}")
        done = proc.run(argv, timeout_s=INIT_TIMEOUT_S, cwd=self.dir)
        with open(self.error_log, "a") as fh:
            fh.write(f"--- {now_iso()} myaccel: {' '.join(argv)}\n{done.stdout}{done.stderr}\n")
        if not done.ok or not (self.datadir / "mysql").is_dir():
            tail = (done.stderr + done.stdout).strip().splitlines()[-LOG_TAIL_LINES:]
            err = next((ln for ln in reversed(tail) if "ERROR" in ln), tail[-1] if tail else "")
            raise SandboxError(
                f"{tool} failed (exit code {done.returncode}): {err.strip()[:200]}",
                hint="last lines of its output:\n  " + "\n  ".join(tail),
            )

    def _setup_users(self) -> None:
        conn = connect(self.connect_params())
        try:
            with conn.cursor() as cur:
                self.adapter.setup_accounts(
                    cur,
                    user=self.state.bench_user,
                    password=self.state.bench_password,
                    database=self.state.bench_database,
                )
        finally:
            conn.close()

    # -------------------------------------------------------------- destroy

    def destroy(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
        """Stop the server (if running) and remove the sandbox with its snapshots."""
        with process.file_lock(lock_path(self.home, self.name), f"sandbox '{self.name}'"):
            with contextlib.suppress(SandboxError):
                self._reload()
            stopped = self._stop_unlocked(timeout_s)
            if self.state.socket_fallback:
                with contextlib.suppress(FileNotFoundError):
                    self.socket.unlink()
            shutil.rmtree(self.dir, ignore_errors=False)
        with contextlib.suppress(FileNotFoundError):
            lock_path(self.home, self.name).unlink()
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
        with process.file_lock(lock_path(h, name), f"sandbox '{name}'"):
            for pid in process.find_server_pids(sdir / "my.cnf"):
                process.terminate(pid, timeout_s)
            shutil.rmtree(sdir)
        return f"destroyed damaged sandbox '{name}' ({sdir})"


def _remove_half_made(sdir: Path, name: str, home: Path) -> None:
    """After a failed init: stop a server we may have started and remove the directory."""
    for pid in process.find_server_pids(sdir / "my.cnf"):
        process.send_signal(pid, signal.SIGKILL)
        process.wait_gone(pid, 10.0)
    with contextlib.suppress(OSError, ValueError):
        st = json.loads((sdir / "state.json").read_text())
        if st.get("socket_fallback"):
            Path(st["socket"]).unlink(missing_ok=True)
    shutil.rmtree(sdir, ignore_errors=True)
    log.debug("removed half-made sandbox %s in %s", name, home)


def _port_owners(existing: Sequence[SandboxCore]) -> dict[int, str]:
    owners: dict[int, str] = {}
    for sb in existing:
        owners.setdefault(sb.port, sb.name)
    return owners
