"""Capture from the general log (MariaDB without performance_schema, or any server where
it is off): the log goes to a private file for the window (``general_log_file``,
``log_output`` with FILE, ``general_log`` ON, each journaled and put back after), then the
file is parsed. The log has no latency and a timestamp per second only; it needs the
server on this host (the file is read here); ``logdir`` makes the file where the server's
user writes it."""

from __future__ import annotations

import contextlib
import datetime as dt
import re
import shutil
from collections.abc import Iterable, Iterator

from myaccel.capture.assemble import Event
from myaccel.capture.logdir import LogFile
from myaccel.capture.source import Conn, Ours, SourceName

# MariaDB: "261125  4:49:09\t     7 Query\tSELECT ..." or "\t\t     7 Query\tSELECT ...";
# MySQL (every entry stamped, ISO 8601 to the microsecond, log_timestamps UTC or SYSTEM):
# "2026-11-28T04:07:51.412345Z\t   10 Query\tSELECT ..."
_ENTRY = re.compile(
    r"^(?:(\d{6}\s+\d{1,2}:\d{2}:\d{2})\t"
    r"|(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?)\s"
    r"|\t\t)\s*(\d+) ([A-Za-z][A-Za-z _]*?)\t(.*)$"
)
_ISO_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+")
_CONNECT = re.compile(r"^(\S+?)@\S* on (\S*) ")
_USE = re.compile(r"^\s*use\s+`?([^`;\s]+)`?\s*;?\s*$", re.IGNORECASE)
STATEMENT_COMMANDS = ("Query", "Execute")


def log_output_with_file(current: str) -> str:
    """``log_output`` that also writes the general log to its file (TABLE kept)."""
    parts = [p.strip().upper() for p in current.split(",") if p.strip()]
    parts = [p for p in parts if p != "NONE"]
    return ",".join(parts) if "FILE" in parts else ",".join([*parts, "FILE"])


def _stamp(text: str) -> float:
    return dt.datetime.strptime(" ".join(text.split()), "%y%m%d %H:%M:%S").timestamp()


def _iso_stamp(text: str) -> float:
    return dt.datetime.fromisoformat(text).timestamp()


def read_entries(lines: Iterable[str]) -> Iterator[tuple[float | None, int, str, str]]:
    """(timestamp or None, connection id, command, argument) per entry; a statement that
    spans lines is joined back."""
    cur: list[object] | None = None
    for raw in lines:
        line = raw.rstrip("\n")
        m = _ENTRY.match(line)
        if m is None:
            if cur is not None:
                cur[3] = f"{cur[3]}\n{line}"
            continue
        if cur is not None:
            yield cur[0], cur[1], cur[2], cur[3]  # type: ignore[misc]
        stamp = _stamp(m.group(1)) if m.group(1) else _iso_stamp(m.group(2)) if m.group(2) else None
        cur = [stamp, int(m.group(3)), m.group(4), m.group(5)]
    if cur is not None:
        yield cur[0], cur[1], cur[2], cur[3]  # type: ignore[misc]


def parse_general_log(
    lines: Iterable[str], exclude: set[int], schemas: dict[int, str] | None = None
) -> list[Event]:
    """The statements of a general log, per connection in order, with the schema each
    ran in (``schemas`` at the start, then Connect, Init DB and USE) and its second since
    the first entry."""
    schema: dict[int, str] = dict(schemas or {})
    users: dict[int, str] = {}
    events: list[Event] = []
    t0: float | None = None
    now = 0.0
    for stamp, cid, command, arg in read_entries(lines):
        if stamp is not None:
            t0 = stamp if t0 is None else t0
            now = stamp - t0
        if command == "Connect":
            m = _CONNECT.match(arg)
            if m:
                users[cid] = m.group(1)
                schema[cid] = m.group(2)
        elif command == "Init DB":
            schema[cid] = arg.strip()
        elif command in STATEMENT_COMMANDS and cid not in exclude and arg.strip():
            events.append(
                Event(
                    conn_id=cid, t_s=now, sql=arg, schema=schema.get(cid, ""), user=users.get(cid)
                )
            )
            m = _USE.match(arg)
            if m:
                schema[cid] = m.group(1)
    events.sort(key=lambda e: e.conn_id)  # stable: each connection keeps its order
    return events


class GeneralLogSource:
    name: SourceName = "general_log"

    def __init__(self, ours: Ours, log_output: str, log: LogFile) -> None:
        """``log``: the empty log file made for the server's user (``logdir.prepare``),
        in a directory of its own that ``cleanup`` removes; the server is told its
        ``path``, myaccel reads it at ``local`` (the same unless the server has a /tmp of
        its own)."""
        self.ours = ours
        self.notes: list[str] = [
            "the general log has no latency; times have a 1 s resolution (a timed replay "
            "spreads a connection's statements of one second evenly within it)"
        ]
        self.dir = log.local.parent
        self.path = log.path
        self.local = log.local
        self.log_output = log_output_with_file(log_output)
        self.schemas: dict[int, str] = {}

    def switches(self) -> list[tuple[str, str]]:
        return [
            ("mysql:general_log_file", str(self.path)),
            ("mysql:log_output", self.log_output),
            ("mysql:general_log", "ON"),
        ]

    def begin(self, conn: Conn) -> None:
        """The default schema of the connections open now (the log shows it only for
        connections that open later)."""
        rows = self.ours.query(conn, "SELECT ID, DB FROM information_schema.PROCESSLIST")
        self.schemas = {int(r[0]): str(r[1]) for r in rows if r[1] is not None}

    def poll(self, conn: Conn) -> None:
        return None

    def finish(self, conn: Conn) -> list[Event]:
        if not self.local.is_file():
            self.notes.append(f"the server wrote no general log at {self.path}")
            return []
        # the log stays on while it is read: read what the window wrote, no more
        with self.local.open("rb") as fh:
            data = fh.read(self.local.stat().st_size)
        lines = data.decode("utf-8", errors="replace").splitlines(keepends=True)
        events = parse_general_log(lines, self.ours.connection_ids, self.schemas)
        if any(_ISO_LINE.match(line) for line in lines[:20]):  # MySQL: to the microsecond
            self.notes = ["the general log has no latency (each statement's start is stamped)"]
        return events

    def cleanup(self) -> None:
        with contextlib.suppress(OSError):
            shutil.rmtree(self.dir)
