"""How many CPUs a server may really use: its affinity (``Cpus_allowed_list``), its cgroup's
CPU quota (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``/``cpu.cfs_period_us``) and the host's
online CPUs, whichever binds first. Rules size threads, spin and redo by this, not by the
host's CPU count (a 4-CPU container on a 64-core host is a 4-CPU server)."""

from __future__ import annotations

import math

from myaccel.cpulist import parse_cpu_list
from myaccel.facts.cgroup import ancestors, cgroup_paths
from myaccel.facts.sysroot import Sysroot
from myaccel.model import Fact, Facts, known, unknown

V1_CPU_BASES = ("/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu")


def _quota_v2(sr: Sysroot, path: str) -> Fact[float]:
    best: float | None = None
    src = ""
    seen = False
    for d in ancestors("/sys/fs/cgroup", path):
        got = sr.read_present(f"{d}/cpu.max")
        if got is None:
            continue
        if not got.known:  # there but unreadable: the quota is unknown, not "no quota"
            return unknown(f"{d}/cpu.max: {got.unknown}", f"{d}/cpu.max")
        raw = got.value or ""
        seen = True
        fields = raw.split()
        if len(fields) != 2 or not fields[1].isdigit() or int(fields[1]) <= 0:
            return unknown(f"{d}/cpu.max: unexpected content {raw.strip()[:40]!r}", f"{d}/cpu.max")
        if fields[0] == "max":
            continue
        if not fields[0].isdigit():
            return unknown(f"{d}/cpu.max: unexpected content {raw.strip()[:40]!r}", f"{d}/cpu.max")
        cpus = int(fields[0]) / int(fields[1])
        if best is None or cpus < best:
            best, src = cpus, f"{d}/cpu.max"
    if not seen:
        return unknown(
            f"no cpu.max readable for {path} (cpu controller not enabled)", "/sys/fs/cgroup"
        )
    return Fact[float](value=best, source=src or "cpu.max: max (no quota)")


def _quota_v1(sr: Sysroot, path: str) -> Fact[float]:
    for base in V1_CPU_BASES:
        if not sr.exists(base):
            continue
        best: float | None = None
        src = ""
        for d in ancestors(base, path):
            got_q = sr.read_present(f"{d}/cpu.cfs_quota_us")
            got_p = sr.read_present(f"{d}/cpu.cfs_period_us")
            if got_q is None or got_p is None:
                continue
            for got in (got_q, got_p):
                if not got.known:  # there but unreadable: unknown, not "no quota"
                    return unknown(f"{got.source}: {got.unknown}", got.source)
            q, p = got_q.value or "", got_p.value or ""
            try:
                quota, period = int(q.strip()), int(p.strip())
            except ValueError:
                return unknown(
                    f"{d}: unexpected cfs quota/period {q.strip()[:20]!r}/{p.strip()[:20]!r}", d
                )
            if quota <= 0 or period <= 0:
                continue  # -1: no quota
            if best is None or quota / period < best:
                best, src = quota / period, f"{d}/cpu.cfs_quota_us"
        return Fact[float](value=best, source=src or f"{base}: no quota")
    return unknown("no v1 cpu controller mounted", "/sys/fs/cgroup/cpu")


def cgroup_cpu_quota(sr: Sysroot, cgroup_file: str) -> Fact[float]:
    """The CPU quota of the process whose /proc/PID/cgroup is ``cgroup_file``, in CPUs
    (4.0 for ``cpu.max 400000 100000``); known None means no quota anywhere on its path."""
    text = sr.read_text(cgroup_file)
    if text is None:
        return unknown("cannot read the process's cgroup file", cgroup_file)
    v2, v1 = cgroup_paths(text, "cpu")
    if v1 is not None:
        return _quota_v1(sr, v1)
    if v2 is not None:
        return _quota_v2(sr, v2)
    return unknown("no cpu controller in the cgroup file", cgroup_file)


def server_visible_cpus(facts: Facts) -> Fact[int]:
    """The CPUs the server sees: min(host CPUs, its affinity), without its cgroup quota.
    What a server sizes itself by (MariaDB's thread_pool_size defaults to it)."""
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


def server_cpu_budget(facts: Facts) -> Fact[int]:
    """The CPUs the server can use: min(host CPUs, its affinity, ceil(its cgroup quota)),
    with the source naming which one binds. Host-only facts give the host's CPUs, said so."""
    visible = server_visible_cpus(facts)
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
