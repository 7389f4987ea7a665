"""From a plan to journaled changes on a server: which setting carries each
recommendation, how the server is restarted (sandbox, systemd, or a command the user
gives) and health-checked, and
automatic rollback when the server does not come back healthy."""

from __future__ import annotations

import json
import os
import shlex
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from myaccel import proc
from myaccel.actions.applier import plan_changes
from myaccel.actions.crashpoint import armed, crash_point, kill_self
from myaccel.actions.errors import ApplyError, JournalCorrupt
from myaccel.actions.files import host_path
from myaccel.actions.journal import Journal, write_json_durably
from myaccel.actions.settings import (
    Change,
    OptionFileSetting,
    Setting,
    expand_target,
    setting_for,
    values_equal,
)
from myaccel.errors import MyaccelError
from myaccel.rules.model import Plan, Recommendation
from myaccel.server.connection import ConnectParams, connect, query_rows
from myaccel.server.sandbox.state import ServerOptions

MANAGED_CNF = "99-myaccel.cnf"
AUTOMATABLE = ("mysql:", "sysctl:", "sysfs:", "debugfs:", "systemd:", "file:")


@dataclass
class ServerHandle:
    """How to reach, restart and check the server a plan is applied to."""

    kind: str  # sandbox, systemd, command, none
    params: ConnectParams | None
    conf_dir: Path | None
    sandbox_name: str | None = None
    unit: str | None = None
    home: str | None = None
    # why conf_dir is None (shown when restart-only knobs are skipped)
    conf_dir_reason: str | None = None
    # kind "command": what restarts (and starts) the server, given by the user
    restart_command: str | None = None

    @property
    def managed_file(self) -> Path | None:
        return self.conf_dir / MANAGED_CNF if self.conf_dir else None

    def _managed_options(self) -> ServerOptions:
        """A sandbox starts with the managed option file as its --config, once it exists."""
        mf = self.managed_file
        return ServerOptions(config=mf if mf is not None and mf.exists() else None)

    def connector(self) -> Callable[[], Any]:
        p = self.params
        if p is None:
            raise ApplyError(
                "no server connection for mysql: targets", hint="pass server options or --sandbox"
            )
        return lambda: connect(p)

    def describe(self) -> dict[str, Any]:
        p = self.params
        return {
            # how to reach the server again for rollback/verify (never the password)
            "connection": None
            if p is None
            else {"host": p.host, "port": p.port, "socket": p.socket, "user": p.user},
            "kind": self.kind,
            "sandbox": self.sandbox_name,
            "unit": self.unit,
            "conf_dir": str(self.conf_dir) if self.conf_dir else None,
            "home": self.home,
            **({"restart_command": self.restart_command} if self.restart_command else {}),
        }

    @classmethod
    def from_dict(cls, d: Any, where: str = "the journal") -> ServerHandle:
        """Rebuild a handle from ``describe()``; anything malformed is ``JournalCorrupt``."""
        try:
            return cls._from_dict(d)
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise JournalCorrupt(
                f"the server record in {where} is malformed ({type(exc).__name__}: {exc})",
                hint="it was edited or damaged; pass the server options (--sandbox NAME, or "
                "-S/-h/-P/-u) to `myaccel rollback` to say which server to use",
                context={"file": where},
            ) from exc

    @classmethod
    def _from_dict(cls, d: Any) -> ServerHandle:
        if not isinstance(d, dict):
            raise TypeError("not a JSON object")
        if d.get("kind") == "sandbox":
            name = d["sandbox"]
            home = d.get("home")
            if not isinstance(name, str) or not (home is None or isinstance(home, str)):
                raise TypeError("sandbox and home must be strings")
            return sandbox_handle(name, home=home, create=False)
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
        return cls(
            kind=str(d.get("kind", "none")),
            params=params,
            conf_dir=Path(str(d["conf_dir"])) if d.get("conf_dir") else None,
            unit=_opt_str(d.get("unit")),
            restart_command=_opt_str(d.get("restart_command")),
        )

    # ------------------------------------------------------------ restart phases

    def _sandbox(self) -> Any:
        from myaccel.server.sandbox import Sandbox

        return Sandbox.load(str(self.sandbox_name), home=Path(self.home) if self.home else None)

    def restart(self, log: Callable[[str], None]) -> None:
        """Stop, then start with the managed option file. Each phase is a crash point
        (restart-stop, restart-down, restart-start; see ``crashpoint``)."""
        if self.kind == "sandbox":
            sb = self._sandbox()
            if armed("restart-stop"):
                pid = sb.pid
                if pid is not None:  # shutdown requested, the server is still going down
                    # A crash-test hook: the server is a detached daemon known only by
                    # its pid file (no proc.Child of ours), so it is signalled directly.
                    os.kill(pid, signal.SIGTERM)
                kill_self()
            log(sb.stop())
            crash_point("restart-down")
            if armed("restart-start"):
                _kill_self_when(sb.is_running)
            sb.start(self._managed_options(), progress=log)
        elif self.kind == "systemd" and self.unit:
            log(f"restarting {self.unit}")
            crash_point("restart-stop")
            self._systemctl("stop")
            crash_point("restart-down")
            self._systemctl("start")
            crash_point("restart-start")
        elif self.kind == "command" and self.restart_command:
            self._run_command()
        else:
            raise ApplyError(
                "restart-only settings changed but myaccel does not know how to restart this server",
                hint="pass --server-unit UNIT (systemd) or use --sandbox; or restart it yourself and run `myaccel verify`",
            )

    def _run_command(self) -> None:
        """The user's restart command (it also starts a stopped server); the server must
        answer within a minute after it returns."""
        cmd = str(self.restart_command)
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

    def _systemctl(self, verb: str) -> None:
        r = proc.run(["systemctl", verb, str(self.unit)], timeout_s=600)
        if not r.ok:
            raise ApplyError(
                f"systemctl {verb} {self.unit} failed: {r.stderr.strip()[:200]}",
                hint=f"see journalctl -u {self.unit}",
            )

    def reachable(self) -> bool:
        if self.params is None:
            return False
        try:
            conn = connect(self.params)
        except MyaccelError:
            return False
        conn.close()
        return True

    def startable(self) -> bool:
        """Whether myaccel knows how to start this server (a sandbox or a systemd unit)."""
        return (
            self.kind == "sandbox"
            or (self.kind == "systemd" and bool(self.unit))
            or (self.kind == "command" and bool(self.restart_command))
        )

    def wait_reachable(self, timeout_s: float = 60.0) -> bool:
        """Wait for a server that is starting (a crash may have left one half way up)."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self.reachable():
                return True
            if self.kind == "sandbox" and not self._sandbox().is_running():
                return False
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)

    def start(self, log: Callable[[str], None]) -> None:
        """Start a stopped server with the option files as they are now."""
        if self.kind == "sandbox":
            res = self._sandbox().start(self._managed_options(), progress=log)
            log(res.message)
        elif self.kind == "systemd" and self.unit:
            log(f"starting {self.unit}")
            self._systemctl("start")
        elif self.kind == "command" and self.restart_command:
            log(f"starting the server: {self.restart_command}")
            self._run_command()
        else:
            raise ApplyError(
                "the server is not reachable and myaccel does not know how to start it",
                hint="start it yourself, then run `myaccel rollback` again",
            )

    def error_log_errors(self) -> list[str]:
        if self.kind != "sandbox":
            return []
        lines: list[str] = self._sandbox().error_log_tail(200)
        return [ln for ln in lines if "[ERROR]" in ln][-3:]


def _opt_str(v: Any) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str):
        raise TypeError(f"{v!r} is not a string")
    return v


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


def sandbox_handle(name: str, home: str | None = None, *, create: bool = False) -> ServerHandle:
    """The handle of a sandbox; its managed option file lives in ``<sandbox>/conf.d``
    (passed as --config at start). ``create`` makes that directory (apply does, right
    before its journal; a dry run never does)."""
    from myaccel.server.sandbox import Sandbox

    sb = Sandbox.load(name, home=Path(home) if home else None)
    if create:
        (sb.dir / "conf.d").mkdir(exist_ok=True)
    return ServerHandle(
        kind="sandbox",
        params=sb.connect_params(),
        conf_dir=sb.dir / "conf.d",
        sandbox_name=name,
        home=str(sb.home),
    )


@dataclass
class PlannedChanges:
    changes: list[tuple[Setting, str]] = field(default_factory=list)
    recs: list[Recommendation] = field(default_factory=list)
    skipped: list[tuple[Recommendation, str]] = field(default_factory=list)
    restart_needed: bool = False
    server_values: dict[str, str] = field(default_factory=dict)  # read back after apply


def _not_applied(r: Recommendation, handle: ServerHandle) -> str | None:
    """Why ``r`` is not applied to ``handle``'s server, or None."""
    if r.action != "apply":
        return "advisory: needs a human (rebuild, firmware or a decision)"
    if not r.target.startswith(AUTOMATABLE):
        return f"{r.target.split(':', 1)[0]}: not automated yet"
    if r.target.startswith("systemd:server/") and handle.kind == "sandbox":
        # bug fix: this used to resolve to the host's own mariadb/mysql unit
        return (
            "a sandbox is not run by systemd: the host's server unit is not changed for it "
            "(a sandbox's CPU affinity and NUMA policy: myaccel tune --layers server,process)"
        )
    return None


def build_changes(
    plan: Plan,
    handle: ServerHandle,
    *,
    layers: list[str] | None = None,
    only: list[str] | None = None,
    partial: bool = False,
    persist_server_variables: bool = False,
) -> PlannedChanges:
    out = PlannedChanges()
    is_root = os.geteuid() == 0
    for r in plan.recommendations:
        if layers and r.layer not in layers:
            continue
        if only and r.id not in only:
            continue
        if (why_not := _not_applied(r, handle)) is not None:
            out.skipped.append((r, why_not))
            continue
        if r.target.startswith("mysql:"):
            name = r.target.removeprefix("mysql:")
            targets: list[str] = []
            if r.risk == "online":
                targets.append(r.target)
            if handle.conf_dir is not None:
                targets.append(f"mycnf:mysqld/{name}")
                if r.risk != "online":
                    out.restart_needed = True
            elif r.risk != "online":
                why = handle.conf_dir_reason or "no option-file directory is known"
                out.skipped.append((r, f"needs a restart and {why} (pass --conf-dir DIR)"))
                continue
            for t in targets:
                out.changes.append(
                    (
                        setting_for(
                            t,
                            conf_dir=str(handle.conf_dir) if handle.conf_dir else None,
                            connect=handle.connector(),
                            persist_server_variables=persist_server_variables,
                        ),
                        r.proposed,
                    )
                )
            out.server_values[name] = r.proposed
            out.recs.append(r)
            continue
        needs_root = True
        if not is_root and needs_root:
            if partial:
                out.skipped.append((r, f"{r.layer} layer needs root: skipped (--partial)"))
                continue
            raise ApplyError(
                f"{r.id} ({r.layer} layer) needs root and this is uid {os.geteuid()}",
                hint="run as root, or pass --partial to apply only what this user may change, or --layers server",
            )
        for t in expand_target(r.target):
            out.changes.append((setting_for(t, server_unit=handle.unit), r.proposed))
        out.recs.append(r)
    return out


def health_check(handle: ServerHandle, expected: dict[str, str]) -> list[str]:
    """Problems after an apply: cannot connect, a query fails, [ERROR] lines in the error
    log, or a value that did not take (what pt-config-diff would catch)."""
    problems: list[str] = []
    if handle.params is None:
        return problems
    try:
        conn = connect(handle.params)
    except MyaccelError as exc:
        return [f"cannot connect: {exc.message}"]
    try:
        rows = query_rows(conn, "SELECT 1")
        if not rows or rows[0][0] != 1:
            problems.append("SELECT 1 did not return 1")
        for name, want in expected.items():
            got = query_rows(conn, f"SELECT @@GLOBAL.{name}")
            val = str(got[0][0]) if got else None
            if val is None or not values_equal(val, want):
                problems.append(f"{name} is {val}, expected {want}")
    except Exception as exc:  # any driver error is a failed check
        problems.append(f"query failed: {exc}")
    finally:
        conn.close()
    return problems


def _handle_path(journal_path: Path) -> Path:
    # Beside the journals, in a subdirectory: the journal directory holds journals only.
    return journal_path.parent / "servers" / f"{journal_path.stem}.json"


def save_handle(journal_path: Path, handle: ServerHandle) -> None:
    """Write the handle beside a journal (what journals without a ``server`` record
    used); kept for callers that record the server after apply."""
    p = _handle_path(journal_path)
    p.parent.mkdir(mode=0o700, exist_ok=True)
    write_json_durably(p, handle.describe())


def load_handle(journal_path: Path, journal: Journal | None = None) -> ServerHandle | None:
    """The server a journal was applied to: its ``server`` record, else (journals written
    before that record existed) ``servers/<id>.json`` beside it. A malformed record or
    file raises ``JournalCorrupt``; None when neither exists."""
    if journal is not None and journal.data.server is not None:
        return ServerHandle.from_dict(journal.data.server, str(journal_path))
    p = _handle_path(journal_path)
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
    return ServerHandle.from_dict(doc, str(p))


def preview_changes(
    changes: list[tuple[Setting, str]], new_dirs: tuple[Path, ...] = ()
) -> tuple[list[tuple[Setting, str, Change]], list[str]]:
    """``plan_changes`` for display, when option files would go into a directory that
    apply creates first (``new_dirs``, e.g. a sandbox's conf.d) and that does not exist yet:
    those settings are shown as writing a new file instead of failing to plan. Creates
    nothing (the dry-run path)."""
    missing = {str(d) for d in new_dirs if not d.is_dir()}

    def deferred(s: Setting) -> bool:
        return isinstance(s, OptionFileSetting) and str(host_path(s.root, s.conf_dir)) in missing

    planned, unchanged = plan_changes([(s, v) for s, v in changes if not deferred(s)])
    by_setting = {id(s): (s, d, c) for s, d, c in planned}
    out: list[tuple[Setting, str, Change]] = []
    for s, v in changes:
        if deferred(s):
            assert isinstance(s, OptionFileSetting)
            ch = Change(
                target=s.target,
                kind=s.kind,
                current=None,
                desired=v.strip(),
                needs_root=s.needs_root,
                writes=(s.path,),
                takes_effect="server restart",
            )
            out.append((s, ch.desired, ch))
        elif id(s) in by_setting:
            out.append(by_setting[id(s)])
    return out, unchanged
