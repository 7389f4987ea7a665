"""What a capture source is (performance_schema, the general log), and the connections
the capture itself opens, whose statements are left out of the workload."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

import pymysql

from myaccel.capture.assemble import Event
from myaccel.server.connection import ConnectParams, connect

Conn: TypeAlias = "pymysql.connections.Connection[Any]"
SourceName = Literal["performance_schema", "general_log"]


class CaptureSource(Protocol):
    name: SourceName
    notes: list[str]

    def switches(self) -> list[tuple[str, str]]:
        """Setting targets (``mysql:``, ``pfs-consumer:``) and the values the capture
        needs; capture journals them before the change and reverts them after."""

    def begin(self, conn: Conn) -> None:
        """The window starts (the switches are on)."""

    def poll(self, conn: Conn) -> None:
        """Called every sample interval during the window."""

    def finish(self, conn: Conn) -> list[Event]:
        """The window ends: the statements of other connections than ours, in order."""

    def cleanup(self) -> None:
        """After the switches are back: remove what the source left (files)."""


@dataclass
class Ours:
    """The capture's own connections (by connection id and performance_schema thread id)
    and the statements it sent (subtracted from the server's ``Questions``)."""

    target: ConnectParams
    connection_ids: set[int] = field(default_factory=set)
    thread_ids: set[int] = field(default_factory=set)
    statements: int = 0

    def query(self, conn: Conn, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        self.statements += 1
        with conn.cursor() as cur:
            cur.execute(sql, args or None)
            return list(cur.fetchall())

    def track(self, conn: Conn) -> Conn:
        self.connection_ids.add(int(self.query(conn, "SELECT CONNECTION_ID()")[0][0]))
        with contextlib.suppress(pymysql.err.MySQLError):
            rows = self.query(
                conn,
                "SELECT THREAD_ID FROM performance_schema.threads "
                "WHERE PROCESSLIST_ID = CONNECTION_ID()",
            )
            self.thread_ids.update(int(r[0]) for r in rows)
        return conn

    def connect(self) -> Conn:
        """A new connection of ours (the settings' connect factory)."""
        return self.track(connect(self.target))
