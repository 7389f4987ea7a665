"""Capture from performance_schema (MySQL, and MariaDB where it is on): the statement
events of ``events_statements_history_long``, read every sample interval while the window
lasts (the table is a ring buffer: 10,000 statements by default), with their latency,
rows and default schema."""

from __future__ import annotations

from typing import Any

from myaccel.capture.assemble import Event
from myaccel.capture.source import Conn, Ours, SourceName

HISTORY = "performance_schema.events_statements_history_long"
# Consumers the history needs, in the order they are switched on (global first): the
# history tables are filled only from events_statements_current, which MariaDB ships off
# (MySQL on); without it a MariaDB capture recorded nothing.
CONSUMERS = (
    "global_instrumentation",
    "thread_instrumentation",
    "events_statements_current",
    "events_statements_history_long",
)
# Events that end just before a poll may be written just after it: read back this far.
MARGIN_PS = 50 * 10**9  # 50 ms in picoseconds
_COLUMNS = (
    "THREAD_ID, EVENT_ID, TIMER_START, TIMER_END, TIMER_WAIT, SQL_TEXT, CURRENT_SCHEMA, "
    "ROWS_SENT, ROWS_AFFECTED, ROWS_EXAMINED"
)


class PerformanceSchemaSource:
    name: SourceName = "performance_schema"

    def __init__(self, ours: Ours, history_size: int) -> None:
        self.ours = ours
        self.history_size = history_size
        self.notes: list[str] = []
        self.watermark = 0
        self.rows: dict[tuple[int, int], tuple[Any, ...]] = {}
        self.full_polls = 0

    def switches(self) -> list[tuple[str, str]]:
        return [(f"pfs-consumer:{c}", "YES") for c in CONSUMERS]

    def begin(self, conn: Conn) -> None:
        rows = self.ours.query(conn, f"SELECT COALESCE(MAX(TIMER_END), 0) FROM {HISTORY}")
        self.watermark = int(rows[0][0] or 0)

    def poll(self, conn: Conn) -> None:
        since = max(0, self.watermark - MARGIN_PS)
        rows = self.ours.query(
            conn,
            f"SELECT {_COLUMNS} FROM {HISTORY} WHERE TIMER_END > %s AND SQL_TEXT IS NOT NULL "
            "AND (NESTING_EVENT_TYPE IS NULL OR NESTING_EVENT_TYPE = 'TRANSACTION')",
            since,
        )
        if self.history_size and len(rows) >= 0.9 * self.history_size:
            self.full_polls += 1
        for r in rows:
            key = (int(r[0]), int(r[1]))
            if int(r[0]) in self.ours.thread_ids or key in self.rows:
                continue
            self.rows[key] = r
            self.watermark = max(self.watermark, int(r[3] or 0))

    def finish(self, conn: Conn) -> list[Event]:
        self.poll(conn)
        if self.full_polls:
            self.notes.append(
                f"{self.full_polls} poll(s) found the statement history nearly full: some "
                "statements may be missing (raise performance_schema_events_statements_"
                "history_long_size)"
            )
        rows = [r for r in self.rows.values() if int(r[0]) not in self.ours.thread_ids]
        if not rows:
            return []
        t0 = min(int(r[2] or 0) for r in rows)
        rows.sort(key=lambda r: (int(r[0]), int(r[1])))
        return [
            Event(
                conn_id=int(r[0]),
                t_s=(int(r[2] or 0) - t0) / 1e12,
                sql=_text(r[5]),
                schema=_text(r[6]) if r[6] is not None else "",
                latency_us=int(r[4]) / 1e6 if r[4] is not None else None,
                rows_sent=int(r[7]),
                rows_affected=int(r[8]),
                rows_examined=int(r[9]),
            )
            for r in rows
        ]

    def cleanup(self) -> None:
        return None


def _text(v: Any) -> str:
    return v.decode(errors="replace") if isinstance(v, bytes) else str(v)
