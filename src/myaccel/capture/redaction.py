"""``capture --redact``: a workload to share, without the literals of its statements.

Every literal becomes a **typed placeholder** (``bench.placeholders``: ``{int:4}``,
``{str:12}``, ``{date}``...): the examples and traced statements keep their text with the
values replaced, and a replay fills the placeholders with new values of the same shape
(``bench --workload-file`` replays a redacted capture). Comments are dropped; schema,
table and column names stay (they are the workload's shape)."""

from __future__ import annotations

from myaccel.bench.placeholders import redact_typed
from myaccel.bench.workload import ConnectionTrace, Workload

MAX_TEMPLATES = 50  # distinct redacted examples kept per class


def _templates(examples: list[str]) -> list[str]:
    out: list[str] = []
    for e in examples:
        t = redact_typed(e)
        if t not in out:
            out.append(t)
    return out[:MAX_TEMPLATES]


def redact_workload(w: Workload) -> Workload:
    classes = [c.model_copy(update={"examples": _templates(c.examples)}) for c in w.classes]
    traces = [
        ConnectionTrace(
            id=t.id,
            user=None,
            statements=[s.model_copy(update={"sql": redact_typed(s.sql)}) for s in t.statements],
        )
        for t in w.connections
    ]
    return w.model_copy(
        update={
            "classes": classes,
            "connections": traces,
            "redacted": True,
            "placeholders": True,
            "journal": None,
            "server": {**w.server, "host": None},
            "notes": [
                *w.notes,
                "redacted: literals replaced by typed placeholders (a replay fills them "
                "with values of the same shape)",
            ],
        }
    )
