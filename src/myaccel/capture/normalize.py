"""Statement texts into classes: literals out (the class's normalized text, also what
``--redact`` keeps), the statement's kind, and whether a replay may issue it.

A small scanner rather than a SQL parser: it must take any statement a server logged
(truncated texts included), fast enough for tens of thousands per second, and only needs
to tell literals, comments and keywords apart. Both capture sources (performance_schema
and the general log) use it, so the classes of a capture and of its replay's capture
compare one to one, across flavors.
"""

from __future__ import annotations

import hashlib
import re

from myaccel.bench.workload import StatementKind

# One alternation, tried left to right: comments, quoted strings (with '' and \ escapes),
# backquoted identifiers (kept), hex and bit literals, numbers not part of a name.
_TOKEN = re.compile(
    r"""
      (?P<comment>/\*(?!\+).*?\*/|--[ \t][^\n]*|\#[^\n]*)
    | (?P<string>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
    | (?P<ident>`(?:[^`]|``)*`)
    | (?P<hex>\b0x[0-9a-fA-F]+\b|\b[xX]'[0-9a-fA-F]*'|\b0b[01]+\b|\b[bB]'[01]*')
    | (?P<number>(?<![\w$.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w$]))
    """,
    re.VERBOSE | re.DOTALL,
)
_LISTS = re.compile(r"\(\s*\?(?:\s*,\s*\?)+\s*\)")
_VALUES_ROWS = re.compile(r"\(\.\.\.\)(?:\s*,\s*\(\.\.\.\))+")
_SPACE = re.compile(r"\s+")

_TRANSACTION = ("begin", "start", "commit", "rollback", "savepoint", "release", "xa")
_READ = ("select", "show", "with", "table", "values", "explain", "describe", "desc", "help")
_WRITE = ("insert", "update", "delete", "replace", "load")
# First words of statements a replay does not issue, and why.
NOT_REPLAYED = {
    "use": "the replay sets each class's schema itself",
    "set": "session settings are not part of the mix (and SET autocommit would change it)",
    "create": "DDL would change the replay's schema",
    "alter": "DDL would change the replay's schema",
    "drop": "DDL would change the replay's schema",
    "truncate": "DDL would change the replay's schema",
    "rename": "DDL would change the replay's schema",
    "grant": "account changes",
    "revoke": "account changes",
    "kill": "would end the replay's own connections",
    "lock": "table locks across the replay's random mix would stall it",
    "unlock": "table locks across the replay's random mix would stall it",
    "flush": "server administration",
    "shutdown": "server administration",
    "prepare": "prepared statements are replayed through their executions",
    "execute": "prepared statements are replayed through their executions",
    "deallocate": "prepared statements are replayed through their executions",
}


def _literal(m: re.Match[str]) -> str:
    kind = m.lastgroup
    if kind == "comment":
        return " "
    if kind == "ident":
        return m.group(0)
    return "?"


def normalize(sql: str) -> str:
    """``sql`` with every literal a ``?``, comments out, lists of literals folded to
    ``(...)``, whitespace collapsed, lower case outside identifiers, no trailing ``;``."""
    text = _TOKEN.sub(_literal, sql)
    text = _LISTS.sub("(...)", text)
    text = _VALUES_ROWS.sub("(...)", text)
    parts = re.split(r"(`(?:[^`]|``)*`)", text)
    text = "".join(p if p.startswith("`") else p.lower() for p in parts)
    return _SPACE.sub(" ", text).strip().rstrip(";").strip()


def redact(sql: str) -> str:
    """``sql`` without its literals (the normalized text): what a shared capture keeps."""
    return normalize(sql)


def first_word(text: str) -> str:
    m = re.match(r"\s*\(?\s*([a-z_]+)", text.lower())
    return m.group(1) if m else ""


def kind_of(text: str) -> StatementKind:
    word = first_word(text)
    if word in _READ:
        return "read"
    if word in _WRITE:
        return "write"
    if word in _TRANSACTION:
        return "transaction"
    return "other"


def not_replayed_because(text: str) -> str | None:
    """Why a replay leaves this statement out, or None when it issues it."""
    return NOT_REPLAYED.get(first_word(text))


def class_id(schema: str, text: str) -> str:
    """A short, stable id of a class (schema and normalized text)."""
    return hashlib.sha256(f"{schema}\0{text}".encode()).hexdigest()[:12]
