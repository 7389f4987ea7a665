"""The process layer of `tune` (``--layers server,process``): what can be set for the server
process alone, without touching the host.

- ``cpu_affinity``: the CPUs the server may run on, "all" (the plan: every CPU it may use
  now) or a contiguous set of them (every one on up to 8 CPUs; blocks aligned to their size
  on more). Applied by starting the trial's server under ``taskset -c LIST``.
- ``numa_policy``: "default" or "interleave" (``numactl --interleave=all``), only on a host
  with more than one NUMA node and numactl installed.
- the thread pool, where the server has one (MariaDB, Percona): ``thread_handling``
  (one-thread-per-connection or pool-of-threads) and ``thread_pool_size``, searched only
  with the pool on (``Dim.needs``). They are server options: the trial's option file
  carries them like any knob.

``cpu_affinity`` and ``numa_policy`` are not server variables: a trial's server starts under
the argv prefix ``launch_prefix`` gives (the candidate arm's alone; the plan's arm runs as
the plan says), so nothing on the sandbox changes and nothing outlives the trial's server:
the next start of either arm, and the sandbox's return to its own configuration after the
search, run without it. The plan a winner becomes carries them as the systemd settings of
the server's unit (``plan_target``), journaled by `apply` like any setting.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from myaccel import proc
from myaccel.cpulist import format_cpu_list, parse_cpu_list
from myaccel.knobs.server_knobs import ServerKnobs
from myaccel.knobs.values import KnobValue
from myaccel.model import Facts
from myaccel.rules.model import Layer
from myaccel.tune.space import Dim, Space

CPU_AFFINITY = "cpu_affinity"
NUMA_POLICY = "numa_policy"
THREAD_HANDLING = "thread_handling"
THREAD_POOL_SIZE = "thread_pool_size"
POOL = "pool-of-threads"
PER_CONNECTION = "one-thread-per-connection"
ALL = "all"
LAUNCH_PARAMS = (CPU_AFFINITY, NUMA_POLICY)  # not server variables: how the server starts
PROCESS_PARAMS = (*LAUNCH_PARAMS, THREAD_HANDLING, THREAD_POOL_SIZE)
EVERY_SET_UP_TO = 8  # CPUs: every contiguous set; beyond, blocks aligned to their size


def server_cpus(facts: Facts) -> list[int]:
    """The CPUs the server may run on now: its affinity among the online CPUs (an affinity
    mask often lists every possible CPU, online or not)."""
    s = facts.server
    allowed = _cpu_list(s.cpus_allowed.value if s is not None else None)
    online = _cpu_list(facts.cpu.online_cpus.value)
    if online is None:
        n = facts.cpu.logical_cpus.value
        online = list(range(n)) if n else None
    if allowed is None or online is None:
        return allowed or online or []
    return sorted(set(allowed) & set(online))


def _cpu_list(text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        return parse_cpu_list(text)
    except ValueError:
        return None


def cpu_sets(cpus: list[int]) -> list[str]:
    """The contiguous sets of ``cpus`` a search chooses from (smaller than all of them)."""
    n = len(cpus)
    if n > EVERY_SET_UP_TO:
        sizes = sorted({1 << k for k in range(n.bit_length()) if 1 << k < n} | {n // 2})
        starts = {size: range(0, n - size + 1, size) for size in sizes}
    else:
        starts = {size: range(0, n - size + 1) for size in range(1, n)}
    return [format_cpu_list(cpus[i : i + size]) for size, rng in starts.items() for i in rng]


def process_space(space: Space, facts: Facts, sk: ServerKnobs, base: Mapping[str, str]) -> Space:
    """``space`` with the process layer's dims (those this host and server have), each
    left out with its reason otherwise. ``base``: the plan's values, else the server's."""
    dims = list(space.dims)
    values: dict[str, KnobValue] = dict(space.base)
    left = dict(space.left_out)
    cpus = server_cpus(facts)
    if len(cpus) < 2:
        left[CPU_AFFINITY] = f"the server may run on {len(cpus) or 'an unknown number of'} CPU(s)"
    else:
        dims.append(Dim(CPU_AFFINITY, "choice", choices=(ALL, *cpu_sets(cpus))))
        values[CPU_AFFINITY] = ALL
    why = _numa_left_out(facts)
    if why:
        left[NUMA_POLICY] = why
    else:
        dims.append(Dim(NUMA_POLICY, "choice", choices=("default", "interleave")))
        values[NUMA_POLICY] = "default"
    why = _pool_left_out(sk)
    if why:
        left[THREAD_HANDLING] = left[THREAD_POOL_SIZE] = why
    else:
        handling = base.get(THREAD_HANDLING) or str(sk.default(THREAD_HANDLING))
        if handling not in (POOL, PER_CONNECTION):
            left[THREAD_HANDLING] = left[THREAD_POOL_SIZE] = f"thread_handling is {handling}"
        else:
            size = _int(base.get(THREAD_POOL_SIZE)) or max(1, len(cpus))
            top = max(2 * max(1, len(cpus)), size)
            dims.append(Dim(THREAD_HANDLING, "choice", choices=(PER_CONNECTION, POOL)))
            dims.append(Dim(THREAD_POOL_SIZE, "int", 1, top, needs=(THREAD_HANDLING, POOL)))
            values[THREAD_HANDLING] = handling
            values[THREAD_POOL_SIZE] = size
    return replace(space, dims=tuple(dims), base=values, left_out=left)


def with_layers(
    space: Space, layers: tuple[str, ...], facts: Facts, sk: ServerKnobs, base: Mapping[str, str]
) -> Space:
    """``space`` (the server layer) with the process layer when ``layers`` asks for it, else
    saying why its parameters are not searched."""
    if "process" in layers:
        return process_space(space, facts, sk, base)
    return not_searched(space)


def not_searched(space: Space) -> Space:
    """``space`` saying why the process layer is not in it (``--layers server``)."""
    left = dict(space.left_out)
    for name in PROCESS_PARAMS:
        left.setdefault(name, "process layer: searched with --layers server,process")
    return replace(space, left_out=left)


def all_nodes(facts: Facts) -> str | None:
    """The host's NUMA nodes as a list (``0-1``), or None when unknown."""
    nodes = facts.cpu.numa_nodes.value
    return format_cpu_list(sorted(n.node for n in nodes)) if nodes else None


def _numa_left_out(facts: Facts) -> str | None:
    nodes = facts.cpu.numa_nodes.value
    if nodes is None:
        return "the NUMA layout is unknown (see facts.json)"
    if len(nodes) < 2:
        return f"{len(nodes)} NUMA node on this host: a NUMA policy has nothing to choose"
    if proc.which("numactl") is None:
        return "numactl is not installed (apt-get install numactl)"
    return None


def _pool_left_out(sk: ServerKnobs) -> str | None:
    if not (sk.exists(THREAD_HANDLING) and sk.exists(THREAD_POOL_SIZE)):
        return f"no thread pool on {sk.label}"
    try:
        sk.parse_value(THREAD_HANDLING, POOL)
    except Exception:
        return f"no built-in thread pool on {sk.label} (a plugin, not loaded by the plan)"
    return None


def _int(text: str | None) -> int | None:
    try:
        return int(str(text)) if text is not None else None
    except ValueError:
        return None


def launch_prefix(changes: Mapping[str, str]) -> tuple[str, ...]:
    """The argv prefix a trial's server starts under (empty: as the plan's)."""
    argv: list[str] = []
    cpus = changes.get(CPU_AFFINITY)
    if cpus and cpus != ALL:
        argv += [proc.require("taskset"), "-c", cpus]
    if changes.get(NUMA_POLICY) == "interleave":
        argv += [proc.require("numactl"), "--interleave=all"]
    return tuple(argv)


def server_changes(changes: Mapping[str, str]) -> dict[str, str]:
    """``changes`` without the launch parameters (what the option file carries)."""
    return {k: v for k, v in changes.items() if k not in LAUNCH_PARAMS}


def check_changes(changes: Mapping[str, str], cpus: list[int]) -> str | None:
    """Why the process changes cannot run here, or None: the CPU set must be CPUs the
    server may use now."""
    text = changes.get(CPU_AFFINITY)
    if not text or text == ALL:
        return None
    try:
        want = parse_cpu_list(text)
    except ValueError as exc:
        return f"cpu_affinity {text!r}: {exc}"
    outside = sorted(set(want) - set(cpus))
    if not want or outside:
        return f"cpu_affinity {text}: CPU(s) {format_cpu_list(outside)} not available to the server"
    return None


def plan_target(name: str) -> tuple[str, Layer] | None:
    """The plan's target and layer of a launch parameter (None: a server variable)."""
    if name == CPU_AFFINITY:
        return "systemd:server/CPUAffinity", "numa"
    if name == NUMA_POLICY:
        return "systemd:server/NUMAPolicy", "numa"
    return None
