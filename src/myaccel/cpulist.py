"""Kernel CPU lists (``0-3,8,10-11``): parsed, printed and checked, for the facts readers
and for the model, which checks every CPU list a facts file holds (a file skips the
readers). Written here: the kernel's list syntax (``N-M:used/group``) is small and no
library parses it."""

from __future__ import annotations

import re

# Largest CPU number accepted in a CPU list (the kernel's NR_CPUS tops out at 8192 today);
# a bigger number is garbage, and a range up to it would exhaust memory.
MAX_CPU = 1 << 16
_CPU_ITEM = re.compile(r"([0-9]+)(?:-([0-9]+)(?::([0-9]+)(?:/([0-9]+))?)?)?")


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


def check_cpu_list(text: str) -> str:
    """``text`` when it parses as a CPU list (the model's validator), else ValueError."""
    parse_cpu_list(text)
    return text
