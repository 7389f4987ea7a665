"""The profile artifact (``myaccel.profile/1``) and the findings ``diagnose`` derives from it.

A profile says how it was taken (``perf record`` event, duration, pid, command), summarises
the folded stacks (top-N by self and inclusive share, per symbol, DSO and symbol group;
kernel vs user share), keeps the per-CPU utilisation series from ``/proc/stat`` samples with
its per-NUMA-node summary, context switches, and optionally micro-architecture metrics and
server status counter deltas over the same window.

Percentages are percent of all samples (stacks) or of all CPU time of a CPU (``/proc/stat``).
The folded stacks themselves stay in their own file (``recording.folded_path``).
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from myaccel import __version__
from myaccel.artifacts import Source, artifact, load, save, validate
from myaccel.errors import UsageError
from myaccel.model import Frozen
from myaccel.profile.simulate import SimulationResult

PROFILE_SCHEMA = "myaccel.profile/1"

# ---------------------------------------------------------------- how it was taken


class Recording(Frozen):
    tool: str = "perf record"
    event: str = "cpu-clock"  # cpu-clock (no PMU, e.g. VMs) or cycles
    frequency_hz: int | None = None  # -F
    call_graph: str | None = None  # fp, dwarf, lbr
    duration_s: float
    pid: int | None = None  # -p; None with system_wide
    system_wide: bool = False  # -a
    command: list[str] = Field(default_factory=list)  # argv of the recorder
    target: str | None = None  # comm of the profiled process, e.g. mariadbd
    started_at: str | None = None
    samples: int | None = None
    lost_samples: int | None = None
    folded_path: str | None = None  # relative to the profile JSON
    flamegraph_path: str | None = None


# ---------------------------------------------------------------- folded stacks summary


class SymbolShare(Frozen):
    symbol: str
    dso: str | None = None
    kernel: bool = False
    self_samples: int
    inclusive_samples: int
    self_pct: float
    inclusive_pct: float


class DsoShare(Frozen):
    dso: str
    self_samples: int
    inclusive_samples: int
    self_pct: float
    inclusive_pct: float


class GroupShare(Frozen):
    group: str  # id in myaccel.profile.folded.SYMBOL_GROUPS
    description: str = ""
    self_pct: float
    inclusive_pct: float  # union of stacks containing any member: no double counting
    top_self: dict[str, float] = Field(default_factory=dict)  # member symbol -> self %


class StackSummary(Frozen):
    total_samples: int
    distinct_stacks: int
    skipped_lines: int = 0
    kernel_pct: float  # samples whose leaf frame is a kernel frame
    user_pct: float
    dso_known_pct: float = 0.0  # samples whose leaf frame names its DSO
    top_n: int
    min_pct: float
    top_self: list[SymbolShare] = Field(default_factory=list)
    top_inclusive: list[SymbolShare] = Field(default_factory=list)
    top_dso_self: list[DsoShare] = Field(default_factory=list)
    top_dso_inclusive: list[DsoShare] = Field(default_factory=list)
    symbols: list[SymbolShare] = Field(default_factory=list)  # inclusive >= min_pct
    groups: dict[str, GroupShare] = Field(default_factory=dict)


# ---------------------------------------------------------------- CPU utilisation


class CpuTimes(Frozen):
    """Shares of one CPU's time (or a mean over CPUs) in percent, from /proc/stat jiffies."""

    user_pct: float = 0.0
    nice_pct: float = 0.0
    system_pct: float = 0.0
    idle_pct: float = 0.0
    iowait_pct: float = 0.0
    irq_pct: float = 0.0
    softirq_pct: float = 0.0
    steal_pct: float = 0.0

    @property
    def busy_pct(self) -> float:
        return (
            self.user_pct
            + self.nice_pct
            + self.system_pct
            + self.irq_pct
            + self.softirq_pct
            + self.steal_pct
        )


_CPU_FIELDS = (
    "user_pct",
    "nice_pct",
    "system_pct",
    "idle_pct",
    "iowait_pct",
    "irq_pct",
    "softirq_pct",
    "steal_pct",
)


class CpuInterval(Frozen):
    start_s: float  # from the first sample
    duration_s: float
    cpus: dict[int, CpuTimes]


class NodeCpus(Frozen):
    node: int
    cpus: list[int]


class NodeLoad(Frozen):
    node: int
    cpu_count: int
    busy_pct: float
    user_pct: float
    system_pct: float
    softirq_pct: float
    iowait_pct: float
    max_cpu_busy_pct: float
    min_cpu_busy_pct: float


class CpuSummary(Frozen):
    cpu_count: int
    duration_s: float
    intervals: int
    mean: CpuTimes  # mean over CPUs and time
    per_cpu: dict[int, CpuTimes]  # mean over time
    nodes: list[NodeLoad] = Field(default_factory=list)
    node_busy_spread_pct: float | None = None  # busiest node minus least busy, in points
    max_cpu_softirq_pct: float = 0.0
    max_softirq_cpu: int | None = None


class ContextSwitches(Frozen):
    total: int
    duration_s: float
    cpu_count: int
    per_s: float
    per_cpu_per_s: float
    source: str  # "/proc/stat ctxt" (system wide), "perf stat context-switches", ...


class StatusWindow(Frozen):
    """SHOW GLOBAL STATUS over the profiling window: counter deltas, gauge values at end."""

    duration_s: float
    deltas: dict[str, float] = Field(default_factory=dict)
    gauges: dict[str, float] = Field(default_factory=dict)
    source: str = "SHOW GLOBAL STATUS"


# ---------------------------------------------------------------- findings

Severity = Literal["high", "medium", "low"]


class Evidence(Frozen):
    metric: str  # what was measured
    value: float
    unit: str  # "%", "points", "/s", "MPKI", ...
    source: str  # where the number comes from
    threshold: str = ""  # the threshold it was compared with, e.g. ">= 10%"
    detail: str = ""  # e.g. top contributing symbols


class RuleEffect(Frozen):
    rule: str  # a rule id (`myaccel explain --all`)
    direction: Literal["raise", "lower"]  # lower: not the fix here, or already applied
    reason: str


class Finding(Frozen):
    id: str  # stable kebab-case; rules read it through Hints.findings
    title: str
    severity: Severity
    evidence: list[Evidence]
    likely_cause: str
    rules: list[RuleEffect] = Field(default_factory=list)
    confirm: str  # how a human confirms (and later verifies the fix)


# ---------------------------------------------------------------- the artifact


@artifact(PROFILE_SCHEMA)
class Profile(Frozen):
    schema_version: str = PROFILE_SCHEMA
    myaccel_version: str = __version__
    created_at: str
    hostname: str | None = None
    recording: Recording
    stacks: StackSummary | None = None
    numa_nodes: list[NodeCpus] = Field(default_factory=list)
    cpu_series: list[CpuInterval] = Field(default_factory=list)
    cpu: CpuSummary | None = None
    context_switches: ContextSwitches | None = None
    microarch: dict[str, float] = Field(default_factory=dict)
    status: StatusWindow | None = None
    findings: list[Finding] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    # valgrind's counts where no PMU exists: labelled SIMULATION, never mixed into microarch
    simulation: SimulationResult | None = None


# ---------------------------------------------------------------- /proc/stat


@dataclass(frozen=True)
class ProcStat:
    cpus: dict[int, tuple[int, ...]]  # user nice system idle iowait irq softirq steal
    ctxt: int | None


def parse_proc_stat(text: str) -> ProcStat:
    cpus: dict[int, tuple[int, ...]] = {}
    ctxt: int | None = None
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        key = parts[0]
        if key.startswith("cpu") and key[3:].isdigit():
            vals = [int(v) for v in parts[1:9] if v.isdigit()]
            vals += [0] * (8 - len(vals))
            cpus[int(key[3:])] = tuple(vals[:8])
        elif key == "ctxt" and len(parts) > 1 and parts[1].isdigit():
            ctxt = int(parts[1])
    return ProcStat(cpus=cpus, ctxt=ctxt)


def cpu_series(samples: Sequence[tuple[float, str]]) -> list[CpuInterval]:
    """Per-CPU time shares between consecutive ``(time_s, /proc/stat text)`` samples."""
    parsed = [(t, parse_proc_stat(text)) for t, text in samples]
    out: list[CpuInterval] = []
    if not parsed:
        return out
    t0 = parsed[0][0]
    for (ta, a), (tb, b) in itertools.pairwise(parsed):
        cpus: dict[int, CpuTimes] = {}
        for cpu, vb in b.cpus.items():
            va = a.cpus.get(cpu)
            if va is None:
                continue
            d = [max(0, y - x) for x, y in zip(va, vb, strict=True)]
            total = sum(d)
            if total <= 0:
                continue
            cpus[cpu] = CpuTimes(
                **{f: round(100.0 * v / total, 3) for f, v in zip(_CPU_FIELDS, d, strict=True)}
            )
        if cpus:
            out.append(CpuInterval(start_s=round(ta - t0, 3), duration_s=tb - ta, cpus=cpus))
    return out


def _mean_times(items: Sequence[tuple[CpuTimes, float]]) -> CpuTimes:
    w = sum(weight for _, weight in items)
    if w <= 0:
        return CpuTimes()
    return CpuTimes(
        **{f: round(sum(getattr(t, f) * wt for t, wt in items) / w, 3) for f in _CPU_FIELDS}
    )


def summarize_cpu(series: Sequence[CpuInterval], nodes: Sequence[NodeCpus] = ()) -> CpuSummary:
    per: dict[int, list[tuple[CpuTimes, float]]] = {}
    for iv in series:
        weight = iv.duration_s if iv.duration_s > 0 else 1.0
        for cpu, t in iv.cpus.items():
            per.setdefault(cpu, []).append((t, weight))
    per_cpu = {cpu: _mean_times(v) for cpu, v in sorted(per.items())}
    loads: list[NodeLoad] = []
    for n in nodes:
        members = [per_cpu[c] for c in n.cpus if c in per_cpu]
        if not members:
            continue
        mean = _mean_times([(t, 1.0) for t in members])
        busy = [t.busy_pct for t in members]
        loads.append(
            NodeLoad(
                node=n.node,
                cpu_count=len(members),
                busy_pct=round(mean.busy_pct, 3),
                user_pct=mean.user_pct,
                system_pct=mean.system_pct,
                softirq_pct=mean.softirq_pct,
                iowait_pct=mean.iowait_pct,
                max_cpu_busy_pct=round(max(busy), 3),
                min_cpu_busy_pct=round(min(busy), 3),
            )
        )
    spread = (
        round(max(x.busy_pct for x in loads) - min(x.busy_pct for x in loads), 3)
        if len(loads) >= 2
        else None
    )
    soft_cpu = max(per_cpu, key=lambda c: per_cpu[c].softirq_pct) if per_cpu else None
    return CpuSummary(
        cpu_count=len(per_cpu),
        duration_s=round(sum(iv.duration_s for iv in series), 3),
        intervals=len(series),
        mean=_mean_times([(t, 1.0) for t in per_cpu.values()]),
        per_cpu=per_cpu,
        nodes=loads,
        node_busy_spread_pct=spread,
        max_cpu_softirq_pct=per_cpu[soft_cpu].softirq_pct if soft_cpu is not None else 0.0,
        max_softirq_cpu=soft_cpu,
    )


def context_switches_from_proc_stat(
    samples: Sequence[tuple[float, str]],
) -> ContextSwitches | None:
    if len(samples) < 2:
        return None
    (ta, a_text), (tb, b_text) = samples[0], samples[-1]
    a, b = parse_proc_stat(a_text), parse_proc_stat(b_text)
    if a.ctxt is None or b.ctxt is None or tb <= ta:
        return None
    total = max(0, b.ctxt - a.ctxt)
    cpus = max(1, len(b.cpus))
    per_s = total / (tb - ta)
    return ContextSwitches(
        total=total,
        duration_s=round(tb - ta, 3),
        cpu_count=cpus,
        per_s=round(per_s, 1),
        per_cpu_per_s=round(per_s / cpus, 1),
        source="/proc/stat ctxt (system wide)",
    )


def parse_cpulist(text: str) -> list[int]:
    """``0-3,8,10-11`` -> [0, 1, 2, 3, 8, 10, 11]; garbage raises ValueError (the probe's
    one strict parser, ``myaccel.cpulist.parse_cpu_list``)."""
    from myaccel.cpulist import parse_cpu_list

    return parse_cpu_list(text)


# ---------------------------------------------------------------- status and micro-arch

STATUS_GAUGES = frozenset(
    {
        "Threads_running",
        "Threads_connected",
        "Threads_cached",
        "Open_tables",
        "Open_files",
        "Innodb_buffer_pool_pages_free",
        "Innodb_buffer_pool_pages_dirty",
        "Innodb_buffer_pool_pages_data",
        "Innodb_buffer_pool_pages_total",
        "Innodb_row_lock_current_waits",
        "Threadpool_threads",
        "Threadpool_idle_threads",
    }
)


def status_window(
    before: Mapping[str, str], after: Mapping[str, str], duration_s: float
) -> StatusWindow:
    """Counter deltas (after - before) and gauges (value at the end) of numeric status."""
    deltas: dict[str, float] = {}
    gauges: dict[str, float] = {}
    for name, raw in after.items():
        try:
            v = float(raw)
        except (TypeError, ValueError):
            continue
        if name in STATUS_GAUGES:
            gauges[name] = v
            continue
        try:
            deltas[name] = v - float(before[name])
        except (KeyError, TypeError, ValueError):
            continue
    return StatusWindow(duration_s=duration_s, deltas=deltas, gauges=gauges)


# Raw event counts (perf stat names, Arm PMU and generic) -> canonical derived metrics.
_INSTRUCTIONS = ("INST_RETIRED", "instructions", "inst_retired")
_CYCLES = ("CPU_CYCLES", "cycles", "cpu_cycles")
_MPKI_EVENTS: dict[str, tuple[str, ...]] = {
    "l1i_mpki": ("L1I_CACHE_REFILL", "L1-icache-load-misses", "l1i_cache_refill"),
    "itlb_mpki": ("L1I_TLB_REFILL", "ITLB_WALK", "iTLB-load-misses", "itlb_walk"),
    "branch_mpki": ("BR_MIS_PRED_RETIRED", "BR_MIS_PRED", "branch-misses"),
    "dtlb_mpki": ("DTLB_WALK", "L1D_TLB_REFILL", "dTLB-load-misses"),
    "l1d_mpki": ("L1D_CACHE_REFILL", "L1-dcache-load-misses"),
    "l2d_mpki": ("L2D_CACHE_REFILL",),
}
_ALIASES: dict[str, str] = {
    "stall_frontend_pct": "frontend_bound_pct",
    "topdown_frontend_bound_pct": "frontend_bound_pct",
    "stall_backend_pct": "backend_bound_pct",
    "topdown_backend_bound_pct": "backend_bound_pct",
    "l1i_miss_mpki": "l1i_mpki",
    "itlb_miss_mpki": "itlb_mpki",
    "itlb_walk_mpki": "itlb_mpki",
    "frontend_stall_cycles_pct": "frontend_bound_pct",
    "backend_stall_cycles_pct": "backend_bound_pct",
}


def derive_microarch(raw: Mapping[str, float]) -> dict[str, float]:
    """Canonical metric names from what a profile carries (derived values win no ties).

    Canonical: ``frontend_bound_pct`` / ``backend_bound_pct`` (stall cycles or top-down
    slots, percent), ``ipc``, and misses per thousand instructions ``l1i_mpki``,
    ``itlb_mpki``, ``branch_mpki``, ``dtlb_mpki``, ``l1d_mpki``, ``l2d_mpki``. Raw counts
    (``STALL_FRONTEND``, ``CPU_CYCLES``, ``INST_RETIRED``, ``L1I_CACHE_REFILL``,
    ``L1I_TLB_REFILL``/``ITLB_WALK``, ..., in any letter case) are turned into these when
    the canonical name is absent; an alias yields to its canonical name. Values that are not
    finite are dropped. ``myaccel.profile.metrics.to_microarch`` produces canonical names.
    """
    out: dict[str, float] = {
        k: float(v)
        for k, v in raw.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    }
    for alias, canonical in _ALIASES.items():
        if alias in out and canonical not in out:
            out[canonical] = out.pop(alias)
    lower = {k.lower(): v for k, v in out.items()}

    def first(names: Iterable[str]) -> float | None:
        for n in names:
            v = lower.get(n.lower())
            if v is not None and v > 0:
                return v
        return None

    inst = first(_INSTRUCTIONS)
    cyc = first(_CYCLES)
    if inst:
        for metric, events in _MPKI_EVENTS.items():
            ev = first(events)
            if metric not in out and ev is not None:
                out[metric] = round(1000.0 * ev / inst, 4)
        if cyc and "ipc" not in out:
            out["ipc"] = round(inst / cyc, 4)
    if cyc:
        for metric, ev_name in (
            ("frontend_bound_pct", "STALL_FRONTEND"),
            ("backend_bound_pct", "STALL_BACKEND"),
        ):
            ev = first((ev_name,))
            if metric not in out and ev is not None:
                out[metric] = round(100.0 * ev / cyc, 3)
    return out


# ---------------------------------------------------------------- build, save, load


def build_profile(
    recording: Recording,
    *,
    stacks: StackSummary | None = None,
    proc_stat: Sequence[tuple[float, str]] = (),
    numa_nodes: Sequence[NodeCpus] = (),
    context_switches: ContextSwitches | None = None,
    microarch: Mapping[str, float] | None = None,
    status: StatusWindow | None = None,
    hostname: str | None = None,
    created_at: str | None = None,
    warnings: Sequence[str] = (),
    simulation: SimulationResult | None = None,
) -> Profile:
    """Assemble a profile from what a recorder captured.

    ``stacks`` comes from ``folded.summarize(folded.parse_folded(text))``; ``proc_stat`` is
    the ``(time_s, /proc/stat text)`` samples taken during the recording (at least two);
    context switches default to the ``ctxt`` delta of those samples.
    """
    series = cpu_series(proc_stat)
    warn = list(warnings)
    if proc_stat and not series:
        warn.append("fewer than two usable /proc/stat samples: no per-CPU series")
    return Profile(
        created_at=created_at or dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        hostname=hostname,
        recording=recording,
        stacks=stacks,
        numa_nodes=list(numa_nodes),
        cpu_series=series,
        cpu=summarize_cpu(series, numa_nodes) if series else None,
        context_switches=context_switches or context_switches_from_proc_stat(proc_stat),
        microarch=derive_microarch(microarch or {}),
        status=status,
        warnings=warn,
        simulation=simulation,
    )


_PROFILE_HINT = (
    "record the profile again with this version of myaccel (`myaccel profile --out profile.json`)"
)


def profile_from_dict(doc: Any, *, source: str = "profile") -> Profile:
    """Validate a decoded profile document; refuses any other schema with a hint."""
    return validate(doc, Profile, Source(None, source, _PROFILE_HINT, UsageError))


def load_profile(path: str | Path) -> Profile:
    return load(path, Profile, what="profile file", hint=_PROFILE_HINT, error=UsageError)


def save_profile(profile: Profile, path: str | Path) -> Path:
    """Write the profile JSON (``myaccel.artifacts.save``)."""
    return save(path, profile)
