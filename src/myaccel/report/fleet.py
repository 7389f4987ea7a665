"""The fleet report: one page across the hosts of an Ansible rollout (ansible/playbooks).

It reads the per-host artifacts the playbooks collect under ``DIR/hosts/HOST/``
(``probe.json``: the host's class; ``canary.json``: the A/B on the canary's sandbox;
``apply.json``: what was changed and the journal; ``health.json``: a failed health check
and its rollback; ``verify.json``: drift and the journals in effect; ``rollback.json``:
the fleet rollback), the class plans under ``DIR/plans/`` and the holds under
``DIR/holds/``, and draws them with the report package's templates and stylesheet.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from markupsafe import Markup

from myaccel.artifacts import write_text
from myaccel.errors import DataError, UsageError
from myaccel.report.render import _env

FLEET_MD = "fleet-report.md"
FLEET_HTML = "fleet-report.html"


@dataclass
class HostRow:
    host: str
    klass: str
    canary: bool
    hardware: str
    server: str
    status: str
    changes: list[str] = field(default_factory=list)
    verdict: str = ""
    journal: str = ""  # the journal of the fleet's apply on this host, with its state
    drift: list[str] = field(default_factory=list)
    note: str = ""


@dataclass
class ClassRow:
    name: str
    hosts: list[str]
    recommendations: list[str]
    held_by: str | None


@dataclass
class FleetContent:
    title: str
    created_at: str
    source: str
    classes: list[ClassRow]
    hosts: list[HostRow]
    counts: dict[str, int]


def _read(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise DataError(
            f"cannot read {path}: {exc}", hint="collect the host again (collect.yml)"
        ) from None
    return doc if isinstance(doc, dict) else None


def _verdict(canary: dict[str, Any] | None) -> str:
    if not canary:
        return ""
    cells = canary.get("cells") or []
    parts = [
        f"{c.get('workload')}/{c.get('threads')}: {c.get('verdict')} "
        + (f"{c['delta_pct']:+.1f}%" if isinstance(c.get("delta_pct"), int | float) else "")
        for c in cells
    ]
    return "; ".join(p.strip() for p in parts) or str(canary.get("msg", ""))


def _status(d: dict[str, dict[str, Any] | None], in_effect: list[str]) -> str:
    if d["rollback"] and d["rollback"].get("changed"):
        return "rolled back (fleet)"
    if d["health"]:
        return "failed health check: rolled back"
    if in_effect:
        return "applied"
    if d["apply"] and d["apply"].get("changed"):
        return "applied, since undone"
    return "unchanged"


def _journal_state(
    journal: str | None, in_effect: list[str], rollback: dict[str, Any] | None
) -> str:
    if not journal:
        return ", ".join(f"{j} (in effect)" for j in in_effect)
    name = Path(journal).name
    undone = rollback is not None and name in {Path(j).name for j in rollback.get("journals") or []}
    return f"{name} ({'in effect' if name in in_effect and not undone else 'undone'})"


def _host_row(hdir: Path) -> HostRow:
    d = {
        k: _read(hdir / f"{k}.json")
        for k in ("probe", "canary", "apply", "health", "verify", "rollback")
    }
    probe = d["probe"] or {}
    verify = d["verify"] or {}
    in_effect = [Path(j).name for j in verify.get("journals_in_effect") or []]
    drift = [
        f"{x.get('target')}: expected {x.get('expected')}, found {x.get('actual')}"
        for x in (verify.get("verify") or {}).get("drift") or []
    ]
    changes = [
        f"{c.get('target')}: {c.get('current')} -> {c.get('desired')}"
        for c in (d["apply"] or {}).get("changes") or []
    ]
    health = d["health"] or {}
    journal = (d["apply"] or {}).get("journal")
    return HostRow(
        host=hdir.name,
        klass=str(probe.get("class", "?")),
        canary=bool(probe.get("canary")),
        hardware=f"{probe.get('arch')} {probe.get('cpu_part')}, {probe.get('logical_cpus')} CPUs, "
        f"{probe.get('memory_gib')} GiB",
        server=f"{probe.get('flavor')} {probe.get('version')}",
        status=_status(d, in_effect),
        changes=changes,
        verdict=_verdict(d["canary"]),
        journal=_journal_state(journal, in_effect, d["rollback"]),
        drift=drift,
        note=str(health.get("error") or "")[:300],
    )


def build_fleet(fleet_dir: Path) -> FleetContent:
    hosts_dir = fleet_dir / "hosts"
    if not hosts_dir.is_dir():
        raise UsageError(
            f"no hosts/ directory in {fleet_dir}",
            hint="run the collection's playbooks with myaccel_fleet_dir set to it (collect.yml)",
        )
    rows = [_host_row(h) for h in sorted(hosts_dir.iterdir()) if h.is_dir()]
    classes: list[ClassRow] = []
    for name in sorted({r.klass for r in rows}):
        plan = _read(fleet_dir / "plans" / f"{name}.json") or {}
        hold = _read(fleet_dir / "holds" / f"{name}.json")
        recs = [
            f"{r.get('id')}: {r.get('target')} = {r.get('proposed')} ({r.get('risk')})"
            for r in plan.get("recommendations") or []
        ]
        classes.append(
            ClassRow(
                name=name,
                hosts=[r.host for r in rows if r.klass == name],
                recommendations=recs,
                held_by=str(hold.get("host")) if hold else None,
            )
        )
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    return FleetContent(
        title=f"Fleet report: {len(rows)} hosts, {len(classes)} classes",
        created_at=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        source=str(fleet_dir),
        classes=classes,
        hosts=rows,
        counts=counts,
    )


def write_fleet_report(fleet_dir: Path, out: Path | None = None) -> list[Path]:
    """Write fleet-report.md and fleet-report.html (into ``out``, default ``fleet_dir``)."""
    content = build_fleet(fleet_dir)
    out = out or fleet_dir
    out.mkdir(parents=True, exist_ok=True)
    md = _env(autoescape=False).get_template("fleet.md.j2").render(f=content)
    env = _env(autoescape=True)
    assert env.loader is not None
    css = env.loader.get_source(env, "report.css")[0]
    html = env.get_template("fleet.html.j2").render(f=content, css=Markup(css))
    paths = [out / FLEET_MD, out / FLEET_HTML]
    write_text(paths[0], md)
    write_text(paths[1], html)
    return paths
