"""Idempotent inserts: the explicit primary key of a replayed ``INSERT`` is shifted.

A capture's ``INSERT INTO orders (id, ...) VALUES (1234, ...)`` replayed as written fails
on a duplicate key the second time (the replay draws each example many times) and on a
server that already holds the row: ~18% of a user's replayed statements failed so. The
replay now gives such an insert a key of its own each time: ``key = base + k * threads +
thread`` where ``base`` is above the table's largest key when the thread starts (``SELECT
MAX(col)``, rounded up to a multiple of the threads), so that keys never meet the
table's rows, another thread's or an earlier run's.

Shifted: a single-row ``INSERT``/``INSERT IGNORE`` whose table has a one-column integer
primary key (from the capture's ``SHOW CREATE TABLE``) given as an integer literal or an
``{int:N}`` placeholder, with or without a column list. Not shifted (their duplicates are
counted apart, as every error is): multi-row inserts, composite or non-integer keys, unique
secondary keys, and updates that move a key.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from myaccel.bench.workload import SchemaInfo

_INT_TYPES = ("tinyint", "smallint", "mediumint", "int", "integer", "bigint")
_CREATE = re.compile(r"CREATE\s+TABLE\s+`((?:[^`]|``)+)`\s*\((.*)\)", re.IGNORECASE | re.DOTALL)
_COLUMN = re.compile(r"^\s*`((?:[^`]|``)+)`\s+([a-z]+)", re.IGNORECASE)
_PK = re.compile(r"^\s*PRIMARY\s+KEY\s*\(\s*`((?:[^`]|``)+)`\s*\)", re.IGNORECASE)
_INSERT = re.compile(
    r"^\s*INSERT\s+(?:LOW_PRIORITY\s+|HIGH_PRIORITY\s+|DELAYED\s+)?(?:IGNORE\s+)?(?:INTO\s+)?"
    r"(?:(`(?:[^`]|``)+`|\w+)\s*\.\s*)?(`(?:[^`]|``)+`|\w+)\s*(\([^()]*\))?\s*VALUES?\s*\(",
    re.IGNORECASE,
)
_INT = re.compile(r"\s*(\d{1,18}|\{int:\d{1,4}\})\s*")


@dataclass(frozen=True)
class TableKey:
    schema: str
    table: str
    column: str
    position: int  # in the table's column order (an insert without a column list)


def _unquote(name: str) -> str:
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


def table_keys(schemas: Sequence[SchemaInfo]) -> dict[tuple[str, str], TableKey]:
    """(schema, table in lower case) -> its one-column integer primary key, from the DDL."""
    out: dict[tuple[str, str], TableKey] = {}
    for s in schemas:
        for ddl in s.ddl[1:]:
            m = _CREATE.search(ddl)
            if m is None:
                continue
            table = m.group(1).replace("``", "`")
            columns: dict[str, str] = {}
            order: list[str] = []
            pk: str | None = None
            for line in m.group(2).splitlines():
                if (c := _COLUMN.match(line)) is not None:
                    name = c.group(1).replace("``", "`")
                    columns[name.lower()] = c.group(2).lower()
                    order.append(name.lower())
                elif (p := _PK.match(line)) is not None:
                    pk = p.group(1).replace("``", "`")
            if pk is not None and columns.get(pk.lower()) in _INT_TYPES:
                out[(s.name.lower(), table.lower())] = TableKey(
                    s.name, table, pk, order.index(pk.lower())
                )
    return out


def _items(sql: str, start: int) -> tuple[list[tuple[int, int]], int] | None:
    """The spans of the top-level items of the parenthesized list opening before
    ``start``, and where it closes; None when it does not close."""
    items: list[tuple[int, int]] = []
    depth, i, begin, quote = 0, start, start, ""
    while i < len(sql):
        ch = sql[i]
        if quote:
            if ch == "\\" and quote != "`":
                i += 2
                continue
            if ch == quote:
                if i + 1 < len(sql) and sql[i + 1] == quote:
                    i += 2
                    continue
                quote = ""
        elif ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                items.append((begin, i))
                return items, i
            depth -= 1
        elif ch == "," and depth == 0:
            items.append((begin, i))
            begin = i + 1
        i += 1
    return None


def key_span(
    sql: str, schema: str, keys: dict[tuple[str, str], TableKey]
) -> tuple[TableKey, int, int] | None:
    """The table key of a single-row insert and the span of its integer value in ``sql``
    (a literal or an ``{int:N}`` placeholder), or None."""
    m = _INSERT.match(sql)
    if m is None:
        return None
    db = _unquote(m.group(1)) if m.group(1) else schema
    key = keys.get((db.lower(), _unquote(m.group(2)).lower()))
    if key is None:
        return None
    if m.group(3):
        cols = [_unquote(c.strip()).lower() for c in m.group(3)[1:-1].split(",")]
        if key.column.lower() not in cols:
            return None
        pos = cols.index(key.column.lower())
    else:
        pos = key.position
    found = _items(sql, m.end())
    if found is None:
        return None
    items, close = found
    if sql[close + 1 :].strip().rstrip(";").strip().startswith(","):
        return None  # several rows
    if pos >= len(items):
        return None
    a, b = items[pos]
    v = _INT.fullmatch(sql, a, b)
    if v is None:
        return None
    return key, v.start(1), v.end(1)
