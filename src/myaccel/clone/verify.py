"""The clone against its source once it runs: every variable whose value differs, with
the reason (a rewrite of the record, a key of the sandbox, a path of the clone's own, or
what follows from those); a difference without one is marked unexplained."""

from __future__ import annotations

from collections.abc import Mapping

from myaccel.clone.defaults import same_value
from myaccel.clone.record import Rewrite
from myaccel.clone.rewrite import Target, explain_difference
from myaccel.clone.source import SourceServer
from myaccel.server.connection import ConnectParams, connect, query_rows
from myaccel.server.optionfile import normalize_key

UNEXPLAINED = "unexplained"


def global_variables(params: ConnectParams) -> dict[str, str]:
    conn = connect(params)
    try:
        rows = query_rows(conn, "SHOW GLOBAL VARIABLES")
    finally:
        conn.close()
    return {normalize_key(str(k)): "" if v is None else str(v) for k, v in rows}


def variable_diff(
    src: SourceServer,
    source_now: Mapping[str, str],
    clone: Mapping[str, str],
    rewritten: list[Rewrite],
    target: Target,
) -> list[Rewrite]:
    reasons = {r.variable: r.reason for r in rewritten}
    out = []
    for name in sorted(set(source_now) | set(clone)):
        a, b = source_now.get(name), clone.get(name)
        if a is not None and b is not None and (a == b or same_value(a, b)):
            continue
        why = explain_difference(name, a, b, reasons, src, target)
        out.append(Rewrite(variable=name, source_value=a, clone_value=b, reason=why or UNEXPLAINED))
    return out
