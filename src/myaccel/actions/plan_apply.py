"""From a plan to journaled changes on a server: which setting carries each
recommendation, how the server is restarted (sandbox or systemd) and health-checked, and
automatic rollback when the server does not come back healthy."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from myaccel import proc
from myaccel.actions.errors import ApplyError
from myaccel.actions.settings import Setting, expand_target, setting_for, values_equal
from myaccel.errors import MyaccelError
from myaccel.rules.model import Plan, Recommendation
from myaccel.server.connection import ConnectParams, connect, query_rows

MANAGED_CNF = "99-myaccel.cnf"
AUTOMATABLE = ("mysql:", "sysctl:", "sysfs:", "debugfs:", "systemd:", "file:")


@dataclass
class ServerHandle:
    """How to reach, restart and check the server a plan is applied to."""

    kind: str  # sandbox, systemd, none
    params: ConnectParams | None
    conf_dir: Path | None
    sandbox_name: str | None = None
    unit: str | None = None
    home: str | None = None

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
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ServerHandle:
        if d.get("kind") == "sandbox":
            return sandbox_handle(str(d["sandbox"]), home=d.get("home"))
        c = d.get("connection")
        params = (
            ConnectParams(
                host=c.get("host"),
                port=int(c.get("port") or 3306),
                socket=c.get("socket"),
                user=str(c.get("user")),
                password=None,
            )
            if isinstance(c, dict)
            else None
        )
        return cls(
            kind=str(d.get("kind", "none")),
            params=params,
            conf_dir=Path(d["conf_dir"]) if d.get("conf_dir") else None,
            unit=d.get("unit"),
        )

    def restart(self, log: Callable[[str], None]) -> None:
        if self.kind == "sandbox":
            from myaccel.server.sandbox import Sandbox

            sb = Sandbox.load(str(self.sandbox_name), home=Path(self.home) if self.home else None)
            sb.stop()
            mf = self.managed_file
            sb.start(config=mf if mf is not None and mf.exists() else None, progress=log)
        elif self.kind == "systemd" and self.unit:
            log(f"restarting {self.unit}")
            r = proc.run(["systemctl", "restart", self.unit], timeout_s=600)
            if not r.ok:
                raise ApplyError(
                    f"systemctl restart {self.unit} failed: {r.stderr.strip()[:200]}",
                    hint=f"see journalctl -u {self.unit}",
                )
        else:
            raise ApplyError(
                "restart-only settings changed but myaccel does not know how to restart this server",
                hint="pass --server-unit UNIT (systemd) or use --sandbox; or restart it yourself and run `myaccel verify`",
            )

    def error_log_errors(self) -> list[str]:
        if self.kind != "sandbox":
            return []
        from myaccel.server.sandbox import Sandbox

        sb = Sandbox.load(str(self.sandbox_name), home=Path(self.home) if self.home else None)
        return [ln for ln in sb.error_log_tail(200) if "[ERROR]" in ln][-3:]


def sandbox_handle(name: str, home: str | None = None) -> ServerHandle:
    from myaccel.server.sandbox import Sandbox

    sb = Sandbox.load(name, home=Path(home) if home else None)
    # The sandbox's own directory for the managed option file (passed as --config at start).
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
        if r.action != "apply":
            out.skipped.append((r, "advisory: needs a human (rebuild, firmware or a decision)"))
            continue
        if not r.target.startswith(AUTOMATABLE):
            out.skipped.append((r, f"{r.target.split(':', 1)[0]}: not automated yet"))
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
                out.skipped.append(
                    (r, "needs a restart and no option-file directory is known (--conf-dir)")
                )
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
    p = _handle_path(journal_path)
    p.parent.mkdir(mode=0o700, exist_ok=True)
    p.write_text(json.dumps(handle.describe()))


def load_handle(journal_path: Path) -> ServerHandle | None:
    p = _handle_path(journal_path)
    if not p.exists():
        return None
    return ServerHandle.from_dict(json.loads(p.read_text()))
