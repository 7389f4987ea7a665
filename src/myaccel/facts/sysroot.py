"""Read host files under a sysroot ("/" for this machine, a captured tree in tests).

Every reader returns a ``Fact``: a file that is absent or unreadable becomes an unknown fact
with the reason, never an exception. Paths in ``source`` are the logical paths ("/proc/...")
so that facts read from a fixture tree look like those read from a live machine.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from myaccel.errors import SysrootError
from myaccel.model import Fact, known, unknown

T = TypeVar("T")

# Placeholder that keeps empty directories of a captured tree in git; never a real entry.
KEEP = ".myaccel-keep"


class Sysroot:
    def __init__(self, root: str | Path = "/") -> None:
        p = Path(root)
        if not p.exists():
            raise SysrootError(
                f"sysroot '{root}' does not exist",
                hint="pass a directory holding captured proc/ and sys/ trees, or omit --sysroot",
            )
        if not p.is_dir():
            raise SysrootError(
                f"sysroot '{root}' is not a directory", hint="pass the directory above proc/"
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
        try:
            return known(conv(raw.value), logical)
        except (ValueError, IndexError) as exc:
            return unknown(f"unexpected content {raw.value[:40]!r}: {exc}", logical)

    def read_int(self, logical: str) -> Fact[int]:
        return self.read_as(logical, lambda s: int(s.split()[0]))

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


def parse_cpu_list(text: str) -> list[int]:
    """Parse a kernel CPU list such as ``0-3,8,10-11`` into sorted CPU numbers."""
    cpus: set[int] = set()
    text = text.strip()
    if not text:
        return []
    for raw in text.split(","):
        part = raw.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            step = 1
            if ":" in hi:  # 0-15:2 stride form
                hi, st = hi.split(":", 1)
                step = int(st.split("/")[0])
            cpus.update(range(int(lo), int(hi) + 1, step))
        else:
            cpus.add(int(part))
    return sorted(cpus)


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
    mult = 1
    for suffix, m in (("kB", 1024), ("KB", 1024), ("K", 1024), ("M", 1024**2), ("G", 1024**3)):
        if t.endswith(suffix):
            mult = m
            t = t[: -len(suffix)]
            break
    return int(t) * mult
