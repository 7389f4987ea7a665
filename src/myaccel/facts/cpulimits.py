"""A process's cgroup CPU quota (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``/``cpu.cfs_period_us``)
along its cgroup path, in CPUs. What binds first, the affinity, the quota or the host's
CPUs, is ``resources.py``'s."""

from __future__ import annotations

from myaccel.facts.cgroup import ancestors, cgroup_paths
from myaccel.facts.sysroot import Sysroot
from myaccel.model import Fact, unknown

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
