"""What is measured over the recording window beside the stacks: /proc/stat every second,
the NUMA nodes, the server's status counters and the CPU family's ``perf stat`` metric set."""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from myaccel.errors import MyaccelError
from myaccel.paths import entries
from myaccel.profile.records import NodeCpus, parse_cpulist

if TYPE_CHECKING:
    from myaccel.server.connection import ConnectParams


NODE_DIR = "/sys/devices/system/node"
STACK_SAMPLE_INTERVAL_S = 1.0


def numa_nodes(root: str | Path = "/") -> list[NodeCpus]:
    base = Path(root) / NODE_DIR.lstrip("/")
    out: list[NodeCpus] = []
    for d in entries(base):
        m = re.fullmatch(r"node(\d+)", d.name)
        if not m:
            continue
        try:
            cpus = parse_cpulist((d / "cpulist").read_text())
        except (OSError, ValueError):
            continue
        if cpus:
            out.append(NodeCpus(node=int(m.group(1)), cpus=cpus))
    return sorted(out, key=lambda n: n.node)


def has_cpu_pmu() -> bool:
    from myaccel.facts.sysroot import Sysroot
    from myaccel.profile.perfstat import collect_event_inventory

    return collect_event_inventory(Sysroot("/")).has_core_pmu


class ProcStatSampler:
    """Reads /proc/stat every ``interval_s`` in a daemon thread until stopped."""

    def __init__(self, interval_s: float = STACK_SAMPLE_INTERVAL_S, path: str = "/proc/stat"):
        self.interval_s = interval_s
        self.path = path
        self.samples: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="proc-stat", daemon=True)

    def _read(self) -> None:
        with contextlib.suppress(OSError):
            self.samples.append((time.monotonic(), Path(self.path).read_text()))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._read()

    def start(self) -> None:
        self._read()
        self._thread.start()

    def stop(self) -> list[tuple[float, str]]:
        self._stop.set()
        self._thread.join(timeout=5)
        self._read()
        return list(self.samples)


def read_status(params: ConnectParams) -> dict[str, str]:
    from myaccel.server.connection import connect, query_rows

    conn = connect(params)
    try:
        return {str(k): str(v) for k, v in query_rows(conn, "SHOW GLOBAL STATUS")}
    finally:
        conn.close()


# ---------------------------------------------------------------- micro-architecture


@dataclass
class MicroarchResult:
    values: dict[str, float] = field(default_factory=dict)
    note: str = ""


def microarch_counter(pid: int, duration_s: float) -> Callable[[], MicroarchResult] | None:
    """A thunk that counts the family's metric set over the window, or None without a PMU."""
    from myaccel.facts.cpu import collect_cpu
    from myaccel.facts.sysroot import Sysroot
    from myaccel.profile.metrics import compute, to_microarch
    from myaccel.profile.perfstat import collect_event_inventory, run_perf_stat, select_events

    sr = Sysroot("/")
    inv = collect_event_inventory(sr)
    if not inv.has_core_pmu:
        return None
    family = collect_cpu(sr).family.value or ("x86-intel" if os.uname().machine == "x86_64" else "")
    plan = select_events(family, inv)

    def run() -> MicroarchResult:
        try:
            result = run_perf_stat(plan, duration_s=duration_s, pid=pid)
        except MyaccelError as exc:
            return MicroarchResult(note=f"perf stat failed: {exc.message}")
        values = to_microarch(compute(family, result))
        return MicroarchResult(values=values, note=f"perf stat, metric set {family}")

    return run


NO_PMU_NOTE = (
    "no CPU PMU under /sys/bus/event_source/devices (a VM without a virtual PMU): no "
    "micro-architecture metrics; stacks sampled with cpu-clock; `--simulate` runs the "
    "valgrind fallback"
)
