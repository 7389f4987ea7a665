"""Which events to count: what the machine's PMUs offer, the metric set's groups per CPU
family reduced to that, and the ``perf stat`` argv that counts them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import Field

from myaccel.errors import UsageError
from myaccel.facts.perfcap import PMU_DIR
from myaccel.facts.sysroot import Sysroot
from myaccel.model import Frozen, PerfFacts
from myaccel.profile.perfstat.names import (
    GENERIC_EVENTS,
    RAW_EVENTS,
    SOFTWARE_EVENTS,
    perf_event_spelling,
)

_CORE_PMU = re.compile(r"^(cpu|cpu_core|cpu_atom|armv\d+_.*)$")


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


def format_event_list(groups: Iterable[Sequence[str]]) -> str:
    """``-e`` argument: groups of two or more as ``{a,b}``, singletons bare."""
    parts: list[str] = []
    for g in groups:
        names = [perf_event_spelling(e) for e in g]
        if not names:
            continue
        parts.append(names[0] if len(names) == 1 else "{" + ",".join(names) + "}")
    return ",".join(parts)


# ---------------------------------------------------------------- argv


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
