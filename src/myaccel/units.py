"""Sizes in bytes: the one parser and the formatters every floor uses.

- ``parse_size``: ``128M``, ``16k``, ``-1``, ``134217728`` the way mysqld's option parser
  reads them (suffixes K, M, G, T, P, E are powers of 1024, any case); with
  ``byte_suffix=True`` also the kernel's ``123 kB`` and ``64MB``;
- ``format_size``: the shortest exact spelling (``134217728`` -> ``128M``), as option
  files and plans write a size;
- ``format_bytes`` and ``format_gib``: approximate sizes for people (``1.5 GiB``).

This module sits on the lowest floor so that facts, knobs, rules and report share it.
"""

from __future__ import annotations

import re

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
TiB = 1 << 40

SIZE_SUFFIXES = {"K": KiB, "M": MiB, "G": GiB, "T": TiB, "P": 1 << 50, "E": 1 << 60}
_SIZE_RE = re.compile(r"^\s*([+-]?\d+)\s*([KMGTPE])?(B)?\s*$", re.IGNORECASE)
_HUMAN_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


class SizeSyntaxError(ValueError):
    """A text that is not a size (the message says which spellings are read)."""


def parse_size(text: str, *, byte_suffix: bool = False) -> int:
    """``128M`` -> 134217728; ``-1`` -> -1; ``1.5G`` is rejected (mysqld rejects it too).

    ``byte_suffix`` also reads a ``B`` after the unit (``123 kB``, the kernel's spelling)."""
    m = _SIZE_RE.match(text)
    if not m or (m.group(3) and not byte_suffix) or len(m.group(1)) > 40:
        raise SizeSyntaxError(f"'{text}' is not an integer (suffixes K, M, G, T, P, E allowed)")
    number = int(m.group(1))
    suffix = m.group(2)
    return number * SIZE_SUFFIXES[suffix.upper()] if suffix else number


def size_or_none(text: str | None) -> int | None:
    """``parse_size``, or None for a missing value or one that is not a size (``ON``)."""
    if text is None:
        return None
    try:
        return parse_size(str(text))
    except SizeSyntaxError:
        return None


def format_size(n: int, *, largest: str = "E") -> str:
    """Shortest exact spelling with a suffix up to ``largest``: 134217728 -> ``128M``,
    1000 -> ``1000``, -1 -> ``-1``."""
    if n <= 0:
        return str(n)
    suffixes = "EPTGMK"
    for suffix in suffixes[suffixes.index(largest) :]:
        unit = SIZE_SUFFIXES[suffix]
        if n % unit == 0:
            return f"{n // unit}{suffix}"
    return str(n)


def format_bytes(n: int | None, *, whole_from: float | None = 100) -> str:
    """About ``n`` bytes for people: ``512 B``, ``1.5 GiB``, ``184 MiB`` (whole numbers from
    ``whole_from`` units on; None: always one decimal); ``?`` when unknown."""
    if n is None:
        return "?"
    v = float(n)
    for unit in _HUMAN_UNITS:
        if abs(v) < 1024 or unit == _HUMAN_UNITS[-1]:
            whole = unit == "B" or (whole_from is not None and v >= whole_from)
            return f"{v:.0f} {unit}" if whole else f"{v:.1f} {unit}"
        v /= 1024
    return f"{n} B"


def format_gib(n: int | None) -> str:
    """``n`` bytes in GiB with one decimal (``30.9 GiB``); ``?`` when unknown."""
    return "?" if n is None else f"{n / GiB:.1f} GiB"
