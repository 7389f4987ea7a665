"""Whether a server's sysbench schema holds a dataset other than the one a run needs, read
with ``SELECT`` only (``information_schema`` and myaccel's marker table), so that a
command refuses *before* its side effects (a clone of the server, a sandbox restarted, a
results directory) instead of when ``bench.dataset.ensure_dataset`` finds it. The same
conditions as ``bench.runner.verify_dataset``, which stays the check of record; this one
creates nothing (that one makes the schema when it is missing)."""

from __future__ import annotations

from dataclasses import dataclass

import pymysql

from myaccel.bench.runner import DB, MARKER_TABLE, read_dataset_tables
from myaccel.server.connection import ConnectParams, connect, query_value
from myaccel.server.privileges import may_select


@dataclass(frozen=True)
class DatasetConflict:
    """The schema holds another dataset than ``want`` (``have``), or a changed one."""

    message: str
    have: str
    ours: bool = True  # prepared by myaccel (its marker table), else someone's tables
    changed: bool = False  # the right size, rows changed since it was prepared


def dataset_conflict(
    params: ConnectParams, tables: int, table_size: int, db: str = DB
) -> DatasetConflict | None:
    """None when schema ``db`` is missing, empty, or holds exactly ``tables`` x
    ``table_size`` rows prepared by myaccel; else what it holds."""
    conn = connect(params)
    try:
        numbered, marker = read_dataset_tables(conn, db)
        if not numbered and not marker:
            return None
        size = marker.get("table_size", "")
        have_size = int(size) if size.isdigit() else None
        want = f"{tables} x {table_size:,} rows"
        have = (
            f"{marker.get('tables', len(numbered))} x {have_size:,} rows"
            if have_size is not None
            else f"{len(numbered)} sbtest tables not prepared by myaccel"
        )
        marked_tables = marker.get("tables", "")
        if (
            have_size != table_size
            or not marked_tables.isdigit()
            or int(marked_tables) != tables
            or len(numbered) != tables
        ):
            return DatasetConflict(
                f"schema '{db}' holds a dataset of {have}; this run needs {want}",
                have,
                ours=have_size is not None,
            )
        for t in sorted({1, tables}):
            n = query_value(
                conn, f"SELECT COUNT(*) FROM `{db}`.`sbtest{t}` WHERE id <= {table_size}"
            )
            if int(n or 0) != table_size:
                return DatasetConflict(
                    f"table {db}.sbtest{t} holds {n} of the {table_size:,} rows it was "
                    "prepared with (changed since)",
                    have,
                    changed=True,
                )
        return None
    except pymysql.err.MySQLError:
        return None  # unreadable here: the check of record (ensure_dataset) decides later
    finally:
        conn.close()


def can_read_schema(params: ConnectParams, db: str = DB) -> bool:
    """Whether the account may read what ``dataset_conflict`` reads in schema ``db``: its
    tables and their rows. An account without SELECT there passes that check unseen (it
    reads nothing and finds no conflict), and the dataset is found only in the clone
    (found with an account holding only the copy's and SET GLOBAL's privileges: the clone
    was made, then refused)."""
    conn = connect(params)
    try:
        return may_select(conn, f"`{db}`.`{MARKER_TABLE}`")
    except pymysql.err.MySQLError:
        return True  # unreadable for another reason: the check of record decides later
    finally:
        conn.close()
