"""What the capture's account needs, per source and flavor (docs/workloads.md lists the
same), checked before anything is switched: a missing privilege is refused as the clone
preflight refuses one (``MissingPrivileges``, exit 3), naming each and the GRANT that
gives it.

- performance_schema: SELECT and UPDATE on ``setup_consumers`` (read and switch the
  consumers), SELECT on ``events_statements_history_long`` (the statements) and on
  ``threads`` (the capture's own thread, left out of the workload);
- the general log: SET GLOBAL of ``general_log``, ``general_log_file`` and ``log_output``
  (MariaDB: SUPER; MySQL: SYSTEM_VARIABLES_ADMIN), and PROCESS (the default schema of the
  connections already open, from ``information_schema.PROCESSLIST``, which shows an
  account without it only its own).

Not checked here: SELECT on the application's schemas, which only gives their DDL to
the workload file (left out with a note without it)."""

from __future__ import annotations

from typing import Any

import pymysql

from myaccel.capture.source import SourceName
from myaccel.clone.errors import MissingPrivileges
from myaccel.server.privileges import (
    SET_GLOBAL,
    AccountPrivileges,
    Need,
    grant_statements,
    read_privileges,
)

PFS = "performance_schema"


def needed(source: SourceName, flavor: str | None) -> list[Need]:
    if source == "performance_schema":
        return [
            Need("SELECT", PFS, "setup_consumers"),
            Need("UPDATE", PFS, "setup_consumers"),
            Need("SELECT", PFS, "events_statements_history_long"),
            Need("SELECT", PFS, "threads"),
        ]
    return [Need(SET_GLOBAL.get(flavor or "", "SUPER")), Need("PROCESS")]


def refusal(
    acc: AccountPrivileges, source: SourceName, flavor: str | None
) -> MissingPrivileges | None:
    """The error for what the account lacks for this source (None: nothing)."""
    missing = acc.missing(needed(source, flavor))
    if not missing:
        return None
    what = "performance schema" if source == "performance_schema" else "the general log"
    grants = "; ".join(grant_statements(missing, acc.user))
    return MissingPrivileges(
        f"the account {acc.user} lacks {', '.join(n.describe() for n in missing)} for a "
        f"capture from {what}",
        hint=f"{grants} (as an administrator; docs/workloads.md, Capture, lists what a "
        "capture needs)",
    )


def check(
    conn: pymysql.connections.Connection[Any], source: SourceName, flavor: str | None
) -> None:
    err = refusal(read_privileges(conn), source, flavor)
    if err is not None:
        raise err
