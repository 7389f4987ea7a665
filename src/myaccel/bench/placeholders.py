"""Typed placeholders: ``capture --redact`` replaces every literal of a statement with a
placeholder that says its shape, and a replay fills each placeholder with a new value of
that shape, so that a redacted capture can be replayed (docs/workloads.md, "Sharing a
capture").

The placeholders (``PLACEHOLDER``), in the statement's text where the literal was (quotes
included):

====================  ==========================================  =====================
placeholder           stands for                                  filled with
====================  ==========================================  =====================
``{int:N}``           an integer of N digits (``{int:-N}``: < 0)  N random digits
``{dec:I.F}``         a decimal, I digits before the point, F     the same digits
                      after (``{dec:-I.F}``: negative)
``{float}``           a number with an exponent (``1.5e3``)       a float of 6 digits
``{str:L}``           a quoted string of L characters             L random letters
``{digits:L}``        a quoted string of L digits (a zip code,    L random digits
                      a phone number)
``{date}``            ``'YYYY-MM-DD'``                            a date in 2020-2026
``{datetime}``        ``'YYYY-MM-DD hh:mm:ss'``                   a date and time
``{time}``            ``'hh:mm:ss'``                              a time
``{hex:L}``           ``0x`` and L hex digits (``X'..'`` too)     L random hex digits
``{bits:L}``          ``0b`` and L bits (``b'..'`` too)           L random bits
====================  ==========================================  =====================

Comments are removed (they can hold anything); names, keywords and ``NULL`` stay. Lengths
are capped at ``MAX_LEN`` (a longer literal says ``{str:4096}``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

MAX_LEN = 4096

Kind = Literal["int", "dec", "float", "str", "digits", "date", "datetime", "time", "hex", "bits"]

_TOKEN = re.compile(
    r"""
      (?P<hint>/\*\+.*?\*/)
    | (?P<comment>/\*(?![+!]).*?\*/|--[ \t][^\n]*|--$|\#[^\n]*)
    | (?P<string>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
    | (?P<ident>`(?:[^`]|``)*`)
    | (?P<hex>\b0x[0-9a-fA-F]+\b|\b[xX]'[0-9a-fA-F]*')
    | (?P<bits>\b0b[01]+\b|\b[bB]'[01]*')
    | (?P<number>(?<![\w$.])-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w$]))
    """,
    re.VERBOSE | re.DOTALL | re.MULTILINE,
)
PLACEHOLDER = re.compile(
    r"\{(int|dec|float|str|digits|date|datetime|time|hex|bits)"
    r"(?::(-?\d{1,4}(?:\.\d{1,4})?))?\}"
)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?")
_TIME = re.compile(r"\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?")


def _n(k: int) -> int:
    return max(1, min(k, MAX_LEN))


def _string_value(quoted: str) -> str:
    body = quoted[1:-1]
    q = quoted[0]
    return re.sub(r"\\(.)", r"\1", body.replace(q + q, q))


def _number(text: str) -> str:
    neg = "-" if text.startswith("-") else ""
    t = text.lstrip("-")
    if "e" in t.lower():
        return "{float}"
    if "." in t:
        i, f = t.split(".", 1)
        return f"{{dec:{neg}{_n(len(i.lstrip('0')))}.{_n(len(f))}}}"
    return f"{{int:{neg}{_n(len(t.lstrip('0')) or 1)}}}"


def _placeholder(m: re.Match[str]) -> str:
    kind, text = m.lastgroup, m.group(0)
    if kind == "comment":
        return " "
    if kind in ("ident", "hint"):
        return text
    if kind == "hex":
        digits = text[2:] if text[:2] in ("0x", "0X") else text[2:-1]
        return f"{{hex:{_n(len(digits))}}}"
    if kind == "bits":
        digits = text[2:] if text[:2] in ("0b", "0B") else text[2:-1]
        return f"{{bits:{_n(len(digits))}}}"
    if kind == "number":
        return _number(text)
    value = _string_value(text)
    if _DATETIME.fullmatch(value):
        return "{datetime}"
    if _DATE.fullmatch(value):
        return "{date}"
    if _TIME.fullmatch(value):
        return "{time}"
    if value and value.isdigit() and value.isascii():
        return f"{{digits:{_n(len(value))}}}"
    return f"{{str:{min(len(value), MAX_LEN)}}}"


def redact_typed(sql: str) -> str:
    """``sql`` with every literal a typed placeholder and its comments removed (optimizer
    hints ``/*+ ... */`` kept); the rest as written."""
    return _TOKEN.sub(_placeholder, sql).strip()


@dataclass(frozen=True)
class Hole:
    """A placeholder of a template: its kind and its size (digits, characters)."""

    kind: Kind
    size: int = 0  # int, str, digits, hex, bits: the length; dec: the integer digits
    frac: int = 0  # dec: the digits after the point
    negative: bool = False


Part = str | Hole


def parse(template: str) -> list[Part]:
    """A template's text and holes, in order (adjacent text joined)."""
    parts: list[Part] = []
    pos = 0
    for m in PLACEHOLDER.finditer(template):
        if m.start() > pos:
            parts.append(template[pos : m.start()])
        kind = m.group(1)
        arg = m.group(2) or ""
        neg = arg.startswith("-")
        arg = arg.lstrip("-")
        size, _, frac = arg.partition(".")
        parts.append(
            Hole(
                kind=kind,  # type: ignore[arg-type]
                size=min(int(size), MAX_LEN) if size else 0,
                frac=min(int(frac), MAX_LEN) if frac else 0,
                negative=neg,
            )
        )
        pos = m.end()
    if pos < len(template):
        parts.append(template[pos:])
    return parts


def has_placeholders(sql: str) -> bool:
    return PLACEHOLDER.search(sql) is not None


def sample_value(h: Hole) -> str:
    """A value of the hole's shape (what a check of the statement reads: every filled value
    is digits, letters or a date in quotes, as this one)."""
    sign = "-" if h.negative else ""
    if h.kind == "int":
        return sign + "1" * max(1, h.size)
    if h.kind == "dec":
        return f"{sign}{'1' * max(1, h.size)}.{'1' * max(1, h.frac)}"
    if h.kind == "float":
        return "1.5e3"
    if h.kind == "str":
        return "'" + "a" * h.size + "'"
    if h.kind == "digits":
        return "'" + "1" * h.size + "'"
    if h.kind == "date":
        return "'2024-01-01'"
    if h.kind == "datetime":
        return "'2024-01-01 00:00:00'"
    if h.kind == "time":
        return "'00:00:00'"
    if h.kind == "hex":
        return "0x" + "a" * max(1, h.size)
    return "0b" + "1" * max(1, h.size)


def sample(template: str) -> str:
    """``template`` filled with ``sample_value`` (the statement as a replay issues it, up
    to the values: what the workload checks judge)."""
    return "".join(p if isinstance(p, str) else sample_value(p) for p in parse(template))
