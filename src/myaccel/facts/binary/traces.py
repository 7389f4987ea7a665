"""How a binary was built: LTO, PGO and profile-instrumentation traces.

LTO and PGO leave few traces. LTO: GCC's ``.lto_priv.`` symbols, clang's ``.llvm.N``
suffixes, ``.gnu.lto_`` sections, a "GNU GIMPLE" or ``-flto`` DW_AT_producer. PGO: only
``-fprofile-use`` (or clang's ``-fprofile-instr-use``) in DW_AT_producer is proof; ``.cold``
symbols are recorded as weak evidence (GCC splits hot/cold code without a profile too).
Without symbols and DWARF these facts are unknown with the reason, never a false "no".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from myaccel.facts.binary.dwarf import dwarf_producers, switches
from myaccel.facts.binary.elf import SHF_ALLOC, SHF_EXECINSTR, Image, SymbolTable
from myaccel.model import Fact, known, unknown

TRACE_KEYS = ("lto", "lto_evidence", "pgo", "pgo_evidence", "instrumented")


@dataclass
class _Traces:
    lto: list[str] = field(default_factory=list)
    pgo: list[str] = field(default_factory=list)
    pgo_weak: list[str] = field(default_factory=list)
    instrumented: list[str] = field(default_factory=list)


def _symbol_traces(tables: list[SymbolTable], traces: _Traces) -> None:
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


def _gcda_strings(img: Image) -> bool:
    for s in img.sections:
        if (
            s.has_data
            and s.type == "SHT_PROGBITS"
            and s.flags & SHF_ALLOC
            and not s.flags & SHF_EXECINSTR
            and img.mm.find(b".gcda\0", s.offset, s.offset + s.size) >= 0
        ):
            return True
    return False


def build_traces(
    img: Image, symtab: SymbolTable | None, dynsym: SymbolTable | None, dwarf_img: Image
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

    producers, units, dwarf_why = dwarf_producers(dwarf_img)
    compiled = [p for p in producers if not p.startswith(("GNU AS", "GNU assembler"))]
    with_switches = [p for p in compiled if switches(p)]
    gimple = [p for p in compiled if p.startswith("GNU GIMPLE")]
    flto = [p for p in with_switches if any(s.startswith("-flto") for s in switches(p))]
    if gimple:
        traces.lto.append(f"DW_AT_producer '{gimple[0][:80]}' (GCC LTO output)")
    elif flto:
        traces.lto.append(f"DW_AT_producer with -flto: '{flto[0][:80]}'")
    use_flags = ("-fprofile-use", "-fprofile-instr-use", "-fprofile-sample-use", "-fauto-profile")
    pgo_units = [p for p in with_switches if any(s.startswith(use_flags) for s in switches(p))]
    if pgo_units:
        flag = next(s for s in switches(pgo_units[0]) if s.startswith(use_flags))
        n = sum(producers[p] for p in pgo_units)
        traces.pgo.append(f"DW_AT_producer of {n} of {units} sampled units has {flag}")
    gen_flags = ("-fprofile-generate", "-fprofile-instr-generate", "-fprofile-arcs")
    if any(s.startswith(gen_flags) for p in with_switches for s in switches(p)):
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
