"""Read host files under a sysroot ("/" for this machine, a captured tree in tests).

Every reader returns a ``Fact``: a file that is absent or unreadable becomes an unknown fact
with the reason, never an exception. Paths in ``source`` are the logical paths ("/proc/...")
so that facts read from a fixture tree look like those read from a live machine.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from myaccel import units
from myaccel.errors import SysrootError
from myaccel.model import Fact, known, unknown
from myaccel.paths import existing_dir

T = TypeVar("T")

# Placeholder that keeps empty directories of a captured tree in git; never a real entry.
KEEP = ".myaccel-keep"


class Sysroot:
    def __init__(self, root: str | Path = "/") -> None:
        p = existing_dir(
            root,
            "sysroot",
            SysrootError,
            hint="pass a directory holding captured proc/ and sys/ trees, or omit --sysroot",
            not_dir_hint="pass the directory above proc/",
        )
        if not (p / "proc").is_dir() and not (p / "sys").is_dir():
            raise SysrootError(
                f"sysroot '{root}' holds neither proc/ nor sys/",
                hint="a sysroot is a directory with proc/ and sys/ subtrees (like /)",
            )
        self.root = p
        self.live = p.resolve() == Path("/")
        # Logical paths read so far, when tracing (used by `probe --capture`).
        self.trace: list[str] | None = None

    def path(self, logical: str) -> Path:
        if self.trace is not None:
            self.trace.append(logical)
        return self.root / logical.lstrip("/")

    def exists(self, logical: str) -> bool:
        return self.path(logical).exists()

    def read_text(self, logical: str) -> str | None:
        """File content, or None if it is absent or unreadable."""
        try:
            return self.path(logical).read_text(errors="replace")
        except (OSError, ValueError):
            return None

    def read(self, logical: str) -> Fact[str]:
        p = self.path(logical)
        try:
            return known(p.read_text(errors="replace").strip(), logical)
        except FileNotFoundError:
            return unknown("not present", logical)
        except PermissionError:
            return unknown("permission denied (run as root to read it)", logical)
        except OSError as exc:
            return unknown(f"unreadable: {exc.strerror or exc}", logical)

    def read_as(self, logical: str, conv: Callable[[str], T]) -> Fact[T]:
        raw = self.read(logical)
        if not raw.known or raw.value is None:
            return unknown(raw.unknown or "empty", logical)
        if not raw.value:
            return unknown(f"{logical} is empty", logical)
        try:
            return known(conv(raw.value), logical)
        except (ValueError, IndexError) as exc:
            msg, shown = str(exc), repr(raw.value[:40])
            if shown in msg:  # the message already quotes the whole content
                return unknown(f"{logical}: {msg}", logical)
            return unknown(f"{logical}: unexpected content {shown}: {msg}", logical)

    def read_line(self, logical: str) -> Fact[str]:
        """A one-line text value (a name, a version); binary or control bytes are unknown."""
        return self.read_as(logical, printable_line)

    def read_int(self, logical: str) -> Fact[int]:
        return self.read_as(logical, parse_int)

    def read_cpu_list(self, logical: str) -> Fact[list[int]]:
        """A kernel CPU list file (``0-3,8``); garbage, empty or missing is unknown."""
        return self.read_as(logical, parse_cpu_list)

    def listdir(self, logical: str) -> list[str]:
        try:
            names = sorted(n for n in os.listdir(self.path(logical)) if n != KEEP)
        except OSError:
            return []
        if self.trace is not None:
            # "?" marks a name that was listed, not read: capture creates it without content.
            self.trace.extend(f"?{logical.rstrip('/')}/{n}" for n in names)
        return names

    def realpath(self, logical: str) -> str | None:
        """Resolve symlinks inside the sysroot; returns the logical path."""
        p = self.path(logical)
        try:
            real = p.resolve(strict=True)
        except OSError:
            return None
        root = self.root.resolve()
        try:
            return "/" + str(real.relative_to(root))
        except ValueError:
            return str(real)


# Largest CPU number accepted in a CPU list (the kernel's NR_CPUS tops out at 8192 today);
# a bigger number is garbage, and a range up to it would exhaust memory.
MAX_CPU = 1 << 16
_CPU_ITEM = re.compile(r"([0-9]+)(?:-([0-9]+)(?::([0-9]+)(?:/([0-9]+))?)?)?")
_INT = re.compile(r"[+-]?[0-9]+")


def _cpu_number(digits: str, item: str) -> int:
    n = int(digits)
    if n >= MAX_CPU:
        raise ValueError(f"CPU number {digits[:12]} in {item[:24]!r} is out of range")
    return n


def parse_cpu_list(text: str) -> list[int]:
    """Parse a kernel CPU list such as ``0-3,8,10-11`` into sorted CPU numbers.

    Accepts what the kernel prints and reads (``N``, ``N-M``, ``N-M:used/group``, and the
    historical ``N-M:stride``), separated by commas, with surrounding whitespace. Anything
    else (NUL bytes, letters, ``0-``, ``3-1``, negative or huge numbers) raises a
    ``ValueError`` that says what is wrong. An empty text is the empty list.
    """
    cpus: set[int] = set()
    text = text.strip()
    if not text:
        return []
    for raw in text.split(","):
        item = raw.strip()
        m = _CPU_ITEM.fullmatch(item)
        if m is None:
            raise ValueError(f"{item[:24]!r} is not a CPU number or range")
        lo = _cpu_number(m.group(1), item)
        if m.group(2) is None:
            cpus.add(lo)
            continue
        hi = _cpu_number(m.group(2), item)
        if hi < lo:
            raise ValueError(f"range {item[:24]!r} ends before it starts")
        used, group = m.group(3), m.group(4)
        if used is None:
            cpus.update(range(lo, hi + 1))
        elif group is None:  # N-M:stride
            step = int(used)
            if step < 1:
                raise ValueError(f"stride in {item[:24]!r} must be at least 1")
            cpus.update(range(lo, hi + 1, step))
        else:  # N-M:used/group, as the kernel's bitmap_parselist
            u, g = int(used), int(group)
            if not 0 < u <= g:
                raise ValueError(f"{item[:24]!r}: need 0 < used <= group size")
            cpus.update(c for c in range(lo, hi + 1) if (c - lo) % g < u)
    return sorted(cpus)


def printable_line(text: str) -> str:
    """The stripped text when it is one line of printable characters, else ValueError."""
    t = text.strip()
    if "\ufffd" in t or not t.isprintable():
        raise ValueError("not printable text (binary or control bytes)")
    return t


def parse_int(text: str) -> int:
    """One decimal integer (a sysctl or sysfs number); anything else raises ValueError."""
    t = text.strip()
    if not _INT.fullmatch(t):
        raise ValueError("not an integer")
    if len(t.lstrip("+-")) > 20:
        raise ValueError("number out of the 64-bit range")
    v = int(t)
    if not -(1 << 63) <= v < 1 << 64:
        raise ValueError("number out of the 64-bit range")
    return v


def format_cpu_list(cpus: list[int]) -> str:
    """Inverse of ``parse_cpu_list``: ``[0,1,2,3,8]`` -> ``0-3,8``."""
    out: list[str] = []
    s = sorted(set(cpus))
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[j] + 1:
            j += 1
        out.append(str(s[i]) if i == j else f"{s[i]}-{s[j]}")
        i = j + 1
    return ",".join(out)


def parse_size(text: str) -> int:
    """Parse sizes as the kernel prints them: ``32K``, ``1024K``, ``64M``, ``123 kB``."""
    t = text.strip().replace(" ", "")
    try:
        n = units.parse_size(t, byte_suffix=True)
    except ValueError:
        n = -1
    if n < 0 or not t[:1].isdigit():
        raise ValueError(f"{t[:24]!r} is not a size")
    if n >= 1 << 64:
        raise ValueError(f"size {t[:24]!r} out of the 64-bit range")
    return n
