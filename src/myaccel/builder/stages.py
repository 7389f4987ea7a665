"""The pipeline's stages (small units run by ``runner.run_stages``).

configure/build/install run twice for PGO (``instrumented`` then ``final``) in ONE build
directory; train, profile-check, bolt (``bolt.BoltStage``), verify and measure follow.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path
from typing import IO, Any

from myaccel.builder import pgo
from myaccel.builder.cross import build_env, deb_arch, install_hint, target_runner
from myaccel.builder.cross import cmake_args as cross_cmake_args
from myaccel.builder.errors import BuildFailed, TrainingError, VerifyFailed
from myaccel.builder.flags import Phase
from myaccel.builder.manifest import Callgrind, MissingProfile, sha256_file
from myaccel.builder.runner import BuildContext, Stage
from myaccel.builder.train import FixtureWorkload, workload_inputs

_NINJA_RE = re.compile(r"^\[(\d+)/(\d+)\]")
_MAKE_RE = re.compile(r"^\[\s*(\d+)%\]")


def _phase_flags(ctx: BuildContext, phase: Phase) -> dict[str, Any]:
    return ctx.phases[phase].to_dict()


def _toolchain_args(ctx: BuildContext) -> list[str]:
    tc = ctx.toolchain
    args = [f"-DCMAKE_C_COMPILER={tc.cc}", f"-DCMAKE_CXX_COMPILER={tc.cxx}"]
    if tc.cross:
        args += cross_cmake_args(tc.target_arch)
    return args


def _env(ctx: BuildContext) -> dict[str, str | None]:
    """Environment of configure and build: the target's pkg-config directories (cross)."""
    return build_env(ctx.toolchain.target_arch, ctx.toolchain.cross)


def server_binary(ctx: BuildContext, install: Path) -> Path | None:
    for rel in ctx.tree.adapter.server_binaries:
        p = install / rel
        if p.is_file():
            return p
    return None


class PhaseStage(Stage):
    """A stage run once per build phase: named ``<base_name>-instrumented`` in the PGO
    training phase and ``<base_name>`` in the final one; ``titles`` are (instrumented, final)."""

    base_name = ""
    titles = ("", "")

    def __init__(self, phase: Phase) -> None:
        self.phase: Phase = phase
        instrumented = phase == "instrumented"
        self.name = f"{self.base_name}-instrumented" if instrumented else self.base_name
        self.title = self.titles[0] if instrumented else self.titles[1]


class ConfigureStage(PhaseStage):
    base_name = "configure"
    titles = ("cmake (PGO instrumented flags)", "cmake (final flags)")

    def inputs(self, ctx: BuildContext) -> dict[str, Any]:
        inputs: dict[str, Any] = {
            "flags": _phase_flags(ctx, self.phase),
            "toolchain": ctx.toolchain.describe(),
            "src": str(ctx.src),
            "tree": ctx.tree_fingerprint(),
            "extra": list(ctx.request.extra_cmake),
        }
        if ctx.toolchain.cross:  # the emulator and pkg-config directories (native: unchanged)
            inputs["cross"] = [*_toolchain_args(ctx), sorted(_env(ctx).items(), key=str)]
        return inputs

    def outputs_ok(self, ctx: BuildContext) -> bool:
        return (ctx.layout.build / "CMakeCache.txt").is_file()

    def argv(self, ctx: BuildContext) -> list[str]:
        lay = ctx.layout
        return [
            "cmake",
            "-S",
            str(ctx.src),
            "-B",
            str(lay.build),
            "-G",
            ctx.toolchain.generator,
            f"-DCMAKE_INSTALL_PREFIX={lay.install}",
            *_toolchain_args(ctx),
            *ctx.phases[self.phase].cmake_args(),
            *(f"-U{name}" for name in ctx.tree.adapter.unset_cache),
            *ctx.request.extra_cmake,
        ]

    def run(self, ctx: BuildContext, log: IO[str]) -> dict[str, Any]:
        lay = ctx.layout
        lay.build.mkdir(parents=True, exist_ok=True)
        argv = self.argv(ctx)
        seen: list[str] = []
        try:
            ctx.run_logged(
                argv,
                log,
                cwd=lay.build,
                env=_env(ctx),
                what=f"cmake configure ({self.phase})",
                on_line=seen.append,
            )
        except BuildFailed as exc:
            tc = ctx.toolchain
            for pattern, package in CONFIGURE_FAILURES:
                if any(pattern in ln for ln in seen):
                    # a cross build needs the target's library package (libssl-dev:arm64)
                    target = tc.target_arch if tc.cross and package.endswith("-dev") else None
                    pkg = f"{package}:{deb_arch(tc.target_arch)}" if target else package
                    raise BuildFailed(
                        f"cmake configure ({self.phase}) failed: {pattern}",
                        hint=f"{install_hint([pkg], target)}  (then rerun with --resume); "
                        f"log: {log.name}",
                    ) from exc
            raise
        downloads = find_downloads(lay.build)
        if downloads:
            raise BuildFailed(
                "the configured build would download: " + ", ".join(downloads),
                hint="install the Debian -dev package of that library (see the dependency "
                "list in docs/building.md); myaccel builds never download",
            )
        return {"summary": f"{ctx.toolchain.generator}, {len(argv)} arguments", "argv": argv}


# configure errors of system-library checks -> the Debian package that fixes them
CONFIGURE_FAILURES = (
    ("system pcre2-8 library is not found or unusable", "libpcre2-dev"),
    ("system libfmt library is not found or unusable", "libfmt-dev"),
    ("Could NOT find OpenSSL", "libssl-dev"),
    ("Curses library not found", "libncurses-dev"),
    ("Could NOT find Curses", "libncurses-dev"),
    ("cannot find -lz", "zlib1g-dev"),
    ("cannot find -lssl", "libssl-dev"),
    ("Could NOT find ZLIB", "zlib1g-dev"),
    ("Could NOT find URING", "liburing-dev"),
    ("Could NOT find LIBAIO", "libaio-dev"),
    ("Bison (GNU parser generator) is required", "bison"),
    ("You can download it with -DDOWNLOAD_BOOST=1", "(the mysql-boost source tarball)"),
)


def find_downloads(build: Path) -> list[str]:
    """ExternalProject URL downloads configured into the build (their -stamp scripts)."""
    found = []
    for p in build.glob("**/*-stamp/download-*.cmake"):
        found.append(p.name.removeprefix("download-").removesuffix(".cmake"))
    return sorted(set(found))


class CompileStage(PhaseStage):
    base_name = "build"
    titles = ("compile (PGO instrumented)", "compile (final)")

    def inputs(self, ctx: BuildContext) -> dict[str, Any]:
        return {"jobs": ctx.request.jobs, "phase": self.phase}

    def outputs_ok(self, ctx: BuildContext) -> bool:
        return (ctx.layout.build / "CMakeCache.txt").is_file()

    def run(self, ctx: BuildContext, log: IO[str]) -> dict[str, Any]:
        missing: list[str] = []
        warn_lines: list[str] = []
        counted = {"n": 0}

        def on_line(line: str) -> None:
            m = _NINJA_RE.match(line)
            if m:
                ctx.progress.stage_progress(int(m.group(1)), int(m.group(2)), "")
            else:
                m2 = _MAKE_RE.match(line)
                if m2:
                    ctx.progress.stage_progress(int(m2.group(1)), 100, "")
            f = pgo.missing_profile_file(line)
            if f is not None:
                counted["n"] += 1
                warn_lines.append(line)
                if f not in missing:
                    missing.append(f)

        t0 = time.monotonic()
        if self.phase == "instrumented" and ctx.layout.profile.exists():
            # Profiles of an earlier instrumented build must not mix in. (Build-time tools
            # such as gen_lex_hash write theirs during this compile: they are kept.)
            shutil.rmtree(ctx.layout.profile)
        argv = ["cmake", "--build", str(ctx.layout.build), "--parallel", str(ctx.request.jobs)]
        ctx.run_logged(
            argv,
            log,
            cwd=ctx.layout.build,
            env=_env(ctx),
            what=f"compile ({self.phase})",
            on_line=on_line,
        )
        detail: dict[str, Any] = {"summary": f"{time.monotonic() - t0:.0f} s"}
        if self.phase == "final" and ctx.request.wants("pgo"):
            ad = ctx.tree.adapter
            # by object (the profiles linked into the instrumented server), else by source
            split = pgo.classify_missing_profiles(
                "\n".join(warn_lines), server_binary(ctx, ctx.layout.train_install)
            ) or pgo.split_hot(missing, ctx.layout.build, ad.server_target, ctx.src, ad.hot_dirs)
            hot, other, method = split
            ctx.manifest.pgo.missing_profile = MissingProfile(
                warnings=counted["n"], hot=hot, other=other, server_sources_from=method
            )
            ctx.manifest.pgo.use_build_done = True
            detail["missing_profile_warnings"] = counted["n"]
            detail["summary"] += (
                f", {counted['n']} -Wmissing-profile warning(s) ({len(hot)} in server sources)"
            )
        return detail


class InstallStage(PhaseStage):
    base_name = "install"
    titles = ("install the instrumented tree", "install the install tree")

    def target(self, ctx: BuildContext) -> Path:
        return ctx.layout.train_install if self.phase == "instrumented" else ctx.layout.install

    def inputs(self, ctx: BuildContext) -> dict[str, Any]:
        return {"prefix": str(self.target(ctx))}

    def outputs_ok(self, ctx: BuildContext) -> bool:
        return server_binary(ctx, self.target(ctx)) is not None

    def run(self, ctx: BuildContext, log: IO[str]) -> dict[str, Any]:
        dest = self.target(ctx)
        if dest.exists():
            shutil.rmtree(dest)
        ctx.run_logged(
            ["cmake", "--install", str(ctx.layout.build), "--prefix", str(dest)],
            log,
            what=f"cmake --install ({self.phase})",
        )
        binary = server_binary(ctx, dest)
        if binary is None:
            raise BuildFailed(
                f"the install tree {dest} has no {ctx.tree.adapter.server_name}",
                hint="looked for "
                + ", ".join(ctx.tree.adapter.server_binaries)
                + f"; see {log.name}",
            )
        check_runs(ctx, binary, log)
        ctx.manifest.binaries[str(binary)] = sha256_file(binary)
        return {"summary": str(binary), "binary": str(binary)}


def check_runs(ctx: BuildContext, binary: Path, log: IO[str]) -> None:
    """The installed server starts far enough to print its version (under qemu when cross)."""
    prefix = target_runner(ctx.toolchain.target_arch, ctx.toolchain.cross)
    ctx.run_logged(
        [*prefix, str(binary), "--version"], log, what=f"{binary.name} --version", timeout_s=120
    )


class TrainStage(Stage):
    name = "train"
    title = "PGO training run"

    def inputs(self, ctx: BuildContext) -> dict[str, Any]:
        r = ctx.request
        return {
            "profile": r.train_profile,
            "ops": r.train_ops,
            "trainer": ctx.tree.adapter.trainer,
            **workload_inputs(r),
        }

    def run(self, ctx: BuildContext, log: IO[str]) -> dict[str, Any]:
        ctx.layout.profile.mkdir(parents=True, exist_ok=True)
        ctx.manifest.pgo.training_started = time.time()
        binary = server_binary(ctx, ctx.layout.train_install)
        if binary is None:
            raise TrainingError(
                "the instrumented install tree has no server binary",
                hint="rerun without --resume so the instrumented build is installed again",
            )
        if ctx.tree.adapter.trainer == "fixture":
            from myaccel.builder.train import train_fixture

            prefix = target_runner(ctx.toolchain.target_arch, ctx.toolchain.cross)
            wl = FixtureWorkload(ops=ctx.request.train_ops, threads=2)
            ctx.layout.work.mkdir(parents=True, exist_ok=True)
            detail = train_fixture(binary, wl, log, prefix, ctx.layout.work)
        else:
            if ctx.toolchain.cross:
                raise TrainingError(
                    "PGO training of a cross-built server is not supported here",
                    hint="build on the target machine (or drop pgo for the cross build)",
                )
            from myaccel.builder.train import train_sandbox, training_workload

            r = ctx.request
            detail = train_sandbox(
                ctx.layout.train_install,
                ctx.layout.work / "home",
                training_workload(r.train_profile, r.train_workload, r.holdout),
                log,
                say=ctx.progress.note,
            )
        detail["summary"] = str(detail.get("workload") or detail.get("profile"))
        return detail


class ProfileCheckStage(Stage):
    name = "profile-check"
    title = "check that training wrote profiles for the hot objects"

    def inputs(self, ctx: BuildContext) -> dict[str, Any]:
        return {"hot": list(ctx.tree.adapter.hot_sources)}

    def run(self, ctx: BuildContext, log: IO[str]) -> dict[str, Any]:
        since = float(ctx.manifest.pgo.training_started or 0)
        cov = pgo.check_coverage(ctx.layout.profile, ctx.tree.adapter.hot_sources, since)
        log.write(f"profiles: {cov.profiles} ({cov.nonempty} non-empty, {cov.fresh} fresh)\n")
        for f in pgo.list_profiles(ctx.layout.profile)[:2000]:
            log.write(f"  {f.size_bytes:>9} {f.object_path}\n")
        pgo_info = ctx.manifest.pgo
        pgo_info.profile_dir = str(ctx.layout.profile)
        pgo_info.profiles = cov.profiles
        pgo_info.hot_found = list(cov.hot_found)
        pgo_info.hot_missing = list(cov.hot_missing)
        if cov.fresh == 0:
            raise TrainingError(
                f"training produced no profiles in {ctx.layout.profile} "
                f"({cov.profiles} older ones from build tools or the install check)",
                hint="profiles are written when the instrumented program exits normally: the "
                "training run was killed or crashed, the binary trained was not the "
                "instrumented one, or the profile directory was not writable by the server "
                f"(see {ctx.layout.logs / 'train.log'})",
            )
        if cov.hot_missing:
            raise TrainingError(
                f"training wrote {cov.fresh} profiles but none for the hot objects "
                + ", ".join(cov.hot_missing[:4]),
                hint="the workload did not reach them or the server exited abnormally; "
                f"see {ctx.layout.logs / 'train.log'}",
            )
        return {"summary": f"{cov.nonempty} profiles, hot objects covered: {len(cov.hot_found)}"}


class VerifyStage(Stage):
    name = "verify"
    title = "verify the binary (verify-build checklist)"

    def inputs(self, ctx: BuildContext) -> dict[str, Any]:
        return {"binaries": dict(ctx.manifest.binaries), "bolt": ctx.manifest.bolt}

    def run(self, ctx: BuildContext, log: IO[str]) -> dict[str, Any]:
        from myaccel.builder.verify import run_checks

        binary = server_binary(ctx, ctx.layout.install)
        if binary is None:
            raise VerifyFailed("no server binary in the install tree", hint="rerun the build")
        ctx.manifest.binaries[str(binary)] = sha256_file(binary)
        _, checks = run_checks(binary, ctx.manifest)
        ctx.manifest.verification = checks
        for c in checks:
            log.write(f"{c.status:7} {c.id}: {c.evidence}\n")
        failed = [c for c in checks if c.status == "fail"]
        if failed:
            ctx.save()
            raise VerifyFailed(
                f"verification failed: {', '.join(c.id for c in failed)} ({failed[0].evidence[:200]})",
                hint=f"see {log.name} and the manifest's verification section",
            )
        passed = sum(1 for c in checks if c.status == "pass")
        return {"summary": f"{passed} pass, {len(checks) - passed} skip/unknown"}


class MeasureStage(Stage):
    name = "measure"
    title = "callgrind instructions per operation"

    def inputs(self, ctx: BuildContext) -> dict[str, Any]:
        return {"ops": ctx.request.measure_ops, **ctx.comparison_inputs()}

    def skip_reason(self, ctx: BuildContext) -> str | None:
        from myaccel import proc

        if ctx.toolchain.cross:
            return "cross build: callgrind runs host binaries only"
        if proc.which("valgrind") is None:
            return "valgrind is not installed (apt-get install valgrind)"
        if ctx.tree.adapter.trainer != "fixture":
            try:
                import importlib

                importlib.import_module("myaccel.profile.simulate")
            except ImportError:
                return "server Ir per query needs myaccel.profile.simulate (not installed)"
        return None

    def run(self, ctx: BuildContext, log: IO[str]) -> dict[str, Any]:
        from myaccel.builder.measure import callgrind_ir

        if ctx.tree.adapter.trainer != "fixture":
            return measure_server(ctx, log)
        wl = FixtureWorkload(ops=ctx.request.measure_ops, threads=1, seed=11)
        binary = server_binary(ctx, ctx.layout.install)
        assert binary is not None
        res = {"workload": f"kvlabd --bench ops={wl.ops} threads=1 seed={wl.seed}"}
        mine = callgrind_ir(binary, wl, ctx.layout.work / "callgrind", log)
        res["this_build"] = mine.to_dict()  # type: ignore[assignment]
        summary = f"{mine.ir_per_op:.1f} Ir/op"
        if ctx.request.compare_with:
            base_bin = Path(ctx.request.compare_with) / ctx.tree.adapter.server_binaries[0]
            if not base_bin.is_file():
                raise BuildFailed(
                    f"--compare-with {ctx.request.compare_with} has no {ctx.tree.adapter.server_binaries[0]}",
                    hint="pass the install tree of another build of the same source",
                )
            base = callgrind_ir(base_bin, wl, ctx.layout.work / "callgrind", log)
            res["baseline"] = base.to_dict()  # type: ignore[assignment]
            delta = 100.0 * (mine.ir_total - base.ir_total) / base.ir_total
            res["delta_pct"] = round(delta, 2)  # type: ignore[assignment]
            summary += f" vs {base.ir_per_op:.1f} baseline ({delta:+.1f}%)"
        ctx.manifest.measurements.callgrind = Callgrind.model_validate(res)
        return {"summary": summary, **res}


def measure_server(ctx: BuildContext, log: IO[str]) -> dict[str, Any]:
    """Callgrind Ir per query of a real server (``myaccel.profile.simulate``): a sandbox of
    the install tree under OUT/work/home, the bounded read-only workload, then the same on
    ``--compare-with`` (another build of the same version) in the same sandbox."""
    import contextlib

    from myaccel.profile.simulate import SimulationRequest, simulate
    from myaccel.server.sandbox import Sandbox

    home = ctx.layout.work / "home"
    name = "build-measure"
    if Sandbox.exists(name, home=home):
        with contextlib.suppress(Exception):
            Sandbox.load(name, home=home).destroy()

    def note(msg: str) -> None:
        log.write(f"# {msg}\n")
        log.flush()

    sb = Sandbox.init(name, basedir=ctx.layout.install, home=home, timeout_s=600, progress=note)
    res: dict[str, Any] = {"tool": "callgrind (myaccel.profile.simulate)"}
    try:
        arms: list[tuple[str, str | None]] = [("this_build", None)]
        if ctx.request.compare_with:
            arms.append(("baseline", ctx.request.compare_with))
        for label, basedir in arms:
            sim = simulate(
                sb,
                SimulationRequest(
                    out_dir=ctx.layout.work / "simulate" / label,
                    tool="callgrind",
                    basedir=basedir or str(ctx.layout.install),
                ),
                note,
            )
            per_q = sim.instructions / sim.queries if sim.queries else float("nan")
            res[label] = {
                "binary": sim.server_binary,
                "ir_total": sim.instructions,
                "queries": sim.queries,
                "transactions": sim.transactions,
                "ops": sim.queries,
                "ir_per_op": round(per_q, 1),
                "workload": sim.workload,
                "mispredicts_per_op": None,
            }
        if "baseline" in res:
            a, b = res["this_build"]["ir_per_op"], res["baseline"]["ir_per_op"]
            res["delta_pct"] = round(100.0 * (a - b) / b, 2) if b else None
    finally:
        with contextlib.suppress(Exception):
            sb.destroy()
    res["workload"] = res["this_build"]["workload"]
    ctx.manifest.measurements.callgrind = Callgrind.model_validate(res)
    summary = f"{res['this_build']['ir_per_op']:.0f} Ir/query"
    if res.get("delta_pct") is not None:
        summary += f" ({res['delta_pct']:+.1f}% vs baseline)"
    return {"summary": summary}


class PatchStage(Stage):
    """MySQL cache line: compile a hard-linked copy of the tree with the patched header."""

    name = "patch"
    title = "apply the reviewed cache line patch to a linked copy of the tree"

    def inputs(self, ctx: BuildContext) -> dict[str, Any]:
        return {"bytes": ctx.request.cacheline_bytes, "patches": ctx.manifest.patches}

    def outputs_ok(self, ctx: BuildContext) -> bool:
        return ctx.source_dir is not None and ctx.source_dir.is_dir()

    def run(self, ctx: BuildContext, log: IO[str]) -> dict[str, Any]:
        from myaccel.builder.patch import apply_to_copy, make_cacheline_patch

        assert ctx.source_dir is not None
        patch = make_cacheline_patch(ctx.tree.path, ctx.request.cacheline_bytes)
        apply_to_copy(ctx.tree.path, ctx.source_dir, patch)
        log.write(patch.diff)
        return {
            "summary": f"{len(patch.files)} file(s), {patch.lines_changed} line(s) -> {ctx.request.cacheline_bytes}"
        }
