"""Rows of the same shape for a schema-only clone: as many rows per table as the source
holds (``information_schema.TABLES``), about as wide (its average row length), with values
of each column's type (``information_schema.COLUMNS`` of the replayed DDL), within a cap
on rows and bytes (``Cap``; the record says when the cap cut the counts down).

The values are typed random values written here, not a data-faking library: what a
benchmark on the clone sees is the column types, the widths, the number of rows and the
uniqueness of keys (the optimizer, the buffer pool and the B-trees), not whether a name
looks like a name; a few dozen lines, seeded per table (the same source shape gives the
same rows), with no dependency. Rules:

- columns of a primary or unique key count up with the row (unique by construction);
- other integers lie in ``1..rows`` (the range of an id in a table of that size, so
  foreign-key-like columns find their rows), within the type's range;
- strings get the table's bytes left after the fixed-width columns and a row's overhead,
  shared out among the variable-length columns, each row at 50-150% of that mean and
  within the column's length;
- generated and auto-increment columns are left to the server; a column of a type with no
  generator (spatial, vector) gets NULL when it may, else its table stays empty (said so).
"""

from __future__ import annotations

import datetime as dt
import random
import re
import string
import time
import uuid
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pymysql

from myaccel.clone.record import GeneratedData, GeneratedTable
from myaccel.server.connection import ConnectParams, connect

Value = Any
Generator = Callable[[random.Random, int], Value]  # (rng, row number from 0) -> value

MIB = 1024 * 1024
DEFAULT_MAX_BYTES = 256 * MIB
DEFAULT_MAX_ROWS = 2_000_000
BATCH_ROWS = 500
ROW_OVERHEAD = 20  # InnoDB's record header, transaction id and roll pointer
PAGE_FILL = 0.9  # InnoDB fills pages to 15/16 on ordered inserts, less its page headers
POOL_MAX = 100_000  # a column with fewer distinct values than rows draws from a pool
SMALL_TABLE = 64 * 1024  # a few pages: its average row length is mostly empty page space
SMALL_TABLE_STRING = 16  # the mean string length in such a table

_INT_BYTES = {"tinyint": 1, "smallint": 2, "mediumint": 3, "int": 4, "integer": 4, "bigint": 8}
_TEXTS = {
    "char",
    "varchar",
    "binary",
    "varbinary",
    "tinytext",
    "text",
    "mediumtext",
    "longtext",
    "tinyblob",
    "blob",
    "mediumblob",
    "longblob",
}
_BINARY = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
_FIXED = {
    "decimal": 8,
    "numeric": 8,
    "float": 4,
    "double": 8,
    "real": 8,
    "date": 3,
    "datetime": 8,
    "timestamp": 4,
    "time": 3,
    "year": 1,
    "bit": 1,
    "enum": 1,
    "set": 1,
    "uuid": 16,
    "inet4": 4,
    "inet6": 16,
    "json": 32,
}
_EPOCH = dt.datetime(2020, 1, 1)
_ALPHABET = string.ascii_letters + string.digits


@dataclass(frozen=True)
class Column:
    """One column of a table, from ``information_schema.COLUMNS``."""

    name: str
    data_type: str  # lower case: int, varchar, enum, ...
    column_type: str  # int(10) unsigned, enum('a','b'), decimal(10,2)
    max_length: int | None  # CHARACTER_MAXIMUM_LENGTH
    precision: int | None  # NUMERIC_PRECISION
    scale: int | None  # NUMERIC_SCALE
    nullable: bool
    unique: bool  # in a primary or unique key
    extra: str = ""  # auto_increment, VIRTUAL GENERATED, ...

    @property
    def left_to_server(self) -> bool:
        e = self.extra.lower()
        return "auto_increment" in e or "generated" in e or "row start" in e or "row end" in e

    @property
    def unsigned(self) -> bool:
        return "unsigned" in self.column_type.lower()


@dataclass(frozen=True)
class Cap:
    """At most this many rows and bytes generated in all, the counts scaled down alike."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_rows: int = DEFAULT_MAX_ROWS

    def factor(self, rows: int, size: int) -> float:
        f = 1.0
        if size > self.max_bytes:
            f = min(f, self.max_bytes / size)
        if rows > self.max_rows:
            f = min(f, self.max_rows / rows)
        return f


def enum_values(column_type: str) -> list[str]:
    """The members of ``enum('a','b''c')`` or ``set(...)``."""
    inner = column_type[column_type.find("(") + 1 : column_type.rfind(")")]
    return [m.replace("''", "'") for m in re.findall(r"'((?:[^']|'')*)'", inner)]


def fixed_bytes(col: Column) -> int:
    """About what a value of a fixed-width column takes in a row (0 for a string)."""
    if col.data_type in _INT_BYTES:
        return _INT_BYTES[col.data_type]
    if col.data_type in ("decimal", "numeric") and col.precision:
        return (col.precision + 1) // 2
    return 0 if col.data_type in _TEXTS else _FIXED.get(col.data_type, 8)


def _int_range(col: Column) -> tuple[int, int]:
    bits = 8 * _INT_BYTES[col.data_type]
    return (0, 2**bits - 1) if col.unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def _text(rng: random.Random, n: int, prefix: str = "") -> str:
    body = "".join(rng.choices(_ALPHABET, k=max(0, n - len(prefix))))
    return (prefix + body)[: max(n, len(prefix))]


def _string_gen(col: Column, mean: float) -> Generator:
    limit = col.max_length or 255
    binary = col.data_type in _BINARY

    def gen(rng: random.Random, i: int) -> Value:
        n = min(limit, max(0, round(mean * rng.uniform(0.5, 1.5))))
        if col.unique:
            n = min(limit, max(n, len(f"{i:x}") + 1))
        s = _text(rng, n, f"{i:x}-" if col.unique else "")[:limit]
        return s.encode() if binary else s

    return gen


def _number_gen(col: Column, rows: int) -> Generator | None:
    t = col.data_type
    if t in _INT_BYTES:
        hi = _int_range(col)[1]
        top = max(1, min(hi, rows))
        if col.unique:
            return lambda rng, i: min(hi, i + 1)
        return lambda rng, i: rng.randint(1, top)
    if t in ("decimal", "numeric"):
        scale = col.scale or 0
        whole = max(0, (col.precision or 10) - scale)
        biggest = min(10.0**whole - 1, 1e6)
        if col.unique:
            return lambda rng, i: f"{min(i, 10**whole - 1)}.{'0' * scale}".rstrip(".")
        return lambda rng, i: f"{rng.uniform(0, biggest):.{scale}f}"
    if t in ("float", "double", "real"):
        return lambda rng, i: float(i) if col.unique else round(rng.uniform(0, 1e6), 3)
    if t == "bit":
        width = col.precision or 1
        return lambda rng, i: (i if col.unique else rng.getrandbits(width)) % (2**width)
    return None


def _time_gen(col: Column) -> Generator | None:
    t = col.data_type
    if t == "date":
        return lambda rng, i: (
            _EPOCH + dt.timedelta(days=i if col.unique else rng.randrange(1826))
        ).date()
    if t in ("datetime", "timestamp"):
        return lambda rng, i: (
            _EPOCH + dt.timedelta(seconds=i if col.unique else rng.randrange(5 * 365 * 86400))
        )
    if t == "time":
        return lambda rng, i: dt.timedelta(seconds=(i if col.unique else rng.randrange(86400)))
    if t == "year":
        return lambda rng, i: 1901 + (i if col.unique else rng.randrange(255)) % 255
    return None


def _other_gen(col: Column, mean: float) -> Generator | None:
    t = col.data_type
    if t in ("enum", "set"):
        members = enum_values(col.column_type) or [""]
        return lambda rng, i: members[i % len(members)] if col.unique else rng.choice(members)
    if t == "json":
        return lambda rng, i: f'{{"n": {i}, "s": "{_text(rng, max(1, round(mean)))}"}}'
    if t == "uuid":
        return lambda rng, i: str(uuid.UUID(int=i if col.unique else rng.getrandbits(128)))
    if t == "inet4":
        return lambda rng, i: ".".join(
            str(b) for b in ((i if col.unique else rng.getrandbits(32)) % 2**32).to_bytes(4, "big")
        )
    if t == "inet6":
        return lambda rng, i: f"2001:db8::{(i if col.unique else rng.getrandbits(16)) % 65536:x}"
    return None


def generator_for(col: Column, rows: int, string_mean: float) -> Generator | None:
    """Values for ``col`` in a table of ``rows`` rows (None: no generator for its type)."""
    if col.data_type in _TEXTS:
        return _string_gen(col, string_mean)
    return _number_gen(col, rows) or _time_gen(col) or _other_gen(col, string_mean)


def string_mean(columns: Sequence[Column], avg_row: float, data_bytes: int) -> float:
    """The mean length of each variable-length value for rows of ``avg_row`` bytes."""
    strings = [c for c in columns if c.data_type in _TEXTS and not c.left_to_server]
    if not strings:
        return 0.0
    if data_bytes <= SMALL_TABLE:
        return float(SMALL_TABLE_STRING)
    fixed = sum(fixed_bytes(c) for c in columns if not c.left_to_server)
    return max(1.0, (avg_row * PAGE_FILL - fixed - ROW_OVERHEAD) / len(strings))


@dataclass(frozen=True)
class TableShape:
    """A source table's size, from ``information_schema.TABLES``."""

    schema: str
    table: str
    rows: int  # TABLE_ROWS: InnoDB's estimate
    data_bytes: int
    index_bytes: int
    # distinct values of indexed columns (the first column's index CARDINALITY)
    distinct: Mapping[str, int] = field(default_factory=dict)

    @property
    def avg_row(self) -> float:
        return self.data_bytes / self.rows if self.rows else 0.0


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def read_columns(conn: Any, schema: str, table: str) -> list[Column]:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT COLUMN_NAME, LOWER(DATA_TYPE), COLUMN_TYPE, CHARACTER_MAXIMUM_LENGTH, "
            "COALESCE(NUMERIC_PRECISION, DATETIME_PRECISION), NUMERIC_SCALE, IS_NULLABLE, "
            "COLUMN_KEY, EXTRA FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND "
            "TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
            (schema, table),
        )
        rows = list(cur.fetchall())
    json_columns = _json_checked(conn, schema, table)
    return [
        Column(
            name=str(r[0]),
            data_type="json" if str(r[0]) in json_columns else str(r[1]),
            column_type=str(r[2]),
            max_length=None if r[3] is None else int(r[3]),
            precision=None if r[4] is None else int(r[4]),
            scale=None if r[5] is None else int(r[5]),
            nullable=str(r[6]) == "YES",
            unique=str(r[7]) in ("PRI", "UNI"),
            extra=str(r[8] or ""),
        )
        for r in rows
    ]


def _json_checked(conn: Any, schema: str, table: str) -> set[str]:
    """MariaDB's JSON columns: LONGTEXT with a ``CHECK (json_valid(col))`` constraint."""
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS WHERE "
                "CONSTRAINT_SCHEMA = %s AND TABLE_NAME = %s",
                (schema, table),
            )
            clauses = [str(r[0]) for r in cur.fetchall()]
    except pymysql.err.MySQLError:
        return set()  # MySQL: no TABLE_NAME there, and a JSON type of its own
    return {m for c in clauses for m in re.findall(r"json_valid\(`((?:[^`]|``)+)`\)", c)}


def row_generators(
    columns: Sequence[Column], shape: TableShape, rows: int
) -> tuple[list[Column], list[Generator], str | None]:
    """The inserted columns and their generators, or why the table cannot be filled."""
    mean = string_mean(columns, shape.avg_row, shape.data_bytes)
    cols: list[Column] = []
    gens: list[Generator] = []
    for c in columns:
        if c.left_to_server:
            continue
        gen = generator_for(c, rows, mean)
        if gen is not None and not c.unique:
            gen = _pooled(gen, shape.distinct.get(c.name, 0), rows, f"{shape.table}.{c.name}")
        if gen is None:
            if not c.nullable:
                return [], [], f"no generator for column {c.name} ({c.column_type})"
            gen = _null
        cols.append(c)
        gens.append(gen)
    return cols, gens, None


def _pooled(gen: Generator, distinct: int, rows: int, seed: str) -> Generator:
    """``gen`` limited to ``distinct`` values (the source's index cardinality), so the
    clone's indexes are as selective as the source's."""
    if not 0 < distinct < rows or distinct > POOL_MAX:
        return gen
    rng = random.Random(zlib.crc32(seed.encode()))
    pool = [gen(rng, j) for j in range(distinct)]
    return lambda r, i: pool[r.randrange(distinct)]


def _null(rng: random.Random, i: int) -> Value:
    return None


def fill_table(conn: Any, shape: TableShape, target: int) -> GeneratedTable:
    """Insert ``target`` generated rows into the clone's copy of ``shape``'s table."""
    out = GeneratedTable(
        database=shape.schema,
        table=shape.table,
        source_rows=shape.rows,
        source_bytes=shape.data_bytes + shape.index_bytes,
        target_rows=target,
    )
    columns = read_columns(conn, shape.schema, shape.table)
    cols, gens, why = row_generators(columns, shape, target)
    if why is not None or target == 0:
        out.skipped = why
        return out
    rng = random.Random(zlib.crc32(f"{shape.schema}.{shape.table}".encode()))
    names = ", ".join(_quoted(c.name) for c in cols) if cols else ""
    marks = ", ".join(["%s"] * len(cols))
    sql = (
        f"INSERT IGNORE INTO {_quoted(shape.schema)}.{_quoted(shape.table)} ({names}) "
        f"VALUES ({marks})"
        if cols
        else f"INSERT INTO {_quoted(shape.schema)}.{_quoted(shape.table)} () VALUES ()"
    )
    with conn.cursor() as cur:
        for start in range(0, target, BATCH_ROWS):
            batch = [
                tuple(g(rng, i) for g in gens)
                for i in range(start, min(target, start + BATCH_ROWS))
            ]
            done = int(cur.executemany(sql, batch) or 0)
            out.rows += done
            if done < len(batch) and out.refused_because is None:
                cur.execute("SHOW WARNINGS LIMIT 1")
                first = cur.fetchall()
                out.refused_because = str(first[0][2])[:200] if first else "a duplicate key"
            conn.commit()
    return out


def generate(
    clone: ConnectParams, shapes: Sequence[TableShape], cap: Cap, say: Callable[[str], None]
) -> GeneratedData:
    """Fill the clone's (empty) tables with rows of the source's shape, within ``cap``."""
    t0 = time.monotonic()
    rows = sum(s.rows for s in shapes)
    size = sum(s.data_bytes + s.index_bytes for s in shapes)
    factor = cap.factor(rows, size)
    data = GeneratedData(max_bytes=cap.max_bytes, max_rows=cap.max_rows, factor=factor)
    conn = connect(clone)
    try:
        conn.autocommit(False)
        with conn.cursor() as cur:
            cur.execute("SET SESSION foreign_key_checks = 0, unique_checks = 0")
        for s in shapes:
            target = round(s.rows * factor)
            say(f"generating {target} rows of the shape of {s.schema}.{s.table}")
            data.tables.append(fill_table(conn, s, target))
    finally:
        conn.close()
    data.duration_s = round(time.monotonic() - t0, 2)
    return data
