"""Rows of the source's shape for a schema-only clone: a value generator per column type
(within the type's range and length, unique where a key needs it), the string widths
from the average row length, the cap, and the inserts (a fake connection)."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import pytest

from myaccel.clone.generate import (
    Cap,
    Column,
    TableShape,
    enum_values,
    fill_table,
    generator_for,
    row_generators,
    string_mean,
)


def _col(data_type: str, column_type: str | None = None, **kw: Any) -> Column:
    base: dict[str, Any] = {
        "name": f"c_{data_type}",
        "data_type": data_type,
        "column_type": column_type or data_type,
        "max_length": None,
        "precision": None,
        "scale": None,
        "nullable": False,
        "unique": False,
    }
    return Column(**{**base, **kw})


def _values(col: Column, n: int = 300, rows: int = 1000, mean: float = 10.0) -> list[Any]:
    gen = generator_for(col, rows, mean)
    assert gen is not None, col
    rng = random.Random(1)
    return [gen(rng, i) for i in range(n)]


@pytest.mark.parametrize(
    ("data_type", "column_type", "lo", "hi"),
    [
        ("tinyint", "tinyint(4)", -128, 127),
        ("tinyint", "tinyint(3) unsigned", 0, 255),
        ("smallint", "smallint(6)", -32768, 32767),
        ("int", "int(11)", -(2**31), 2**31 - 1),
        ("bigint", "bigint(20) unsigned", 0, 2**64 - 1),
    ],
)
def test_integers_in_range_and_unique_keys_count_up(
    data_type: str, column_type: str, lo: int, hi: int
) -> None:
    plain = _values(_col(data_type, column_type), rows=100)
    assert all(isinstance(v, int) and lo <= v <= hi and 1 <= v <= 100 for v in plain)
    assert len(set(plain)) > 1
    key = _values(_col(data_type, column_type, unique=True), n=100)
    assert key == list(range(1, 101))


def test_decimal_float_bit() -> None:
    dec = _values(_col("decimal", "decimal(6,2)", precision=6, scale=2))
    assert all(isinstance(v, str) and len(v.split(".")[1]) == 2 for v in dec)
    assert all(0 <= float(v) < 10**4 for v in dec)
    assert _values(_col("decimal", "decimal(5,0)", precision=5, scale=0, unique=True), n=3) == [
        "0",
        "1",
        "2",
    ]
    assert all(isinstance(v, float) for v in _values(_col("double")))
    bits = _values(_col("bit", "bit(3)", precision=3))
    assert all(0 <= v < 8 for v in bits)


def test_strings_within_length_and_mean() -> None:
    v = _values(_col("varchar", "varchar(40)", max_length=40), mean=20)
    assert all(isinstance(s, str) and len(s) <= 40 for s in v)
    assert 15 <= sum(map(len, v)) / len(v) <= 25
    short = _values(_col("char", "char(4)", max_length=4), mean=20)
    assert all(len(s) <= 4 for s in short)
    blob = _values(_col("blob", max_length=65535), mean=50)
    assert all(isinstance(b, bytes) for b in blob)
    keys = _values(_col("varchar", "varchar(8)", max_length=8, unique=True), n=500, mean=2)
    assert len(set(keys)) == 500 and all(len(k) <= 8 for k in keys)


def test_dates_and_times() -> None:
    assert all(isinstance(d, dt.date) for d in _values(_col("date")))
    stamps = _values(_col("timestamp"))
    assert all(dt.datetime(2020, 1, 1) <= s < dt.datetime(2025, 1, 1) for s in stamps)
    assert len(set(_values(_col("datetime", unique=True), n=100))) == 100
    assert all(isinstance(t, dt.timedelta) for t in _values(_col("time")))
    assert all(1901 <= y <= 2155 for y in _values(_col("year")))


def test_enum_set_json_and_mariadb_types() -> None:
    assert enum_values("enum('new','paid','it''s')") == ["new", "paid", "it's"]
    states = _values(_col("enum", "enum('new','paid','it''s')"))
    assert set(states) == {"new", "paid", "it's"}
    assert set(_values(_col("set", "set('a','b')"))) <= {"a", "b"}
    assert all(v.startswith('{"n": ') for v in _values(_col("json")))
    uuids = _values(_col("uuid", unique=True), n=10)
    assert len(set(uuids)) == 10 and all(len(u) == 36 for u in uuids)
    assert all(v.count(".") == 3 for v in _values(_col("inet4")))
    assert all(v.startswith("2001:db8::") for v in _values(_col("inet6")))
    assert generator_for(_col("geometry"), 10, 1.0) is None


def test_string_mean_from_the_average_row() -> None:
    cols = [_col("int", unique=True), _col("varchar", max_length=100), _col("text")]
    # 200-byte rows, 90% of a page used: 4 fixed, 20 overhead, the rest shared by the
    # two strings
    assert string_mean(cols, 200.0, 10 * 1024 * 1024) == pytest.approx(78.0)
    # a table of a few pages: its average is mostly empty page space
    assert string_mean(cols, 5000.0, 16384) == 16.0
    assert string_mean([_col("int")], 200.0, 10**7) == 0.0


def test_server_filled_and_ungenerated_columns() -> None:
    shape = TableShape("s", "t", 10, 16384, 0)
    cols = [
        _col("int", extra="auto_increment", unique=True),
        _col("int", extra="VIRTUAL GENERATED"),
        _col("point", nullable=True),
        _col("varchar", max_length=10),
    ]
    kept, gens, why = row_generators(cols, shape, 10)
    assert why is None and [c.data_type for c in kept] == ["point", "varchar"]
    assert gens[0](random.Random(), 0) is None  # NULL where it may
    _, _, why = row_generators([_col("geometry")], shape, 10)
    assert why is not None and "geometry" in why


def test_cap_scales_all_tables_alike() -> None:
    assert Cap(max_bytes=100, max_rows=1000).factor(500, 50) == 1.0
    assert Cap(max_bytes=100, max_rows=1000).factor(500, 400) == 0.25
    assert Cap(max_bytes=10**9, max_rows=1000).factor(4000, 400) == 0.25


class _Cursor:
    def __init__(self, conn: _Conn) -> None:
        self.conn = conn
        self.rows: list[Any] = []

    def __enter__(self) -> _Cursor:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def execute(self, sql: str, args: Any = None) -> int:
        self.conn.sql.append(sql)
        return 0

    def fetchall(self) -> list[Any]:
        last = self.conn.sql[-1]
        if "CHECK_CONSTRAINTS" in last:
            return [(c,) for c in self.conn.checks]
        if last.startswith("SHOW WARNINGS"):
            return [("Warning", 4025, "CONSTRAINT `t.c` failed")]
        return self.conn.columns

    def executemany(self, sql: str, batch: list[tuple[Any, ...]]) -> int:
        self.conn.sql.append(sql)
        kept = batch[self.conn.refuse :]
        self.conn.inserted += kept
        return len(kept)


class _Conn:
    def __init__(self, columns: list[tuple[Any, ...]]) -> None:
        self.columns = columns
        self.sql: list[str] = []
        self.inserted: list[tuple[Any, ...]] = []
        self.commits = 0
        self.checks: list[str] = []
        self.refuse = 0  # rows of each batch the server refuses

    def cursor(self) -> _Cursor:
        return _Cursor(self)

    def commit(self) -> None:
        self.commits += 1


def test_fill_table_inserts_the_target_in_batches() -> None:
    conn = _Conn(
        [
            ("id", "int", "int(11)", None, 10, 0, "NO", "PRI", "auto_increment"),
            ("customer", "int", "int(11)", None, 10, 0, "YES", "MUL", ""),
            ("state", "enum", "enum('new','paid')", 4, None, None, "NO", "", ""),
            ("note", "varchar", "varchar(30)", 30, None, None, "YES", "", ""),
        ]
    )
    out = fill_table(conn, TableShape("shop", "orders", 1200, 10 * 1024 * 1024, 0), 1200)
    assert out.rows == 1200 and out.target_rows == 1200 and out.skipped is None
    assert len(conn.inserted) == 1200 and conn.commits == 3  # batches of 500
    assert all(len(r) == 3 for r in conn.inserted)  # id left to the server
    assert "INSERT IGNORE INTO `shop`.`orders` (`customer`, `state`, `note`)" in conn.sql[-1]
    again = _Conn(conn.columns)
    fill_table(again, TableShape("shop", "orders", 1200, 10 * 1024 * 1024, 0), 1200)
    assert again.inserted == conn.inserted  # seeded per table


def test_mariadb_json_columns_and_refused_rows() -> None:
    conn = _Conn([("doc", "longtext", "longtext", 2**32 - 1, None, None, "YES", "", "")])
    conn.checks = ["json_valid(`doc`)"]
    conn.refuse = 1
    out = fill_table(conn, TableShape("s", "t", 10, 16384, 0), 10)
    assert all(str(r[0]).startswith('{"n": ') for r in conn.inserted)  # JSON, not text
    assert out.rows == 9 and out.refused_because == "CONSTRAINT `t.c` failed"


def test_index_cardinality_limits_distinct_values() -> None:
    shape = TableShape("s", "t", 1000, 10 * 1024 * 1024, 0, {"city": 17, "id": 1000})
    cols = [_col("int", unique=True, name="id"), _col("varchar", max_length=40, name="city")]
    _, gens, _ = row_generators(cols, shape, 1000)
    rng = random.Random(3)
    rows = [tuple(g(rng, i) for g in gens) for i in range(1000)]
    assert len({r[1] for r in rows}) == 17  # as selective as the source's index
    assert len({r[0] for r in rows}) == 1000  # a key stays unique
