"""From a plan to journaled changes on a server: which setting carries each
recommendation (``build_changes``), what a dry run shows (``preview_changes``), and the
health check after a change (``health_check``). The server is a ``target.ServerTarget``;
the apply and rollback around a restart are ``protocol``'s."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from myaccel.actions.applier import plan_changes
from myaccel.actions.errors import ApplyError
from myaccel.actions.files import host_path
from myaccel.actions.settings import (
    Change,
    OptionFileSetting,
    Setting,
    expand_target,
    setting_for,
    values_equal,
)
from myaccel.actions.target import ServerTarget
from myaccel.errors import MyaccelError
from myaccel.rules.model import Plan, Recommendation
from myaccel.server.connection import connect, query_rows

AUTOMATABLE = ("mysql:", "sysctl:", "sysfs:", "debugfs:", "systemd:", "file:", "irq:")


@dataclass
class PlannedChanges:
    changes: list[tuple[Setting, str]] = field(default_factory=list)
    recs: list[Recommendation] = field(default_factory=list)
    skipped: list[tuple[Recommendation, str]] = field(default_factory=list)
    restart_needed: bool = False
    server_values: dict[str, str] = field(default_factory=dict)  # read back after apply


def _not_applied(r: Recommendation, target: ServerTarget) -> str | None:
    """Why ``r`` is not applied to ``target``'s server, or None."""
    if r.action != "apply":
        return "advisory: needs a human (rebuild, firmware or a decision)"
    if not r.target.startswith(AUTOMATABLE):
        return f"{r.target.split(':', 1)[0]}: not automated yet"
    if r.target.startswith("systemd:server/") and not target.host_service:
        # bug fix: this used to resolve to the host's own mariadb/mysql unit
        return (
            "a sandbox is not run by systemd: the host's server unit is not changed for it "
            "(a sandbox's CPU affinity and NUMA policy: myaccel tune --layers server,process)"
        )
    if r.target.startswith("systemd:server/") and target.unit is None:
        return (
            "the server is not run by a systemd unit myaccel found (its main process is in "
            "no system service): pass --server-unit UNIT if one runs it"
        )
    return None


def build_changes(
    plan: Plan,
    target: ServerTarget,
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
        if (why_not := _not_applied(r, target)) is not None:
            out.skipped.append((r, why_not))
            continue
        if r.target.startswith("mysql:"):
            name = r.target.removeprefix("mysql:")
            targets: list[str] = []
            if r.risk == "online":
                targets.append(r.target)
            if target.conf_dir is not None:
                targets.append(f"mycnf:mysqld/{name}")
                if r.risk != "online":
                    out.restart_needed = True
            elif r.risk != "online":
                why = target.conf_dir_reason or "no option-file directory is known"
                out.skipped.append((r, f"needs a restart and {why} (pass --conf-dir DIR)"))
                continue
            for t in targets:
                out.changes.append(
                    (
                        setting_for(
                            t,
                            conf_dir=str(target.conf_dir) if target.conf_dir else None,
                            connect=target.connector(),
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
            out.changes.append((setting_for(t, server_unit=target.unit), r.proposed))
        if r.risk == "restart" and r.target.startswith(
            ("systemd:server/", f"systemd:{target.unit}/")
        ):
            out.restart_needed = True  # a drop-in acts when the unit starts again
        out.recs.append(r)
    return out


def health_check(target: ServerTarget, expected: dict[str, str]) -> list[str]:
    """Problems after an apply: cannot connect, a query fails, [ERROR] lines in the error
    log, or a value that did not take (what pt-config-diff would catch)."""
    problems: list[str] = []
    if target.params is None:
        return problems
    try:
        conn = connect(target.params)
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
