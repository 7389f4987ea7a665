"""The plan and journal sections: each recommendation with its status (applied, measured,
rolled back, ...), and each journal change with the statement it ran and its file diff."""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from myaccel.actions.journal import JournalData, JournalEntry
from myaccel.report.load import Loaded
from myaccel.rules.model import LAYERS, Plan, Recommendation


@dataclass
class PlanRow:
    id: str
    layer: str
    status: str  # applied, measured, rolled back, failed, not applied, advisory, kept, skipped
    why: str  # rationale, or the reason it was not applied / skipped
    # What a skipped rule has none of: it recommended nothing.
    title: str = ""
    target: str = "-"
    current: str = "-"
    proposed: str = "-"
    source: str = ""
    expected: str = ""
    risk: str = ""


@dataclass
class PlanView:
    path: Path
    plan: Plan
    rows: list[PlanRow]
    never_applied: bool
    counts: dict[str, int]

    def by_layer(self) -> list[tuple[str, list[PlanRow]]]:
        """Recommendations per layer (in the plan's layer order); skipped rules apart."""
        order = {lay: i for i, lay in enumerate(LAYERS)}
        rows = [r for r in self.rows if r.status != "skipped"]
        layers = sorted({r.layer for r in rows}, key=lambda x: (order.get(x, 99), x))
        return [(lay, [r for r in rows if r.layer == lay]) for lay in layers]

    @property
    def skipped(self) -> list[PlanRow]:
        return [r for r in self.rows if r.status == "skipped"]


def _journal_targets(journals: Sequence[Loaded[JournalData]]) -> dict[str, str]:
    """Setting name or target -> entry state, over all journals (later ones win)."""
    out: dict[str, str] = {}
    for lj in sorted(journals, key=lambda j: j.doc.created_at):
        for e in lj.doc.entries:
            out[e.target] = e.state
            if e.target.startswith("mycnf:"):
                key = e.target.split("/", 1)[-1]
                out.setdefault(f"mysql:{key}", e.state)
    return out


def _cnf_ids(paths: Sequence[Path]) -> set[str]:
    ids: set[str] = set()
    for p in paths:
        try:
            text = p.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("# ") and ": " in line:
                head = line[2:].split(": ", 1)[0]
                if head and " " not in head:
                    ids.add(head)
    return ids


def _not_applied_reason(r: Recommendation, sandbox_run: bool) -> str:
    if r.action == "advisory":
        return "advisory: needs a human (rebuild, firmware or a decision)"
    if sandbox_run and not r.target.startswith("mysql:"):
        return (
            f"{r.layer} layer: host-wide, applied with `myaccel apply` on a server, "
            "not to a sandbox benchmark"
        )
    if sandbox_run:
        return "not in the candidate configuration (rejected by the knob catalog or not applicable)"
    return "no journal entry for this target (the apply left it out or was not run for it)"


def plan_view(
    lp: Loaded[Plan], journals: Sequence[Loaded[JournalData]], cnfs: Sequence[Path]
) -> PlanView:
    plan = lp.doc
    jt = _journal_targets([j for j in journals if j.doc.plan_id in (None, plan.created_at)])
    cnf = _cnf_ids(cnfs)
    never = not jt and not cnf
    rows: list[PlanRow] = []
    for r in plan.recommendations:
        state = jt.get(r.target)
        if state is None and r.target.startswith("mysql:"):
            state = jt.get(f"mycnf:mysqld/{r.target.removeprefix('mysql:')}")
        if state is not None:
            status = {
                "applied": "applied",
                "reverted": "rolled back",
                "failed": "failed",
                "pending": "pending (interrupted)",
            }.get(state, state)
            why = r.rationale
        elif r.id in cnf:
            status, why = "measured", r.rationale
        elif r.action == "advisory" and r.current is not None and str(r.current) == r.proposed:
            status, why = "kept", r.rationale  # a note that nothing needs to change
        elif r.action == "advisory":
            status, why = "advisory", r.rationale
        elif never:
            status, why = "not applied", "the plan was never applied (no journal, no A/B)"
        else:
            status, why = "not applied", _not_applied_reason(r, bool(cnf))
        rows.append(
            PlanRow(
                id=r.id,
                layer=r.layer,
                title=r.title,
                target=r.target,
                current="-" if r.current is None else str(r.current),
                proposed=str(r.proposed),
                status=status,
                why=why,
                source=r.effect_source,
                expected=r.expected_effect,
                risk=r.risk,
            )
        )
    for s in plan.skipped:
        rows.append(PlanRow(id=s.id, layer=s.layer, status="skipped", why=s.reason))
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    return PlanView(path=lp.path, plan=plan, rows=rows, never_applied=never, counts=counts)


@dataclass
class Change:
    index: int
    target: str
    kind: str
    statement: str  # the exact change: SET, sysctl, file line
    old: str
    new: str
    state: str
    read_back: str
    diff: str  # unified diff of a file change, when both sides are known


def _statement(e: JournalEntry) -> str:
    sp = e.spec
    if e.kind == "mysql":
        verb = "SET PERSIST" if sp.get("persist") else "SET GLOBAL"
        return f"{verb} {sp.get('name', e.target.split(':', 1)[-1])} = {e.new_value}"
    if e.kind == "mycnf":
        path = Path(str(sp.get("conf_dir", ""))) / str(sp.get("filename", ""))
        return f"{path}: [{sp.get('group', 'mysqld')}] {sp.get('key', '')} = {e.new_value}"
    if e.target.startswith("sysctl:"):
        return f"sysctl -w {e.target.removeprefix('sysctl:')}={e.new_value}"
    if e.target.startswith("sysfs:"):
        return f"echo {e.new_value} > {e.target.removeprefix('sysfs:')}"
    return f"{e.target} = {e.new_value}"


def journal_changes(j: JournalData) -> list[Change]:
    """Entries in apply order; file diffs between consecutive recorded states of a file."""
    snapshots: dict[str, list[tuple[int, bytes | None]]] = {}
    for e in j.entries:
        for f in e.old.files:
            content = f.content if f.existed else b""
            snapshots.setdefault(f.path, []).append((e.index, content))
    diffs: dict[int, str] = {}
    for path, snaps in snapshots.items():
        for (idx, a), (_, b) in itertools.pairwise(snaps):
            if a is None or b is None:
                continue
            d = difflib.unified_diff(
                a.decode(errors="replace").splitlines(),
                b.decode(errors="replace").splitlines(),
                fromfile=f"{path} (before)",
                tofile=f"{path} (after)",
                lineterm="",
                n=1,
            )
            diffs[idx] = "\n".join(d)
    out: list[Change] = []
    for e in j.entries:
        old = e.old.value
        if old is None and e.old.files:
            old = "(file did not exist)" if not e.old.files[0].existed else "(file content)"
        out.append(
            Change(
                index=e.index,
                target=e.target,
                kind=e.kind,
                statement=_statement(e),
                old="-" if old is None else old,
                new=e.new_value,
                state=e.state,
                read_back=e.read_back or "-",
                diff=diffs.get(e.index, ""),
            )
        )
    return out


def not_applied_rows(plans: list[PlanView]) -> list[tuple[str, str]]:
    return [
        (f"{r.id} ({r.target})" if r.target != "-" else r.id, f"{r.status}: {r.why}")
        for pv in plans
        for r in pv.rows
        if r.status in ("not applied", "advisory", "failed", "pending (interrupted)")
    ]
