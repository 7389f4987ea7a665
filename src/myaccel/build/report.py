"""The build report (``OUT/build-report.md``): flags next to what they bought, from the
manifest alone (so it can be regenerated from any manifest.json)."""

from __future__ import annotations

from typing import Any

from myaccel.build.manifest import BuildManifest


def flags_line(phase: dict[str, Any]) -> str:
    cxx = " ".join(phase.get("cxx_flags") or []) or "(none)"
    ld = " ".join(phase.get("exe_linker_flags") or [])
    defs = phase.get("cmake_defs") or {}
    picked = {
        k: v
        for k, v in defs.items()
        if k.startswith(("CMAKE_INTERPROCEDURAL", "WITH_LTO", "FPROFILE", "CPU_LEVEL1"))
    }
    parts = [f"CXXFLAGS `{cxx}`"]
    if ld:
        parts.append(f"LDFLAGS `{ld}`")
    parts += [f"`{k}={v}`" for k, v in sorted(picked.items())]
    return ", ".join(parts)


def format_report(m: BuildManifest) -> str:
    opts = ", ".join(m.request.get("opts") or []) or "plain"
    out = [
        f"# Build report: {m.source.get('label')} ({opts})",
        "",
        f"- status: **{m.status}**" + (f" ({m.error})" if m.error else ""),
        f"- compiler: GCC {m.compiler.get('version')} ({m.compiler.get('triplet')}), "
        f"{m.compiler.get('generator')}",
        f"- target: {m.target.get('why')} ({m.target.get('source')})",
        f"- install tree: `{m.install_dir}` (`myaccel sandbox init NAME --basedir ...`)",
        "",
        "## Flags",
        "",
    ]
    for phase, f in m.flags.items():
        out.append(f"- {phase}: {flags_line(f)}")
        for n in f.get("notes") or []:
            out.append(f"  - {n}")
    if m.left_out:
        out += ["", f"Left out of the lean build ({len(m.left_out)}): "
                + "; ".join(s.split(":")[0] for s in m.left_out)]  # fmt: skip
    out += ["", "## Stages", "", "| stage | status | s | note |", "|---|---|---:|---|"]
    for s in m.stages:
        dur = f"{s.duration_s:.1f}" if s.duration_s is not None else ""
        note = s.reason or str(s.detail.get("summary", ""))
        out.append(f"| {s.name} | {s.status}{' (resumed)' if s.resumed else ''} | {dur} | {note} |")
    out += ["", "## Verification", "", "| check | status | evidence |", "|---|---|---|"]
    for c in m.verification:
        out.append(f"| {c.id} | {c.status} | {c.evidence.replace('|', '/')[:300]} |")
    cg = m.measurements.get("callgrind")
    if cg:
        out += ["", "## Instructions per operation (callgrind, deterministic)", ""]
        out.append(f"Workload: {cg.get('workload')}")
        out += ["", "| build | Ir | ops | Ir/op | mispredicts/op |", "|---|---:|---:|---:|---:|"]
        for label in ("baseline", "this_build"):
            r = cg.get(label)
            if r:
                mis = r.get("mispredicts_per_op")
                out.append(
                    f"| {label} | {r['ir_total']:,} | {r['ops']:,} | {r['ir_per_op']:.1f} | "
                    f"{'' if mis is None else f'{mis:.3f}'} |"
                )
        if cg.get("delta_pct") is not None:
            out += ["", f"Instructions vs baseline: **{cg['delta_pct']:+.2f}%**"]
    out += [
        "",
        "Throughput is measured separately with interleaved runs: `myaccel ab "
        "--baseline-basedir PLAIN/install --candidate-basedir "
        f"{m.install_dir}`.",
        "",
    ]
    return "\n".join(out)
