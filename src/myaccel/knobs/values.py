"""Parse and format knob values the way mysqld and mariadbd read them.

- sizes and integers: ``128M``, ``1G``, ``16k``, ``-1`` (suffixes K, M, G, T, P, E are powers
  of 1024, case-insensitive, as in ``my_getopt``);
- booleans: ``ON``/``OFF``, ``1``/``0``, ``TRUE``/``FALSE`` (any case);
- enums: case-insensitive names, or the 0-based index of the name (``SET GLOBAL
  innodb_change_buffering = 0`` means ``none``), normalized to the documented spelling;
- floats: ``90``, ``90.000000``.

Values are normalized to Python ``int``, ``bool``, ``float`` or ``str``; formatting is the
reverse, choosing the shortest exact size suffix (``134217728`` -> ``128M``). Sizes are
read and written by ``myaccel.units``, which every floor shares.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from myaccel.units import SizeSyntaxError, format_size, parse_size

__all__ = [
    "KnobValue",
    "ValueSyntaxError",
    "format_bool",
    "format_float",
    "format_size",
    "parse_bool",
    "parse_enum",
    "parse_float",
    "parse_int",
]

KnobValue = int | float | bool | str

_TRUE = {"ON", "1", "TRUE", "YES"}
_FALSE = {"OFF", "0", "FALSE", "NO"}


class ValueSyntaxError(ValueError):
    """A text that is not a valid value of the knob's type (message says why)."""


def parse_int(text: str) -> int:
    """``128M`` -> 134217728; ``-1`` -> -1; ``1.5G`` is rejected (mysqld rejects it too)."""
    try:
        return parse_size(text)
    except SizeSyntaxError as exc:
        raise ValueSyntaxError(str(exc)) from exc


def parse_bool(text: str) -> bool:
    t = text.strip().upper()
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    raise ValueSyntaxError(f"'{text}' is not a boolean (use ON/OFF, 1/0 or TRUE/FALSE)")


def parse_float(text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError as exc:
        raise ValueSyntaxError(f"'{text}' is not a number") from exc
    if not math.isfinite(value):
        raise ValueSyntaxError(f"'{text}' is not a finite number")
    return value


def parse_enum(text: str, values: Sequence[str]) -> str:
    t = text.strip()
    for v in values:
        if v.lower() == t.lower():
            return v
    if t.isdigit() and int(t) < len(values):
        return values[int(t)]
    on_off = {v.upper(): v for v in values if v.upper() in ("ON", "OFF")}
    if len(on_off) == 2 and t.upper() in _TRUE | _FALSE:
        return on_off["ON" if t.upper() in _TRUE else "OFF"]
    raise ValueSyntaxError(f"'{text}' is not one of {', '.join(values)}")


def format_float(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def format_bool(b: bool) -> str:
    return "ON" if b else "OFF"
