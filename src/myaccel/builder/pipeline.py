"""``myaccel build``: preflight (tree, toolchain, target CPU, flags, dependencies: all before
anything is compiled), then the stages.

Nothing outside ``--out`` is written: out-of-source builds, the instrumented and final
installs, profiles, logs, sandboxes and the manifest all live under it; a MySQL cache line
patch is compiled from a hard-linked copy of the tree under ``--out``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from myaccel.builder import deps as depcheck
from myaccel.builder.bolt import BoltStage
from myaccel.builder.cross import build_env, target_runner
from myaccel.builder.errors import BuildOptionError, TreeError
from myaccel.builder.flags import (
    BuildRequest,
    arch_flags,
    check_arch_flags,
    compose_phase,
    find_toolchain,
    resolve_target,
)
from myaccel.builder.holdout import HoldoutStage
from myaccel.builder.manifest import (
    MANIFEST,
    BuildManifest,
    CompilerInfo,
    Dependency,
    PatchRecord,
    RequestInfo,
    SourceInfo,
    TargetInfo,
    load_manifest,
)
from myaccel.builder.runner import (
    BuildContext,
    Layout,
    NullProgress,
    ProgressSink,
    Stage,
    run_stages,
)
from myaccel.builder.smoke import SmokeStage, smoke_applies
from myaccel.builder.stages import (
    CompileStage,
    ConfigureStage,
    InstallStage,
    MeasureStage,
    PatchStage,
    ProfileCheckStage,
    TrainStage,
    VerifyStage,
)
from myaccel.builder.tree import SourceTree, detect_tree
from myaccel.builder.verify import ATOMICS_EXPECTED
from myaccel.model import same_named
from myaccel.outdir import check_writable_dir
from myaccel.paths import myaccel_home


def default_out(tree: SourceTree, req: BuildRequest) -> Path:
    tag = "+".join(req.opts) or "plain"
    if req.cross:
        tag += f"-{req.cross}"
    return myaccel_home() / "builds" / f"{tree.flavor}-{tree.version}-{tag}"


def _check_out_dir(out: Path, tree: SourceTree, resume: bool) -> BuildManifest | None:
    src = tree.path.resolve()
    o = out.resolve()
    if o == src or src in o.parents:
        raise TreeError(
            f"--out {out} is inside the source tree",
            hint="builds are out of source: pass a directory outside the tree",
        )
    if o in src.parents:
        raise TreeError(
            f"--out {out} contains the source tree",
            hint="pass a directory that does not contain the sources",
        )
    man = o / MANIFEST
    if man.is_file():
        old = load_manifest(man)
        if not resume:
            raise TreeError(
                f"{out} already holds a build ({old.status})",
                hint="pass --resume to continue it (completed stages with unchanged inputs are "
                "skipped), or choose another --out",
            )
        if old.source.path != str(src):
            raise TreeError(
                f"{out} holds a build of another tree ({old.source.path})",
                hint="choose another --out",
            )
        return old
    if o.exists() and any(p.name != "patches" for p in o.iterdir()):
        raise TreeError(
            f"--out {out} exists, is not empty and holds no myaccel build",
            hint="pass a new or empty directory (myaccel never writes into other files)",
        )
    check_writable_dir(out, "--out")  # a dry run too: the build would fail there
    return None


def _check_compare_with(req: BuildRequest, tree: SourceTree) -> None:
    """--compare-with: an install tree holding this tree's server, checked now rather than
    by the measure stage after hours of compiling."""
    if not req.compare_with:
        return
    base = Path(req.compare_with)
    if not base.is_dir():
        raise BuildOptionError(
            f"--compare-with '{req.compare_with}' does not exist",
            hint="pass the install tree of another build of the same source "
            "(OUT/install of `myaccel build`)",
        )
    wanted = tree.adapter.server_binaries
    if not any((base / rel).is_file() for rel in wanted):
        raise BuildOptionError(
            f"--compare-with '{req.compare_with}' holds no {tree.adapter.server_name} "
            f"(looked for {', '.join(wanted)})",
            hint="pass the install tree of another build of the same source "
            "(OUT/install of `myaccel build`)",
        )


def _check_training(req: BuildRequest, tree: SourceTree) -> None:
    """--train W.json and --holdout: a tree trained by sysbench, a workload to hold out."""
    ad = tree.adapter
    if req.train_workload is not None and ad.trainer != "sandbox":
        raise BuildOptionError(
            f"--train {req.train_workload}: this tree ({tree.flavor}) trains with its own "
            "driver, not with a captured workload",
            hint="a captured workload trains MySQL or MariaDB trees; pass a bench profile here",
        )
    if req.holdout and req.train_workload is None:
        raise BuildOptionError(
            "--holdout checks the build on a held-out part of a captured workload",
            hint="pass --train W.json (a file of `myaccel capture`) with it",
        )


def prepare(
    source: str | Path,
    req: BuildRequest,
    out: str | Path | None,
    *,
    resume: bool = False,
    progress: ProgressSink | None = None,
    write: bool = True,
    origin: dict[str, Any] | None = None,
) -> BuildContext:
    """Everything that can fail before compiling: raises with a hint, writes nothing except
    the (new or resumed) ``--out`` directory once all checks passed (nothing at all with
    ``write=False``, the dry run)."""
    from myaccel.facts.cpu import collect_cpu
    from myaccel.facts.sysroot import Sysroot

    tree = detect_tree(source)
    ad = tree.adapter
    _check_training(req, tree)
    _check_compare_with(req, tree)
    if req.wants("pgo") and req.cross and ad.trainer == "sandbox":
        raise BuildOptionError(
            "PGO of a cross-built server cannot be trained on this machine",
            hint="build on the target, or drop pgo from --opt for the cross build",
        )
    tc = find_toolchain(req)
    if tc.major and tc.major < 10 and (req.wants("pgo") or tc.target_arch == "aarch64"):
        raise BuildOptionError(
            f"GCC {tc.version} is too old for this build (-fprofile-partial-training and "
            "-moutline-atomics need GCC 10+)",
            hint="install a newer gcc/g++ (Debian 12 has GCC 12)",
        )
    cpu = None
    if not req.cross or req.sysroot != "/":
        cpu = collect_cpu(Sysroot(req.sysroot))
        if req.cross and cpu.arch.value != tc.target_arch:
            raise BuildOptionError(
                f"--sysroot {req.sysroot} describes a {cpu.arch.value} machine, the cross target "
                f"is {tc.target_arch}",
                hint="pass the captured sysroot of the target machine, or --target-cpu",
            )
    target = resolve_target(req, tc, cpu)
    arch, arch_why = arch_flags(req, target)
    check_arch_flags(tc, arch, target)  # e.g. an aarch64 core for an x86 build: refused now
    dep_results = depcheck.ensure(tree, req, tc)
    out_dir = Path(out) if out else default_out(tree, req)
    old = _check_out_dir(out_dir, tree, resume)
    layout = Layout(out_dir.resolve())
    phases = {}
    if req.wants("pgo"):
        phases["instrumented"] = compose_phase("instrumented", tree, req, tc, arch, layout.profile)
    phases["final"] = compose_phase("final", tree, req, tc, arch, layout.profile)

    # MySQL cache line: the patch is reviewable before anything is compiled
    patches: list[PatchRecord] = []
    source_dir: Path | None = None
    if req.wants("cacheline") and ad.cacheline_mode == "patch":
        from myaccel.builder.patch import make_cacheline_patch

        patch = make_cacheline_patch(tree.path, req.cacheline_bytes)
        pfile = layout.patches / f"innodb-cacheline-{req.cacheline_bytes}.patch"
        if write:
            layout.patches.mkdir(parents=True, exist_ok=True)
            pfile.write_text(patch.diff)
        patches.append(
            PatchRecord(files=list(patch.files), patch=str(pfile), applied=req.allow_patch)
        )
        if not req.allow_patch:
            raise BuildOptionError(
                f"{ad.label}: InnoDB's cache line is a source constant; the change is written "
                f"to {pfile} for review",
                hint="review it, then rerun with --allow-patch (the original tree stays "
                "untouched: a linked copy under --out is compiled)",
            )
        source_dir = layout.out / "src"

    if write:
        layout.out.mkdir(parents=True, exist_ok=True)
    man = old or BuildManifest()
    man.status = "running"
    man.error = ""
    man.source = SourceInfo(
        path=str(tree.path),
        flavor=tree.flavor,
        version=tree.version,
        label=ad.label,
        markers=list(tree.markers),
        config_headers=list(ad.config_headers),
        patched=source_dir is not None,
        compiled_from=str(source_dir or tree.path),
        notes=list(ad.notes),
        from_installed=origin,  # --from-installed: the installed server this tree belongs to
    )
    man.out_dir = str(layout.out)
    man.build_dir = str(layout.build)
    man.install_dir = str(layout.install)
    expected_atomics = None
    if tc.target_arch == "aarch64":
        atom = req.effective_atomics
        expected_atomics = "outline" if atom == "auto" else atom
    if ATOMICS_EXPECTED.get(str(expected_atomics)) is None:
        expected_atomics = None  # a class verify-build cannot check
    as_asked = "opts target_cpu cross jobs train_profile train_workload holdout train_ops"
    as_asked += " allow_patch extra_cmake compare_with sysroot"
    man.request = RequestInfo(
        **same_named(req, as_asked.split()),
        atomics=req.effective_atomics,
        atomics_expected=expected_atomics,
        cacheline_bytes=req.cacheline_bytes if req.wants("cacheline") else None,
    )
    man.compiler = CompilerInfo(
        cc=tc.cc,
        cxx=tc.cxx,
        version=tc.version,
        triplet=tc.triplet,
        cross=tc.cross,
        generator=tc.generator,
    )
    if tc.cross:
        man.compiler.target_runner = target_runner(tc.target_arch, tc.cross)
        env = build_env(tc.target_arch, tc.cross)
        man.compiler.build_env = {k: v for k, v in env.items() if v is not None}
    man.target = TargetInfo(
        **same_named(target, ("arch", "has_lse", "source")),
        cpu=target.mcpu,
        arch_flags=arch,
        why=arch_why,
    )
    man.flags = {k: v.record() for k, v in phases.items()}
    man.left_out = ad.left_out()
    man.dependencies = [
        Dependency(
            name=r.dep.name,
            package=depcheck.package_for(r.dep, tc),
            found=r.found,
            where=r.where,
        )
        for r in dep_results
    ]
    man.patches = patches
    ctx = BuildContext(
        tree=tree,
        request=req,
        toolchain=tc,
        target=target,
        layout=layout,
        manifest=man,
        phases=phases,
        progress=progress or NullProgress(),
        source_dir=source_dir,
        resume=resume,
    )
    if write:
        ctx.save()
    return ctx


def dry_run_plan(
    source: str | Path,
    req: BuildRequest,
    out: str | Path | None,
    origin: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What ``build`` would do, as data: the checks run, nothing is written or compiled."""
    ctx = prepare(source, req, out, write=False, origin=origin)
    tc = ctx.toolchain
    env = {k: v for k, v in build_env(tc.target_arch, tc.cross).items() if v is not None}
    configure = {}
    for phase in ctx.phases:
        stage = ConfigureStage("instrumented" if phase == "instrumented" else "final")
        configure[phase] = stage.argv(ctx)
    return {
        "source": ctx.manifest.source.model_dump(),
        "out": str(ctx.layout.out),
        "opts": list(req.opts),
        "compiler": ctx.manifest.compiler.model_dump(),
        "compiler_text": tc.describe(),
        "target": ctx.manifest.target.model_dump(),
        "cross": {
            "emulator": target_runner(tc.target_arch, tc.cross),
            "env": env,
        }
        if tc.cross
        else None,
        "dependencies": [d.model_dump() for d in ctx.manifest.dependencies],
        "stages": [s.name for s in stages_for(ctx)],
        "flags": {k: f.model_dump() for k, f in ctx.manifest.flags.items()},
        "configure": configure,
        "left_out": list(ctx.manifest.left_out),
    }


def format_plan(plan: dict[str, Any]) -> str:
    """The dry-run plan as text (shell-quoted cmake invocations)."""
    import shlex

    lines = [
        f"# {plan['source']['label']}: {', '.join(plan['opts']) or 'plain'} build into "
        f"{plan['out']}",
        f"# compiler: {plan['compiler_text']}; target: {plan['target']['why']}",
        f"# dependencies: all {len(plan['dependencies'])} found",
        "# stages: " + " -> ".join(plan["stages"]),
    ]
    if plan["cross"]:
        env = " ".join(f"{k}={v}" for k, v in plan["cross"]["env"].items())
        lines.append(f"# target programs run as: {shlex.join(plan['cross']['emulator'])} ...")
        lines.append(f"# configure and build environment: {env}")
    for phase, argv in plan["configure"].items():
        lines.append(f"# {phase} configure:")
        lines.append(shlex.join(argv))
    if plan["left_out"]:
        lines.append(f"# left out ({len(plan['left_out'])}):")
        lines += [f"#   {x}" for x in plan["left_out"]]
    return "\n".join(lines)


def stages_for(ctx: BuildContext) -> list[Stage]:
    req = ctx.request
    st: list[Stage] = []
    if ctx.source_dir is not None:
        st.append(PatchStage())
    if req.wants("pgo"):
        st += [
            ConfigureStage("instrumented"),
            CompileStage("instrumented"),
            InstallStage("instrumented"),
            TrainStage(),
            ProfileCheckStage(),
        ]
    st += [ConfigureStage("final"), CompileStage("final"), InstallStage("final")]
    if req.wants("bolt"):
        st.append(BoltStage())
    st.append(VerifyStage())
    if smoke_applies(ctx):
        st.append(SmokeStage())
    st.append(MeasureStage())
    if req.holdout:
        st.append(HoldoutStage())
    return st


def build(
    source: str | Path,
    req: BuildRequest,
    out: str | Path | None = None,
    *,
    resume: bool = False,
    progress: ProgressSink | None = None,
    origin: dict[str, Any] | None = None,
) -> BuildManifest:
    from myaccel.builder.report import format_report

    ctx = prepare(source, req, out, resume=resume, progress=progress, origin=origin)
    try:
        run_stages(ctx, stages_for(ctx))
        ctx.manifest.status = "complete"
        ctx.save()
    finally:
        (ctx.layout.out / "build-report.md").write_text(format_report(ctx.manifest))
    return ctx.manifest
