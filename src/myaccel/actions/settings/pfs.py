"""``pfs-consumer:NAME``: a performance_schema consumer (a row of
``performance_schema.setup_consumers``), switched with ``UPDATE`` on a running server.
``myaccel capture`` turns the statement-history consumers on for its window; the journal
holds the old ``ENABLED`` value for rollback. The change lasts until the server restarts."""

from __future__ import annotations

import contextlib
import re
from typing import Any

import pymysql

from myaccel.actions.errors import ApplyError
from myaccel.actions.journal import JournalEntry, OldState
from myaccel.actions.settings.base import Change, Connect, Setting
from myaccel.errors import UsageError

_NAME_RE = re.compile(r"^[a-z_]+$")


def check_consumer_name(name: str) -> str:
    if not _NAME_RE.match(name.lower()):
        raise UsageError(
            f"'{name}' is not a performance_schema consumer name",
            hint="write it like events_statements_history_long",
        )
    return name.lower()


def _yes_no(value: str) -> str:
    v = value.strip().upper()
    if v in ("YES", "ON", "1", "TRUE"):
        return "YES"
    if v in ("NO", "OFF", "0", "FALSE"):
        return "NO"
    raise UsageError(f"a consumer is YES or NO, not '{value}'", hint="use YES or NO")


class ConsumerSetting(Setting):
    kind = "pfs-consumer"
    spec_fields = ("name",)

    def __init__(self, name: str, *, connect: Connect) -> None:
        self.name = check_consumer_name(name)
        self.connect = connect
        self.target = f"pfs-consumer:{self.name}"

    @property
    def needs_root(self) -> bool:
        return False  # needs UPDATE on performance_schema on the server instead

    def _run(self, sql: str, *args: str) -> list[tuple[Any, ...]]:
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(sql, args)
                return list(cur.fetchall())
        except pymysql.err.MySQLError as exc:
            raise ApplyError(
                f"{self.target}: {exc.args[1] if len(exc.args) > 1 else exc}",
                hint="performance_schema must be ON and the user allowed to UPDATE "
                "performance_schema.setup_consumers",
            ) from exc
        finally:
            with contextlib.suppress(pymysql.err.Error):
                conn.close()

    def read(self) -> str | None:
        rows = self._run(
            "SELECT ENABLED FROM performance_schema.setup_consumers WHERE NAME = %s", self.name
        )
        return str(rows[0][0]) if rows else None

    def matches(self, actual: str | None, desired: str) -> bool:
        return actual is not None and _yes_no(actual) == _yes_no(desired)

    def plan(self, desired: str) -> Change | None:
        current = self.read()
        if current is None:
            raise UsageError(
                f"the server has no performance_schema consumer {self.name}",
                hint="is performance_schema ON? (it needs a restart to switch on)",
            )
        if self.matches(current, desired):
            return None
        return self._change(
            current, _yes_no(desired), ["UPDATE performance_schema.setup_consumers"]
        )

    def capture(self) -> OldState:
        return OldState(value=self.read())

    def apply(self, desired: str) -> None:
        self._run(
            "UPDATE performance_schema.setup_consumers SET ENABLED = %s WHERE NAME = %s",
            _yes_no(desired),
            self.name,
        )

    def revert(self, entry: JournalEntry) -> None:
        old = entry.old.value
        if old is not None and not self.matches(self.read(), old):
            self.apply(old)
