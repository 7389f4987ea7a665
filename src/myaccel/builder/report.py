"""The build report (``OUT/build-report.md``): flags next to what they bought, from the
manifest alone (so it can be regenerated from any manifest.json)."""

from __future__ import annotations

from myaccel import markdown
from myaccel.builder.manifest import BuildManifest, PhaseFlags


def flags_line(phase: PhaseFlags) -> str:
    cxx = " ".join(phase.cxx_flags) or "(none)"
    ld = " ".join(phase.exe_linker_flags)
    defs = phase.cmake_defs
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
    opts = ", ".join(m.request.opts) or "plain"
    out = [
        f"# Build report: {m.source.label} ({opts})",
        "",
        f"- status: **{m.status}**" + (f" ({m.error})" if m.error else ""),
        f"- compiler: GCC {m.compiler.version} ({m.compiler.triplet}), {m.compiler.generator}",
        f"- target: {m.target.why} ({m.target.source})",
        f"- install tree: `{m.install_dir}` (`myaccel sandbox init NAME --basedir ...`)",
        "",
        "## Flags",
        "",
    ]
    for phase, f in m.flags.items():
        out.append(f"- {phase}: {flags_line(f)}")
        for n in f.notes:
            out.append(f"  - {n}")
    if m.left_out:
        out += ["", f"Left out of the lean build ({len(m.left_out)}): "
                + "; ".join(s.split(":")[0] for s in m.left_out)]  # fmt: skip
    stages = [
        [
            s.name,
            f"{s.status}{' (resumed)' if s.resumed else ''}",
            f"{s.duration_s:.1f}" if s.duration_s is not None else "",
            s.reason or str(s.detail.get("summary", "")),
        ]
        for s in m.stages
    ]
    out += ["", "## Stages", "", *markdown.table(["stage", "status", "s", "note"], stages, "llrl")]
    checks = [[c.id, c.status, c.evidence[:300]] for c in m.verification]
    out += ["", "## Verification", "", *markdown.table(["check", "status", "evidence"], checks)]
    cg = m.measurements.callgrind
    if cg:
        out += ["", "## Instructions per operation (callgrind, deterministic)", ""]
        out.append(f"Workload: {cg.workload}")
        runs = [
            [
                label,
                f"{r.ir_total:,}",
                f"{r.ops:,}",
                f"{r.ir_per_op:.1f}",
                "" if r.mispredicts_per_op is None else f"{r.mispredicts_per_op:.3f}",
            ]
            for label in ("baseline", "this_build")
            if (r := cg.run(label))
        ]
        header = ["build", "Ir", "ops", "Ir/op", "mispredicts/op"]
        out += ["", *markdown.table(header, runs, "lrrrr")]
        if cg.delta_pct is not None:
            out += ["", f"Instructions vs baseline: **{cg.delta_pct:+.2f}%**"]
    out += [
        "",
        "Throughput is measured separately with interleaved runs: `myaccel ab "
        "--baseline-basedir PLAIN/install --candidate-basedir "
        f"{m.install_dir}`.",
        "",
    ]
    return "\n".join(out)
