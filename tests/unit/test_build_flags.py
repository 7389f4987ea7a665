"""Architecture and optimization flags from probe facts (no compiler runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from myaccel.builder.errors import BuildOptionError
from myaccel.builder.flags import (
    BuildRequest,
    Toolchain,
    arch_flags,
    compose_phase,
    parse_opts,
    resolve_target,
)
from myaccel.builder.tree import detect_tree
from myaccel.facts.cpu import collect_cpu
from myaccel.facts.sysroot import Sysroot

SYSROOTS = Path(__file__).resolve().parents[1] / "fixtures" / "sysroots"
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "buildproj"

ARM_TC = Toolchain("gcc", "g++", "12.2.0", "aarch64", False, "aarch64-linux-gnu", "Ninja")
X86_TC = Toolchain("gcc", "g++", "12.2.0", "x86_64", False, "x86_64-linux-gnu", "Ninja")
CROSS_TC = Toolchain("a-gcc", "a-g++", "12.2.0", "aarch64", True, "aarch64-linux-gnu", "Ninja")

# Cortex-A72 (e.g. AWS Graviton1, Raspberry Pi 4): ARMv8.0, no 'atomics' in Features.
A72_CPUINFO = """processor\t: 0
BogoMIPS\t: 166.66
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 cpuid
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x0
CPU part\t: 0xd08
CPU revision\t: 3

"""


def a72_sysroot(tmp_path: Path) -> Path:
    root = tmp_path / "a72"
    (root / "proc").mkdir(parents=True)
    (root / "proc" / "cpuinfo").write_text(A72_CPUINFO)
    (root / "sys").mkdir()
    return root


def test_parse_opts() -> None:
    assert parse_opts("pgo, lto,bolt") == ("lto", "pgo", "bolt")
    assert parse_opts("") == ()
    with pytest.raises(BuildOptionError, match="unknown optimization 'fast'"):
        parse_opts("pgo,fast")


@pytest.mark.parametrize(
    ("sysroot", "lse_flag", "tune"),
    [
        ("graviton2-m6g", "-mcpu=neoverse-n1", "-mtune=neoverse-n1"),
        ("kunpeng920-2s", "-mcpu=tsv110", "-mtune=tsv110"),
        # the Yitian 710 tree lists `sb` among its Features: the build for it gets +sb
        ("yitian710-g8y2xlarge", "-mcpu=neoverse-n2+sb", "-mtune=neoverse-n2"),
    ],
)
def test_aarch64_flags_from_probe_facts(sysroot: str, lse_flag: str, tune: str) -> None:
    cpu = collect_cpu(Sysroot(SYSROOTS / sysroot))
    target = resolve_target(BuildRequest(), ARM_TC, cpu)
    assert target.has_lse is True
    # default: tuned for the core, outline atomics (runs on any ARMv8.0 CPU)
    flags, why = arch_flags(BuildRequest(), target)
    assert flags == ["-march=armv8-a", tune, "-moutline-atomics"]
    assert "outline" in why
    # lse: the core's -mcpu (LSE-capable), which inlines casal/ldaddal
    flags, why = arch_flags(BuildRequest(opts=("lse",)), target)
    assert flags == [lse_flag]
    assert "inline LSE" in why
    assert ("+sb: the target has the speculation barrier" in why) == lse_flag.endswith("+sb")


def test_lse_refused_without_atomics(tmp_path: Path) -> None:
    cpu = collect_cpu(Sysroot(a72_sysroot(tmp_path)))
    assert cpu.has_lse.value is False
    target = resolve_target(BuildRequest(opts=("lse",)), ARM_TC, cpu)
    with pytest.raises(BuildOptionError, match="has no LSE atomics") as ei:
        arch_flags(BuildRequest(opts=("lse",)), target)
    assert "SIGILL" in ei.value.message and "outline" in ei.value.hint
    # the default stays safe on that CPU
    assert arch_flags(BuildRequest(), target)[0] == [
        "-march=armv8-a",
        "-mtune=cortex-a72",
        "-moutline-atomics",
    ]


def test_lse_for_cross_needs_a_target() -> None:
    target = resolve_target(BuildRequest(opts=("lse",), cross="aarch64"), CROSS_TC, None)
    with pytest.raises(BuildOptionError, match="unknown"):
        arch_flags(BuildRequest(opts=("lse",)), target)
    t2 = resolve_target(BuildRequest(target_cpu="cortex-a72"), CROSS_TC, None)
    with pytest.raises(BuildOptionError, match="no LSE atomics"):
        arch_flags(BuildRequest(opts=("lse",)), t2)
    t3 = resolve_target(BuildRequest(target_cpu="armv8.2-a"), CROSS_TC, None)
    assert arch_flags(BuildRequest(opts=("lse",)), t3)[0] == ["-march=armv8.2-a"]


def test_llsc_and_x86() -> None:
    target = resolve_target(BuildRequest(), CROSS_TC, None)
    assert arch_flags(BuildRequest(atomics="llsc"), target)[0] == [
        "-march=armv8-a",
        "-mno-outline-atomics",
    ]
    x86 = resolve_target(BuildRequest(), X86_TC, None)
    assert arch_flags(BuildRequest(), x86)[0] == []  # no -march unless asked
    x86v3 = resolve_target(BuildRequest(target_cpu="x86-64-v3"), X86_TC, None)
    assert arch_flags(BuildRequest(), x86v3)[0] == ["-march=x86-64-v3"]
    with pytest.raises(BuildOptionError, match="only applies to aarch64"):
        arch_flags(BuildRequest(opts=("lse",)), x86)


def test_pgo_phases_flags_mode(tmp_path: Path) -> None:
    tree = detect_tree(FIXTURE)
    req = BuildRequest(opts=("lto", "pgo", "bolt", "cacheline"))
    prof = tmp_path / "profile"
    gen = compose_phase("instrumented", tree, req, X86_TC, [], prof)
    assert f"-fprofile-generate={prof}" in gen.cxx_flags
    assert "-fprofile-update=atomic" in gen.cxx_flags
    assert gen.cmake_defs["CMAKE_INTERPROCEDURAL_OPTIMIZATION"] == "OFF"
    use = compose_phase("final", tree, req, X86_TC, [], prof)
    for f in (f"-fprofile-use={prof}", "-fprofile-partial-training", "-Wmissing-profile"):
        assert f in use.cxx_flags and f in use.c_flags
    assert use.cmake_defs["CMAKE_INTERPROCEDURAL_OPTIMIZATION"] == "ON"
    assert "-Wl,--emit-relocs" in use.exe_linker_flags
    assert "-fno-reorder-blocks-and-partition" in use.cxx_flags
    assert use.cmake_defs["CPU_LEVEL1_DCACHE_LINESIZE"] == "128"
    args = use.cmake_args()
    assert any(a.startswith("-DCMAKE_CXX_FLAGS=-fprofile-use=") for a in args)


def test_mysql_uses_its_own_options(tmp_path: Path) -> None:
    (tmp_path / "cmake").mkdir()
    (tmp_path / "CMakeLists.txt").write_text('OPTION(WITH_LTO "" OFF)\n')
    (tmp_path / "cmake" / "fprofile.cmake").write_text("# FPROFILE_GENERATE\n")
    # options are passed only where the tree declares them (9.7 has no DOWNLOAD_BOOST)
    (tmp_path / "cmake" / "boost.cmake").write_text('OPTION(DOWNLOAD_BOOST "" OFF)\n')
    (tmp_path / "MYSQL_VERSION").write_text(
        "MYSQL_VERSION_MAJOR=8\nMYSQL_VERSION_MINOR=4\nMYSQL_VERSION_PATCH=3\n"
    )
    tree = detect_tree(tmp_path)
    req = BuildRequest(opts=("lto", "pgo"))
    prof = tmp_path / "p"
    gen = compose_phase("instrumented", tree, req, X86_TC, [], prof)
    assert gen.cmake_defs["FPROFILE_GENERATE"] == "ON"
    assert gen.cmake_defs["FPROFILE_DIR"] == str(prof)
    assert not any(f.startswith("-fprofile-generate") for f in gen.cxx_flags)
    use = compose_phase("final", tree, req, X86_TC, [], prof)
    assert (use.cmake_defs["FPROFILE_USE"], use.cmake_defs["FPROFILE_GENERATE"]) == ("ON", "OFF")
    assert use.cmake_defs["WITH_LTO"] == "ON"
    assert use.cmake_defs["DOWNLOAD_BOOST"] == "OFF"


def test_mariadb_cacheline_is_a_compiler_define(tmp_path: Path) -> None:
    (tmp_path / "CMakeLists.txt").write_text("project(MySQL)\n")
    (tmp_path / "VERSION").write_text(
        "MYSQL_VERSION_MAJOR=10\nMYSQL_VERSION_MINOR=11\nMYSQL_VERSION_PATCH=9\nSERVER_MATURITY=stable\n"
    )
    (tmp_path / "config.h.cmake").write_text("#cmakedefine HAVE_X 1\n")
    tree = detect_tree(tmp_path)
    f = compose_phase("final", tree, BuildRequest(opts=("cacheline",)), ARM_TC, [], tmp_path)
    assert "-DCPU_LEVEL1_DCACHE_LINESIZE=128" in f.c_flags
    assert "-DCPU_LEVEL1_DCACHE_LINESIZE=128" in f.cxx_flags
    assert f.cmake_defs["WITH_PCRE"] == "system"
