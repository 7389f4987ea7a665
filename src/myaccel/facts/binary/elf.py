"""The ELF file under a server binary: headers, sections, segments, symbol tables, notes.

``open_image`` maps the file and parses its headers with pyelftools (with the checks that
turn a truncated or foreign file into a ``BinaryError`` with a hint); everything bulky
(symbol tables) is read straight from the memory map with numpy. A separate debug file
(Debian's -dbgsym, found by build id under /usr/lib/debug, or by .gnu_debuglink) stands in
for the stripped symbol table, .comment and DWARF (``find_debug_file``).
"""

from __future__ import annotations

import mmap
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from elftools.elf.elffile import ELFFile

from myaccel.errors import BinaryError
from myaccel.model import Fact, known, unknown

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

SHF_EXECINSTR = 0x4
SHF_ALLOC = 0x2
SHF_COMPRESSED = 0x800
PF_X = 0x1

U32 = npt.NDArray[np.uint32]
I64 = npt.NDArray[np.int64]


def bad(path: Path, message: str, hint: str) -> BinaryError:
    return BinaryError(message, hint=hint, context={"path": str(path)})


@dataclass(frozen=True)
class Section:
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
class Segment:
    type: str
    flags: int
    offset: int
    vaddr: int
    filesz: int
    memsz: int
    align: int


@dataclass
class Image:
    """The mapped file with its parsed headers."""

    path: Path
    mm: mmap.mmap
    elf: Any  # elftools ELFFile
    size: int
    little: bool
    elf_class: int
    machine: str
    e_type: str
    sections: list[Section]
    segments: list[Segment]

    def section(self, name: str) -> Section | None:
        for s in self.sections:
            if s.name == name:
                return s
        return None

    def read(self, offset: int, size: int) -> bytes:
        return self.mm[offset : offset + size]

    def data(self, sec: Section) -> bytes:
        return b"" if not sec.has_data else self.read(sec.offset, sec.size)


def check_path(path: Path) -> int:
    try:
        st = path.stat()
    except FileNotFoundError:
        raise bad(
            path,
            f"binary '{path}' does not exist",
            "pass the server executable, e.g. /usr/sbin/mariadbd or /usr/sbin/mysqld",
        ) from None
    except OSError as exc:
        raise bad(
            path,
            f"cannot access binary '{path}': {exc.strerror}",
            "check the path and its permissions",
        ) from None
    if stat.S_ISDIR(st.st_mode):
        raise bad(
            path,
            f"binary '{path}' is a directory",
            "pass the executable inside it, e.g. <prefix>/bin/mariadbd or /usr/sbin/mysqld",
        )
    if not stat.S_ISREG(st.st_mode):
        raise bad(path, f"binary '{path}' is not a regular file", "pass the server executable")
    return st.st_size


# The numeric fields of Section and Segment, named as in the ELF headers without the
# sh_ / p_ prefix.
_SECTION_INTS = ("flags", "addr", "offset", "size", "link", "entsize")
_SEGMENT_INTS = ("flags", "offset", "vaddr", "filesz", "memsz", "align")


def _ints(header: Any, prefix: str, names: tuple[str, ...]) -> dict[str, int]:
    return {name: int(header[prefix + name]) for name in names}


def truncated(path: Path, what: str) -> BinaryError:
    return bad(
        path,
        f"'{path}' is a truncated or corrupt ELF file ({what})",
        "the file is incomplete or damaged: copy, download or build it again",
    )


def open_image(path: Path, size: int, fh: Any, *, debug_file: bool = False) -> Image:
    head = fh.read(16)
    if len(head) < 4 or head[:4] != b"\x7fELF":
        raise bad(
            path,
            f"'{path}' is not an ELF file",
            "pass the compiled server executable (mysqld/mariadbd), not a script or a symlink"
            " to a wrapper such as mysqld_safe",
        )
    if size < 52:
        raise truncated(path, f"only {size} bytes")
    try:
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:
        raise bad(path, f"cannot map '{path}': {exc}", "check that the file is readable") from None
    try:
        fh.seek(0)
        elf = ELFFile(fh)
        hdr = elf.header
        little = elf.little_endian
        elf_class = int(elf.elfclass)
        phend = hdr.e_phoff + hdr.e_phnum * hdr.e_phentsize
        if hdr.e_phnum and phend > size:
            raise truncated(path, "program headers past the end of the file")
        shnum = elf.num_sections()
        shend = hdr.e_shoff + shnum * hdr.e_shentsize
        if shnum and shend > size:
            raise truncated(path, "section headers past the end of the file")
        sections: list[Section] = []
        for i, s in enumerate(elf.iter_sections()):
            h = s.header
            sec = Section(
                index=i, name=str(s.name), type=str(h.sh_type), **_ints(h, "sh_", _SECTION_INTS)
            )
            if sec.has_data and sec.offset + sec.size > size:
                raise truncated(path, f"section {sec.name or i} ends past the end of the file")
            sections.append(sec)
        segments: list[Segment] = []
        for seg in elf.iter_segments():
            h = seg.header
            sg = Segment(type=str(h.p_type), **_ints(h, "p_", _SEGMENT_INTS))
            # a separate debug file keeps the program headers but not the loaded bytes
            if not debug_file and sg.type == "PT_LOAD" and sg.offset + sg.filesz > size:
                raise truncated(path, "a loadable segment ends past the end of the file")
            segments.append(sg)
        em = hdr.e_machine
        machine = _MACHINES.get(str(em), str(em).removeprefix("EM_").lower())
        if machine == "ppc64" and little:
            machine = "ppc64le"
        if machine == "riscv" and elf_class == 64:
            machine = "riscv64"
        if machine == "loongarch" and elf_class == 64:
            machine = "loongarch64"
        return Image(
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
        raise truncated(path, first or type(exc).__name__) from None


# ---------------------------------------------------------------- symbols


@dataclass
class SymbolTable:
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


def load_symbols(img: Image, sec: Section) -> SymbolTable | None:
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
    return SymbolTable(
        section=sec.name,
        names=arr["name"].astype(np.int64),
        values=arr["value"].astype(np.uint64),
        info=arr["info"].astype(np.uint8),
        shndx=arr["shndx"].astype(np.uint16),
        strtab=img.data(strsec),
    )


def symbols_of(img: Image, name: str, label: str = "") -> SymbolTable | None:
    sec = img.section(name)
    table = load_symbols(img, sec) if sec else None
    if table is not None and label:
        table.section = label
    return table


def has_section(img: Image, *names: str) -> bool:
    return any(s.name in names for s in img.sections)


# ---------------------------------------------------------------- notes and debug files


def comment_fact(img: Image) -> Fact[list[str]]:
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


def build_id_fact(img: Image) -> Fact[str]:
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


def _debuglink(img: Image) -> str | None:
    sec = img.section(".gnu_debuglink")
    if sec is None or not sec.has_data:
        return None
    name = img.data(sec).split(b"\0", 1)[0].decode("utf-8", "replace")
    return name or None


def find_debug_file(img: Image, build_id: str | None, debug_dirs: list[Path]) -> Path | None:
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


def open_debug_image(path: Path) -> tuple[Image, Any] | None:
    try:
        fh = path.open("rb")
    except OSError:
        return None
    try:
        return open_image(path, path.stat().st_size, fh, debug_file=True), fh
    except (BinaryError, OSError):
        fh.close()
        return None
