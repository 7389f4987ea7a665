"""A schema-only clone, for data too large for the disk: the source's databases, tables
and views (``SHOW CREATE``, read-only) replayed into the clone's fresh datadir, and the
shape of the data (rows and bytes per table from ``information_schema``), which
``generate`` fills the clone's tables to."""

from __future__ import annotations

import contextlib
from typing import Any

import pymysql

from myaccel.clone.generate import TableShape
from myaccel.clone.source import SYSTEM_SCHEMAS
from myaccel.server.connection import ConnectParams, connect, query_rows

_EXCLUDED = ", ".join(f"'{s}'" for s in SYSTEM_SCHEMAS)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def table_shapes(params: ConnectParams) -> list[TableShape]:
    """Rows (InnoDB's estimate) and bytes of the user's base tables, and the distinct
    values of their indexed columns (an index's cardinality on its first column)."""
    conn = connect(params)
    try:
        # MySQL caches these figures for a day (information_schema_stats_expiry): read
        # them fresh, in this session only
        with contextlib.suppress(pymysql.err.MySQLError):
            query_rows(conn, "SET SESSION information_schema_stats_expiry = 0")
        rows = query_rows(
            conn,
            "SELECT TABLE_SCHEMA, TABLE_NAME, COALESCE(TABLE_ROWS, 0), "
            "COALESCE(DATA_LENGTH, 0), COALESCE(INDEX_LENGTH, 0) FROM information_schema.TABLES "
            f"WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN ({_EXCLUDED}) "
            "ORDER BY TABLE_SCHEMA, TABLE_NAME",
        )
        distinct: dict[tuple[str, str], dict[str, int]] = {}
        for db, table, column, n in query_rows(
            conn,
            "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, MAX(CARDINALITY) FROM "
            f"information_schema.STATISTICS WHERE SEQ_IN_INDEX = 1 AND TABLE_SCHEMA NOT IN "
            f"({_EXCLUDED}) AND CARDINALITY IS NOT NULL GROUP BY 1, 2, 3",
        ):
            distinct.setdefault((str(db), str(table)), {})[str(column)] = int(n)
    finally:
        conn.close()
    return [
        TableShape(str(s), str(t), int(r), int(d), int(i), distinct.get((str(s), str(t)), {}))
        for s, t, r, d, i in rows
    ]


def _statements(conn: pymysql.connections.Connection[Any]) -> list[str]:
    out: list[str] = []
    schemas = [
        str(r[0])
        for r in query_rows(
            conn,
            "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME NOT IN "
            f"({_EXCLUDED}) ORDER BY SCHEMA_NAME",
        )
    ]
    views: list[str] = []
    for db in schemas:
        out.append(str(query_rows(conn, f"SHOW CREATE DATABASE {_quoted(db)}")[0][1]))
        out.append(f"USE {_quoted(db)}")
        for name, kind in query_rows(conn, f"SHOW FULL TABLES FROM {_quoted(db)}"):
            what = "VIEW" if str(kind) == "VIEW" else "TABLE"
            row = query_rows(conn, f"SHOW CREATE {what} {_quoted(db)}.{_quoted(str(name))}")[0]
            if what == "VIEW":
                views += [f"USE {_quoted(db)}", str(row[1])]
            else:
                out.append(str(row[1]))
    return out + views


def replay_schema(source: ConnectParams, clone: ConnectParams) -> tuple[int, list[str]]:
    """Create the source's schemas in the clone; (statements run, those that failed)."""
    conn = connect(source)
    try:
        statements = _statements(conn)
    finally:
        conn.close()
    failed: list[str] = []
    target = connect(clone)
    try:
        with target.cursor() as cur:
            cur.execute("SET SESSION foreign_key_checks = 0")
            for sql in statements:
                try:
                    cur.execute(sql.replace("CREATE DATABASE", "CREATE DATABASE IF NOT EXISTS", 1))
                except pymysql.err.MySQLError as exc:
                    failed.append(f"{sql.splitlines()[0][:80]}: {exc.args[-1]}")
    finally:
        target.close()
    return len(statements), failed
