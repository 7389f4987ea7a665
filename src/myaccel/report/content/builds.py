"""The build sections: a `myaccel build` manifest summarized for a DBA (flags next to what
they bought), or any other manifest shown generically."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from myaccel.report.load import Loaded


@dataclass
class BuildSummary:
    """What a DBA reads in a `myaccel build` manifest: flags next to what they bought."""

    label: str
    opts: str
    status: str
    error: str
    compiler: str
    target: str
    install_dir: str
    flags: list[tuple[str, str]]  # phase, flags line
    left_out: int
    stages: list[tuple[str, str, str, str]]  # name, status, seconds, note
    checks: list[tuple[str, str, str]]  # id, status, evidence
    callgrind: list[tuple[str, str, str, str]]  # build, Ir, operations, Ir per operation
    callgrind_workload: str
    callgrind_delta: str | None


@dataclass
class BuildView:
    path: Path
    schema: str
    scalars: list[tuple[str, str]]
    sections: list[tuple[str, list[tuple[str, str]]]]  # flags, stages, verification, ...
    summary: BuildSummary | None = None  # a manifest of `myaccel build` (myaccel.build/1)


def _short(v: Any, limit: int = 240) -> str:
    if isinstance(v, str):
        s = v
    elif isinstance(v, list) and all(isinstance(x, str | int | float) for x in v):
        s = " ".join(str(x) for x in v)
    else:
        import json

        s = json.dumps(v, sort_keys=True, default=str)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _pairs(v: Any) -> list[tuple[str, str]]:
    if isinstance(v, dict):
        return [(str(k), _short(x)) for k, x in v.items()]
    if isinstance(v, list):
        out = []
        for i, x in enumerate(v):
            if isinstance(x, dict):
                name = str(x.get("name") or x.get("id") or x.get("stage") or i)
                rest = {k: y for k, y in x.items() if k not in ("name", "id", "stage")}
                out.append((name, _short(rest)))
            else:
                out.append((str(i), _short(x)))
        return out
    return [("", _short(v))]


def build_view(lb: Loaded[dict[str, Any]]) -> BuildView:
    doc = lb.doc
    schema = str(doc.get("schema") or doc.get("schema_version"))
    scalars = [
        (k, _short(v))
        for k, v in doc.items()
        if k not in ("schema", "schema_version") and isinstance(v, str | int | float | bool)
    ]
    sections: list[tuple[str, list[tuple[str, str]]]] = []
    keys = ["flags", "stages", "verification"]
    keys += [k for k, v in doc.items() if isinstance(v, dict | list) and k not in keys]
    for k in keys:
        if k in doc:
            sections.append((k, _pairs(doc[k])))
    return BuildView(
        path=lb.path,
        schema=schema,
        scalars=scalars,
        sections=sections,
        summary=build_summary(doc) if schema == "myaccel.build/1" else None,
    )


def build_summary(doc: dict[str, Any]) -> BuildSummary | None:
    """The structured view of a `myaccel build` manifest; None (generic view) when the
    document does not validate, e.g. a manifest cut short or written by hand."""
    from myaccel.artifacts import Source, validate
    from myaccel.builder.manifest import BuildManifest, Callgrind
    from myaccel.builder.report import flags_line
    from myaccel.errors import MyaccelError

    try:
        m = validate(doc, BuildManifest, Source(None, "build manifest", ""))
    except MyaccelError:
        return None
    stages = []
    for st in m.stages:
        note = st.reason or str(st.detail.get("summary", ""))
        dur = f"{st.duration_s:.1f}" if st.duration_s is not None else ""
        stages.append((st.name, st.status + (" (resumed)" if st.resumed else ""), dur, note))
    cg = m.measurements.callgrind or Callgrind()
    rows = [
        (label.replace("_", " "), f"{r.ir_total:,}", f"{r.ops:,}", f"{r.ir_per_op:,.1f}")
        for label in ("baseline", "this_build")
        if (r := cg.run(label)) is not None
    ]
    delta = cg.delta_pct
    return BuildSummary(
        label=m.source.label or m.source.path or "?",
        opts=", ".join(m.request.opts) or "plain",
        status=m.status,
        error=m.error or "",
        compiler=f"GCC {m.compiler.version or '?'} ({m.compiler.triplet or '?'})",
        target=m.target.why,
        install_dir=m.install_dir,
        flags=[(phase, flags_line(f)) for phase, f in m.flags.items()],
        left_out=len(m.left_out),
        stages=stages,
        checks=[(c.id, c.status, c.evidence) for c in m.verification],
        callgrind=rows,
        callgrind_workload=cg.workload or "",
        callgrind_delta=f"{float(delta):+.2f}%" if delta is not None else None,
    )
