"""Where the code sits: PIE or not, the text segment's alignment (code huge pages), and
whether relocations were kept (--emit-relocs, for BOLT)."""

from __future__ import annotations

from myaccel.facts.binary.elf import PF_X, Image
from myaccel.model import Fact, known, unknown

HUGE_PAGE_BYTES = 2 * 1024 * 1024
_DF_1_PIE = 0x08000000


def pie_fact(img: Image) -> Fact[bool]:
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


def text_segment_facts(img: Image) -> tuple[Fact[int], Fact[bool]]:
    loads = [g for g in img.segments if g.type == "PT_LOAD" and g.flags & PF_X]
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


def relocations_fact(img: Image) -> Fact[bool]:
    src = f"{img.path}:section headers"
    if not img.sections:
        return unknown("no section headers", src)
    kept = any(s.name in (".rela.text", ".rel.text") for s in img.sections)
    return known(kept, f"{src} (.rela.text {'present' if kept else 'absent'}: --emit-relocs)")
