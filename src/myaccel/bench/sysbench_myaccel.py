"""The ``MYACCEL {...}`` lines our Lua hooks print (``lua/myaccel_report.lua``): one JSON
object per interval, checkpoint or summary, with exact counts and windows. A line that is
not valid JSON or lacks a field is malformed, never an error."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from myaccel.bench.records import IntervalReport, ThreadCounts
from myaccel.model import same_named

MYACCEL_PREFIX = "MYACCEL "


def finite(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) else None


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class MyaccelReport(_Lenient):
    v: int = 1
    kind: Literal["interval", "checkpoint", "summary"]
    t: float
    dt: float | None = None
    threads: int | None = None
    events: int
    reads: int
    writes: int
    other: int
    errors: int
    reconnects: int
    tps: float | None = None
    qps: float | None = None
    reads_per_s: float | None = None
    writes_per_s: float | None = None
    other_per_s: float | None = None
    err_per_s: float | None = None
    reconn_per_s: float | None = None
    lat_ms_pct: float | None = None
    pct: int | None = None
    queue_length: int | None = None
    concurrency: int | None = None
    lat_ms_min: float | None = None
    lat_ms_avg: float | None = None
    lat_ms_max: float | None = None
    lat_ms_sum: float | None = None


def parse_myaccel(payload: str) -> MyaccelReport | None:
    try:
        data = json.loads(payload)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    try:
        return MyaccelReport.model_validate(data)
    except ValidationError:
        return None


def parse_thread(payload: str) -> ThreadCounts | None:
    """A ``{"kind":"thread",...}`` line's counts, or None when ``payload`` is not one."""
    try:
        data = json.loads(payload)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("kind") != "thread":
        return None
    options = {k[4:]: v for k, v in data.items() if k.startswith("opt.") and _scalar(v)}
    calls = {k[6:]: v for k, v in data.items() if k.startswith("calls.") and _count(v)}
    tid, events = data.get("tid"), data.get("events")
    if not (_count(tid) and _count(events)):
        return None
    return ThreadCounts(tid=tid, events=events, options=options, calls=calls)


def _count(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _scalar(v: object) -> bool:
    return isinstance(v, str | bool | int | float)


def describe_threads(threads: Sequence[ThreadCounts]) -> str:
    """What the threads ran, for a run whose shape is wrong: the options they saw (each
    value with its thread count when they differ) and each statement group's calls per
    event (issue 35, defect 3)."""
    if not threads:
        return ""
    events = sum(t.events for t in threads)
    seen: dict[str, Counter[str]] = {}
    for t in threads:
        for k, v in t.options.items():
            seen.setdefault(k, Counter())[str(v)] += 1
    opts = ", ".join(
        f"{k}=" + "/".join(v if len(c) == 1 else f"{v} ({n})" for v, n in c.items())
        for k, c in seen.items()
    )
    names = sorted({k for t in threads for k in t.calls})
    per_event = ", ".join(
        f"{k.removeprefix('execute_')} {sum(t.calls.get(k, 0) for t in threads) / events:.2f}"
        for k in names
        if events
    )
    return (
        f" (sysbench's {len(threads)} thread(s): {events} events; options {opts or 'none'}; "
        f"calls per event: {per_event or 'none counted'})"
    )


def interval_report(
    required: Mapping[str, float | int | None], **optional: object
) -> IntervalReport | None:
    """An ``IntervalReport``, or None when a required figure is missing or not finite (a
    line cut short, a "nan"); the human text's interval lines are built here too."""
    if any(v is None for v in required.values()):
        return None
    return IntervalReport.model_validate({**required, **optional})


# The IntervalReport fields a MYACCEL line gives under the same name, as they are.
_COUNTS = (
    "events",
    "reads",
    "writes",
    "other",
    "errors",
    "reconnects",
    "queue_length",
    "concurrency",
)


def interval_from_myaccel(r: MyaccelReport) -> IntervalReport | None:
    if not math.isfinite(r.t):
        return None
    rates = {
        "tps": r.tps,
        "qps": r.qps,
        "reads_per_s": r.reads_per_s,
        "writes_per_s": r.writes_per_s,
        "other_per_s": r.other_per_s,
        "latency_ms_pct": r.lat_ms_pct,
    }
    return interval_report(
        {"t_s": r.t, "threads": r.threads, **{k: finite(v) for k, v in rates.items()}},
        percentile=r.pct,
        err_per_s=finite(r.err_per_s) or 0.0,
        reconn_per_s=finite(r.reconn_per_s) or 0.0,
        dt_s=finite(r.dt),
        **same_named(r, _COUNTS),
        source="myaccel",
    )
