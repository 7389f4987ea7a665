"""The ``perf stat -x SEP`` output parser: counter lines, metric continuations, comments."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from pydantic import Field

from myaccel.model import Frozen
from myaccel.profile.perfstat.names import canonical_event

NOT_SUPPORTED = "not supported"
NOT_COUNTED = "not counted"


# ---------------------------------------------------------------- parsed output


class PerfMetricColumn(Frozen):
    value: float
    unit: str  # perf's metric unit text, e.g. "insn per cycle", "%  tma_retiring"


class PerfCount(Frozen):
    """One counter line of ``perf stat -x`` output."""

    event: str  # as printed: "cycles", "cpu_core/cycles/", "task-clock:u", "r2014"
    name: str  # canonical: lowercase, PMU wrapper and modifiers removed, raw codes named
    value: float | None  # as printed (perf's scaled estimate when multiplexed)
    unit: str = ""
    reason: str | None = None  # "not supported" / "not counted" when value is None
    run_time_ns: int | None = None
    enabled_pct: float | None = None  # percent of the window the counter ran
    variance_pct: float | None = None  # with -r
    metrics: list[PerfMetricColumn] = Field(default_factory=list)
    # The counter ran for part of the window only (enabled_pct < 100): perf scaled the
    # printed value from the time it ran; the value is an estimate.
    multiplexed: bool = False
    timestamp_s: float | None = None  # with -I
    aggregate: str | None = None  # CPU/core/socket id or comm-pid
    aggregate_cpus: int | None = None

    @property
    def counted(self) -> bool:
        return self.value is not None


class PerfStatResult(Frozen):
    counts: list[PerfCount] = Field(default_factory=list)
    metrics: list[PerfMetricColumn] = Field(default_factory=list)  # lines with no counter
    comments: list[str] = Field(default_factory=list)
    unparsed: list[str] = Field(default_factory=list)  # e.g. the workload's own stderr

    def totals(self) -> dict[str, float | None]:
        """Value per canonical event name, summed over aggregation rows and intervals.

        Per-CPU rows add up to the system total and interval rows are deltas, so a sum is
        right for both. An event with no counted row maps to None.
        """
        out: dict[str, float | None] = {}
        for c in self.counts:
            if c.value is None:
                out.setdefault(c.name, None)
                continue
            prev = out.get(c.name)
            out[c.name] = c.value if prev is None else prev + c.value
        return out

    def reasons(self) -> dict[str, str]:
        """Why an event has no value (``not supported`` / ``not counted``)."""
        totals = self.totals()
        return {
            c.name: c.reason or "no value"
            for c in self.counts
            if c.value is None and totals.get(c.name) is None
        }

    def multiplexed(self) -> dict[str, float]:
        """Events that were scaled, with the lowest percentage of time they ran."""
        out: dict[str, float] = {}
        for c in self.counts:
            if c.multiplexed and c.enabled_pct is not None:
                out[c.name] = min(out.get(c.name, 100.0), c.enabled_pct)
        return out

    def get(self, name: str) -> PerfCount | None:
        key = canonical_event(name)
        return next((c for c in self.counts if c.name == key), None)


# ---------------------------------------------------------------- parsing


_FLOAT = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_LEADING_FLOAT = re.compile(r"^\s*([+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?)")


def _is_float(s: str) -> bool:
    return bool(_FLOAT.match(s.strip()))


def _value_token(s: str) -> tuple[bool, float | None, str | None]:
    t = s.strip()
    if t.startswith("<") and t.endswith(">"):
        return True, None, t[1:-1].strip()
    if _is_float(t):
        return True, float(t), None
    return False, None, None


def _unit_token(s: str) -> bool:
    t = s.strip()
    return not _is_float(t) and not t.startswith("<")


def _name_token(s: str) -> bool:
    t = s.strip()
    return bool(t) and not _is_float(t) and not t.startswith("<") and not t.endswith("%")


def _merge_pmu_name(fields: list[str], start: int) -> tuple[str, int]:
    """Join ``cpu/event=0x3c`` + ``umask=0/`` back into one name; returns (name, next index)."""
    name = fields[start]
    j = start + 1
    if re.match(r"^[\w.\-]+/", name.strip()) and name.count("/") % 2 == 1:
        while j < len(fields) and name.count("/") % 2 == 1:
            name = name + "," + fields[j]
            j += 1
        if name.count("/") % 2 == 1:  # never closed: give up, keep the first field
            return fields[start], start + 1
    return name, j


def _parse_prefix(prefix: Sequence[str]) -> tuple[float | None, str | None, int | None]:
    ts: float | None = None
    agg: str | None = None
    ncpu: int | None = None
    for f in (p.strip() for p in prefix):
        if not f:
            continue
        if ts is None and agg is None and _is_float(f) and "." in f:
            ts = float(f)
        elif agg is None and not _is_float(f):
            agg = f
        elif agg is not None and ncpu is None and f.isdigit():
            ncpu = int(f)
    return ts, agg, ncpu


def _counter_line(fields: list[str]) -> PerfCount | None:
    # The value can be preceded by at most: time stamp, aggregation id, CPU count.
    for i in range(0, min(4, len(fields) - 2)):
        ok, value, reason = _value_token(fields[i])
        if not ok or not _unit_token(fields[i + 1]) or not _name_token(fields[i + 2]):
            continue
        event, j = _merge_pmu_name(fields, i + 2)
        rest = [f.strip() for f in fields[j:]]
        variance: float | None = None
        if rest and rest[0].endswith("%") and _is_float(rest[0][:-1]):
            variance = float(rest[0][:-1])
            rest = rest[1:]
        run_ns = int(float(rest[0])) if len(rest) > 0 and _is_float(rest[0]) else None
        pct = float(rest[1]) if len(rest) > 1 and _is_float(rest[1]) else None
        metrics: list[PerfMetricColumn] = []
        if len(rest) > 2:
            mv = _LEADING_FLOAT.match(rest[2])
            munit = rest[3] if len(rest) > 3 else ""
            if mv and munit:
                metrics.append(PerfMetricColumn(value=float(mv.group(1)), unit=munit))
        ts, agg, ncpu = _parse_prefix(fields[:i])
        return PerfCount(
            event=event.strip(),
            name=canonical_event(event),
            value=value,
            unit=fields[i + 1].strip(),
            reason=reason if value is None else None,
            run_time_ns=run_ns,
            enabled_pct=pct,
            variance_pct=variance,
            metrics=metrics,
            multiplexed=value is not None and pct is not None and pct < 100.0,
            timestamp_s=ts,
            aggregate=agg,
            aggregate_cpus=ncpu,
        )
    return None


def _metric_line(fields: list[str]) -> PerfMetricColumn | None:
    filled = [(k, f.strip()) for k, f in enumerate(fields) if f.strip()]
    if len(filled) < 2 or len(fields) < 4:
        return None
    (k1, v), (k2, unit) = filled[-2], filled[-1]
    mv = _LEADING_FLOAT.match(v)
    if k2 != k1 + 1 or mv is None or _is_float(unit):
        return None
    # Everything before the metric must be prefix columns followed by empty fields.
    if any(fields[k].strip() for k in range(max(0, k1 - 3), k1)):
        return None
    return PerfMetricColumn(value=float(mv.group(1)), unit=unit)


def parse_perf_stat_csv(text: str, *, sep: str = ",") -> PerfStatResult:
    """Parse ``perf stat -x SEP`` output (from ``-o FILE`` or stderr) into counts.

    Comment lines (``# started on ...``) are kept apart; lines that are neither counters
    nor metric continuations (the workload's own stderr, warnings) land in ``unparsed``.
    """
    counts: list[PerfCount] = []
    loose: list[PerfMetricColumn] = []
    comments: list[str] = []
    unparsed: list[str] = []
    for raw in text.splitlines():
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        if line.lstrip().startswith("#"):
            comments.append(line.strip())
            continue
        fields = line.split(sep)
        count = _counter_line(fields) if len(fields) >= 3 else None
        if count is not None:
            counts.append(count)
            continue
        metric = _metric_line(fields)
        if metric is not None:
            if counts:
                last = counts[-1]
                counts[-1] = last.model_copy(update={"metrics": [*last.metrics, metric]})
            else:
                loose.append(metric)
            continue
        unparsed.append(line)
    return PerfStatResult(counts=counts, metrics=loose, comments=comments, unparsed=unparsed)


def counts_mapping(result: PerfStatResult | Mapping[str, float | None]) -> dict[str, float | None]:
    """Canonical name -> value from a parsed run or a plain mapping (names canonicalized)."""
    if isinstance(result, PerfStatResult):
        return result.totals()
    return {canonical_event(k): v for k, v in result.items()}
