"""The ELF sections BOLT leaves in a binary it rewrote: read by the bolt stage after the
rewrite and by ``verify-build``. A leaf module, so that ``verify`` does not import the bolt
stage (bolt -> stages -> verify -> bolt was an import circle)."""

from __future__ import annotations

from pathlib import Path

BOLT_MARKER_SECTIONS = (".note.bolt_info", ".bolt.org.text")


def has_bolt_marker(binary: Path) -> tuple[bool, str]:
    from elftools.elf.elffile import ELFFile

    try:
        with binary.open("rb") as fh:
            names = [s.name for s in ELFFile(fh).iter_sections()]
    except Exception as exc:  # unreadable ELF: report, never crash
        return False, f"sections not readable: {type(exc).__name__}"
    found = [n for n in names if n in BOLT_MARKER_SECTIONS or n.startswith(".bolt")]
    if found:
        return True, f"sections {', '.join(found[:3])}"
    return False, "no .note.bolt_info / .bolt.org.* sections"
