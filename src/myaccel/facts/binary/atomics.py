"""Atomics on aarch64: inline LSE, outline-atomics helper calls, LL/SC loops.

KNOWLEDGE section 5. The executable sections are scanned as
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

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from myaccel.facts.binary.elf import I64, PF_X, SHF_EXECINSTR, U32, Image, SymbolTable
from myaccel.model import AtomicsFacts, Fact, known, unknown

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


def _code_regions(img: Image) -> list[_Region]:
    regions = [
        _Region(s.name, s.addr, s.offset, s.size)
        for s in img.sections
        if s.has_data and s.type == "SHT_PROGBITS" and s.flags & SHF_EXECINSTR
    ]
    if regions or img.sections:
        return regions
    # No section headers (sstrip): the executable loadable segments instead.
    return [
        _Region(f"PT_LOAD@{g.vaddr:#x}", g.vaddr, g.offset, g.filesz)
        for g in img.segments
        if g.type == "PT_LOAD" and g.flags & PF_X and g.filesz > 0
    ]


def _data_ranges(
    symtab: SymbolTable | None, region: _Region, sec_index: int | None
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
    img: Image,
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


def atomics_fact(img: Image, symtab: SymbolTable | None) -> Fact[AtomicsFacts]:
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
