"""``capture --redact``: a workload to share, without the literals of its statements.

Every example and traced statement becomes its class's normalized text (literals as
``?``); schema, table and column names stay (they are the workload's shape). A redacted
workload cannot be replayed: ``bench --workload-file`` refuses it."""

from __future__ import annotations

from myaccel.bench.workload import ConnectionTrace, Workload
from myaccel.capture.normalize import redact


def redact_workload(w: Workload) -> Workload:
    classes = [c.model_copy(update={"examples": []}) for c in w.classes]
    traces = [
        ConnectionTrace(
            id=t.id,
            user=None,
            statements=[s.model_copy(update={"sql": redact(s.sql)}) for s in t.statements],
        )
        for t in w.connections
    ]
    return w.model_copy(
        update={
            "classes": classes,
            "connections": traces,
            "redacted": True,
            "journal": None,
            "server": {**w.server, "host": None},
            "notes": [*w.notes, "redacted: literals removed (replays need an unredacted capture)"],
        }
    )
