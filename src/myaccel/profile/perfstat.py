"""Counting with ``perf stat``: which events to ask for, the argv, the CSV parser, errors.

What this module relies on (facts checked while writing it, see
``tests/fixtures/perfstat/README.md`` for the sources):

* ``perf stat -x SEP`` prints one line per counter, fields in this order: optional
  time stamp (``-I``), optional aggregation id (CPU, core, socket, die, node or
  ``comm-pid`` with ``--per-thread``), optional number of CPUs aggregated, the counter
  value, its unit (often empty), the event name, optional variance (``-r``), the counter's
  run time, the percentage of the measurement time it ran, optional metric value and
  metric unit. A line holding only a metric value and unit continues the previous counter
  (perf's ``new_line_csv``). Separators are not quoted: an event such as
  ``cpu/event=0x3c,umask=0/`` contains the separator itself.
* The value column holds ``<not supported>`` when the PMU cannot count an event and
  ``<not counted>`` when it was never scheduled; perf still exits 0.
* perf scales counts by enabled/running time by default: a percentage below 100 means the
  counter was multiplexed and the printed value is an estimate. We keep the value as
  printed plus the percentage and flag the row.
* Empty metric columns are printed as two separators by perf 5.x and 6.x and as four by
  older releases; some lines carry no metric columns at all. The parser therefore anchors
  on the value/unit/event triple instead of counting columns.
* ``perf stat`` exits 129 with ``event syntax error`` for an event it cannot parse, 255
  with an ``Access to performance monitoring ... is limited`` banner when
  ``kernel.perf_event_paranoid`` forbids the request, and 255 with ``The <event> event is
  not supported.`` when the leader of a *group* is an event the PMU lacks (measured on
  this VM, perf 6.1: the same events ungrouped print ``<not supported>`` and exit 0).

The argv never uses ``--topdown``: in the perf 4.x source read for this work the flag
forces ``--metric-only`` output (a header line plus value lines, another layout) with
per-core aggregation and demands ``-a``; on CPUs without the events it exits with
"System does not support topdown" (measured here, exit code 234). We request the events it uses
(``slots`` + ``topdown-*`` on Ice Lake and later, ``topdown-total-slots``... before) as
one group and compute level 1 with perf's own formulas in :mod:`myaccel.profile.metrics`.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pydantic import Field

from myaccel import proc
from myaccel.errors import ExitCode, MyaccelError, ProcessFailed, UsageError
from myaccel.facts.sysroot import Sysroot
from myaccel.model import Frozen, PerfFacts

PMU_DIR = "/sys/bus/event_source/devices"

NOT_SUPPORTED = "not supported"
NOT_COUNTED = "not counted"

# Core (CPU) PMUs: Intel/AMD "cpu", Intel hybrid "cpu_core"/"cpu_atom", arm64 "armv8_*".
_CORE_PMU = re.compile(r"^(cpu|cpu_core|cpu_atom|armv\d+_.*)$")

# Raw IMP-DEF encodings we request, printed by perf as given, and their canonical names.
# Kunpeng 920 (HiSilicon hip08) FETCH_BUBBLE is IMP-DEF event 0x2014 (Linux
# tools/perf/pmu-events/arch/arm64/hisilicon/hip08/core-imp-def.json and metrics.json).
RAW_EVENTS: dict[str, str] = {"fetch_bubble": "r2014"}
_RAW_ALIASES = {raw: name for name, raw in RAW_EVENTS.items()}

# perf's generic (legacy) events as perf spells them; canonical names are lowercase.
GENERIC_EVENTS: dict[str, str] = {
    name.lower(): name
    for name in (
        "cycles",
        "instructions",
        "branch-misses",
        "branches",
        "L1-icache-load-misses",
        "iTLB-load-misses",
        "dTLB-load-misses",
        "L1-dcache-load-misses",
        "LLC-load-misses",
        "stalled-cycles-frontend",
        "stalled-cycles-backend",
    )
}
_GENERIC_ALIASES = {"cpu-cycles": "cycles"}

# Software events: counted by the kernel, available without a PMU (VMs included).
SOFTWARE_EVENTS = ("task-clock", "context-switches", "cpu-migrations", "page-faults")


# ---------------------------------------------------------------- errors


class PerfStatError(MyaccelError):
    code = "perf-stat"


class PerfUnknownEvent(PerfStatError):
    """perf could not parse an event name (exit code 129)."""

    exit_code = ExitCode.USAGE
    code = "perf-unknown-event"


class PerfPermissionDenied(PerfStatError):
    code = "perf-permission"


class PerfUnsupported(PerfStatError):
    """The PMU cannot count what was asked for (no PMU in a VM, a group with a missing event)."""

    code = "perf-unsupported"


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
_MODIFIERS = re.compile(r":[ukhHGpPSDIWe]+$")
_PMU_WRAPPED = re.compile(r"^([\w.\-]+)/([^/]*)/([a-zA-Z]*)$")


def _is_float(s: str) -> bool:
    return bool(_FLOAT.match(s.strip()))


def canonical_event(event: str) -> str:
    """The name metric formulas use: ``cpu_core/cycles/`` -> ``cycles``,
    ``task-clock:u`` -> ``task-clock``, ``INST_RETIRED`` -> ``inst_retired``,
    ``r2014`` -> ``fetch_bubble``. Raw configs (``cpu/event=0x3c/``) stay as printed."""
    n = event.strip()
    m = _PMU_WRAPPED.match(n)
    if m and "=" not in m.group(2) and m.group(2):
        n = m.group(2)
    n = _MODIFIERS.sub("", n).lower()
    n = _RAW_ALIASES.get(n, n)
    return _GENERIC_ALIASES.get(n, n)


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


# ---------------------------------------------------------------- what the machine offers


class EventInventory(Frozen):
    """PMUs and event names (lowercase, as sysfs spells them) found on a machine."""

    pmus: list[str] = Field(default_factory=list)
    events: list[str] = Field(default_factory=list)
    source: str = PMU_DIR

    @property
    def core_pmus(self) -> list[str]:
        return [p for p in self.pmus if _CORE_PMU.match(p)]

    @property
    def has_core_pmu(self) -> bool:
        return bool(self.core_pmus)

    def has(self, name: str) -> bool:
        return name.lower() in self.events


def collect_event_inventory(sr: Sysroot) -> EventInventory:
    """Every event name under ``/sys/bus/event_source/devices/<core pmu>/events``.

    Only core PMUs count: uncore PMUs (``hisi_sccl*``, ``uncore_*``) measure other things
    under the same names. The arm64 kernel lists only the common events the CPU reports
    as implemented (PMCEID), so presence here means "this core can count it".
    """
    pmus = sr.listdir(PMU_DIR)
    events: set[str] = set()
    for pmu in pmus:
        if not _CORE_PMU.match(pmu):
            continue
        for ev in sr.listdir(f"{PMU_DIR}/{pmu}/events"):
            if not ev.endswith((".scale", ".unit", ".per-pkg", ".snapshot")):
                events.add(ev.lower())
    return EventInventory(pmus=pmus, events=sorted(events))


def inventory_from_facts(perf: PerfFacts) -> EventInventory:
    """The (smaller) inventory recorded in facts.json: only the events probe looks for."""
    present = [k.lower() for k, v in (perf.events.value or {}).items() if v]
    return EventInventory(pmus=list(perf.pmus.value or []), events=sorted(present))


# ---------------------------------------------------------------- choosing events


class EventPlan(Frozen):
    """Events to count, grouped so that ratios come from one scheduling window."""

    family: str
    groups: list[list[str]] = Field(default_factory=list)  # canonical names
    missing: dict[str, str] = Field(default_factory=dict)  # wanted event -> why not asked
    notes: list[str] = Field(default_factory=list)

    @property
    def events(self) -> list[str]:
        return [e for g in self.groups for e in g]

    @property
    def hardware(self) -> bool:
        return any(e not in SOFTWARE_EVENTS for e in self.events)


# Groups per family, canonical names. A group is scheduled as a unit (all or nothing), so
# ratios between its members are exact even when groups take turns on the counters. Sizes
# respect the counters: Neoverse N1/N2/V1/V2 have 6 programmable counters plus the cycle
# counter; Intel has 4 (8 without SMT) general counters plus fixed ones for cycles,
# instructions and slots; the topdown-* events of Ice Lake+ are read from PERF_METRICS
# and must sit in one group led by slots.
_ARM_MPKI_GROUPS = [
    ["l1i_tlb_refill", "itlb_walk", "l1i_cache_refill", "br_mis_pred_retired", "br_mis_pred"],
    ["dtlb_walk", "l1d_tlb_refill", "l1d_cache_refill", "l2d_cache_refill"],
]
_ARM_SLOT_GROUP = [
    "cpu_cycles",
    "stall_slot_frontend",
    "stall_slot_backend",
    "stall_slot",
    "op_retired",
    "op_spec",
]
_X86_MPKI_GROUPS = [
    ["cycles", "instructions", "branch-misses"],
    ["l1-icache-load-misses", "itlb-load-misses"],
    ["dtlb-load-misses", "l1-dcache-load-misses", "llc-load-misses"],
]
_ICL_TOPDOWN = [
    "slots",
    "topdown-retiring",
    "topdown-bad-spec",
    "topdown-fe-bound",
    "topdown-be-bound",
]
_SKL_TOPDOWN = [
    "topdown-total-slots",
    "topdown-slots-issued",
    "topdown-slots-retired",
    "topdown-fetch-bubbles",
    "topdown-recovery-bubbles",
]

FAMILY_GROUPS: dict[str, list[list[str]]] = {
    "neoverse-n1": [
        ["cpu_cycles", "inst_retired", "stall_frontend", "stall_backend"],
        *_ARM_MPKI_GROUPS,
    ],
    "neoverse-n2": [
        _ARM_SLOT_GROUP,
        ["inst_retired", "stall_frontend", "stall_backend"],
        *_ARM_MPKI_GROUPS,
    ],
    "neoverse-v1": [
        _ARM_SLOT_GROUP,
        ["inst_retired", "stall_frontend", "stall_backend"],
        *_ARM_MPKI_GROUPS,
    ],
    "neoverse-v2": [
        _ARM_SLOT_GROUP,
        ["inst_retired", "stall_frontend", "stall_backend"],
        *_ARM_MPKI_GROUPS,
    ],
    "kunpeng920": [
        ["cpu_cycles", "inst_retired", "inst_spec", "fetch_bubble"],
        ["stall_frontend", "stall_backend"],
        *_ARM_MPKI_GROUPS,
    ],
    "x86-intel": [_ICL_TOPDOWN, _SKL_TOPDOWN, *_X86_MPKI_GROUPS],
    "x86-amd": [
        ["cycles", "instructions", "branch-misses", "stalled-cycles-frontend"],
        *_X86_MPKI_GROUPS[1:],
    ],
}
_GENERIC_ARM = "neoverse-n1"
_GENERIC_X86 = "x86-amd"


def family_groups(family: str) -> list[list[str]]:
    if family in FAMILY_GROUPS:
        return [list(g) for g in FAMILY_GROUPS[family]]
    if family.startswith("x86"):
        return [list(g) for g in FAMILY_GROUPS[_GENERIC_X86]]
    return [list(g) for g in FAMILY_GROUPS[_GENERIC_ARM]]


def _available(name: str, family: str, inv: EventInventory) -> str | None:
    """None when ``name`` can be requested here, else the reason it cannot."""
    if not inv.has_core_pmu:
        return (
            "no CPU PMU under /sys/bus/event_source/devices (a VM without a virtual PMU?): "
            "hardware events would print <not supported>"
        )
    if name in RAW_EVENTS:
        if family == "kunpeng920":
            return None
        return f"IMP-DEF event {RAW_EVENTS[name]} exists on Kunpeng 920 only"
    if name in GENERIC_EVENTS:
        if family.startswith("x86"):
            return None  # perf's legacy events: the kernel maps them per CPU model
        return "x86 generic event; Arm sets use the PMU's own event names"
    if inv.has(name):
        return None
    return f"not listed under {PMU_DIR}/*/events"


def select_events(
    family: str, inventory: EventInventory, *, include_software: bool = True
) -> EventPlan:
    """The family's event groups, reduced to what this machine can count.

    Unavailable events are dropped (with the reason in ``missing``), groups that become
    empty disappear, and on x86 the Ice Lake topdown group wins over the Skylake one.
    Without a CPU PMU only software events remain, so a run still says something.
    """
    groups: list[list[str]] = []
    missing: dict[str, str] = {}
    notes: list[str] = []
    seen: set[str] = set()
    for g in family_groups(family):
        if g == _SKL_TOPDOWN and any(e in seen for e in _ICL_TOPDOWN):
            continue
        kept: list[str] = []
        for e in g:
            if e in seen:
                continue
            why = _available(e, family, inventory)
            if why is None:
                kept.append(e)
                seen.add(e)
            elif g in (_ICL_TOPDOWN, _SKL_TOPDOWN):
                continue  # reported once below
            else:
                missing.setdefault(e, why)
        if g in (_ICL_TOPDOWN, _SKL_TOPDOWN) and 0 < len(kept) < len(g):
            # A partial topdown group cannot be scheduled; do not request it.
            for e in kept:
                seen.discard(e)
                missing[e] = "topdown group incomplete on this CPU"
            kept = []
        if kept:
            groups.append(kept)
    if family.startswith("x86") and inventory.has_core_pmu:
        if any(e in seen for e in _ICL_TOPDOWN):
            notes.append("x86 top-down from slots + topdown-* (Ice Lake and later)")
        elif any(e in seen for e in _SKL_TOPDOWN):
            notes.append(
                "x86 top-down from topdown-total-slots... (pre-Ice Lake): with SMT on, "
                "count system-wide (-a) as perf --topdown requires"
            )
        else:
            missing["topdown"] = "no slots/topdown-* events in sysfs (AMD, old Intel or a VM)"
    if not inventory.has_core_pmu:
        notes.append("no CPU PMU: only software events are counted")
    if include_software:
        groups.append(["task-clock"])
    return EventPlan(family=family, groups=groups, missing=missing, notes=notes)


def perf_event_spelling(name: str) -> str:
    """How to write a canonical event on perf's command line."""
    if name in RAW_EVENTS:
        return RAW_EVENTS[name]
    return GENERIC_EVENTS.get(name, name)


def format_event_list(groups: Iterable[Sequence[str]]) -> str:
    """``-e`` argument: groups of two or more as ``{a,b}``, singletons bare."""
    parts: list[str] = []
    for g in groups:
        names = [perf_event_spelling(e) for e in g]
        if not names:
            continue
        parts.append(names[0] if len(names) == 1 else "{" + ",".join(names) + "}")
    return ",".join(parts)


# ---------------------------------------------------------------- argv and running


def build_perf_stat_argv(
    plan: EventPlan | Sequence[Sequence[str]],
    *,
    duration_s: float,
    pid: int | None = None,
    system_wide: bool = False,
    perf: str = "perf",
    output_path: str | Path | None = None,
    sep: str = ",",
) -> list[str]:
    """``perf stat -x, [-o FILE] -e EVENTS (-p PID | -a) -- sleep DURATION``.

    The ``sleep`` bounds the window in both modes (perf stops counting a ``-p`` target
    when the command ends). ``-o`` keeps the counts apart from anything else on stderr.
    """
    if (pid is None) == (not system_wide):
        raise UsageError(
            "count either one process (pid) or the whole system, not both or neither",
            hint="count a server process (myaccel profile --pid PID) or the whole system",
        )
    if pid is not None and pid <= 0:
        raise UsageError(f"invalid pid {pid}", hint="pass the server's process id")
    if not duration_s > 0:
        raise UsageError(f"invalid duration {duration_s!r} s", hint="pass a positive duration")
    groups = plan.groups if isinstance(plan, EventPlan) else [list(g) for g in plan]
    events = format_event_list(groups)
    if not events:
        raise UsageError("no events to count", hint="this machine offers none of the events")
    argv = [perf, "stat", f"-x{sep}"]
    if output_path is not None:
        argv += ["-o", str(output_path)]
    argv += ["-e", events]
    argv += ["-a"] if system_wide else ["-p", str(pid)]
    argv += ["--", "sleep", f"{duration_s:g}"]
    return argv


_SYNTAX = re.compile(r"event syntax error: '([^']*)'")
_NOT_SUPPORTED = re.compile(r"The (\S+) event is not supported")
_PERMISSION = (
    "Access to performance monitoring and observability operations is limited",
    "perf_event_paranoid setting is",
    "No permission to enable",
    "You may not have permission to collect",
)


def perf_stat_error(
    returncode: int,
    stderr: str,
    *,
    paranoid: int | None = None,
    system_wide: bool = False,
) -> MyaccelError | None:
    """The error a failed ``perf stat`` run means, or None when it succeeded."""
    text = stderr or ""
    if returncode == 0:
        return None
    tail = " | ".join(text.strip().splitlines()[-3:]) or "no output"
    if returncode == 129 or "event syntax error" in text:
        m = _SYNTAX.search(text)
        ev = m.group(1) if m else "?"
        return PerfUnknownEvent(
            f"perf does not know the event '{ev}' (exit code {returncode})",
            hint="list what this perf and kernel offer with `perf list`; myaccel only asks "
            f"for events listed under {PMU_DIR}/*/events, so a perf older than the kernel "
            "may be missing the name (install the linux-perf matching `uname -r`)",
            context={"event": ev, "exit_code": str(returncode)},
        )
    if any(s in text for s in _PERMISSION):
        m = re.search(r"perf_event_paranoid setting is (-?\d+)", text)
        level = int(m.group(1)) if m else paranoid
        now = f" (now {level})" if level is not None else ""
        need = "0 for system-wide counting (-a)" if system_wide else "1 to count a process"
        return PerfPermissionDenied(
            f"kernel.perf_event_paranoid{now} does not allow this perf stat",
            hint=f"run myaccel as root (or with CAP_PERFMON), or lower the limit to {need}: "
            "sysctl -w kernel.perf_event_paranoid=1 (persist it in /etc/sysctl.d/); counting "
            "another user's process (mysqld) also needs root or CAP_SYS_PTRACE",
            context={"paranoid": str(level), "exit_code": str(returncode)},
        )
    if "System does not support topdown" in text:
        return PerfUnsupported(
            "this CPU has no top-down events (perf --topdown refused)",
            hint="use the per-family metric set (myaccel picks events from sysfs) instead",
            context={"exit_code": str(returncode)},
        )
    m = _NOT_SUPPORTED.search(text)
    if m:
        return PerfUnsupported(
            f"the PMU cannot count '{m.group(1)}' and it was requested in a group",
            hint="on a VM without a virtual PMU hardware events are unavailable: profile "
            "with software events (perf record -e cpu-clock) or valgrind --tool=cachegrind",
            context={"event": m.group(1), "exit_code": str(returncode)},
        )
    return ProcessFailed(
        f"perf stat failed with exit code {returncode}: {tail}",
        hint="rerun with --debug to see the full perf command",
        context={"exit_code": str(returncode)},
    )


def run_perf_stat(
    plan: EventPlan,
    *,
    duration_s: float,
    pid: int | None = None,
    system_wide: bool = False,
    paranoid: int | None = None,
) -> PerfStatResult:
    """Count ``plan`` for ``duration_s`` on a process or the whole system.

    Raises ``ToolMissing`` without perf, ``PerfUnknownEvent`` (exit 129),
    ``PerfPermissionDenied`` (perf_event_paranoid), ``PerfUnsupported`` or ``ProcessFailed``.
    """
    perf = proc.require("perf")
    with tempfile.TemporaryDirectory(prefix="myaccel-perfstat-") as tmp:
        out = Path(tmp) / "stat.csv"
        argv = build_perf_stat_argv(
            plan,
            duration_s=duration_s,
            pid=pid,
            system_wide=system_wide,
            perf=perf,
            output_path=out,
        )
        done = proc.run(argv, timeout_s=duration_s + 60.0)
        err = perf_stat_error(
            done.returncode, done.stderr, paranoid=paranoid, system_wide=system_wide
        )
        if err is not None:
            raise err
        text = out.read_text(errors="replace") if out.exists() else done.stderr
    return parse_perf_stat_csv(text)


def counts_mapping(result: PerfStatResult | Mapping[str, float | None]) -> dict[str, float | None]:
    """Canonical name -> value from a parsed run or a plain mapping (names canonicalized)."""
    if isinstance(result, PerfStatResult):
        return result.totals()
    return {canonical_event(k): v for k, v in result.items()}
