"""What to build with: the request, the toolchain, the target CPU, and the compiler/CMake
flags of each build phase.

Architecture flags come from probe facts (``myaccel.facts.cpu``) of the target machine:
this host by default, a captured sysroot (``--sysroot``), or ``--target-cpu`` for cross
builds. Policy (KNOWLEDGE.md section 5):

* aarch64, default: ``-mtune=<core>`` plus ``-moutline-atomics`` (GCC >= 10): the binary
  runs on any ARMv8.0 CPU and picks LSE at run time. We tune for the detected core instead of
  ``-mcpu=<core>`` because ``-mcpu`` of an ARMv8.1+ core enables LSE and so inlines atomics.
* ``lse`` (or ``--atomics lse``): ``-mcpu=<core>`` of an LSE-capable core, else
  ``-march=armv8.1-a``; only when the target CPU has ``atomics`` in /proc/cpuinfo Features
  (inline LSE on a CPU without it dies with SIGILL).
* ``--atomics llsc``: ``-march=armv8-a -mno-outline-atomics`` (ARMv8.0 exclusive loops).
* x86: no ``-march`` unless ``--target-cpu`` asks for one (portability).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from myaccel import proc
from myaccel.builder.errors import BuildOptionError, DependencyMissing
from myaccel.builder.manifest import PhaseFlags as FlagsRecord
from myaccel.builder.tree import SourceTree
from myaccel.model import CpuFacts

OPTS = ("lse", "lto", "pgo", "bolt", "cacheline")
Atomics = Literal["auto", "llsc", "outline", "lse"]
Phase = Literal["instrumented", "final"]

# GCC -mcpu names of aarch64 cores by the probe's family id, and whether they have LSE.
MCPU_BY_FAMILY = {
    "kunpeng920": "tsv110",
    "neoverse-n1": "neoverse-n1",
    "neoverse-n2": "neoverse-n2",
    "neoverse-v1": "neoverse-v1",
    "neoverse-v2": "neoverse-v2",
    "cortex-a72": "cortex-a72",
    "ampereone": "ampere1",
}
# A build for the probed machine itself (inline LSE) that has the speculation barrier gets
# `+sb`, so that code may use the `sb` instruction, as InnoDB's spin loop can (MySQL pull
# request #611 on github.com/mysql/mysql-server: -28% on a Graviton4 contention test).
# Measured with Debian 12's aarch64 GCC 12.2: `-mcpu=neoverse-n1` refuses `sb` in inline
# assembly ("selected processor does not support `sb'"), `-mcpu=neoverse-n1+sb` and
# `-mcpu=neoverse-n2` take it; GCC 12 defines no __ARM_FEATURE_SB macro for either. Never in
# the portable outline-atomics build: `sb` is SIGILL on a core without it.
SB_WHY = "+sb: the target has the speculation barrier (HWCAP sb), the sb instruction allowed"
# -mcpu/-march values we know the atomics capability of (Arm ARM: LSE is ARMv8.1).
LSE_CAPABLE = {
    "tsv110": True,
    "neoverse-n1": True,
    "neoverse-n2": True,
    "neoverse-v1": True,
    "neoverse-v2": True,
    "ampere1": True,
    "cortex-a76": True,
    "cortex-a55": True,
    "cortex-a72": False,
    "cortex-a57": False,
    "cortex-a53": False,
    "generic": False,
    "armv8-a": False,
    "armv8.1-a": True,
    "armv8.2-a": True,
    "armv9-a": True,
}
CROSS_PREFIX = {"aarch64": "aarch64-linux-gnu-"}
CROSS_PACKAGES = {"aarch64": ("gcc-aarch64-linux-gnu", "g++-aarch64-linux-gnu")}
DEFAULT_CACHELINE = 128


def parse_opts(text: str | None) -> tuple[str, ...]:
    if not text:
        return ()
    items = [t.strip().lower() for t in text.split(",") if t.strip()]
    bad = [t for t in items if t not in OPTS]
    if bad:
        raise BuildOptionError(
            f"unknown optimization {', '.join(repr(b) for b in bad)} in --opt",
            hint="choose from: " + ",".join(OPTS) + " (comma separated)",
        )
    return tuple(o for o in OPTS if o in items)


@dataclass(frozen=True)
class BuildRequest:
    opts: tuple[str, ...] = ()
    atomics: Atomics = "auto"
    target_cpu: str | None = None
    cross: str | None = None
    jobs: int = 2
    train_profile: str = "quick"
    train_workload: str | None = None  # build --train W.json: a captured workload replayed
    holdout: bool = False  # train on part of the workload, replay the rest on the build
    train_ops: int = 300_000
    measure_ops: int = 60_000
    allow_patch: bool = False
    cacheline_bytes: int = DEFAULT_CACHELINE
    extra_cmake: tuple[str, ...] = ()
    compare_with: str | None = None
    sysroot: str = "/"

    def wants(self, opt: str) -> bool:
        return opt in self.opts

    @property
    def effective_atomics(self) -> Atomics:
        if self.wants("lse"):
            return "lse"
        return self.atomics


@dataclass(frozen=True)
class Toolchain:
    cc: str
    cxx: str
    version: str  # e.g. 12.2.0
    target_arch: str  # machine the binaries run on: x86_64, aarch64
    cross: bool
    triplet: str
    generator: str  # Ninja or Unix Makefiles

    @property
    def major(self) -> int:
        try:
            return int(self.version.split(".")[0])
        except ValueError:
            return 0

    def describe(self) -> str:
        return f"GCC {self.version} ({self.triplet}{', cross' if self.cross else ''})"


def _host_arch() -> str:
    import platform

    m = platform.machine()
    return {"arm64": "aarch64", "amd64": "x86_64"}.get(m, m)


def find_toolchain(req: BuildRequest) -> Toolchain:
    """The C/C++ compilers (GCC only: the PGO flags and profile layout are GCC's)."""
    import os

    if req.cross:
        arch = req.cross
        if arch not in CROSS_PREFIX:
            raise BuildOptionError(
                f"cross target '{arch}' is not supported",
                hint="supported: --cross aarch64 (Debian's aarch64-linux-gnu-gcc/g++)",
            )
        pre = CROSS_PREFIX[arch]
        cc_name, cxx_name = f"{pre}gcc", f"{pre}g++"
        missing = [
            pkg
            for name, pkg in zip((cc_name, cxx_name), CROSS_PACKAGES[arch], strict=True)
            if proc.which(name) is None
        ]
        if missing:
            raise DependencyMissing(
                f"the {arch} cross compiler is not installed ({', '.join(missing)})",
                hint=f"apt-get install {' '.join(missing)}",
            )
        cc, cxx = str(proc.which(cc_name)), str(proc.which(cxx_name))
    else:
        arch = _host_arch()
        cc_name = os.environ.get("CC", "gcc")
        cxx_name = os.environ.get("CXX", "g++")
        cc_p, cxx_p = proc.which(cc_name), proc.which(cxx_name)
        if cc_p is None or cxx_p is None:
            absent = [n for n, p in ((cc_name, cc_p), (cxx_name, cxx_p)) if p is None]
            raise DependencyMissing(
                f"no C/C++ compiler: {', '.join(absent)} not found on PATH",
                hint="apt-get install gcc g++  (or build-essential)",
            )
        cc, cxx = cc_p, cxx_p
    ver = proc.run([cxx, "-dumpfullversion", "-dumpversion"], timeout_s=30)
    is_gcc = proc.run([cxx, "--version"], timeout_s=30)
    text = is_gcc.stdout.lower()
    if "clang" in text or ("g++" not in text and "gcc" not in text and "free software" not in text):
        raise BuildOptionError(
            f"'{cxx}' is not GCC",
            hint="myaccel build drives GCC (profile layout, -moutline-atomics); set CXX=g++ CC=gcc",
        )
    triplet = proc.run([cxx, "-dumpmachine"], timeout_s=30).stdout.strip()
    generator = "Ninja" if proc.which("ninja") else "Unix Makefiles"
    if generator == "Unix Makefiles" and proc.which("make") is None:
        raise DependencyMissing(
            "neither ninja nor make is installed", hint="apt-get install ninja-build"
        )
    return Toolchain(
        cc=cc,
        cxx=cxx,
        version=ver.stdout.strip() or "?",
        target_arch=arch,
        cross=bool(req.cross),
        triplet=triplet or arch,
        generator=generator,
    )


# ---------------------------------------------------------------- target CPU


@dataclass(frozen=True)
class TargetCpu:
    arch: str
    mcpu: str | None  # GCC -mcpu (aarch64) / -march (x86) value, None = generic
    has_lse: bool | None  # None = unknown
    source: str  # where we learned it
    # the Armv8.5 speculation barrier (HWCAP ``sb``), from the probe of the target machine
    has_sb: bool | None = None


def resolve_target(req: BuildRequest, tc: Toolchain, cpu: CpuFacts | None) -> TargetCpu:
    if req.target_cpu:
        name = req.target_cpu
        if tc.target_arch == "aarch64":
            lse = LSE_CAPABLE.get(name)
            if lse is None and name.startswith("armv"):
                m = re.match(r"armv(\d+)(?:\.(\d+))?", name)
                lse = bool(m and (int(m.group(1)), int(m.group(2) or 0)) >= (8, 1))
            return TargetCpu("aarch64", name, lse, f"--target-cpu {name}")
        return TargetCpu(tc.target_arch, name, None, f"--target-cpu {name}")
    if cpu is None:
        return TargetCpu(tc.target_arch, None, None, "no target CPU given (generic)")
    if tc.target_arch == "aarch64":
        fam = cpu.family.value or ""
        src = f"probe facts: {cpu.model.value or fam} ({cpu.features.source or '/proc/cpuinfo'})"
        return TargetCpu(
            "aarch64", MCPU_BY_FAMILY.get(fam), cpu.has_lse.value, src, cpu.has_sb.value
        )
    return TargetCpu(tc.target_arch, None, None, f"probe facts: {cpu.model.value or '?'}")


def arch_flags(req: BuildRequest, target: TargetCpu) -> tuple[list[str], str]:
    """Compiler flags for the target and a one-line reason."""
    atom = req.effective_atomics
    if target.arch != "aarch64":
        if atom in ("lse", "llsc", "outline"):
            raise BuildOptionError(
                f"--atomics {atom} / lse only applies to aarch64 targets (this one is {target.arch})",
                hint="drop it, or cross-build with --cross aarch64",
            )
        if target.mcpu:
            return [f"-march={target.mcpu}"], f"-march={target.mcpu} as requested"
        return [], "x86: no -march (portable binary; pass --target-cpu to choose one)"
    if atom == "lse":
        if target.has_lse is False:
            raise BuildOptionError(
                f"inline LSE atomics requested, but the target CPU has no LSE atomics "
                f"({target.source}: 'atomics' is not among its Features); the binary would "
                "die with SIGILL",
                hint="drop 'lse' from --opt: the default outline atomics pick LSE at run time "
                "where it exists",
            )
        if target.has_lse is None:
            raise BuildOptionError(
                f"inline LSE atomics requested, but whether the target CPU has LSE is unknown "
                f"({target.source})",
                hint="name the target core with --target-cpu (e.g. neoverse-n1, tsv110) or "
                "build on the target machine",
            )
        sb, sb_why = ("+sb", f"; {SB_WHY}") if target.has_sb else ("", "")
        if target.mcpu and LSE_CAPABLE.get(target.mcpu):
            flag = (
                f"-march={target.mcpu}{sb}"
                if target.mcpu.startswith("armv")
                else f"-mcpu={target.mcpu}{sb}"
            )
            return [flag], f"inline LSE: {flag} (LSE-capable core; {target.source}){sb_why}"
        flag = f"-march=armv8.1-a{sb}"
        return [flag], f"inline LSE: {flag} ({target.source}){sb_why}"
    if atom == "llsc":
        return (
            ["-march=armv8-a", "-mno-outline-atomics"],
            "LL/SC only: -march=armv8-a -mno-outline-atomics (ARMv8.0 exclusive loops)",
        )
    tune = []
    if target.mcpu and not target.mcpu.startswith("armv") and target.mcpu != "generic":
        tune = [f"-mtune={target.mcpu}"]
    why = "outline atomics (LSE chosen at run time)" + (
        f"; tuned for {target.mcpu}" if tune else ""
    )
    return ["-march=armv8-a", *tune, "-moutline-atomics"], why


def check_arch_flags(tc: Toolchain, arch: list[str], target: TargetCpu) -> None:
    """The compiler itself must accept the target flags (``-mcpu=tsv110`` is an aarch64
    core, not an x86 ``-march``): checked on an empty file before anything runs."""
    if not arch:
        return
    done = proc.run([tc.cc, *arch, "-E", "-x", "c", "/dev/null", "-o", "/dev/null"], timeout_s=60)
    if done.ok:
        return
    lines = [ln.strip() for ln in (done.stderr or done.stdout).splitlines() if ln.strip()]
    said = next((ln for ln in lines if "error" in ln), lines[0] if lines else "rejected")
    said = re.sub(r"^\S*(cc1|gcc|g\+\+)\S*:\s*", "", said)
    asked = f"--target-cpu {target.mcpu}" if target.mcpu else " ".join(arch)
    cc = Path(tc.cc).name
    if tc.target_arch == "aarch64":
        hint = (
            f"pass an aarch64 core {cc} knows (neoverse-n1, tsv110, cortex-a72, or armv8.1-a); "
            "an x86 -march value needs a build without --cross"
        )
    else:
        hint = (
            f"pass an -march value {cc} knows for {tc.target_arch} (x86-64-v2, x86-64-v3, "
            "skylake, znver3); an aarch64 core such as tsv110 needs --cross aarch64"
        )
    raise BuildOptionError(
        f"{asked} is not valid for {tc.target_arch} ({cc} {' '.join(arch)}: {said})", hint=hint
    )


# ---------------------------------------------------------------- per-phase flags


class PhaseFlags(FlagsRecord):
    """The flags of one phase as they are composed; the manifest keeps them as
    ``manifest.PhaseFlags`` (``record``)."""

    phase: Phase

    def both(self, *flags: str) -> None:
        self.c_flags.extend(flags)
        self.cxx_flags.extend(flags)

    def cmake_args(self) -> list[str]:
        args = [f"-D{k}={v}" for k, v in sorted(self.cmake_defs.items())]
        args.append(f"-DCMAKE_C_FLAGS={' '.join(self.c_flags)}")
        args.append(f"-DCMAKE_CXX_FLAGS={' '.join(self.cxx_flags)}")
        args.append(f"-DCMAKE_EXE_LINKER_FLAGS={' '.join(self.exe_linker_flags)}")
        args.append(f"-DCMAKE_SHARED_LINKER_FLAGS={' '.join(self.shared_linker_flags)}")
        args.append(f"-DCMAKE_MODULE_LINKER_FLAGS={' '.join(self.shared_linker_flags)}")
        return args

    def record(self) -> FlagsRecord:
        return FlagsRecord.model_validate(self.model_dump(exclude={"phase"}))

    def to_dict(self) -> dict[str, object]:
        return self.record().model_dump()


def compose_phase(
    phase: Phase,
    tree: SourceTree,
    req: BuildRequest,
    tc: Toolchain,
    arch: list[str],
    profile_dir: Path,
) -> PhaseFlags:
    """The flags of one build: ``instrumented`` (PGO generate) or ``final``."""
    ad = tree.adapter
    f = PhaseFlags(phase=phase)
    f.cmake_defs["CMAKE_BUILD_TYPE"] = "RelWithDebInfo"
    f.cmake_defs["CMAKE_EXPORT_COMPILE_COMMANDS"] = "ON"
    f.both(*arch)
    if phase == "instrumented":
        if ad.pgo_mode == "mysql-fprofile":
            f.cmake_defs["FPROFILE_GENERATE"] = "ON"
            f.cmake_defs["FPROFILE_USE"] = "OFF"
            f.cmake_defs["FPROFILE_DIR"] = str(profile_dir)
        else:
            f.both(f"-fprofile-generate={profile_dir}")
        # Many server threads update the same counters: atomic updates keep them exact.
        f.both("-fprofile-update=atomic")
        # links pull in libgcov; CMake passes the compile flags to GCC links too, but
        # explicit linker flags also cover targets linked with their own rules
        link = f"-fprofile-generate={profile_dir}"
        f.exe_linker_flags.append(link)
        f.shared_linker_flags.append(link)
        f.notes.append("PGO generate: -fprofile-generate, -fprofile-update=atomic")
        if ad.lto_mode == "mysql-with-lto":
            f.cmake_defs["WITH_LTO"] = "OFF"
        else:
            f.cmake_defs["CMAKE_INTERPROCEDURAL_OPTIMIZATION"] = "OFF"
    else:
        if req.wants("pgo"):
            if ad.pgo_mode == "mysql-fprofile":
                f.cmake_defs["FPROFILE_GENERATE"] = "OFF"
                f.cmake_defs["FPROFILE_USE"] = "ON"
                f.cmake_defs["FPROFILE_DIR"] = str(profile_dir)
            else:
                f.both(f"-fprofile-use={profile_dir}", "-fprofile-correction")
            # Training runs one workload: code it never ran keeps normal optimization
            # instead of being optimized for size (no regressions on untrained paths).
            f.both("-fprofile-partial-training", "-Wmissing-profile")
            f.notes.append(
                "PGO use: -fprofile-use, -fprofile-partial-training (untrained paths keep "
                "-O2), -Wmissing-profile (a TU without profile is reported)"
            )
        elif ad.pgo_mode == "mysql-fprofile":
            f.cmake_defs["FPROFILE_GENERATE"] = "OFF"
            f.cmake_defs["FPROFILE_USE"] = "OFF"
        lto = req.wants("lto")
        if ad.lto_mode == "mysql-with-lto":
            f.cmake_defs["WITH_LTO"] = "ON" if lto else "OFF"
        else:
            f.cmake_defs["CMAKE_INTERPROCEDURAL_OPTIMIZATION"] = "ON" if lto else "OFF"
        if lto:
            f.notes.append(
                "LTO: "
                + (
                    "WITH_LTO=ON"
                    if ad.lto_mode == "mysql-with-lto"
                    else "CMAKE_INTERPROCEDURAL_OPTIMIZATION=ON (-flto=auto, gcc-ar)"
                )
            )
        if req.wants("bolt"):
            # BOLT rewrites the linked binary: it needs the relocations, and GCC's own
            # hot/cold partitioning gets in its way.
            f.exe_linker_flags.append("-Wl,--emit-relocs")
            f.both("-fno-reorder-blocks-and-partition")
            f.notes.append("BOLT: -Wl,--emit-relocs, -fno-reorder-blocks-and-partition")
    if req.wants("cacheline"):
        n = str(req.cacheline_bytes)
        f.cmake_defs["CPU_LEVEL1_DCACHE_LINESIZE"] = n
        if ad.cacheline_mode == "cmake+define":
            f.both(f"-DCPU_LEVEL1_DCACHE_LINESIZE={n}")
            f.notes.append(
                f"cache line {n}: compiler define (this tree's config.h.cmake ignores the "
                "CMake variable)"
            )
    for opt in (*ad.offline_options, *ad.lean_options):
        f.cmake_defs.setdefault(opt.name, opt.value)
    return f
