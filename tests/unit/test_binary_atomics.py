"""aarch64 atomics classification: the A64 masks, helper detection and the class rule.

The unit tests build tiny ELF files in Python (no tools needed). The integration tests
cross-compile tests/fixtures/atomics/atomics_demo.c three ways with aarch64-linux-gnu-gcc,
run each build under qemu-aarch64, and check our counts against
``aarch64-linux-gnu-objdump -d`` mnemonic for mnemonic.
"""

from __future__ import annotations

import random
import re
import shutil
import struct
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from myaccel.builder.cross import qemu_argv
from myaccel.facts.binary import classify_atomics, collect_binary
from myaccel.facts.binary.atomics import _decode_atomic

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "atomics" / "atomics_demo.c"

# Mnemonics of the families we count, as objdump prints them.
FAMILY = re.compile(
    r"^(casp?(a|l|al)?[bh]?|swp(a|l|al)?[bh]?"
    r"|ld(add|clr|eor|set|smax|smin|umax|umin)(a|l|al)?[bh]?"
    r"|st(add|clr|eor|set|smax|smin|umax|umin)l?[bh]?"
    r"|ld(a)?x[rp][bh]?|st(l)?x[rp][bh]?)$"
)
HELPER_CALL = re.compile(r"<__aarch64_(cas|swp|ldadd|ldclr|ldeor|ldset)(1|2|4|8|16)_\w+>$")
HELPER_DEF = re.compile(
    r"^[0-9a-f]+ <__aarch64_(cas|swp|ldadd|ldclr|ldeor|ldset)(1|2|4|8|16)_\w+>:"
)

RET = 0xD65F03C0
NOP = 0xD503201F


# ---------------------------------------------------------------- a minimal ELF writer


def make_elf(
    words: list[int],
    *,
    machine: int = 183,  # EM_AARCH64
    symbols: list[tuple[str, int]] | None = None,
    text_addr: int = 0x400100,
    align: int = 0x10000,
) -> bytes:
    """An ET_EXEC ELF64 LE with .text holding ``words`` and optionally a .symtab
    (``symbols``: name, address; all defined in .text)."""
    text = struct.pack(f"<{len(words)}I", *words)
    names = [b"", b".text", b".shstrtab"] + ([b".symtab", b".strtab"] if symbols else [])
    shstr = b"\0".join(names) + b"\0"
    name_off = {n: shstr.index(n + b"\0") for n in names if n}
    strtab = b"\0"
    syms = struct.pack("<IBBHQQ", 0, 0, 0, 0, 0, 0)
    for name, addr in symbols or []:
        off = len(strtab)
        strtab += name.encode() + b"\0"
        syms += struct.pack("<IBBHQQ", off, 0x12, 0, 1, addr, 0)  # GLOBAL FUNC in .text
    base = text_addr & ~0xFFF
    text_off = text_addr - base
    assert text_off >= 64 + 56
    blobs = text
    shstr_off = text_off + len(blobs)
    blobs += shstr
    sym_off = (text_off + len(blobs) + 7) & ~7
    blobs += b"\0" * (sym_off - text_off - len(blobs)) + (syms if symbols else b"")
    str_off = text_off + len(blobs)
    blobs += strtab if symbols else b""
    sh_off = (text_off + len(blobs) + 7) & ~7
    body = b"\0" * (sh_off - text_off - len(blobs))
    shnum = len(names)
    ehdr = struct.pack(
        "<4sBBBBB7sHHIQQQIHHHHHH",
        b"\x7fELF", 2, 1, 1, 0, 0, b"\0" * 7,
        2, machine, 1, text_addr, 64, sh_off, 0, 64, 56, 1, 64, shnum, 2,
    )  # fmt: skip
    phdr = struct.pack("<IIQQQQQQ", 1, 5, 0, base, base, sh_off, sh_off, align)
    shdrs = b"\0" * 64
    shdrs += struct.pack("<IIQQQQIIQQ", name_off[b".text"], 1, 6, text_addr, text_off,
                         len(text), 0, 0, 4, 0)  # fmt: skip
    shdrs += struct.pack("<IIQQQQIIQQ", name_off[b".shstrtab"], 3, 0, 0, shstr_off,
                         len(shstr), 0, 0, 1, 0)  # fmt: skip
    if symbols:
        shdrs += struct.pack("<IIQQQQIIQQ", name_off[b".symtab"], 2, 0, 0, sym_off,
                             len(syms), 4, 1, 8, 24)  # fmt: skip
        shdrs += struct.pack("<IIQQQQIIQQ", name_off[b".strtab"], 3, 0, 0, str_off,
                             len(strtab), 0, 0, 1, 0)  # fmt: skip
    head = ehdr + phdr
    return head + b"\0" * (text_off - len(head)) + blobs + body + shdrs


def bl(from_addr: int, to_addr: int, *, link: bool = True) -> int:
    imm = ((to_addr - from_addr) >> 2) & 0x03FFFFFF
    return (0x94000000 if link else 0x14000000) | imm


# Encodings taken from the Arm ARM (and what objdump prints for them).
CASAL_W = 0x88E0FC41  # casal w0, w1, [x2]
LDXR_W = 0x885F7C40  # ldxr w0, [x2]
STXR_W = 0x88117C41  # stxr w17, w1, [x2]
LDADDAL_W = 0xB8E00020  # ldaddal w0, w0, [x1]
LDAXR_W = 0x885FFC20  # ldaxr w0, [x1]
STLXR_W = 0x8811FC20  # stlxr w17, w0, [x1]


def helper_words() -> list[int]:
    """libgcc's __aarch64_cas4_acq_rel, as GCC 12 links it."""
    return [
        0xD503245F,  # bti c
        0x90000010,  # adrp x16, ...
        0x39400210,  # ldrb w16, [x16]
        0x34000070,  # cbz w16, +12
        CASAL_W,
        RET,
        0x2A0003F0,  # mov w16, w0
        LDAXR_W,
        0x6B10001F,  # cmp w0, w16
        0x54000061,  # b.ne
        0x8811FC41,  # stlxr w17, w1, [x2]
        0x35FFFF91,  # cbnz w17, loop
        RET,
    ]


# ---------------------------------------------------------------- decoding


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        (CASAL_W, ("casal", "lse")),
        (0x08A07C41, ("casb", "lse")),
        (0x48E0FC41, ("casalh", "lse")),
        (0xC8A07C41, ("cas", "lse")),  # x registers
        (0x48607C82, ("caspa", "lse")),  # caspa x0, x1, x2, x3, [x4]
        (0x48617C82, None),  # caspa with odd Rs: unallocated
        (LDADDAL_W, ("ldaddal", "lse")),
        (0x38602020, ("ldeorlb", "lse")),
        (0xF820003F, ("stadd", "lse")),  # ldadd x0, xzr, [x1] is STADD
        (0xB860303F, ("stsetl", "lse")),
        (0xB8A0303F, ("ldseta", "lse")),  # acquire keeps the LD form even with wzr
        (0xB8E08020, ("swpal", "lse")),
        (0x78A05020, ("ldsminah", "lse")),
        (0xB8BFC020, None),  # ldapr w0, [x1]: o3=1 opc=100, RCpc load, not an atomic
        (0x38BFC020, None),  # ldaprb
        (LDXR_W, ("ldxr", "xload")),
        (LDAXR_W, ("ldaxr", "xload")),
        (0x085F7C40, ("ldxrb", "xload")),
        (0x485FFC40, ("ldaxrh", "xload")),
        (0xC87F0440, ("ldxp", "xload")),
        (0xC87F8440, ("ldaxp", "xload")),
        (STXR_W, ("stxr", "xstore")),
        (0x0811FC41, ("stlxrb", "xstore")),
        (0xC8310441, ("stxp", "xstore")),
        (0xC8318441, ("stlxp", "xstore")),
        (0x88DFFC20, None),  # ldar: ordered, not exclusive
        (0x889FFC20, None),  # stlr
        (RET, None),
        (NOP, None),
        (0x94000010, None),  # bl
    ],
)
def test_decode_atomic(word: int, expected: tuple[str, str] | None) -> None:
    assert _decode_atomic(word) == expected


# ---------------------------------------------------------------- the class rule


def test_classify_none() -> None:
    klass, detail = classify_atomics(0, 0, 0, 0)
    assert klass == "none"
    assert "no LSE" in detail


@pytest.mark.parametrize(
    ("inline_lse", "calls", "loops", "helpers", "expected"),
    [
        (0, 2125, 0, 25, "outline"),  # Debian's arm64 mariadbd
        (1031, 342, 0, 13, "inline-lse"),  # -march=armv8.1-a, static glibc brings helpers
        (0, 342, 1031, 13, "llsc"),  # -mno-outline-atomics, static glibc brings helpers
        (0, 0, 40, 0, "llsc"),  # GCC < 10 default, dynamically linked
        (500, 0, 0, 0, "inline-lse"),
        (3, 3000, 7, 20, "outline"),  # a few hand-written sites do not change the class
        (0, 0, 0, 4, "outline"),  # helpers linked in, only called indirectly
    ],
)
def test_classify_by_sites(
    inline_lse: int, calls: int, loops: int, helpers: int, expected: str
) -> None:
    klass, detail = classify_atomics(inline_lse, calls, loops, helpers)
    assert klass == expected
    assert detail.startswith(expected + ":")
    assert "\n" not in detail


# ---------------------------------------------------------------- synthetic ELF files


def test_helper_detected_structurally_when_stripped(tmp_path: Path) -> None:
    text = 0x400100
    words = helper_words()
    caller = text + 4 * len(words)
    words += [bl(caller + 4 * i, text) for i in range(5)]  # 5 calls to the helper entry
    words += [bl(caller + 20, text, link=False)]  # a tail call
    words += [RET]
    path = tmp_path / "stripped"
    path.write_bytes(make_elf(words))
    facts = collect_binary(path)
    a = facts.atomics.value
    assert a is not None
    assert a.klass == "outline"
    assert (a.lse_instructions, a.helper_sites, a.helper_calls) == (1, 1, 6)
    assert (a.exclusive_loads, a.exclusive_stores) == (1, 1)
    assert a.helper_symbols == 0
    assert a.by_mnemonic == {"casal": 1, "ldaxr": 1, "stlxr": 1}
    assert a.instructions_scanned == len(words)
    assert facts.stripped.value is True


def test_helper_symbols_counted(tmp_path: Path) -> None:
    text = 0x400100
    words = [*helper_words(), bl(text + 52, text), RET]
    path = tmp_path / "with-symbols"
    path.write_bytes(
        make_elf(words, symbols=[("__aarch64_cas4_acq_rel", text), ("main", text + 52)])
    )
    a = collect_binary(path).atomics.value
    assert a is not None
    assert (a.helper_symbols, a.helper_calls, a.klass) == (1, 1, "outline")


def test_inline_lse_is_not_a_helper(tmp_path: Path) -> None:
    # ldaddal; ret with no LL/SC fallback after it: inline LSE in a tiny function
    words = [LDADDAL_W, RET, NOP, NOP, LDADDAL_W, 0x2A0003E1, RET]
    path = tmp_path / "lse"
    path.write_bytes(make_elf(words))
    a = collect_binary(path).atomics.value
    assert a is not None
    assert (a.klass, a.lse_instructions, a.helper_sites) == ("inline-lse", 2, 0)


def test_llsc_loop(tmp_path: Path) -> None:
    words = [LDAXR_W, 0x11000401, STLXR_W, 0x35FFFFB1, RET]  # ldaxr; add; stlxr; cbnz; ret
    path = tmp_path / "llsc"
    path.write_bytes(make_elf(words))
    a = collect_binary(path).atomics.value
    assert a is not None
    assert (a.klass, a.exclusive_loads, a.exclusive_stores, a.lse_instructions) == (
        "llsc",
        1,
        1,
        0,
    )


def test_no_atomics(tmp_path: Path) -> None:
    path = tmp_path / "plain"
    path.write_bytes(make_elf([NOP, NOP, RET]))
    a = collect_binary(path).atomics.value
    assert a is not None
    assert a.klass == "none"


def test_data_mapping_symbols_are_skipped(tmp_path: Path) -> None:
    # A literal pool marked $d holding a word that looks like casal is data, as objdump says.
    text = 0x400100
    words = [NOP, RET, CASAL_W, CASAL_W, LDADDAL_W, RET]
    path = tmp_path / "pool"
    path.write_bytes(make_elf(words, symbols=[("$x", text), ("$d", text + 8), ("$x.1", text + 16)]))
    a = collect_binary(path).atomics.value
    assert a is not None
    assert a.by_mnemonic == {"ldaddal": 1}
    assert a.instructions_scanned == 4


def test_x86_is_not_applicable(tmp_path: Path) -> None:
    path = tmp_path / "x86"
    path.write_bytes(make_elf([0xC3C3C3C3], machine=62))
    facts = collect_binary(path)
    assert facts.machine.value == "x86_64"
    a = facts.atomics.value
    assert a is not None
    assert a.klass == "not-applicable"
    assert "aarch64" in a.detail


# ---------------------------------------------------------------- real builds (integration)

VARIANTS = {
    # name: (extra gcc flags, expected class)
    "outline": ([], "outline"),
    "lse": (["-march=armv8.1-a"], "inline-lse"),
    "llsc": (["-march=armv8-a", "-mno-outline-atomics"], "llsc"),
}
ITERATIONS = 2000


def expected_checksum(n: int) -> int:
    """What atomics_demo.c prints for ``n`` iterations per thread (2 threads, 256 slots)."""
    guarded = sum(v ^ 0x5A5A for v in range(2 * n))
    slots = 256 * (2 * n + 3)
    return (
        (n * (2 * n - 1) * 31 + 2 * n * 7 + 0x7FFF + (2 * n - 1) * 3 + 2 * n * 5)
        + guarded
        + slots * 11
    )


def need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} is not installed (apt-get install the cross toolchain/qemu-user)")
    return path


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    gcc = need("aarch64-linux-gnu-gcc")
    out = tmp_path_factory.mktemp("atomics")
    result: dict[str, Path] = {}
    for name, (flags, _) in VARIANTS.items():
        exe = out / name
        cp = subprocess.run(
            [gcc, "-O2", "-static", "-pthread", *flags, "-o", str(exe), str(FIXTURE)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert cp.returncode == 0, cp.stderr
        result[name] = exe
    strip = shutil.which("aarch64-linux-gnu-strip")
    if strip:
        stripped = out / "outline.stripped"
        subprocess.run(
            [strip, "-o", str(stripped), str(result["outline"])], check=True, timeout=120
        )
        result["outline.stripped"] = stripped
    return result


def objdump_counts(path: Path) -> tuple[Counter[str], int, int]:
    """Family mnemonic counts, direct calls to named helpers, helper definitions."""
    objdump = need("aarch64-linux-gnu-objdump")
    text = subprocess.run(
        [objdump, "-d", "--no-show-raw-insn", str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout
    counts: Counter[str] = Counter()
    calls = helpers = 0
    for line in text.splitlines():
        if HELPER_DEF.match(line):
            helpers += 1
            continue
        parts = line.split("\t")
        if len(parts) < 2 or not parts[0].rstrip().endswith(":"):
            continue
        fields = parts[1].split()
        mnemonic = fields[0] if fields else ""
        if FAMILY.match(mnemonic):
            counts[mnemonic] += 1
        elif mnemonic in ("bl", "b") and len(parts) > 2 and HELPER_CALL.search(parts[2]):
            calls += 1
    return counts, calls, helpers


@pytest.mark.integration
@pytest.mark.parametrize("name", list(VARIANTS))
def test_build_runs_under_qemu(builds: dict[str, Path], name: str) -> None:
    need("qemu-aarch64")
    cp = subprocess.run(
        [*qemu_argv("aarch64"), str(builds[name]), str(ITERATIONS)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert cp.returncode == 0, cp.stderr
    assert f"checksum={expected_checksum(ITERATIONS)}" in cp.stdout


@pytest.mark.integration
@pytest.mark.parametrize("name", list(VARIANTS))
def test_build_class(builds: dict[str, Path], name: str) -> None:
    a = collect_binary(builds[name]).atomics.value
    assert a is not None
    assert a.klass == VARIANTS[name][1], a.detail
    # the program's own 1024+ atomic sites
    if name == "outline":
        assert a.helper_calls >= 1024
        assert a.lse_instructions == a.helper_sites
    elif name == "lse":
        assert a.lse_instructions - a.helper_sites >= 1024
    else:
        assert a.exclusive_loads - a.helper_sites >= 1024


@pytest.mark.integration
@pytest.mark.parametrize("name", list(VARIANTS))
def test_counts_equal_objdump(builds: dict[str, Path], name: str) -> None:
    a = collect_binary(builds[name]).atomics.value
    assert a is not None
    counts, calls, helpers = objdump_counts(builds[name])
    assert a.by_mnemonic == dict(counts)
    assert a.lse_instructions == sum(
        n for m, n in counts.items() if not re.match(r"^(ld|st)(a|l)?x", m)
    )
    assert a.exclusive_loads == sum(n for m, n in counts.items() if re.match(r"^lda?x", m))
    assert a.exclusive_stores == sum(n for m, n in counts.items() if re.match(r"^stl?x", m))
    assert a.helper_calls == calls
    assert a.helper_symbols == helpers
    assert a.helper_sites == helpers  # each libgcc helper is one structural site


@pytest.mark.integration
def test_stripped_outline_still_outline(builds: dict[str, Path]) -> None:
    if "outline.stripped" not in builds:
        pytest.skip("aarch64-linux-gnu-strip is not installed")
    full = collect_binary(builds["outline"])
    bare = collect_binary(builds["outline.stripped"])
    assert bare.stripped.value is True
    fa, ba = full.atomics.value, bare.atomics.value
    assert fa is not None
    assert ba is not None
    assert ba.klass == "outline"
    assert ba.helper_symbols == 0
    assert (ba.helper_sites, ba.helper_calls, ba.by_mnemonic) == (
        fa.helper_sites,
        fa.helper_calls,
        fa.by_mnemonic,
    )


@pytest.mark.integration
def test_masks_agree_with_objdump_on_random_words(tmp_path: Path) -> None:
    """Random words inside the two encoding groups (and anywhere): our decoder names exactly
    the instructions objdump names from our families, and nothing else."""
    objdump = need("aarch64-linux-gnu-objdump")
    rng = random.Random(20240601)
    words: list[int] = []
    for _ in range(10000):
        r = rng.getrandbits(32)
        words.append((r & ~0x3F200C00) | 0x38200000)  # atomic memory operations group
        words.append((r & ~0x3F000000) | 0x08000000)  # exclusive / ordered / CAS group
        words.append(((r & ~0x3F000000) | 0x08000000) | 0x001F7C00)  # Rs = Rt2 = 11111
        words.append(r)
    raw = tmp_path / "words.bin"
    raw.write_bytes(struct.pack(f"<{len(words)}I", *words))
    text = subprocess.run(
        [objdump, "-D", "-b", "binary", "-m", "aarch64", "--no-show-raw-insn", str(raw)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    theirs: dict[int, str] = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) >= 2 and parts[0].strip().endswith(":"):
            fields = parts[1].split()
            theirs[int(parts[0].strip()[:-1], 16) // 4] = fields[0] if fields else ""
    mismatches = []
    hits = 0
    for i, w in enumerate(words):
        name = theirs.get(i, "")
        expected = name if FAMILY.match(name) else None
        hits += expected is not None
        got = _decode_atomic(w)
        if (got[0] if got else None) != expected:
            mismatches.append(f"{w:#010x}: objdump {name!r}, ours {got}")
    assert hits > 10000
    assert not mismatches, mismatches[:10]
