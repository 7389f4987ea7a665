"""Event names: the raw and generic events we request, the software events, the
canonical names metric formulas use and the spelling perf's command line wants."""

from __future__ import annotations

import re

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


_MODIFIERS = re.compile(r":[ukhHGpPSDIWe]+$")
_PMU_WRAPPED = re.compile(r"^([\w.\-]+)/([^/]*)/([a-zA-Z]*)$")


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


def perf_event_spelling(name: str) -> str:
    """How to write a canonical event on perf's command line."""
    if name in RAW_EVENTS:
        return RAW_EVENTS[name]
    return GENERIC_EVENTS.get(name, name)
