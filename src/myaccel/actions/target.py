"""The server a plan is applied to, and that rollback reaches, restarts and checks: one
type (``ServerTarget``) with one implementation per way myaccel restarts a server:

- ``SandboxServer``: a myaccel sandbox (loaded once, carried by value), its own option
  directory ``<sandbox>/conf.d``, started with the managed file as its ``--config``;
- ``SystemdServer``: a systemd unit (``systemctl stop``/``start``);
- ``CommandServer``: a command the user gives (``--restart-command``), which also starts a
  stopped server;
- ``UnmanagedServer``: a server myaccel cannot restart (online changes only).

Targets are built here only: from connection options (``target_from_options``), from the
journal's ``server`` record (``target_from_record``, ``recorded_target``: the record
``describe()`` writes; journals written before that record existed keep it in
``journals/servers/<id>.json``), for a rollback with the command line's options over the
record (``rollback_target``), or from what is known of a server (``server_target``).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

from myaccel import proc
from myaccel.actions.crashpoint import armed, crash_point, kill_self
from myaccel.actions.errors import ApplyError, JournalCorrupt
from myaccel.actions.journal import Journal
from myaccel.errors import MyaccelError
from myaccel.server import connection
from myaccel.server.connection import ConnectionOptions, ConnectParams, connect
from myaccel.server.sandbox.state import ServerOptions

if TYPE_CHECKING:
    from myaccel.server.sandbox import Sandbox

MANAGED_CNF = "99-myaccel.cnf"
Log = Callable[[str], None]
Resolve = Callable[[ConnectionOptions], ConnectParams]


class ServerTarget(ABC):
    """How to reach, restart and check the server a plan is applied to. Frozen values:
    a changed field is a new target (``with_params``, ``with_conf_dir``)."""

    params: ConnectParams | None
    conf_dir: Path | None  # where the managed option file goes; None: no option file
    conf_dir_reason: str | None  # why conf_dir is None (shown when restart knobs are skipped)
    # the unit that systemd:server/... targets name (None: the host's installed one)
    unit: str | None = None
    # whether the host's server unit runs this server (not so for a sandbox)
    host_service: ClassVar[bool] = True
    # whether apply creates conf_dir itself, right before its journal (a sandbox's conf.d)
    creates_conf_dir: ClassVar[bool] = False
    # the ``kind`` of the journal's server record (kept for journals already written);
    # also how messages name the way a server is restarted ("systemd (mariadb.service)")
    record_kind: ClassVar[str]

    @property
    def managed_file(self) -> Path | None:
        return self.conf_dir / MANAGED_CNF if self.conf_dir else None

    def connector(self) -> Callable[[], Any]:
        p = self.params
        if p is None:
            raise ApplyError(
                "no server connection for mysql: targets", hint="pass server options or --sandbox"
            )
        return lambda: connect(p)

    def describe(self) -> dict[str, Any]:
        """The journal's ``server`` record (never the password)."""
        p = self.params
        return {
            "connection": None
            if p is None
            else {"host": p.host, "port": p.port, "socket": p.socket, "user": p.user},
            "kind": self.record_kind,
            "sandbox": None,
            "unit": self.unit,
            "conf_dir": str(self.conf_dir) if self.conf_dir else None,
            "home": None,
        }

    def with_params(self, params: ConnectParams | None) -> ServerTarget:
        new: ServerTarget = replace(cast(Any, self), params=params)
        return new

    def with_conf_dir(self, conf_dir: Path | None, reason: str | None = None) -> ServerTarget:
        new: ServerTarget = replace(cast(Any, self), conf_dir=conf_dir, conf_dir_reason=reason)
        return new

    # ------------------------------------------------------------ restart phases

    @abstractmethod
    def startable(self) -> bool:
        """Whether myaccel knows how to (re)start this server."""

    @abstractmethod
    def restart(self, log: Log) -> None:
        """Stop, then start with the managed option file. Each phase is a crash point
        (restart-stop, restart-down, restart-start; see ``crashpoint``)."""

    @abstractmethod
    def start(self, log: Log) -> None:
        """Start a stopped server with the option files as they are now."""

    def error_log_errors(self) -> list[str]:
        return []

    def _gone(self) -> bool:
        """Whether the server is known not to be coming up (a sandbox not running)."""
        return False

    def reachable(self) -> bool:
        if self.params is None:
            return False
        try:
            conn = connect(self.params)
        except MyaccelError:
            return False
        conn.close()
        return True

    def wait_reachable(self, timeout_s: float = 60.0) -> bool:
        """Wait for a server that is starting (a crash may have left one half way up)."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self.reachable():
                return True
            if self._gone():
                return False
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)


@dataclass(frozen=True, eq=False)
class SandboxServer(ServerTarget):
    """A myaccel sandbox; ``params`` is how it is reached (its own admin account unless
    the command line says otherwise)."""

    sandbox: Sandbox
    params: ConnectParams | None
    conf_dir: Path | None
    conf_dir_reason: str | None = None
    host_service: ClassVar[bool] = False
    creates_conf_dir: ClassVar[bool] = True
    record_kind: ClassVar[str] = "sandbox"

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "sandbox": self.sandbox.name,
            "home": str(self.sandbox.home),
        }

    def _managed_options(self) -> ServerOptions:
        """A sandbox starts with the managed option file as its --config, once it exists."""
        mf = self.managed_file
        return ServerOptions(config=mf if mf is not None and mf.exists() else None)

    def startable(self) -> bool:
        return True

    def restart(self, log: Log) -> None:
        sb = self.sandbox
        if armed("restart-stop"):
            pid = sb.pid
            if pid is not None:  # shutdown requested, the server is still going down
                # A crash-test hook: the server is a detached daemon known only by its
                # pid file (no proc.Child of ours), so it is signalled directly.
                os.kill(pid, signal.SIGTERM)
            kill_self()
        log(sb.stop())
        crash_point("restart-down")
        if armed("restart-start"):
            _kill_self_when(sb.is_running)
        sb.start(self._managed_options(), progress=log)

    def start(self, log: Log) -> None:
        res = self.sandbox.start(self._managed_options(), progress=log)
        log(res.message)

    def _gone(self) -> bool:
        return not self.sandbox.is_running()

    def error_log_errors(self) -> list[str]:
        lines: list[str] = self.sandbox.error_log_tail(200)
        return [ln for ln in lines if "[ERROR]" in ln][-3:]


@dataclass(frozen=True, eq=False)
class SystemdServer(ServerTarget):
    """A server run by a systemd unit."""

    params: ConnectParams | None
    conf_dir: Path | None
    unit: str | None  # never None here (typed so to match the base class)
    conf_dir_reason: str | None = None
    record_kind: ClassVar[str] = "systemd"

    def startable(self) -> bool:
        return True

    def restart(self, log: Log) -> None:
        log(f"restarting {self.unit}")
        crash_point("restart-stop")
        self._systemctl("stop")
        crash_point("restart-down")
        self._systemctl("start")
        crash_point("restart-start")

    def start(self, log: Log) -> None:
        log(f"starting {self.unit}")
        # its drop-ins as they are now (a rollback may just have restored them)
        r = proc.run(["systemctl", "daemon-reload"], timeout_s=600)
        if not r.ok:
            raise ApplyError(
                f"systemctl daemon-reload failed: {r.stderr.strip()[:200]}",
                hint="see journalctl -b -u init.scope",
            )
        self._systemctl("start")

    def _systemctl(self, verb: str) -> None:
        r = proc.run(["systemctl", verb, str(self.unit)], timeout_s=600)
        if not r.ok:
            raise ApplyError(
                f"systemctl {verb} {self.unit} failed: {r.stderr.strip()[:200]}",
                hint=f"see journalctl -u {self.unit}",
            )


@dataclass(frozen=True, eq=False)
class CommandServer(ServerTarget):
    """A server restarted (and started) by a command the user gives."""

    params: ConnectParams | None
    conf_dir: Path | None
    restart_command: str
    conf_dir_reason: str | None = None
    record_kind: ClassVar[str] = "command"

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "restart_command": self.restart_command}

    def startable(self) -> bool:
        return True

    def restart(self, log: Log) -> None:
        self._run_command()

    def start(self, log: Log) -> None:
        log(f"starting the server: {self.restart_command}")
        self._run_command()

    def _run_command(self) -> None:
        """The user's restart command (it also starts a stopped server); the server must
        answer within a minute after it returns."""
        cmd = self.restart_command
        # a restart under way finishes even if myaccel is killed meanwhile
        r = proc.run(shlex.split(cmd), timeout_s=600, die_with_parent=False)
        if not r.ok:
            raise ApplyError(
                f"the restart command failed ({cmd}): {(r.stderr or r.stdout).strip()[-200:]}",
                hint="run it by hand to see why; the server's error log tells the rest",
            )
        if not self.wait_reachable(timeout_s=60.0):
            raise ApplyError(
                f"the server does not answer after the restart command ({cmd})",
                hint="see the server's error log",
            )


@dataclass(frozen=True, eq=False)
class UnmanagedServer(ServerTarget):
    """A server myaccel does not know how to restart (or no server at all)."""

    params: ConnectParams | None = None
    conf_dir: Path | None = None
    conf_dir_reason: str | None = None
    record_kind: ClassVar[str] = "none"

    def startable(self) -> bool:
        return False

    def restart(self, log: Log) -> None:
        raise ApplyError(
            "restart-only settings changed but myaccel does not know how to restart this server",
            hint="pass --server-unit UNIT (systemd) or use --sandbox; or restart it yourself "
            "and run `myaccel verify`",
        )

    def start(self, log: Log) -> None:
        raise ApplyError(
            "the server is not reachable and myaccel does not know how to start it",
            hint="start it yourself, then run `myaccel rollback` again",
        )


def _kill_self_when(condition: Callable[[], bool], timeout_s: float = 60.0) -> None:
    """Crash-point helper: SIGKILL this process as soon as ``condition()`` holds (polled in
    a daemon thread), e.g. once the server was spawned but before it is ready."""

    def watch() -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if condition():
                kill_self()
            time.sleep(0.01)

    threading.Thread(target=watch, name="crash-point", daemon=True).start()


# ---------------------------------------------------------------- building targets


def sandbox_target(
    name: str,
    home: str | Path | None = None,
    *,
    create: bool = False,
    params: ConnectParams | None = None,
    sandbox: Sandbox | None = None,
) -> SandboxServer:
    """A sandbox as a target (loaded here, once, unless ``sandbox`` is given); its
    managed option file lives in ``<sandbox>/conf.d`` (passed as --config at start).
    ``create`` makes that directory (apply does, right before its journal; a dry run
    never does). ``params`` (default: the sandbox's admin account) is how it is reached."""
    if sandbox is None:
        from myaccel.server.sandbox import Sandbox

        sandbox = Sandbox.load(name, home=Path(home) if home else None)
    if create:
        (sandbox.dir / "conf.d").mkdir(exist_ok=True)
    return SandboxServer(
        sandbox=sandbox,
        params=params if params is not None else sandbox.connect_params(),
        conf_dir=sandbox.dir / "conf.d",
    )


def server_target(
    params: ConnectParams | None,
    *,
    conf_dir: Path | None = None,
    conf_dir_reason: str | None = None,
    unit: str | None = None,
    restart_command: str | None = None,
) -> ServerTarget:
    """A server that is not a sandbox: run by ``unit``, else restarted by
    ``restart_command``, else one myaccel cannot restart."""
    if unit:
        return SystemdServer(params, conf_dir, unit, conf_dir_reason)
    if restart_command:
        return CommandServer(params, conf_dir, restart_command, conf_dir_reason)
    return UnmanagedServer(params, conf_dir, conf_dir_reason)


def target_from_options(
    conn: ConnectionOptions,
    *,
    conf_dir: str | None = None,
    unit: str | None = None,
    resolve: Resolve = connection.resolve,
    default_server: bool = False,
) -> ServerTarget:
    """The server that a command's options name (``--sandbox``, or -S/-h/-P/-u with
    ``--conf-dir`` and ``--server-unit``); ``resolve`` turns the options into connection
    parameters (the CLI's also repairs what a killed command left on that server).
    ``default_server``: with no server option, still the server the defaults reach (option
    files, the default socket), as ``myaccel plan`` does; else no server."""
    if conn.sandbox is not None:
        return sandbox_target(conn.sandbox)
    params = resolve(conn) if conn.given or conf_dir or unit or default_server else None
    return server_target(params, conf_dir=Path(conf_dir) if conf_dir else None, unit=unit)


def target_from_record(d: Any, where: str = "the journal") -> ServerTarget:
    """The target a journal's ``server`` record (``describe()``) names; anything
    malformed is ``JournalCorrupt``."""
    try:
        return _from_record(d)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise JournalCorrupt(
            f"the server record in {where} is malformed ({type(exc).__name__}: {exc})",
            hint="it was edited or damaged; pass the server options (--sandbox NAME, or "
            "-S/-h/-P/-u) to `myaccel rollback` to say which server to use",
            context={"file": where},
        ) from exc


def _from_record(d: Any) -> ServerTarget:
    if not isinstance(d, dict):
        raise TypeError("not a JSON object")
    raw_kind = d.get("kind")  # an unknown kind (or not a string): a server never restarted
    kind = _RECORD_KINDS.get(raw_kind if isinstance(raw_kind, str) else "", UnmanagedServer)
    if kind is SandboxServer:
        name = d["sandbox"]
        home = d.get("home")
        if not isinstance(name, str) or not (home is None or isinstance(home, str)):
            raise TypeError("sandbox and home must be strings")
        return sandbox_target(name, home=home)
    c = d.get("connection")
    params = None
    if c is not None:
        if not isinstance(c, dict):
            raise TypeError("connection is not an object")
        params = ConnectParams(
            host=_opt_str(c.get("host")),
            port=int(c.get("port") or 3306),
            socket=_opt_str(c.get("socket")),
            user=str(c.get("user") or "root"),
            password=None,
        )
    conf_dir = Path(str(d["conf_dir"])) if d.get("conf_dir") else None
    unit = _opt_str(d.get("unit"))
    command = _opt_str(d.get("restart_command"))
    # a unit or a command counts only for the record's own kind (as it always did)
    return server_target(
        params,
        conf_dir=conf_dir,
        unit=unit if kind is SystemdServer else None,
        restart_command=command if kind is CommandServer else None,
    )


# a record's ``kind`` -> the target type that wrote it (an unknown kind: none)
_RECORD_KINDS: dict[str, type[ServerTarget]] = {
    t.record_kind: t for t in (SandboxServer, SystemdServer, CommandServer, UnmanagedServer)
}


def _opt_str(v: Any) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str):
        raise TypeError(f"{v!r} is not a string")
    return v


def _record_path(journal_path: Path) -> Path:
    # Beside the journals, in a subdirectory: the journal directory holds journals only.
    return journal_path.parent / "servers" / f"{journal_path.stem}.json"


def recorded_target(journal_path: Path, journal: Journal | None = None) -> ServerTarget | None:
    """The server a journal was applied to: its ``server`` record, else (journals written
    before that record existed) ``servers/<id>.json`` beside it. A malformed record or
    file raises ``JournalCorrupt``; None when neither exists."""
    if journal is not None and journal.data.server is not None:
        return target_from_record(journal.data.server, str(journal_path))
    p = _record_path(journal_path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise JournalCorrupt(
            f"cannot read {p}: {exc.strerror or exc}",
            hint="check its permissions, or pass the server options to `myaccel rollback`",
        ) from exc
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise JournalCorrupt(
            f"{p} is not valid JSON: {exc}",
            hint="it was damaged; pass the server options (--sandbox NAME, or -S/-h/-P/-u) to "
            "`myaccel rollback` to say which server to use",
            context={"file": str(p)},
        ) from exc
    return target_from_record(doc, str(p))


def rollback_target(
    path: Path,
    journal: Journal,
    conn: ConnectionOptions,
    resolve: Resolve = connection.resolve,
) -> ServerTarget | None:
    """The server to roll back (or verify) on: the one recorded at apply, with what the
    command line gives overriding it; the password comes from the usual places (-p,
    MYSQL_PWD, ~/.my.cnf), never from the journal. None: no server recorded or given."""
    if conn.sandbox is not None:
        return sandbox_target(conn.sandbox)
    target = recorded_target(path, journal)
    if target is None:
        return target_from_options(conn, resolve=resolve) if conn.given else None
    if isinstance(target, SandboxServer):
        if conn.user is not None and target.params is not None:
            return target.with_params(
                replace(target.params, user=conn.user, password=conn.password)
            )
        return target
    return target.with_params(_merge_params(target.params, conn, resolve))


def _merge_params(
    recorded: ConnectParams | None, conn: ConnectionOptions, resolve: Resolve
) -> ConnectParams | None:
    where_given = any(
        v is not None for v in (conn.host, conn.port, conn.socket, conn.defaults_file)
    )
    if recorded is None or where_given:
        return resolve(conn) if conn.given else recorded
    return resolve(
        ConnectionOptions(
            host=recorded.host,
            port=recorded.port if recorded.host else None,
            socket=recorded.socket,
            user=conn.user or recorded.user,
            password=conn.password,
        )
    )
