"""What a server binary was built with: ELF basics, atomics, LTO/PGO traces, text alignment.

``collect_binary(path)`` reads a mysqld/mariadbd (or any ELF file) and returns
``myaccel.model.BinaryFacts``. It never runs the binary and never shells out: headers come
from pyelftools, everything bulky (instruction words, symbol tables, DWARF unit headers) is
read straight from a memory map with numpy, so Debian's 25 MB arm64 mariadbd (2.2 million
instructions) takes about 0.1 s. A separate debug file (Debian's -dbgsym, found by build id
under /usr/lib/debug, or by .gnu_debuglink) stands in for the stripped symbol table,
.comment and DWARF.

LTO and PGO leave few traces. LTO: GCC's ``.lto_priv.`` symbols, clang's ``.llvm.N``
suffixes, ``.gnu.lto_`` sections, a "GNU GIMPLE" or ``-flto`` DW_AT_producer. PGO: only
``-fprofile-use`` (or clang's ``-fprofile-instr-use``) in DW_AT_producer is proof; ``.cold``
symbols are recorded as weak evidence (GCC splits hot/cold code without a profile too).
Without symbols and DWARF these facts are unknown with the reason, never a false "no".
Producers are read from a sample of compile units (first, last and spread), not all.

Atomics on aarch64 (KNOWLEDGE section 5). The executable sections are scanned as
little-endian 32-bit words with numpy masks. We do not disassemble with capstone or
``objdump -d``: a server has tens of millions of instructions, a disassembler spends
seconds to minutes producing text we would throw away, while A64 encodings are fixed-width
and the few instruction classes we need are recognised exactly by bit masks in well under
a second. The masks are derived from the Arm ARM encoding tables and cross-checked against
``aarch64-linux-gnu-objdump -d`` in tests/unit/test_binary_atomics.py.

Three kinds of atomic "sites" are counted:

* inline LSE: an ARMv8.1 LSE instruction (CAS*, CASP*, LD<op>/ST<op>, SWP*) outside an
  outline-atomics helper: the code was compiled for ARMv8.1+ and needs LSE to run;
* outline calls: BL/B to an outline-atomics helper (libgcc's ``__aarch64_cas4_acq_rel``
  and friends, compiler-rt's are alike). A helper is recognised structurally, so stripped
  binaries work too: an LSE instruction followed by RET and, within a few instructions, an
  exclusive load (the LL/SC fallback taken when the CPU lacks LSE);
* LL/SC loops: exclusive loads (LDXR/LDAXR/LDXP/LDAXP and B/H forms) outside helpers.

The class is the kind with the most sites (``inline-lse``, ``outline``, ``llsc``; ``none``
when there are no atomics at all). A count of sites, not a precedence rule: a statically
linked glibc brings a few hundred helper calls of its own and a few hand-written LL/SC loops
are common, but a server's own atomics outnumber both.
"""

from __future__ import annotations

import mmap
import re
import stat
import struct
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from elftools.elf.elffile import ELFFile

from myaccel.errors import BinaryError
from myaccel.model import AtomicsFacts, BinaryFacts, Fact, known, unknown

HUGE_PAGE_BYTES = 2 * 1024 * 1024

_MACHINES = {
    "EM_X86_64": "x86_64",
    "EM_AARCH64": "aarch64",
    "EM_386": "i386",
    "EM_ARM": "arm",
    "EM_PPC64": "ppc64",
    "EM_PPC": "ppc",
    "EM_S390": "s390x",
    "EM_RISCV": "riscv",
    "EM_LOONGARCH": "loongarch",
    "EM_MIPS": "mips",
    "EM_SPARCV9": "sparc64",
}

_SHF_EXECINSTR = 0x4
_SHF_ALLOC = 0x2
_SHF_COMPRESSED = 0x800
_PF_X = 0x1
_DF_1_PIE = 0x08000000

U32 = npt.NDArray[np.uint32]
I64 = npt.NDArray[np.int64]


def _bad(path: Path, message: str, hint: str) -> BinaryError:
    return BinaryError(message, hint=hint, context={"path": str(path)})


# ---------------------------------------------------------------- file access


@dataclass(frozen=True)
class _Section:
    index: int
    name: str
    type: str
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    entsize: int

    @property
    def has_data(self) -> bool:
        return self.type != "SHT_NOBITS" and self.size > 0


@dataclass(frozen=True)
class _Segment:
    type: str
    flags: int
    offset: int
    vaddr: int
    filesz: int
    memsz: int
    align: int


@dataclass
class _Image:
    """The mapped file with its parsed headers."""

    path: Path
    mm: mmap.mmap
    elf: Any  # elftools ELFFile
    size: int
    little: bool
    elf_class: int
    machine: str
    e_type: str
    sections: list[_Section]
    segments: list[_Segment]

    def section(self, name: str) -> _Section | None:
        for s in self.sections:
            if s.name == name:
                return s
        return None

    def read(self, offset: int, size: int) -> bytes:
        return self.mm[offset : offset + size]

    def data(self, sec: _Section) -> bytes:
        return b"" if not sec.has_data else self.read(sec.offset, sec.size)


def _check_path(path: Path) -> int:
    try:
        st = path.stat()
    except FileNotFoundError:
        raise _bad(
            path,
            f"binary '{path}' does not exist",
            "pass the server executable, e.g. /usr/sbin/mariadbd or /usr/sbin/mysqld",
        ) from None
    except OSError as exc:
        raise _bad(
            path,
            f"cannot access binary '{path}': {exc.strerror}",
            "check the path and its permissions",
        ) from None
    if stat.S_ISDIR(st.st_mode):
        raise _bad(
            path,
            f"binary '{path}' is a directory",
            "pass the executable inside it, e.g. <prefix>/bin/mariadbd or /usr/sbin/mysqld",
        )
    if not stat.S_ISREG(st.st_mode):
        raise _bad(path, f"binary '{path}' is not a regular file", "pass the server executable")
    return st.st_size


def _truncated(path: Path, what: str) -> BinaryError:
    return _bad(
        path,
        f"'{path}' is a truncated or corrupt ELF file ({what})",
        "the file is incomplete or damaged: copy, download or build it again",
    )


def _open_image(path: Path, size: int, fh: Any, *, debug_file: bool = False) -> _Image:
    head = fh.read(16)
    if len(head) < 4 or head[:4] != b"\x7fELF":
        raise _bad(
            path,
            f"'{path}' is not an ELF file",
            "pass the compiled server executable (mysqld/mariadbd), not a script or a symlink"
            " to a wrapper such as mysqld_safe",
        )
    if size < 52:
        raise _truncated(path, f"only {size} bytes")
    try:
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:
        raise _bad(path, f"cannot map '{path}': {exc}", "check that the file is readable") from None
    try:
        fh.seek(0)
        elf = ELFFile(fh)
        hdr = elf.header
        little = elf.little_endian
        elf_class = int(elf.elfclass)
        phend = hdr.e_phoff + hdr.e_phnum * hdr.e_phentsize
        if hdr.e_phnum and phend > size:
            raise _truncated(path, "program headers past the end of the file")
        shnum = elf.num_sections()
        shend = hdr.e_shoff + shnum * hdr.e_shentsize
        if shnum and shend > size:
            raise _truncated(path, "section headers past the end of the file")
        sections: list[_Section] = []
        for i, s in enumerate(elf.iter_sections()):
            h = s.header
            sec = _Section(
                index=i,
                name=str(s.name),
                type=str(h.sh_type),
                flags=int(h.sh_flags),
                addr=int(h.sh_addr),
                offset=int(h.sh_offset),
                size=int(h.sh_size),
                link=int(h.sh_link),
                entsize=int(h.sh_entsize),
            )
            if sec.has_data and sec.offset + sec.size > size:
                raise _truncated(path, f"section {sec.name or i} ends past the end of the file")
            sections.append(sec)
        segments: list[_Segment] = []
        for seg in elf.iter_segments():
            h = seg.header
            sg = _Segment(
                type=str(h.p_type),
                flags=int(h.p_flags),
                offset=int(h.p_offset),
                vaddr=int(h.p_vaddr),
                filesz=int(h.p_filesz),
                memsz=int(h.p_memsz),
                align=int(h.p_align),
            )
            # a separate debug file keeps the program headers but not the loaded bytes
            if not debug_file and sg.type == "PT_LOAD" and sg.offset + sg.filesz > size:
                raise _truncated(path, "a loadable segment ends past the end of the file")
            segments.append(sg)
        em = hdr.e_machine
        machine = _MACHINES.get(str(em), str(em).removeprefix("EM_").lower())
        if machine == "ppc64" and little:
            machine = "ppc64le"
        if machine == "riscv" and elf_class == 64:
            machine = "riscv64"
        if machine == "loongarch" and elf_class == 64:
            machine = "loongarch64"
        return _Image(
            path=path,
            mm=mm,
            elf=elf,
            size=size,
            little=bool(little),
            elf_class=elf_class,
            machine=machine,
            e_type=str(hdr.e_type),
            sections=sections,
            segments=segments,
        )
    except BinaryError:
        mm.close()
        raise
    except Exception as exc:  # pyelftools raises many types on damaged headers
        mm.close()
        first = (str(exc).splitlines() or [""])[0][:120]
        raise _truncated(path, first or type(exc).__name__) from None


# ---------------------------------------------------------------- symbols


@dataclass
class _SymbolTable:
    """One symbol table as numpy columns plus its string table."""

    section: str
    names: I64  # st_name offsets
    values: npt.NDArray[np.uint64]
    info: npt.NDArray[np.uint8]
    shndx: npt.NDArray[np.uint16]
    strtab: bytes
    _nul: I64 | None = None

    @property
    def count(self) -> int:
        return int(self.names.size)

    def name(self, i: int) -> str:
        off = int(self.names[i])
        end = self.strtab.find(b"\0", off)
        return self.strtab[off : end if end >= 0 else len(self.strtab)].decode("utf-8", "replace")

    def containing(self, needle: bytes) -> I64:
        """Indices of symbols whose name contains ``needle`` (vectorised over the table)."""
        if self.count == 0:
            return np.zeros(0, dtype=np.int64)
        hits = np.array(
            [m.start() for m in re.finditer(re.escape(needle), self.strtab)], dtype=np.int64
        )
        if hits.size == 0:
            return np.zeros(0, dtype=np.int64)
        if self._nul is None:
            raw = np.frombuffer(self.strtab, dtype=np.uint8)
            self._nul = np.append(np.flatnonzero(raw == 0), len(self.strtab)).astype(np.int64)
        nul = self._nul
        starts = np.clip(self.names, 0, len(self.strtab))
        k = np.searchsorted(hits, starts, side="left")
        valid = k < hits.size
        pos = hits[np.minimum(k, hits.size - 1)]
        end = nul[np.minimum(np.searchsorted(nul, starts, side="left"), nul.size - 1)]
        ok = valid & (pos + len(needle) <= end)
        return np.flatnonzero(ok).astype(np.int64)

    def names_containing(self, needle: bytes) -> list[tuple[str, int]]:
        return [(self.name(int(i)), int(self.values[i])) for i in self.containing(needle)]


def _load_symbols(img: _Image, sec: _Section) -> _SymbolTable | None:
    if not sec.has_data or sec.link >= len(img.sections):
        return None
    strsec = img.sections[sec.link]
    e = "<" if img.little else ">"
    if img.elf_class == 64:
        dtype = np.dtype(
            [
                ("name", e + "u4"),
                ("info", "u1"),
                ("other", "u1"),
                ("shndx", e + "u2"),
                ("value", e + "u8"),
                ("size", e + "u8"),
            ]
        )
    else:
        dtype = np.dtype(
            [
                ("name", e + "u4"),
                ("value", e + "u4"),
                ("size", e + "u4"),
                ("info", "u1"),
                ("other", "u1"),
                ("shndx", e + "u2"),
            ]
        )
    n = sec.size // dtype.itemsize
    arr = np.frombuffer(img.read(sec.offset, n * dtype.itemsize), dtype=dtype, count=n)
    return _SymbolTable(
        section=sec.name,
        names=arr["name"].astype(np.int64),
        values=arr["value"].astype(np.uint64),
        info=arr["info"].astype(np.uint8),
        shndx=arr["shndx"].astype(np.uint16),
        strtab=img.data(strsec),
    )


# ---------------------------------------------------------------- aarch64 atomics

# Helper names as libgcc (GCC >= 10) and compiler-rt spell them.
_HELPER_RE = re.compile(
    r"^__aarch64_(cas|swp|ldadd|ldclr|ldeor|ldset)(1|2|4|8|16)_(relax|acq|rel|acq_rel|sync)$"
)
_RET = 0xD65F03C0  # ret (x30)
# A helper: LSE instruction, RET, then its LL/SC fallback (a mov or two, then the exclusive
# load) within this many instructions after the LSE instruction.
_HELPER_WINDOW = 6
# A call lands on a helper's first instruction (bti c, adrp, ldrb, cbz: at most 5 before
# the LSE instruction; 6 for slack).
_HELPER_ENTRY_SPAN_BYTES = 24

_LD_OPS = ("add", "clr", "eor", "set", "smax", "smin", "umax", "umin")
_SIZE_SUFFIX = ("b", "h", "", "")


def _order(acquire: int, release: int) -> str:
    return ("a" if acquire else "") + ("l" if release else "")


def _decode_atomic(word: int) -> tuple[str, str] | None:
    """Mnemonic (as objdump prints it) and kind ("lse", "xload", "xstore") of one A64 word,
    or None for anything else. Field names follow the Arm ARM."""
    size = word >> 30
    if (word & 0x3F200C00) == 0x38200000:
        # Atomic memory operations (LSE): size 111 V=0 00 A R 1 Rs o3 opc 00 Rn Rt.
        # o3=0: LD<op> for all eight opc; o3=1 opc=000: SWP. o3=1 opc=100 is LDAPR (RCpc
        # load-acquire, not an atomic); the rest of o3=1 is LD64B/ST64B* or unallocated.
        a, r = (word >> 23) & 1, (word >> 22) & 1
        o3, opc, rt = (word >> 15) & 1, (word >> 12) & 7, word & 31
        sfx = _SIZE_SUFFIX[size]
        if o3:
            return ("swp" + _order(a, r) + sfx, "lse") if opc == 0 else None
        op = _LD_OPS[opc]
        if a == 0 and rt == 31:  # ST<op>: alias of LD<op> discarding the old value
            return ("st" + op + ("l" if r else "") + sfx, "lse")
        return ("ld" + op + _order(a, r) + sfx, "lse")
    if (word & 0x3F000000) == 0x08000000:
        # Load/store exclusive, ordered and compare-and-swap: size 001000 o2 L o1 Rs o0 Rt2
        # Rn Rt (o2 = bit 23, L = 22, o1 = 21, o0 = 15). Rs and Rt2 of the exclusives are
        # "should be one" fields that the CPU and objdump ignore.
        o2, ld, o1 = (word >> 23) & 1, (word >> 22) & 1, (word >> 21) & 1
        rs, o0, rt2, rt = (word >> 16) & 31, (word >> 15) & 1, (word >> 10) & 31, word & 31
        if o2 and o1:  # CAS{A,L,AL}{B,H}
            return ("cas" + _order(ld, o0) + _SIZE_SUFFIX[size], "lse") if rt2 == 31 else None
        if o2:  # LDAR/STLR/LDLAR/STLLR: ordered, not exclusive
            return None
        if o1:
            if size < 2:  # CASP{A,L,AL} (bit 31 = 0): Rs and Rt name even register pairs
                ok = rt2 == 31 and rs % 2 == 0 and rt % 2 == 0
                return ("casp" + _order(ld, o0), "lse") if ok else None
            if ld:
                return ("ld" + ("a" if o0 else "") + "xp", "xload")
            return ("st" + ("l" if o0 else "") + "xp", "xstore")
        sfx = _SIZE_SUFFIX[size]
        if ld:
            return ("ld" + ("a" if o0 else "") + "xr" + sfx, "xload")
        return ("st" + ("l" if o0 else "") + "xr" + sfx, "xstore")
    return None


def _candidates(words: U32) -> npt.NDArray[np.bool_]:
    """Words that may be LSE or exclusive instructions (exact test in ``_decode_atomic``)."""
    lse = ((words & 0x3F200C00) == 0x38200000) & (
        ((words & 0x8000) == 0) | ((words & 0xF000) == 0x8000)
    )
    # bits 29:24 = 001000 and not (o2=1, o1=0), which is LDAR/STLR (very common)
    excl = ((words & 0x3F000000) == 0x08000000) & ((words & 0x00A00000) != 0x00800000)
    result: npt.NDArray[np.bool_] = lse | excl
    return result


@dataclass
class _Region:
    name: str
    addr: int
    offset: int
    size: int


@dataclass
class _ScanTotals:
    scanned: int = 0
    by_mnemonic: dict[str, int] = field(default_factory=dict)
    lse: int = 0
    xloads: int = 0
    xstores: int = 0
    helper_sites: int = 0
    helper_loads: int = 0
    helper_addrs: list[I64] = field(default_factory=list)
    call_targets: list[I64] = field(default_factory=list)


def _code_regions(img: _Image) -> list[_Region]:
    regions = [
        _Region(s.name, s.addr, s.offset, s.size)
        for s in img.sections
        if s.has_data and s.type == "SHT_PROGBITS" and s.flags & _SHF_EXECINSTR
    ]
    if regions or img.sections:
        return regions
    # No section headers (sstrip): the executable loadable segments instead.
    return [
        _Region(f"PT_LOAD@{g.vaddr:#x}", g.vaddr, g.offset, g.filesz)
        for g in img.segments
        if g.type == "PT_LOAD" and g.flags & _PF_X and g.filesz > 0
    ]


def _data_ranges(
    symtab: _SymbolTable | None, region: _Region, sec_index: int | None
) -> list[tuple[int, int]]:
    """Word ranges [start, end) of a region that ``$d`` mapping symbols mark as data (objdump
    prints them as .word); none when the symbol table is gone."""
    if symtab is None or sec_index is None or symtab.count == 0:
        return []
    st = symtab.strtab
    names = np.clip(symtab.names, 0, len(st))
    raw = np.frombuffer(st + b"\0\0\0", dtype=np.uint8)
    c0, c1, c2 = raw[names], raw[names + 1], raw[names + 2]
    mapping = (c0 == ord("$")) & ((c1 == ord("d")) | (c1 == ord("x"))) & ((c2 == 0) | (c2 == 46))
    mapping &= symtab.shndx == sec_index
    idx = np.flatnonzero(mapping)
    if idx.size == 0 or not np.any(c1[idx] == ord("d")):
        return []
    addrs = symtab.values[idx].astype(np.int64) - region.addr
    is_data = c1[idx] == ord("d")
    order = np.lexsort((~is_data, addrs))  # at one address a $x after a $d wins
    addrs, is_data = addrs[order], is_data[order]
    n = region.size // 4
    ranges: list[tuple[int, int]] = []
    for j in np.flatnonzero(is_data).tolist():
        start = int(addrs[j])
        end = int(addrs[j + 1]) if j + 1 < addrs.size else region.size
        lo, hi = max(0, (start + 3) // 4), min(n, (end + 3) // 4)
        if hi > lo:
            ranges.append((lo, hi))
    return ranges


def _scan_region(
    img: _Image,
    region: _Region,
    totals: _ScanTotals,
    data_ranges: list[tuple[int, int]],
    cache: dict[int, Any],
) -> None:
    n = region.size // 4
    if n == 0:
        return
    words = np.frombuffer(img.read(region.offset, n * 4), dtype="<u4").copy()
    skipped = 0
    for lo, hi in data_ranges:
        skipped += hi - lo  # ranges end at the next mapping symbol: no overlaps
        words[lo:hi] = 0  # udf #0: matches nothing below
    totals.scanned += n - skipped
    cand = np.flatnonzero(_candidates(words))
    kinds = np.zeros(cand.size, dtype=np.int8)  # 1 lse, 2 xload, 3 xstore
    if cand.size:
        uniq, inverse = np.unique(words[cand], return_inverse=True)
        ukind = np.zeros(uniq.size, dtype=np.int8)
        counts = np.bincount(inverse, minlength=uniq.size)
        for j, w in enumerate(uniq.tolist()):
            dec = cache.get(w)
            if dec is None:
                dec = _decode_atomic(int(w)) or ("", "")
                cache[w] = dec
            mnem, kind = dec
            if not mnem:
                continue
            ukind[j] = {"lse": 1, "xload": 2, "xstore": 3}[kind]
            totals.by_mnemonic[mnem] = totals.by_mnemonic.get(mnem, 0) + int(counts[j])
        kinds = ukind[inverse]
    lse_idx = cand[kinds == 1].astype(np.int64)
    xload_idx = cand[kinds == 2].astype(np.int64)
    totals.lse += int(lse_idx.size)
    totals.xloads += int(xload_idx.size)
    totals.xstores += int(np.count_nonzero(kinds == 3))
    if lse_idx.size and xload_idx.size:
        nxt = np.minimum(lse_idx + 1, n - 1)
        ret_next = (words[nxt] == _RET) & (lse_idx + 1 < n)
        k = np.searchsorted(xload_idx, lse_idx + 2, side="left")
        has = k < xload_idx.size
        load_at = xload_idx[np.minimum(k, xload_idx.size - 1)]
        site = ret_next & has & (load_at <= lse_idx + _HELPER_WINDOW)
        totals.helper_sites += int(np.count_nonzero(site))
        totals.helper_loads += int(np.unique(load_at[site]).size)
        totals.helper_addrs.append(region.addr + lse_idx[site] * 4)
    # BL (100101) and B (000101) with imm26: calls and tail calls
    br = np.flatnonzero((words & 0x7C000000) == 0x14000000)
    if br.size:
        imm = (words[br] & 0x03FFFFFF).astype(np.int64)
        imm -= (imm & 0x02000000) << 1
        totals.call_targets.append(region.addr + br * 4 + imm * 4)


def _helper_calls(totals: _ScanTotals) -> int:
    if not totals.helper_addrs or not totals.call_targets:
        return 0
    helpers = np.sort(np.concatenate(totals.helper_addrs))
    if helpers.size == 0:
        return 0
    targets = np.concatenate(totals.call_targets)
    k = np.searchsorted(helpers, targets, side="left")
    ok = k < helpers.size
    dist = helpers[np.minimum(k, helpers.size - 1)] - targets
    return int(np.count_nonzero(ok & (dist >= 0) & (dist <= _HELPER_ENTRY_SPAN_BYTES)))


def classify_atomics(
    inline_lse: int, helper_calls: int, llsc_loops: int, helper_sites: int
) -> tuple[str, str]:
    """The class and a one-line reason from the three kinds of atomic sites."""
    if inline_lse == 0 and helper_calls == 0 and llsc_loops == 0 and helper_sites == 0:
        return "none", "no LSE or exclusive load/store instructions found"
    total = inline_lse + helper_calls + llsc_loops
    sites = {"outline": helper_calls, "inline-lse": inline_lse, "llsc": llsc_loops}
    klass = max(sites, key=lambda k: sites[k])  # ties: outline, then inline-lse
    if total == 0:
        klass = "outline"  # helpers linked in, no direct call found (called indirectly)

    def pct(n: int) -> str:
        return f"{100.0 * n / total:.0f}%" if total else "0%"

    parts = [
        f"{inline_lse} inline LSE ({pct(inline_lse)})",
        f"{helper_calls} calls to {helper_sites} outline-atomics helpers ({pct(helper_calls)})",
        f"{llsc_loops} LL/SC loops outside helpers ({pct(llsc_loops)})",
    ]
    lead = {
        "outline": "atomics go through outline helpers (LSE chosen at run time)",
        "inline-lse": "LSE atomics inlined (built for ARMv8.1+; needs LSE to run)",
        "llsc": "atomics are LL/SC exclusive loops (ARMv8.0 code, no LSE)",
    }[klass]
    return klass, f"{klass}: {lead}; sites: " + ", ".join(parts)


def _atomics(img: _Image, symtab: _SymbolTable | None) -> Fact[AtomicsFacts]:
    src = f"{img.path}:executable sections (numpy scan of A64 words)"
    if img.machine != "aarch64":
        return known(
            AtomicsFacts(
                klass="not-applicable",
                detail=f"{img.machine} binary: the LSE/LL-SC question only exists on aarch64",
            ),
            f"{img.path}:ELF header",
        )
    regions = _code_regions(img)
    if not regions:
        return unknown("no executable sections or segments to scan", f"{img.path}")
    totals = _ScanTotals()
    cache: dict[int, Any] = {}
    sec_index = {s.name: s.index for s in img.sections}
    for region in regions:
        data = _data_ranges(symtab, region, sec_index.get(region.name))
        _scan_region(img, region, totals, data, cache)
    calls = _helper_calls(totals)
    helper_symbols = 0
    if symtab is not None:
        found = {(n, v) for n, v in symtab.names_containing(b"__aarch64_") if _HELPER_RE.match(n)}
        helper_symbols = len(found)
    inline_lse = totals.lse - totals.helper_sites
    llsc_loops = totals.xloads - totals.helper_loads
    klass, detail = classify_atomics(inline_lse, calls, llsc_loops, totals.helper_sites)
    return known(
        AtomicsFacts(
            klass=klass,
            lse_instructions=totals.lse,
            exclusive_loads=totals.xloads,
            exclusive_stores=totals.xstores,
            helper_sites=totals.helper_sites,
            helper_symbols=helper_symbols,
            helper_calls=calls,
            by_mnemonic=dict(sorted(totals.by_mnemonic.items())),
            instructions_scanned=totals.scanned,
            detail=detail,
        ),
        src,
    )


# ---------------------------------------------------------------- DWARF producers


class _DwarfStopError(Exception):
    """The unit cannot be read further (unknown form, truncated, compressed with zstd)."""


class _Blob:
    """A (possibly SHF_COMPRESSED or .zdebug) section read lazily from the map."""

    _MAX_INFLATE = 256 * 1024 * 1024

    def __init__(self, img: _Image, sec: _Section) -> None:
        self.img = img
        self.sec = sec
        self.inflater: Any = None
        self.plain: bytearray | None = None
        raw_off, raw_size = sec.offset, sec.size
        if sec.flags & _SHF_COMPRESSED:
            # Elf64_Chdr is 24 bytes, Elf32_Chdr 12; both start with ch_type
            ch_type = struct.unpack_from("<I" if img.little else ">I", img.read(raw_off, 4))[0]
            hdr = 24 if img.elf_class == 64 else 12
            if ch_type != 1:  # ELFCOMPRESS_ZLIB; zstd (2) needs a module we do not have
                raise _DwarfStopError(f"{sec.name} is compressed with type {ch_type}")
            self._start_inflate(raw_off + hdr, raw_size - hdr)
        elif sec.name.startswith(".zdebug"):
            if img.read(raw_off, 4) != b"ZLIB":
                raise _DwarfStopError(f"{sec.name} has no ZLIB header")
            self._start_inflate(raw_off + 12, raw_size - 12)

    def _start_inflate(self, off: int, size: int) -> None:
        self.inflater = zlib.decompressobj()
        self.in_off, self.in_end = off, off + size
        self.plain = bytearray()

    def read(self, off: int, n: int) -> bytes:
        if self.plain is None:
            end = min(off + n, self.sec.size)
            return self.img.read(self.sec.offset + off, max(end - off, 0))
        while len(self.plain) < off + n and self.in_off < self.in_end:
            if len(self.plain) > self._MAX_INFLATE:
                raise _DwarfStopError("compressed debug section too large to inflate")
            chunk = self.img.read(self.in_off, min(1 << 20, self.in_end - self.in_off))
            self.in_off += len(chunk)
            self.plain += self.inflater.decompress(chunk)
        return bytes(self.plain[off : off + n])

    def cstr(self, off: int) -> bytes:
        out = b""
        while True:
            chunk = self.read(off + len(out), 256)
            if not chunk:
                return out
            nul = chunk.find(b"\0")
            if nul >= 0:
                return out + chunk[:nul]
            out += chunk


class _Cursor:
    def __init__(self, blob: _Blob, off: int, little: bool) -> None:
        self.blob, self.pos, self.e = blob, off, "<" if little else ">"
        self.buf, self.buf_off = b"", off

    def _take(self, n: int) -> bytes:
        rel = self.pos - self.buf_off
        if rel < 0 or rel + n > len(self.buf):
            self.buf, self.buf_off = self.blob.read(self.pos, max(n, 4096)), self.pos
            rel = 0
            if len(self.buf) < n:
                raise _DwarfStopError("unexpected end of section")
        self.pos += n
        return self.buf[rel : rel + n]

    def u(self, n: int) -> int:
        return int.from_bytes(self._take(n), "little" if self.e == "<" else "big")

    def uleb(self) -> int:
        result = shift = 0
        while True:
            b = self._take(1)[0]
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return result

    def sleb(self) -> int:
        result = shift = 0
        while True:
            b = self._take(1)[0]
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                if b & 0x40:
                    result -= 1 << shift
                return result

    def cstr(self) -> bytes:
        out = bytearray()
        while True:
            b = self._take(1)[0]
            if b == 0:
                return bytes(out)
            out.append(b)

    def skip(self, n: int) -> None:
        self.pos += n


_DW_AT_PRODUCER = 0x25
_DW_AT_STR_OFFSETS_BASE = 0x72
_FIXED_FORM_SIZE = {
    0x05: 2, 0x06: 4, 0x07: 8, 0x0B: 1, 0x0C: 1, 0x11: 1, 0x12: 2, 0x13: 4, 0x14: 8, 0x19: 0,
    0x1C: 4, 0x1E: 16, 0x20: 8, 0x21: 0, 0x24: 8, 0x25: 1, 0x26: 2, 0x27: 3, 0x28: 4,
    0x29: 1, 0x2A: 2, 0x2B: 3, 0x2C: 4,
}  # fmt: skip
_OFFSET_FORMS = {0x0E, 0x17, 0x1D, 0x1F, 0x1F20, 0x1F21}  # strp, sec_offset, *strp*, GNU alt
_ULEB_FORMS = {0x0F, 0x15, 0x1A, 0x1B, 0x22, 0x23, 0x1F01, 0x1F02}
_STRX_FORMS = {0x1A: 0, 0x25: 1, 0x26: 2, 0x27: 3, 0x28: 4, 0x1F02: 0}


def _abbrev_attrs(abbrev: _Blob, off: int, code: int, little: bool) -> list[tuple[int, int]]:
    cur = _Cursor(abbrev, off, little)
    while True:
        c = cur.uleb()
        if c == 0:
            raise _DwarfStopError("abbreviation not found")
        cur.uleb()  # tag
        cur.skip(1)  # children
        attrs: list[tuple[int, int]] = []
        while True:
            at, form = cur.uleb(), cur.uleb()
            if at == 0 and form == 0:
                break
            if form == 0x21:
                cur.sleb()  # implicit_const value lives in the abbreviation
            attrs.append((at, form))
        if c == code:
            return attrs


class _Dwarf:
    def __init__(self, img: _Image) -> None:
        self.img = img
        self.blobs: dict[str, _Blob | None] = {}

    def blob(self, name: str) -> _Blob | None:
        if name not in self.blobs:
            sec = self.img.section(name) or self.img.section(".z" + name[1:])
            self.blobs[name] = _Blob(self.img, sec) if sec and sec.has_data else None
        return self.blobs[name]

    def _string(self, section: str, off: int) -> str:
        b = self.blob(section)
        if b is None:
            raise _DwarfStopError(f"no {section}")
        return b.cstr(off).decode("utf-8", "replace")

    def unit_offsets(self, limit: int) -> list[int]:
        """Offsets of the units in .debug_info, walking only the 4/12-byte length fields."""
        info = self.blob(".debug_info")
        offsets: list[int] = []
        if info is None:
            return offsets
        off = 0
        while len(offsets) < limit:
            try:
                raw = info.read(off, 12)
            except _DwarfStopError:  # compressed and huge: sample what was inflated
                break
            if len(raw) < 4:
                break
            e: Literal["little", "big"] = "little" if self.img.little else "big"
            length, hdr = int.from_bytes(raw[:4], e), 4
            if length == 0xFFFFFFFF and len(raw) == 12:
                length, hdr = int.from_bytes(raw[4:12], e), 12
            if length == 0 or length >= 0xFFFFFFF0:
                break
            offsets.append(off)
            off += hdr + length
        return offsets

    def producers(self, max_units: int) -> Iterator[str]:
        """DW_AT_producer of a sample of compile units: the first ones, the last ones and
        some spread between (LTO output units may sit anywhere)."""
        info = self.blob(".debug_info")
        abbrev = self.blob(".debug_abbrev")
        if info is None or abbrev is None:
            return
        offsets = self.unit_offsets(_MAX_UNITS_WALKED)
        if len(offsets) > max_units:
            head, tail = max_units // 2, max_units // 8
            middle = offsets[head : len(offsets) - tail]
            step = max(1, len(middle) // (max_units - head - tail))
            offsets = offsets[:head] + middle[::step] + offsets[len(offsets) - tail :]
        for off in offsets:
            try:
                producer = self._unit_producer(info, abbrev, off)
            except _DwarfStopError:
                producer = None
            if producer:
                yield producer

    def _unit_producer(self, info: _Blob, abbrev: _Blob, off: int) -> str | None:
        head = _Cursor(info, off, self.img.little)
        length = head.u(4)
        offsize = 4
        if length == 0xFFFFFFFF:
            length, offsize = head.u(8), 8
        version = head.u(2)
        unit_type = 1
        if version >= 5:
            unit_type = head.u(1)
            addr_size = head.u(1)
            abbrev_off = head.u(offsize)
            if unit_type in (4, 5):  # skeleton, split_compile: dwo_id
                head.skip(8)
            elif unit_type in (2, 6):  # type units: signature, type offset
                head.skip(8 + offsize)
        elif 2 <= version <= 4:
            abbrev_off = head.u(offsize)
            addr_size = head.u(1)
        else:
            return None
        if unit_type not in (1, 3, 4, 5):
            return None
        return self._producer(
            head, abbrev, abbrev_off=abbrev_off, addr_size=addr_size, offsize=offsize, ver=version
        )

    def _producer(
        self,
        cur: _Cursor,
        abbrev: _Blob,
        *,
        abbrev_off: int,
        addr_size: int,
        offsize: int,
        ver: int,
    ) -> str | None:
        code = cur.uleb()
        if code == 0:
            return None
        producer: str | None = None
        strx_index: int | None = None
        str_offsets_base: int | None = None
        for at, form0 in _abbrev_attrs(abbrev, abbrev_off, code, self.img.little):
            form = form0
            while form == 0x16:  # indirect
                form = cur.uleb()
            if at == _DW_AT_PRODUCER:
                if form == 0x08:
                    producer = cur.cstr().decode("utf-8", "replace")
                elif form == 0x0E:
                    producer = self._string(".debug_str", cur.u(offsize))
                elif form == 0x1F:
                    producer = self._string(".debug_line_str", cur.u(offsize))
                elif form in _STRX_FORMS:
                    n = _STRX_FORMS[form]
                    strx_index = cur.uleb() if n == 0 else cur.u(n)
                else:
                    raise _DwarfStopError(f"producer in form {form:#x}")
                continue
            if at == _DW_AT_STR_OFFSETS_BASE and form == 0x17:
                str_offsets_base = cur.u(offsize)
                continue
            self._skip(cur, form, addr_size, offsize, ver)
        if producer is None and strx_index is not None:
            base = str_offsets_base if str_offsets_base is not None else 8
            so = self.blob(".debug_str_offsets")
            if so is None:
                return None
            raw = so.read(base + strx_index * offsize, offsize)
            if len(raw) < offsize:
                return None
            producer = self._string(
                ".debug_str", int.from_bytes(raw, "little" if self.img.little else "big")
            )
        return producer

    @staticmethod
    def _skip(cur: _Cursor, form: int, addr_size: int, offsize: int, ver: int) -> None:
        if form in _FIXED_FORM_SIZE:
            cur.skip(_FIXED_FORM_SIZE[form])
        elif form in _OFFSET_FORMS:
            cur.skip(offsize)
        elif form in _ULEB_FORMS:
            cur.uleb()
        elif form == 0x01:  # addr
            cur.skip(addr_size)
        elif form == 0x10:  # ref_addr
            cur.skip(addr_size if ver == 2 else offsize)
        elif form == 0x08:
            cur.cstr()
        elif form == 0x0D:
            cur.sleb()
        elif form == 0x0A:
            cur.skip(cur.u(1))
        elif form == 0x03:
            cur.skip(cur.u(2))
        elif form == 0x04:
            cur.skip(cur.u(4))
        elif form in (0x09, 0x18):  # block, exprloc
            cur.skip(cur.uleb())
        else:
            raise _DwarfStopError(f"unknown form {form:#x}")


_MAX_UNITS = 96  # producers read (each costs one abbreviation lookup)
_MAX_UNITS_WALKED = 1_000_000


def _dwarf_producers(img: _Image) -> tuple[dict[str, int], int, str | None]:
    """DW_AT_producer strings of a sample of compile units with how many units each,
    the number of units read, or a reason why none."""
    if img.section(".debug_info") is None and img.section(".zdebug_info") is None:
        return {}, 0, "no .debug_info"
    seen: dict[str, int] = {}
    units = 0
    try:
        for p in _Dwarf(img).producers(_MAX_UNITS):
            seen[p] = seen.get(p, 0) + 1
            units += 1
    except _DwarfStopError as exc:
        return seen, units, None if seen else f"DWARF not readable: {exc}"
    except Exception as exc:  # damaged DWARF: what was read so far still counts
        return seen, units, None if seen else f"DWARF not readable: {type(exc).__name__}"
    return seen, units, None


def _switches(producer: str) -> list[str]:
    return [t for t in producer.split() if t.startswith("-")]


# ---------------------------------------------------------------- other facts


def _comment(img: _Image) -> Fact[list[str]]:
    sec = img.section(".comment")
    src = f"{img.path}:.comment"
    if sec is None:
        return unknown("no .comment section (removed by strip -R .comment or sstrip)", src)
    seen: dict[str, None] = {}
    for part in img.data(sec).split(b"\0"):
        text = part.decode("utf-8", "replace").strip()
        if text:
            seen.setdefault(text, None)
    return known(list(seen), src)


def _build_id(img: _Image) -> Fact[str]:
    src = f"{img.path}:NT_GNU_BUILD_ID"
    try:
        containers: list[Any] = [
            s for s in img.elf.iter_sections() if s.header.sh_type == "SHT_NOTE"
        ]
        if not containers:
            containers = [g for g in img.elf.iter_segments() if g.header.p_type == "PT_NOTE"]
        for c in containers:
            for note in c.iter_notes():
                if note["n_type"] == "NT_GNU_BUILD_ID" and note["n_name"] == "GNU":
                    return known(str(note["n_desc"]), src)
    except Exception as exc:  # damaged notes: unknown, never a crash
        return unknown(f"notes not readable: {type(exc).__name__}: {exc}"[:200], src)
    return Fact[str](value=None, source=src)  # known: there is no build id


def _debuglink(img: _Image) -> str | None:
    sec = img.section(".gnu_debuglink")
    if sec is None or not sec.has_data:
        return None
    name = img.data(sec).split(b"\0", 1)[0].decode("utf-8", "replace")
    return name or None


def _find_debug_file(img: _Image, build_id: str | None, debug_dirs: list[Path]) -> Path | None:
    """The separate debug file (Debian's -dbgsym, Fedora's -debuginfo) the way gdb finds it:
    by build id under each debug directory, then by .gnu_debuglink name."""
    cands: list[Path] = []
    if build_id and len(build_id) > 2:
        cands += [d / ".build-id" / build_id[:2] / f"{build_id[2:]}.debug" for d in debug_dirs]
    link = _debuglink(img)
    if link and "/" not in link:
        here = img.path.resolve().parent
        cands += [here / link, here / ".debug" / link]
        cands += [d / here.relative_to(here.anchor) / link for d in debug_dirs]
    me = img.path.resolve()
    for c in cands:
        try:
            if c.is_file() and c.resolve() != me:
                return c
        except OSError:
            continue
    return None


def _open_debug_image(path: Path) -> tuple[_Image, Any] | None:
    try:
        fh = path.open("rb")
    except OSError:
        return None
    try:
        return _open_image(path, path.stat().st_size, fh, debug_file=True), fh
    except (BinaryError, OSError):
        fh.close()
        return None


def _pie(img: _Image) -> Fact[bool]:
    src = f"{img.path}:e_type+PT_INTERP"
    if img.e_type == "ET_EXEC":
        return known(False, src)
    if img.e_type != "ET_DYN":
        return known(False, f"{img.path}:e_type={img.e_type}")
    if any(g.type == "PT_INTERP" for g in img.segments):
        return known(True, src)
    try:
        dyn = img.elf.get_section_by_name(".dynamic")
        if dyn is not None:
            for tag in dyn.iter_tags():
                if tag.entry.d_tag == "DT_FLAGS_1" and int(tag.entry.d_val) & _DF_1_PIE:
                    return known(True, f"{img.path}:DT_FLAGS_1 (static PIE)")
    except Exception as exc:  # damaged dynamic section
        return unknown(f".dynamic not readable: {type(exc).__name__}", src)
    return known(False, f"{img.path}:ET_DYN without PT_INTERP (a shared object)")


def _text_segment(img: _Image) -> tuple[Fact[int], Fact[bool]]:
    loads = [g for g in img.segments if g.type == "PT_LOAD" and g.flags & _PF_X]
    if not loads:
        reason = "no executable PT_LOAD segment"
        return unknown(reason, f"{img.path}:program headers"), unknown(reason)
    g = max(loads, key=lambda s: s.filesz)
    src = (
        f"{img.path}:PT_LOAD R-X vaddr={g.vaddr:#x} offset={g.offset:#x} "
        f"filesz={g.filesz:#x} align={g.align:#x}"
    )
    ready = (
        g.align >= HUGE_PAGE_BYTES
        and g.align % HUGE_PAGE_BYTES == 0
        and (g.vaddr - g.offset) % HUGE_PAGE_BYTES == 0
    )
    why = (
        "2 MiB aligned: code huge pages possible"
        if ready
        else "not 2 MiB aligned: relink with -Wl,-zmax-page-size=0x200000 for code huge pages"
    )
    return known(g.align, src), known(ready, f"{src} ({why})")


def _relocations(img: _Image) -> Fact[bool]:
    src = f"{img.path}:section headers"
    if not img.sections:
        return unknown("no section headers", src)
    kept = any(s.name in (".rela.text", ".rel.text") for s in img.sections)
    return known(kept, f"{src} (.rela.text {'present' if kept else 'absent'}: --emit-relocs)")


def _has_section(img: _Image, *names: str) -> bool:
    return any(s.name in names for s in img.sections)


@dataclass
class _Traces:
    lto: list[str] = field(default_factory=list)
    pgo: list[str] = field(default_factory=list)
    pgo_weak: list[str] = field(default_factory=list)
    instrumented: list[str] = field(default_factory=list)


def _symbol_traces(tables: list[_SymbolTable], traces: _Traces) -> None:
    for t in tables:
        lto_priv = t.names_containing(b".lto_priv.")
        if lto_priv:
            traces.lto.append(
                f"{len(lto_priv)} GCC LTO symbols in {t.section} (e.g. {lto_priv[0][0]})"
            )
        llvm = [n for n, _ in t.names_containing(b".llvm.") if re.search(r"\.llvm\.\d+$", n)]
        if llvm:
            traces.lto.append(
                f"{len(llvm)} clang ThinLTO-promoted symbols in {t.section} (e.g. {llvm[0]})"
            )
        cold = [n for n, _ in t.names_containing(b".cold") if re.search(r"\.cold(\.\d+)?$", n)]
        if cold:
            traces.pgo_weak.append(
                f"weak: {len(cold)} .cold symbols in {t.section} (GCC also splits hot/cold"
                " code without a profile, so this alone does not mean PGO)"
            )
        for needle in (b"__gcov_", b"__llvm_profile_"):
            hits = t.names_containing(needle)
            if hits:
                traces.instrumented.append(
                    f"{len(hits)} {needle.decode()} symbols in {t.section} (e.g. {hits[0][0]})"
                )


def _gcda_strings(img: _Image) -> bool:
    for s in img.sections:
        if (
            s.has_data
            and s.type == "SHT_PROGBITS"
            and s.flags & _SHF_ALLOC
            and not s.flags & _SHF_EXECINSTR
            and img.mm.find(b".gcda\0", s.offset, s.offset + s.size) >= 0
        ):
            return True
    return False


def _build_traces(
    img: _Image, symtab: _SymbolTable | None, dynsym: _SymbolTable | None, dwarf_img: _Image
) -> dict[str, Fact[Any]]:
    traces = _Traces()
    tables = [t for t in (symtab, dynsym) if t is not None]
    _symbol_traces(tables, traces)
    lto_sections = [s.name for s in img.sections if s.name.startswith(".gnu.lto_")]
    if lto_sections:
        traces.lto.append(f"{len(lto_sections)} .gnu.lto_* sections (e.g. {lto_sections[0]})")
    prf = [s.name for s in img.sections if s.name.startswith("__llvm_prf_")]
    if prf:
        traces.instrumented.append(f"clang profile sections {', '.join(prf[:3])}")
    if not traces.instrumented and _gcda_strings(img):
        traces.instrumented.append("GCC .gcda profile paths in read-only data")

    producers, units, dwarf_why = _dwarf_producers(dwarf_img)
    compiled = [p for p in producers if not p.startswith(("GNU AS", "GNU assembler"))]
    with_switches = [p for p in compiled if _switches(p)]
    gimple = [p for p in compiled if p.startswith("GNU GIMPLE")]
    flto = [p for p in with_switches if any(s.startswith("-flto") for s in _switches(p))]
    if gimple:
        traces.lto.append(f"DW_AT_producer '{gimple[0][:80]}' (GCC LTO output)")
    elif flto:
        traces.lto.append(f"DW_AT_producer with -flto: '{flto[0][:80]}'")
    use_flags = ("-fprofile-use", "-fprofile-instr-use", "-fprofile-sample-use", "-fauto-profile")
    pgo_units = [p for p in with_switches if any(s.startswith(use_flags) for s in _switches(p))]
    if pgo_units:
        flag = next(s for s in _switches(pgo_units[0]) if s.startswith(use_flags))
        n = sum(producers[p] for p in pgo_units)
        traces.pgo.append(f"DW_AT_producer of {n} of {units} sampled units has {flag}")
    gen_flags = ("-fprofile-generate", "-fprofile-instr-generate", "-fprofile-arcs")
    if any(s.startswith(gen_flags) for p in with_switches for s in _switches(p)):
        traces.instrumented.append("DW_AT_producer has -fprofile-generate")

    src_dwarf = (
        f"{dwarf_img.path}:DW_AT_producer of {units} sampled compile units "
        f"({len(compiled)} distinct compiler lines)"
    )
    src_syms = f"{img.path}:{' + '.join(t.section for t in tables) or 'no symbol table'}"
    out: dict[str, Fact[Any]] = {}

    # LTO
    if traces.lto:
        out["lto"] = known(True, f"{img.path}:symbols/sections/DWARF")
    elif with_switches:
        out["lto"] = known(False, f"{src_dwarf}: compiler switches recorded, no -flto")
    elif symtab is not None:
        out["lto"] = known(
            False,
            f"{src_syms}: no .lto_priv./.llvm.N symbols or .gnu.lto_ sections among "
            f"{symtab.count} symbols (weak: GCC with one LTO partition or clang full LTO "
            "may leave none)",
        )
    else:
        out["lto"] = unknown(
            "stripped binary without DWARF: no symbol names or producer flags to show LTO",
            f"{img.path}:{dwarf_why or 'DWARF'}",
        )
    out["lto_evidence"] = known(traces.lto, f"{src_syms}; {dwarf_why or src_dwarf}")

    # PGO
    if traces.pgo:
        out["pgo"] = known(True, src_dwarf)
    elif with_switches:
        out["pgo"] = known(False, f"{src_dwarf}: compiler switches recorded, no -fprofile-use")
    else:
        why = dwarf_why or "DW_AT_producer records no compiler switches"
        out["pgo"] = unknown(
            f"PGO leaves no reliable trace without DWARF producer flags ({why})"
            + ("; .cold symbols alone are weak evidence" if traces.pgo_weak else ""),
            src_dwarf if compiled else f"{img.path}",
        )
    out["pgo_evidence"] = known(traces.pgo + traces.pgo_weak, f"{src_syms}; {src_dwarf}")

    # profile-generate (instrumented) build
    if traces.instrumented:
        out["instrumented"] = known(True, f"{img.path}: " + "; ".join(traces.instrumented))
    else:
        out["instrumented"] = known(
            False,
            f"{src_syms}: no __gcov_/__llvm_profile_ symbols, no __llvm_prf_* sections, "
            "no .gcda paths",
        )
    return out


# ---------------------------------------------------------------- entry point


DEFAULT_DEBUG_DIRS = ("/usr/lib/debug",)


def collect_binary(
    path: str | Path, *, debug_dirs: list[str | Path] | tuple[str | Path, ...] | None = None
) -> BinaryFacts:
    """Analyse an ELF binary (normally mysqld/mariadbd) without running it.

    A separate debug file (found by build id or .gnu_debuglink under ``debug_dirs``, default
    /usr/lib/debug) supplies the symbol table, .comment and DWARF that distributions strip.
    Raises ``BinaryError`` for a missing path, a directory, a non-ELF or truncated file.
    Anything odd inside a valid ELF file becomes an unknown fact with the reason.
    """
    t0 = time.perf_counter()
    p = Path(path)
    size = _check_path(p)
    dirs = [Path(d) for d in (DEFAULT_DEBUG_DIRS if debug_dirs is None else debug_dirs)]
    try:
        fh = p.open("rb")
    except OSError as exc:
        raise _bad(
            p,
            f"cannot read binary '{p}': {exc.strerror}",
            "run as a user who can read it (or with sudo)",
        ) from None
    with fh:
        img = _open_image(p, size, fh)
        dbg: tuple[_Image, Any] | None = None
        try:
            build_id = _guarded("build id", f"{p}:notes", lambda: _build_id(img))
            if img.section(".symtab") is None or img.section(".debug_info") is None:
                try:
                    found = _find_debug_file(img, build_id.value, dirs)
                except Exception:  # a damaged .gnu_debuglink: no separate debug file
                    found = None
                dbg = _open_debug_image(found) if found else None
            return _collect(img, dbg[0] if dbg else None, build_id, t0)
        finally:
            img.mm.close()
            if dbg:
                dbg[0].mm.close()
                dbg[1].close()


def _guarded(what: str, src: str, fn: Callable[[], Fact[Any]]) -> Fact[Any]:
    """Run one collector; an exception on an odd file becomes an unknown fact."""
    try:
        return fn()
    except Exception as exc:  # never crash on odd binaries: say what failed instead
        return unknown(f"{what} failed on this file: {type(exc).__name__}: {exc}"[:200], src)


def _symbols_of(img: _Image, name: str, label: str = "") -> _SymbolTable | None:
    sec = img.section(name)
    table = _load_symbols(img, sec) if sec else None
    if table is not None and label:
        table.section = label
    return table


def _collect(img: _Image, dbg: _Image | None, build_id: Fact[str], t0: float) -> BinaryFacts:
    p = img.path
    symtab = dynsym = None
    sym_reason = ""
    try:
        symtab = _symbols_of(img, ".symtab")
        dynsym = _symbols_of(img, ".dynsym")
        if symtab is None and dbg is not None:
            symtab = _symbols_of(dbg, ".symtab", f".symtab of {dbg.path}")
    except Exception as exc:  # a damaged symbol table: analyse without it
        sym_reason = f"symbol table not readable: {type(exc).__name__}: {exc}"[:200]
    own_debug = _has_section(img, ".debug_info", ".zdebug_info")
    dwarf_img = img if own_debug or dbg is None else dbg
    hdr_src = f"{p}:ELF header"
    sec_src = f"{p}:section headers"
    atomics = _guarded("instruction scan", str(p), lambda: _atomics(img, symtab))
    try:
        traces = _build_traces(img, symtab, dynsym, dwarf_img)
    except Exception as exc:  # never crash on odd binaries
        why = f"build traces not readable: {type(exc).__name__}: {exc}"[:200]
        traces = {k: unknown(why, str(p)) for k in _TRACE_KEYS}
    try:
        align, huge_ready = _text_segment(img)
    except Exception as exc:  # never crash on odd binaries
        align = huge_ready = unknown(f"program headers: {type(exc).__name__}", str(p))
    if img.sections:
        stripped: Fact[bool] = known(img.section(".symtab") is None, f"{sec_src} (.symtab)")
        debug: Fact[bool] = known(own_debug, f"{sec_src} (.debug_info)")
        if not own_debug and dbg is not None and _has_section(dbg, ".debug_info", ".zdebug_info"):
            debug = known(True, f"{dbg.path} (separate debug file)")
    else:
        stripped = known(True, f"{p}: no section headers at all")
        debug = known(False, f"{p}: no section headers at all")
    if sym_reason:
        stripped = unknown(sym_reason, sec_src)
    compiler = _guarded(".comment", f"{p}:.comment", lambda: _comment(img))
    if not compiler.known and dbg is not None and dbg.section(".comment") is not None:
        compiler = _guarded(".comment", f"{dbg.path}:.comment", lambda: _comment(dbg))
    return BinaryFacts(
        path=str(p),
        size_bytes=known(img.size, f"{p}:stat"),
        elf_class=known(img.elf_class, hdr_src),
        machine=known(img.machine, hdr_src),
        pie=_guarded("PIE check", hdr_src, lambda: _pie(img)),
        compiler=compiler,
        build_id=build_id,
        stripped=stripped,
        debug_info=debug,
        atomics=atomics,
        lto=traces["lto"],
        lto_evidence=traces["lto_evidence"],
        pgo=traces["pgo"],
        pgo_evidence=traces["pgo_evidence"],
        instrumented=traces["instrumented"],
        text_segment_align=align,
        text_huge_page_ready=huge_ready,
        relocations=_guarded("relocations", sec_src, lambda: _relocations(img)),
        analysis_s=round(time.perf_counter() - t0, 3),
    )


_TRACE_KEYS = ("lto", "lto_evidence", "pgo", "pgo_evidence", "instrumented")


__all__ = ["DEFAULT_DEBUG_DIRS", "HUGE_PAGE_BYTES", "classify_atomics", "collect_binary"]
