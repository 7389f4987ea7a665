"""The CPUs and memory one server may use, in one place: the CPUs it sees (its affinity,
``Cpus_allowed_list``: a systemd ``CPUAffinity`` or a cpuset is already in it), the CPUs it
can keep busy (also its cgroup's CPU quota), the memory nodes it may allocate from
(``Mems_allowed_list``) and the memory it may use (its cgroup's limit, a container's limit,
the RAM). Every rule sizes by these, not by the host's counts: a 4-CPU container on a
64-core host is a 4-CPU server, a server pinned to node 1 is placed on node 1. A pure
function of the facts; the cgroup readers are in ``cpulimits.py`` and ``memory.py``."""

from __future__ import annotations

import math
from dataclasses import dataclass

from myaccel.cpulist import parse_cpu_list
from myaccel.model import Fact, Facts, known, unknown


@dataclass(frozen=True)
class ServerResources:
    visible_cpus: Fact[int]  # min(host, affinity): what a server sizes itself by
    usable_cpus: Fact[int]  # also ceil(cgroup quota): what it can keep busy
    memory_bytes: Fact[int]  # min(its cgroup limit, the probe's limit or RAM)
    cpus: frozenset[int] | None  # its Cpus_allowed_list that is online; None: unknown
    mems: frozenset[int] | None  # its Mems_allowed_list; None: unknown or no server facts
    online: frozenset[int] | None  # the host's online CPUs; None: unknown


def _visible_cpus(facts: Facts) -> Fact[int]:
    host = facts.cpu.logical_cpus
    if not host.known or host.value is None:
        return unknown(host.unknown or "host CPU count unknown", host.source)
    best, why = host.value, f"host: {host.value} logical CPUs"
    srv = facts.server
    if srv is None:
        return known(best, f"{why} (no server facts: its own limits were not read)")
    if srv.cpus_allowed.known and srv.cpus_allowed.value:
        n = len(parse_cpu_list(srv.cpus_allowed.value))
        if 0 < n < best:
            best, why = n, f"server affinity: Cpus_allowed_list {srv.cpus_allowed.value} ({n} CPUs)"
    return known(best, why)


def _usable_cpus(facts: Facts, visible: Fact[int]) -> Fact[int]:
    srv = facts.server
    if not visible.known or visible.value is None or srv is None:
        return visible
    best, why = visible.value, visible.source
    quota = srv.cpu_quota_cpus
    if quota.known and quota.value is not None:
        n = max(1, math.ceil(quota.value - 1e-9))
        if n < best:
            best, why = n, f"server cgroup CPU quota: {quota.value:g} CPUs ({quota.source})"
    return known(best, why)


def _memory(facts: Facts) -> Fact[int]:
    budget: int | None = None
    src = ""
    s = facts.server
    if s is not None and s.cgroup_limit_bytes.known and s.cgroup_limit_bytes.value:
        budget = s.cgroup_limit_bytes.value
        src = f"server cgroup limit ({s.cgroup_limit_bytes.source})"
    eff = facts.memory.effective_limit_bytes
    if eff.known and eff.value and (budget is None or eff.value < budget):
        budget, src = eff.value, f"min(RAM, cgroup limit) ({eff.source})"
    if budget is None:
        return unknown("memory size unknown", eff.source)
    return known(budget, src)


def _list(fact: Fact[str] | None) -> frozenset[int] | None:
    if fact is None or not fact.known or not fact.value:
        return None
    return frozenset(parse_cpu_list(fact.value))


def server_resources(facts: Facts) -> ServerResources:
    """The server's share of the machine (host-only facts: the host's, said so)."""
    visible = _visible_cpus(facts)
    s = facts.server
    online = _list(facts.cpu.online_cpus)
    allowed = _list(s.cpus_allowed if s is not None else None)
    if allowed is not None and online is not None and allowed & online:
        allowed = allowed & online  # an offline CPU in an affinity mask runs nothing
    return ServerResources(
        visible_cpus=visible,
        usable_cpus=_usable_cpus(facts, visible),
        memory_bytes=_memory(facts),
        cpus=allowed,
        mems=_list(s.mems_allowed if s is not None else None),
        online=online,
    )
