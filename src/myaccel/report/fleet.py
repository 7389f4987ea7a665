"""The fleet report: one page across the hosts of an Ansible rollout (ansible/playbooks).

It reads the per-host artifacts the playbooks collect under ``DIR/hosts/HOST/``
(``probe.json``: the host's class; ``canary.json``: the A/B on the canary's sandbox;
``apply.json``: what was changed and the journal; ``health.json``: a failed health check
and its rollback; ``verify.json``: drift and the journals in effect; ``rollback.json``:
the fleet rollback), the class plans under ``DIR/plans/`` and the holds under
``DIR/holds/``, and draws them with the report package's templates and stylesheet.

A host's files come from different rollouts: its status is that of the newest record of
what happened to it (an apply, a failed health check and its rollback, the fleet rollback),
by the ``recorded_at`` the playbooks write (the file's time for a file without one); drift
and journals in effect collected before that record are not taken for the present.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

from markupsafe import Markup
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from myaccel.artifacts import read_json, write_text
from myaccel.errors import DataError, UsageError, validation_summary
from myaccel.report.render import _env

FLEET_MD = "fleet-report.md"
FLEET_HTML = "fleet-report.html"


@dataclass
class HostRow:
    host: str
    klass: str
    canary: bool
    canary_in_place_of: str  # the canary this host stood in for (myaccel_canary_substitute)
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


_HOST_HINT = (
    "the file was edited or damaged: collect the host again (collect.yml), or remove the file"
)
_PLAN_HINT = "the class plan was edited or damaged: delete it and plan the class again (plan.yml)"
_HOLD_HINT = "the hold was edited or damaged: delete it (the class is held until then anyway)"


class _Doc(BaseModel):
    """A per-host or per-class file: an object whose fields the report reads have the
    types the playbooks write (Ansible adds fields of its own: ignored)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class _Record(_Doc):
    """A record of something that happened to a host, with the time the playbook wrote it."""

    recorded_at: datetime | None = None


class ProbeDoc(_Doc):
    klass: str = Field(alias="class")  # required: the host is grouped by it
    canary: bool = False
    canary_in_place_of: str | None = None  # myaccel_canary_substitute: the canary it replaced
    arch: str | None = None
    cpu_part: str | None = None
    logical_cpus: int | None = None
    numa_nodes: int | None = None
    memory_gib: int | float | None = None
    flavor: str | None = None
    version: str | None = None

    @field_validator("klass")
    @classmethod
    def _a_file_name(cls, v: str) -> str:
        # the class names plans/CLASS.json and holds/CLASS.json: one path component
        if not v or "/" in v or "\x00" in v or v in (".", ".."):
            raise ValueError("not a class name (one path component)")
        return v


class CellDoc(_Doc):
    workload: str | None = None
    threads: int | None = None
    verdict: str | None = None
    delta_pct: float | None = None


class CanaryDoc(_Doc):
    cells: list[CellDoc] | None = None
    msg: str | None = None


class ChangeDoc(_Doc):
    target: str | None = None
    current: Any = None
    desired: Any = None


class ApplyDoc(_Record):
    changed: bool = False
    changes: list[ChangeDoc] | None = None
    journal: str | None = None


class HealthDoc(_Record):
    error: str | None = None


class DriftDoc(_Doc):
    target: str | None = None
    expected: Any = None
    actual: Any = None


class VerifyResultDoc(_Doc):
    drift: list[DriftDoc] | None = None


class VerifyDoc(_Record):
    verify: VerifyResultDoc | None = None
    journals_in_effect: list[str] | None = None


class RollbackDoc(_Record):
    changed: bool = False
    journals: list[str] | None = None


class RecommendationDoc(_Doc):
    id: str | None = None
    target: str | None = None
    proposed: Any = None
    risk: str | None = None


class PlanDoc(_Doc):
    recommendations: list[RecommendationDoc] | None = None


class HoldDoc(_Doc):
    host: str | None = None


D = TypeVar("D", bound=_Doc)


def _read(path: Path, model: type[D], hint: str = _HOST_HINT) -> D | None:
    """The document in ``path`` (None when there is none); a damaged one, or one whose
    fields have other types than the playbooks write, is a ``DataError`` naming the file."""
    try:
        doc = read_json(path)  # bounded in size and nesting (200,000 nested '[')
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataError(f"cannot read {path}: {why}", hint=hint) from None
    if not isinstance(doc, dict):
        raise DataError(
            f"cannot read {path}: a JSON {type(doc).__name__}, not an object", hint=hint
        )
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        raise DataError(f"cannot read {path}: {validation_summary(exc)}", hint=hint) from None


def _verdict(canary: CanaryDoc | None) -> str:
    if not canary:
        return ""
    parts = [
        f"{c.workload}/{c.threads}: {c.verdict} "
        + (f"{c.delta_pct:+.1f}%" if c.delta_pct is not None else "")
        for c in canary.cells or []
    ]
    return "; ".join(p.strip() for p in parts) or (canary.msg or "")


Event = Literal["apply", "health", "rollback"]


def _when(path: Path, doc: _Record | None) -> datetime | None:
    """When the record was written: its ``recorded_at``, else the file's modification time."""
    if doc is None:
        return None
    if doc.recorded_at is not None:
        at = doc.recorded_at
        return at if at.tzinfo else at.replace(tzinfo=UTC)
    return datetime.fromtimestamp(path.stat().st_mtime, UTC)


def _latest(
    apply: ApplyDoc | None,
    health: HealthDoc | None,
    rollback: RollbackDoc | None,
    times: dict[str, datetime | None],
) -> tuple[Event | None, datetime | None]:
    """The newest record of a change to the host (an apply that changed something, a failed
    health check and its rollback, a fleet rollback that undid something) and its time."""
    events: list[tuple[datetime, Event]] = []
    if apply and apply.changed and times["apply"]:
        events.append((times["apply"], "apply"))
    if health and times["health"]:
        events.append((times["health"], "health"))
    if rollback and rollback.changed and times["rollback"]:
        events.append((times["rollback"], "rollback"))
    if not events:
        return None, None
    at, event = max(events, key=lambda e: e[0])
    return event, at


def _status(latest: Event | None, apply: ApplyDoc | None, in_effect: list[str]) -> str:
    if latest == "rollback":
        return "rolled back (fleet)"
    if latest == "health":
        return "failed health check: rolled back"
    if in_effect:
        return "applied"
    if apply and apply.changed:
        return "applied, since undone"
    return "unchanged"


def _journal_state(journal: str | None, in_effect: list[str], rollback: RollbackDoc | None) -> str:
    if not journal:
        return ", ".join(f"{j} (in effect)" for j in in_effect)
    name = Path(journal).name
    undone = rollback is not None and name in {Path(j).name for j in rollback.journals or []}
    return f"{name} ({'in effect' if name in in_effect and not undone else 'undone'})"


def _host_row(hdir: Path) -> HostRow:
    probe = _read(hdir / "probe.json", ProbeDoc) or ProbeDoc(klass="?")  # not probed yet
    canary = _read(hdir / "canary.json", CanaryDoc)
    apply = _read(hdir / "apply.json", ApplyDoc)
    health = _read(hdir / "health.json", HealthDoc)
    verify_doc = _read(hdir / "verify.json", VerifyDoc)
    rollback = _read(hdir / "rollback.json", RollbackDoc)
    times = {
        "apply": _when(hdir / "apply.json", apply),
        "health": _when(hdir / "health.json", health),
        "rollback": _when(hdir / "rollback.json", rollback),
        "verify": _when(hdir / "verify.json", verify_doc),
    }
    latest, latest_at = _latest(apply, health, rollback, times)
    verify = verify_doc or VerifyDoc()
    collected_at = times["verify"]
    drift = [
        f"{x.target}: expected {x.expected}, found {x.actual}"
        for x in (verify.verify.drift if verify.verify else None) or []
    ]
    in_effect = [Path(j).name for j in verify.journals_in_effect or []]
    if latest_at is not None and (collected_at is None or collected_at < latest_at):
        # collected before the newest change (or never): that change says what is in
        # effect; a health check's rollback and the fleet rollback leave nothing in effect
        in_effect = (
            [Path(apply.journal).name] if latest == "apply" and apply and apply.journal else []
        )
        drift = ["not collected since the apply (collect.yml)"] if latest == "apply" else []
    changes = [
        f"{c.target}: {'(not set)' if c.current is None else c.current} -> {c.desired}"
        for c in (apply.changes if apply else None) or []
    ]
    return HostRow(
        host=hdir.name,
        klass=probe.klass,
        canary=probe.canary,
        canary_in_place_of=probe.canary_in_place_of or "",
        hardware=f"{probe.arch} {probe.cpu_part}, {probe.logical_cpus} CPUs, "
        + (f"{probe.numa_nodes} NUMA nodes, " if (probe.numa_nodes or 1) > 1 else "")
        + f"{probe.memory_gib} GiB",
        server=f"{probe.flavor} {probe.version}",
        status=_status(latest, apply, in_effect),
        changes=changes,
        verdict=_verdict(canary),
        journal=_journal_state(apply.journal if apply else None, in_effect, rollback),
        drift=drift,
        # a failed health check of an earlier rollout is history, not this host's state
        note=(health.error or "")[:300] if health and latest == "health" else "",
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
        plan = _read(fleet_dir / "plans" / f"{name}.json", PlanDoc, _PLAN_HINT) or PlanDoc()
        hold = _read(fleet_dir / "holds" / f"{name}.json", HoldDoc, _HOLD_HINT)
        recs = [f"{r.id}: {r.target} = {r.proposed} ({r.risk})" for r in plan.recommendations or []]
        classes.append(
            ClassRow(
                name=name,
                hosts=[r.host for r in rows if r.klass == name],
                recommendations=recs,
                held_by=str(hold.host) if hold else None,
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
