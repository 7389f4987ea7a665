"""One server option, however it is spelt: in an option file, on a server command line (a
systemd ``ExecStart=``, an ``Environment=MYSQLD_OPTS=...``) or as a plan target.

The server reads ``innodb_flush_log_at_trx_commit=0``, ``--loose-Innodb-Flush-Log-At-Trx-
Commit = "0" # fast``, ``skip-innodb-doublewrite``, ``--disable-innodb-doublewrite`` and
``set-variable=sync_binlog=0`` alike; this module turns each into an ``OptionWord`` (the
variable name, the value the spelling gives it) so that a check written against variable
names sees them all. Include directives are reported, never followed: what a plan would
write is judged by its own text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Container, Iterator
from dataclasses import dataclass, replace

from myaccel.server.optionfile import normalize_key

# Groups a server reads besides its versioned and suffixed ones ([mysqld-8.0],
# [mariadb-10.11], [mysqld1] of mysqld_multi, [mysqld_x] of --defaults-group-suffix):
# MariaDB reads [client-server] (clients and server) and [galera] too.
SERVER_GROUP_NAMES = frozenset({"client-server", "galera"})
SERVER_GROUP_PREFIXES = ("mysqld", "mariadb", "server")
# Prefixes my_getopt takes before an option name, and the value a bare one implies. It
# strips them one after the other, in any order (``loose-skip-X``, ``skip-loose-X``), until
# a name is left; the last one stripped decides. ``loose-`` (ignore when unknown) implies
# nothing; ``maximum-`` caps what a session may set.
MODIFIERS = {
    "loose_": None,
    "skip_": "OFF",
    "disable_": "OFF",
    "enable_": "ON",
    "maximum_": None,
}
# SQL: ``SET`` up to the end of the statement, and each ``name = value`` in it.
_SET_RE = re.compile(r"\bSET\s+(?P<body>[^;]*)", re.IGNORECASE)
_SQL_ASSIGN_RE = re.compile(
    r"(?:(?:GLOBAL|PERSIST_ONLY|PERSIST|SESSION|LOCAL)\s+"
    r"|@@(?:(?:GLOBAL|PERSIST_ONLY|PERSIST|SESSION|LOCAL)\.)?)*"
    r"`?(?P<name>[A-Za-z_][A-Za-z0-9_]*)`?\s*:?=\s*"
    r"(?P<value>'[^']*'|\"[^\"]*\"|[^,;\s]+)",
    re.IGNORECASE,
)
_INCLUDE_RE = re.compile(r"\s*!\s*include", re.IGNORECASE)
# ``--name``, ``--name=value``, ``--name value`` on a command line, in an environment
# variable or anywhere in a unit file: after a line start, a blank, a quote or ``=``.
_LONG_OPTION_RE = re.compile(
    r"""(?:^|(?<=[\s"'=;]))--(?P<name>[A-Za-z][A-Za-z0-9_-]*)"""
    r"""(?:=(?P<value>"[^"]*"|'[^']*'|[^\s"';]*)|[ \t]+(?P<next>[^\s"';-][^\s"';]*))?""",
    re.MULTILINE,
)


@dataclass(frozen=True)
class OptionWord:
    """An option as the server reads it."""

    name: str  # the variable: lower case, underscores, loose-/skip-/... removed
    value: str | None  # as given (quotes and comments removed), or ON/OFF of skip-/enable-
    spelt: str  # as written, for messages
    group: str | None = None  # the option-file group ("" before any); None elsewhere
    modifier: str = ""  # skip_, disable_, enable_, maximum_ or ""
    kind: str = "option"  # option (file or target), argument, sql, json

    @property
    def sets_value(self) -> bool:
        """False for ``maximum-X`` (a cap for sessions, not the value of X)."""
        return self.modifier != "maximum_"


def is_server_group(group: str) -> bool:
    """True for an option-file group the server reads its own options from. Broad on
    purpose (a check of what the server might read): [mysqld], [server], [mariadb],
    [mariadbd], [client-server], [galera], versioned and suffixed groups."""
    g = group.strip().lower()
    return g in SERVER_GROUP_NAMES or g.startswith(SERVER_GROUP_PREFIXES)


def option_word(
    spelt: str,
    value: str | None,
    *,
    group: str | None = None,
    names: Container[str] = (),
) -> OptionWord:
    """The option ``spelt`` (with ``value``) as the server reads it. ``names``: option names
    that keep a modifier-looking start (``skip_name_resolve`` is a name of its own)."""
    key = normalize_key(spelt.strip().lstrip("-"))
    modifier = ""
    while key not in names and (prefix := _modifier(key)):
        key, modifier = key.removeprefix(prefix), prefix
    if key == "set_variable" and value is not None and "=" in value:
        inner, _, inner_value = value.partition("=")  # the old set-variable=NAME=VALUE
        return option_word(inner, clean_value(inner_value), group=group, names=names)
    implied = MODIFIERS.get(modifier)
    if implied is not None and not (implied == "ON" and value):
        value = implied
    return OptionWord(key, value, spelt.strip(), group, "" if modifier == "loose_" else modifier)


def _modifier(key: str) -> str:
    """The prefix ``key`` starts with (followed by a name), or ''."""
    return next((p for p in MODIFIERS if key.startswith(p) and len(key) > len(p)), "")


def clean_value(raw: str) -> str:
    """A value as the server's option-file reader sees it: a ``#`` outside quotes starts a
    comment, blanks around are dropped, one pair of enclosing quotes is removed."""
    kept: list[str] = []
    quote = ""
    escaped = False
    for ch in raw:
        if ch in "'\"" and not escaped:
            quote = "" if quote == ch else (quote or ch)
        if not quote and ch == "#":
            break
        escaped = bool(quote) and ch == "\\" and not escaped
        kept.append(ch)
    v = "".join(kept).strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
        v = v[1:-1]
    return v


def include_directives(text: str) -> list[str]:
    """The ``!include``/``!includedir`` lines of an option-file text (any case, any
    indentation), as written."""
    return [line.strip() for line in text.splitlines() if _INCLUDE_RE.match(line)]


def option_file_words(text: str, *, names: Container[str] = ()) -> Iterator[OptionWord]:
    """The options of the server groups of an option-file text (and those before any
    group), in order (duplicates kept: the last one wins at the server). Directives are
    skipped, never followed."""
    group: str | None = ""  # before any group: the server refuses to start; counted
    for raw in text.splitlines():
        line = raw.strip().lstrip("\ufeff")
        if not line or line[0] in "#;!":
            continue
        if line.startswith("["):
            group = line[1 : line.index("]")].strip().lower() if "]" in line else None
            continue
        if group is None or (group and not is_server_group(group)):
            continue
        word = _option_line(line, group, names)
        if word is not None:
            yield word


def _option_line(line: str, group: str, names: Container[str]) -> OptionWord | None:
    """``key``, ``key = value``, ``key=value # comment``: the key ends at a blank or ``=``."""
    m = re.match(r"([^\s=#]+)\s*(=?)(.*)", line)
    if m is None:
        return None
    key, eq, rest = m.groups()
    value = clean_value(rest) if eq else None
    return replace(option_word(key, value, group=group, names=names), spelt=line)


def command_line_words(text: str, *, names: Container[str] = ()) -> Iterator[OptionWord]:
    """Every ``--option[=value]`` (or ``--option value``) in a command line, an environment
    assignment or a unit file, comment lines (``#``, ``;``) aside."""
    body = "\n".join(
        ln
        for ln in text.replace("\\\n", " ").splitlines()
        if not ln.lstrip().startswith(("#", ";"))
    )
    for m in _LONG_OPTION_RE.finditer(body):
        raw = m.group("value")
        value = clean_value(raw) if raw is not None else m.group("next")
        word = option_word(m.group("name"), value, names=names)
        yield replace(word, spelt=m.group(0).strip(), kind="argument")


def sql_words(text: str, *, names: Container[str] = ()) -> Iterator[OptionWord]:
    """Every variable a ``SET [GLOBAL|PERSIST|PERSIST_ONLY] name = value`` (or
    ``SET @@global.name = value``, several separated by commas) in ``text`` assigns: an
    init file, a script, an ``init_connect`` value."""
    for statement in _SET_RE.finditer(text):
        for m in _SQL_ASSIGN_RE.finditer(statement.group("body")):
            word = option_word(m.group("name"), clean_value(m.group("value")), names=names)
            yield replace(word, spelt=f"SET {m.group(0).strip()}", kind="sql")


def json_words(text: str, *, names: Container[str] = ()) -> Iterator[OptionWord]:
    """Every key of a JSON text (MySQL's ``mysqld-auto.cnf``, where ``SET PERSIST``
    writes: ``{"mysql_static_variables": {"innodb_doublewrite": {"Value": "OFF"}}}``);
    nothing when the text is not JSON."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return
    for key, value in _json_items(doc):
        word = option_word(key, value, names=names)
        yield replace(word, spelt=f'"{key}": {json.dumps(value)}', kind="json")


def _json_items(node: object) -> Iterator[tuple[str, str | None]]:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, list):
            stack.extend(n)
        if not isinstance(n, dict):
            continue
        for k, v in n.items():
            inner = v.get("Value") if isinstance(v, dict) else v
            scalar = isinstance(inner, (str, int, float)) and not isinstance(inner, bool)
            yield str(k), str(inner) if scalar else None
            stack.append(v)
