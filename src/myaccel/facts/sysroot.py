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
from myaccel.cpulist import parse_cpu_list
from myaccel.errors import SysrootError
from myaccel.model import Fact, known, unknown
from myaccel.paths import existing_dir

T = TypeVar("T")

NOT_PRESENT = "not present"

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
            return unknown(NOT_PRESENT, logical)
        except PermissionError:
            return unknown("permission denied (run as root to read it)", logical)
        except OSError as exc:
            return unknown(f"unreadable: {exc.strerror or exc}", logical)

    def read_present(self, logical: str) -> Fact[str] | None:
        """``read``, or None when the file is not there: unlike ``read_text``, a file that
        is there but cannot be read (permissions, a directory, I/O) is an unknown Fact."""
        f = self.read(logical)
        return None if f.unknown == NOT_PRESENT else f

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


_INT = re.compile(r"[+-]?[0-9]+")


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
