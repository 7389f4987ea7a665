"""``collect_binary``: open the file (and its separate debug file) and gather every fact.

Each collector runs guarded: an exception on an odd but valid ELF file becomes an unknown
fact with the reason, never a crash.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from myaccel.facts.binary.atomics import atomics_fact
from myaccel.facts.binary.elf import (
    Image,
    bad,
    build_id_fact,
    check_path,
    comment_fact,
    find_debug_file,
    has_section,
    open_debug_image,
    open_image,
    symbols_of,
)
from myaccel.facts.binary.layout import pie_fact, relocations_fact, text_segment_facts
from myaccel.facts.binary.traces import TRACE_KEYS, build_traces
from myaccel.model import BinaryFacts, Fact, known, unknown

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
    size = check_path(p)
    dirs = [Path(d) for d in (DEFAULT_DEBUG_DIRS if debug_dirs is None else debug_dirs)]
    try:
        fh = p.open("rb")
    except OSError as exc:
        raise bad(
            p,
            f"cannot read binary '{p}': {exc.strerror}",
            "run as a user who can read it (or with sudo)",
        ) from None
    with fh:
        img = open_image(p, size, fh)
        dbg: tuple[Image, Any] | None = None
        try:
            build_id = _guarded("build id", f"{p}:notes", lambda: build_id_fact(img))
            if img.section(".symtab") is None or img.section(".debug_info") is None:
                try:
                    found = find_debug_file(img, build_id.value, dirs)
                except Exception:  # a damaged .gnu_debuglink: no separate debug file
                    found = None
                dbg = open_debug_image(found) if found else None
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


def _collect(img: Image, dbg: Image | None, build_id: Fact[str], t0: float) -> BinaryFacts:
    p = img.path
    symtab = dynsym = None
    sym_reason = ""
    try:
        symtab = symbols_of(img, ".symtab")
        dynsym = symbols_of(img, ".dynsym")
        if symtab is None and dbg is not None:
            symtab = symbols_of(dbg, ".symtab", f".symtab of {dbg.path}")
    except Exception as exc:  # a damaged symbol table: analyse without it
        sym_reason = f"symbol table not readable: {type(exc).__name__}: {exc}"[:200]
    own_debug = has_section(img, ".debug_info", ".zdebug_info")
    dwarf_img = img if own_debug or dbg is None else dbg
    hdr_src = f"{p}:ELF header"
    sec_src = f"{p}:section headers"
    atomics = _guarded("instruction scan", str(p), lambda: atomics_fact(img, symtab))
    try:
        traces = build_traces(img, symtab, dynsym, dwarf_img)
    except Exception as exc:  # never crash on odd binaries
        why = f"build traces not readable: {type(exc).__name__}: {exc}"[:200]
        traces = {k: unknown(why, str(p)) for k in TRACE_KEYS}
    try:
        align, huge_ready = text_segment_facts(img)
    except Exception as exc:  # never crash on odd binaries
        align = huge_ready = unknown(f"program headers: {type(exc).__name__}", str(p))
    if img.sections:
        stripped: Fact[bool] = known(img.section(".symtab") is None, f"{sec_src} (.symtab)")
        debug: Fact[bool] = known(own_debug, f"{sec_src} (.debug_info)")
        if not own_debug and dbg is not None and has_section(dbg, ".debug_info", ".zdebug_info"):
            debug = known(True, f"{dbg.path} (separate debug file)")
    else:
        stripped = known(True, f"{p}: no section headers at all")
        debug = known(False, f"{p}: no section headers at all")
    if sym_reason:
        stripped = unknown(sym_reason, sec_src)
    compiler = _guarded(".comment", f"{p}:.comment", lambda: comment_fact(img))
    if not compiler.known and dbg is not None and dbg.section(".comment") is not None:
        compiler = _guarded(".comment", f"{dbg.path}:.comment", lambda: comment_fact(dbg))
    return BinaryFacts(
        path=str(p),
        size_bytes=known(img.size, f"{p}:stat"),
        elf_class=known(img.elf_class, hdr_src),
        machine=known(img.machine, hdr_src),
        pie=_guarded("PIE check", hdr_src, lambda: pie_fact(img)),
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
        relocations=_guarded("relocations", sec_src, lambda: relocations_fact(img)),
        analysis_s=round(time.perf_counter() - t0, 3),
    )


__all__ = ["DEFAULT_DEBUG_DIRS", "collect_binary"]
