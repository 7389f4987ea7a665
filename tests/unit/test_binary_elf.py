"""ELF facts: bad input, header facts, LTO/PGO/instrumentation traces, text alignment,
relocations and separate debug files.

Synthetic ELF files (written by test_binary_atomics.make_elf) need no tools; the builds
with the host gcc are integration tests.
"""

from __future__ import annotations

import platform
import random
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from myaccel.errors import BinaryError
from myaccel.facts.binary import HUGE_PAGE_BYTES, collect_binary
from myaccel.model import BinaryFacts

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_binary_atomics import FIXTURE, NOP, RET, make_elf

# ---------------------------------------------------------------- bad input


def assert_one_line(err: BinaryError) -> None:
    assert err.message
    assert "\n" not in err.message
    assert err.hint
    assert err.code == "binary"
    assert err.exit_code == 2


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(BinaryError, match="does not exist") as exc:
        collect_binary(tmp_path / "nope" / "mariadbd")
    assert_one_line(exc.value)


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(BinaryError, match="is a directory") as exc:
        collect_binary(tmp_path)
    assert_one_line(exc.value)


@pytest.mark.parametrize(
    "content", [b"#!/bin/sh\nexec mysqld\n", b"", b"\x7fEL", b"MZ\x90\x00" + b"\0" * 200]
)
def test_not_elf(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "mysqld_safe"
    path.write_bytes(content)
    with pytest.raises(BinaryError, match="not an ELF file") as exc:
        collect_binary(path)
    assert_one_line(exc.value)


@pytest.mark.parametrize("keep", [20, 40, 100, 0.5])
def test_truncated_elf(tmp_path: Path, keep: float) -> None:
    real = Path(sys.executable).resolve().read_bytes()  # the Python interpreter: a real ELF
    assert real[:4] == b"\x7fELF"
    n = int(len(real) * keep) if isinstance(keep, float) else int(keep)
    path = tmp_path / "truncated"
    path.write_bytes(real[:n])
    with pytest.raises(BinaryError, match="truncated or corrupt") as exc:
        collect_binary(path)
    assert_one_line(exc.value)


def test_truncated_synthetic(tmp_path: Path) -> None:
    data = make_elf([NOP] * 64 + [RET])
    path = tmp_path / "cut"
    path.write_bytes(data[: len(data) - 100])  # section headers cut off
    with pytest.raises(BinaryError, match="truncated"):
        collect_binary(path)


def test_never_crashes_on_corrupt_elf(tmp_path: Path) -> None:
    """Flipped bytes anywhere: a BinaryError or facts, never another exception."""
    base = bytearray(
        make_elf([NOP, 0x88E0FC41, RET] * 20, symbols=[("main", 0x400100), ("$d", 0x400108)])
    )
    rng = random.Random(7)
    path = tmp_path / "corrupt"
    outcomes = {"facts": 0, "error": 0}
    for _ in range(300):
        data = bytearray(base)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.getrandbits(8)
        path.write_bytes(bytes(data))
        try:
            assert isinstance(collect_binary(path), BinaryFacts)
            outcomes["facts"] += 1
        except BinaryError as err:
            assert_one_line(err)
            outcomes["error"] += 1
    assert outcomes["facts"] > 0


# ---------------------------------------------------------------- synthetic files


def test_header_facts_of_synthetic_exec(tmp_path: Path) -> None:
    path = tmp_path / "exec"
    path.write_bytes(make_elf([NOP, RET]))
    f = collect_binary(path)
    assert f.path == str(path)
    assert f.size_bytes.value == path.stat().st_size
    assert (f.elf_class.value, f.machine.value) == (64, "aarch64")
    assert f.pie.value is False  # ET_EXEC
    assert f.stripped.value is True
    assert f.debug_info.value is False
    assert f.compiler.known is False
    assert f.compiler.unknown is not None and ".comment" in f.compiler.unknown
    assert f.build_id.known and f.build_id.value is None  # known: there is none
    assert f.text_segment_align.value == 0x10000
    assert f.text_huge_page_ready.value is False
    assert f.relocations.value is False
    assert f.lto.known is False  # no symbols, no DWARF: unknown, not a false "no"
    assert f.lto.unknown and "stripped" in f.lto.unknown
    assert f.pgo.known is False
    assert f.instrumented.value is False
    assert f.analysis_s >= 0


def test_huge_page_alignment(tmp_path: Path) -> None:
    path = tmp_path / "huge"
    path.write_bytes(make_elf([NOP, RET], align=HUGE_PAGE_BYTES, text_addr=0x200100))
    f = collect_binary(path)
    assert f.text_segment_align.value == HUGE_PAGE_BYTES
    assert f.text_huge_page_ready.value is True
    assert "vaddr=0x200000" in f.text_segment_align.source


def test_without_section_headers(tmp_path: Path) -> None:
    """sstrip-style files: no section headers; the executable PT_LOAD is scanned instead."""
    data = bytearray(make_elf([NOP, 0xB8E00020, RET]))  # ldaddal inline
    struct.pack_into("<Q", data, 0x28, 0)  # e_shoff
    struct.pack_into("<HH", data, 0x3C, 0, 0)  # e_shnum, e_shstrndx
    path = tmp_path / "sstripped"
    path.write_bytes(bytes(data))
    f = collect_binary(path)
    assert f.compiler.known is False
    assert f.relocations.known is False
    assert f.stripped.value is True
    a = f.atomics.value
    assert a is not None
    assert a.klass == "inline-lse"
    assert a.by_mnemonic == {"ldaddal": 1}


def test_python_interpreter_is_analysed() -> None:
    f = collect_binary(Path(sys.executable).resolve())
    assert f.machine.value in ("x86_64", "aarch64")
    assert f.atomics.known
    assert f.text_segment_align.known


# ---------------------------------------------------------------- host gcc builds


@pytest.fixture(scope="module")
def gcc() -> str:
    path = shutil.which("gcc")
    if path is None:
        pytest.skip("gcc is not installed")
    return path


def build(gcc: str, out: Path, *flags: str, src: Path = FIXTURE) -> Path:
    arch = ["-mcx16"] if platform.machine() == "x86_64" else []  # 16-byte __sync CAS
    cp = subprocess.run(
        [gcc, "-O2", "-pthread", *arch, *flags, "-o", str(out), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=out.parent,
    )
    assert cp.returncode == 0, cp.stderr
    return out


@pytest.mark.integration
@pytest.mark.parametrize("debug", ["-g", "-gdwarf-4", "-gz"])
def test_dwarf_producer_without_lto_or_pgo(gcc: str, tmp_path: Path, debug: str) -> None:
    flags = ["-g", debug] if debug == "-gz" else [debug]
    f = collect_binary(build(gcc, tmp_path / "prog", *flags))
    assert f.debug_info.value is True
    assert f.stripped.value is False
    assert f.compiler.value and any("GCC" in c for c in f.compiler.value)
    assert f.build_id.value and len(f.build_id.value) == 40
    assert f.pie.value is True  # Debian's gcc defaults to PIE
    assert (f.lto.value, f.pgo.value) == (False, False)
    assert "DW_AT_producer" in f.lto.source and "DW_AT_producer" in f.pgo.source
    assert f.instrumented.value is False


@pytest.mark.integration
def test_lto(gcc: str, tmp_path: Path) -> None:
    f = collect_binary(build(gcc, tmp_path / "prog", "-g", "-flto"))
    assert f.lto.value is True
    assert f.lto_evidence.value and any("GIMPLE" in e for e in f.lto_evidence.value)


@pytest.mark.integration
def test_profile_generate_then_use(gcc: str, tmp_path: Path) -> None:
    prog = build(gcc, tmp_path / "prog", "-fprofile-generate", "-fprofile-update=atomic")
    gen = collect_binary(prog)
    assert gen.instrumented.value is True
    assert "__gcov_" in gen.instrumented.source
    bare = tmp_path / "prog.stripped"
    subprocess.run(["strip", "-o", str(bare), str(prog)], check=True, timeout=60)
    stripped = collect_binary(bare)
    assert stripped.instrumented.value is True  # from the .gcda paths in .rodata
    assert ".gcda" in stripped.instrumented.source
    # train, then rebuild with the profile (same output name: GCC keys .gcda by it)
    subprocess.run([str(prog), "300"], check=True, timeout=120, capture_output=True)
    assert list(tmp_path.glob("*.gcda"))
    use = collect_binary(build(gcc, tmp_path / "prog", "-g", "-fprofile-use"))
    assert use.pgo.value is True
    assert use.pgo_evidence.value and any("-fprofile-use" in e for e in use.pgo_evidence.value)
    assert use.instrumented.value is False


@pytest.mark.integration
def test_cold_symbols_alone_are_weak(gcc: str, tmp_path: Path) -> None:
    prog = build(gcc, tmp_path / "prog", "-static-pie")  # glibc brings .cold symbols
    f = collect_binary(prog)
    assert f.pie.value is True  # static PIE: DT_FLAGS_1 PIE, no PT_INTERP
    assert f.debug_info.value is False
    assert f.pgo.known is False
    assert f.pgo_evidence.value and all(e.startswith("weak:") for e in f.pgo_evidence.value)


@pytest.mark.integration
def test_huge_pages_relocs_no_pie(gcc: str, tmp_path: Path) -> None:
    prog = build(
        gcc,
        tmp_path / "prog",
        "-no-pie",
        "-Wl,-zmax-page-size=0x200000",
        "-Wl,-zcommon-page-size=0x200000",
        "-Wl,--emit-relocs",
    )
    f = collect_binary(prog)
    assert f.pie.value is False
    assert f.text_segment_align.value == HUGE_PAGE_BYTES
    assert f.text_huge_page_ready.value is True
    assert f.relocations.value is True
    plain = collect_binary(build(gcc, tmp_path / "plain"))
    assert plain.text_huge_page_ready.value is False
    assert plain.relocations.value is False


@pytest.mark.integration
def test_separate_debug_file_by_build_id(gcc: str, tmp_path: Path) -> None:
    prog = build(gcc, tmp_path / "prog", "-g", "-flto")
    full = collect_binary(prog)
    assert full.build_id.value
    bid = full.build_id.value
    root = tmp_path / "debugroot"
    dbg = root / ".build-id" / bid[:2] / f"{bid[2:]}.debug"
    dbg.parent.mkdir(parents=True)
    subprocess.run(["objcopy", "--only-keep-debug", str(prog), str(dbg)], check=True)
    bare = tmp_path / "prog.stripped"
    subprocess.run(["strip", "--remove-section=.comment", "-o", str(bare), str(prog)], check=True)
    alone = collect_binary(bare, debug_dirs=[])
    assert alone.stripped.value is True
    assert alone.compiler.known is False
    assert alone.lto.known is False
    with_dbg = collect_binary(bare, debug_dirs=[root])
    assert with_dbg.stripped.value is True  # about the binary itself
    assert with_dbg.debug_info.value is True
    assert str(dbg) in with_dbg.debug_info.source
    assert with_dbg.lto.value is True
    assert with_dbg.compiler.value and any("GCC" in c for c in with_dbg.compiler.value)
