"""The fence that keeps a clone from starving the server it copies.

Every start of the clone's server (and the copy tool of a MariaDB clone) runs under
``taskset -c CPUS nice -n 10 ionice -c2 -n7``:

- CPUs: the CPUs the source may use that are left once it is given the lower half of this
  host's CPUs, i.e. the upper half (at least one CPU; all of them on a one-CPU host). A
  source already pinned to some CPUs leaves the others to the clone when there are any.
- nice 10: where the two compete for a CPU, the scheduler gives the source (nice 0) about
  nine times the clone's share (CFS weights 1024 vs 110).
- I/O: best effort, lowest priority (7), not idle: an idle-class clone would stall behind
  the source's writes and make its A/B runs noisy.

An A/B on the clone compares two configurations under the same fence, so the fence costs
absolute throughput, not the comparison.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from myaccel import proc
from myaccel.clone.record import FenceInfo

NICE = 10
IO_CLASS, IO_LEVEL = 2, 7


@dataclass(frozen=True)
class Fence:
    cpus: list[int] | None  # None: no CPU set (one CPU, or taskset missing)
    nice: int
    reason: str

    def argv_prefix(self) -> list[str]:
        argv: list[str] = []
        if self.cpus and proc.which("taskset"):
            argv += ["taskset", "-c", ",".join(str(c) for c in self.cpus)]
        argv += ["nice", "-n", str(self.nice)]
        if proc.which("ionice"):
            argv += ["ionice", f"-c{IO_CLASS}", f"-n{IO_LEVEL}"]
        return argv

    def info(self) -> FenceInfo:
        return FenceInfo(
            cpus=self.cpus,
            nice=self.nice,
            io_priority=f"best-effort {IO_LEVEL}",
            argv_prefix=self.argv_prefix(),
            reason=self.reason,
        )


def choose_fence(
    source_cpus: Sequence[int] | None,
    *,
    host_cpus: Sequence[int] | None = None,
    cpus: Sequence[int] | None = None,
    nice: int | None = None,
) -> Fence:
    """The clone's CPUs and priority (``cpus``/``nice`` given by the user win)."""
    level = NICE if nice is None else nice
    if cpus:
        return Fence(sorted(cpus), level, "CPUs given with --cpus")
    host = sorted(host_cpus if host_cpus is not None else os.sched_getaffinity(0))
    if len(host) <= 1:
        return Fence(None, level, "one CPU: priority only (nice, I/O best-effort 7)")
    pinned = sorted(source_cpus or [])
    if pinned and set(pinned) < set(host):
        free = [c for c in host if c not in pinned]
        return Fence(free, level, "the CPUs the source is not pinned to, at lower priority")
    upper = host[len(host) // 2 :]
    return Fence(
        upper,
        level,
        f"the upper half of the {len(host)} CPUs at lower priority (nice {level}, I/O "
        f"best-effort {IO_LEVEL}): the source wins where they compete",
    )
