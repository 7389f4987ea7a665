"""The server's process as the kernel places it: its binary, the CPUs and memory nodes it may
use (``/proc/PID/status``), its cgroup's memory limit and CPU quota. Read through a
``Sysroot``, so that a captured tree holding ``proc/PID/status`` and ``proc/PID/cgroup``
stands for a pinned or confined server as well as the live ``/proc`` does."""

from __future__ import annotations

import os
from dataclasses import dataclass

from myaccel.cpulist import parse_cpu_list
from myaccel.facts.cpulimits import cgroup_cpu_quota
from myaccel.facts.memory import cgroup_memory
from myaccel.facts.sysroot import Sysroot
from myaccel.model import Fact, known, unknown


@dataclass(frozen=True)
class ProcessFacts:
    binary_path: Fact[str]
    cpus_allowed: Fact[str]
    mems_allowed: Fact[str]
    cgroup_limit_bytes: Fact[int]
    cpu_quota_cpus: Fact[float]

    @classmethod
    def unknown(cls, why: str, source: str) -> ProcessFacts:
        return cls(*(unknown(why, source) for _ in range(5)))


def status_field(text: str, key: str) -> str | None:
    """One ``Key:`` line of a ``/proc/PID/status``, its value stripped."""
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return line.split(":", 1)[1].strip()
    return None


def cpu_list_field(value: str | None, key: str, src: str) -> Fact[str]:
    """A ``Cpus_allowed_list``-style field: known when it parses as a CPU list."""
    if not value:
        return unknown("not readable", src)
    try:
        parse_cpu_list(value)
    except ValueError as exc:
        return unknown(f"{src}: {key} {value[:40]!r}: {exc}", src)
    return known(value, src)


def process_facts(sr: Sysroot, pid: int) -> ProcessFacts:
    """What the kernel says of process ``pid`` under ``sr``."""
    exe_src = f"/proc/{pid}/exe"
    try:
        exe: Fact[str] = known(os.readlink(sr.path(exe_src)), exe_src)
    except OSError as exc:
        exe = unknown(f"cannot read: {exc.strerror}", exe_src)
    status_src = f"/proc/{pid}/status"
    status = sr.read_text(status_src) or ""
    return ProcessFacts(
        binary_path=exe,
        cpus_allowed=cpu_list_field(
            status_field(status, "Cpus_allowed_list"), "Cpus_allowed_list", status_src
        ),
        mems_allowed=cpu_list_field(
            status_field(status, "Mems_allowed_list"), "Mems_allowed_list", status_src
        ),
        cgroup_limit_bytes=cgroup_memory(sr, f"/proc/{pid}/cgroup")[2],
        cpu_quota_cpus=cgroup_cpu_quota(sr, f"/proc/{pid}/cgroup"),
    )
