"""Reproduce a bug report in the lab: a captured sysroot (`myaccel probe --capture DIR`)
and the reporter's option file in, a running guest out, with the reporter's NUMA layout
(scaled to what an emulated machine here can hold) and the option file in the server's
configuration, and myaccel's plan made inside it.

The layout is kept, the sizes are not: the guest has as many NUMA nodes as the report (up
to ``MAX_NODES``), the same number of sockets when that divides the nodes, CPUs shared out
evenly (``GUEST_CPUS`` in all, fewer if the report has fewer), and each node's memory in
the report's proportions of a ``GUEST_MEMORY_MIB`` total (less if the report has less; at
least ``MIN_NODE_MIB`` a node). Ratios the rules compare
(a buffer pool sized from the machine's memory against one node's) survive the scaling;
absolute sizes do not, and the summary says what was scaled.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError
from lab.topology import NumaNode, Topology

MAX_NODES = 4
GUEST_CPUS = 4
GUEST_MEMORY_MIB = 4096
MIN_NODE_MIB = 512
STEP_MIB = 16
OPTION_FILE = "/etc/mysql/mariadb.conf.d/90-bug-report.cnf"


@dataclass(frozen=True)
class ReportedMachine:
    """What the sysroot says of the reporter's machine."""

    node_cpus: dict[int, int]  # node -> its CPU count
    node_kib: dict[int, int]  # node -> its MemTotal
    sockets: int
    arch: str

    def describe(self) -> str:
        cpus = sum(self.node_cpus.values())
        mem = sum(self.node_kib.values()) / 2**20
        return (
            f"{self.arch}, {cpus} CPUs in {self.sockets} socket(s), {len(self.node_cpus)} "
            f"NUMA node(s), {mem:.1f} GiB"
        )


def _cpu_count(text: str) -> int:
    n = 0
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        n += int(hi or lo) - int(lo) + 1
    return n


def read_machine(sysroot: Path) -> ReportedMachine:
    """The NUMA nodes (CPUs, memory), sockets and architecture a captured sysroot shows."""
    nodes_dir = sysroot / "sys/devices/system/node"
    if not (sysroot / "proc").is_dir() or not (sysroot / "sys").is_dir():
        raise LabError(
            f"lab: {sysroot} is not a captured sysroot (no proc/ and sys/): make one with "
            "`myaccel probe --capture DIR`"
        )
    node_cpus: dict[int, int] = {}
    node_kib: dict[int, int] = {}
    for d in sorted(nodes_dir.glob("node[0-9]*")):
        node = int(d.name.removeprefix("node"))
        cpulist = (d / "cpulist").read_text() if (d / "cpulist").exists() else ""
        meminfo = (d / "meminfo").read_text() if (d / "meminfo").exists() else ""
        m = re.search(r"MemTotal:\s+(\d+) kB", meminfo)
        node_cpus[node] = _cpu_count(cpulist)
        node_kib[node] = int(m.group(1)) if m else 0
    if not node_cpus:  # no NUMA in the capture: one node with the whole machine
        meminfo = (sysroot / "proc/meminfo").read_text(errors="replace")
        m = re.search(r"MemTotal:\s+(\d+) kB", meminfo)
        online = sysroot / "sys/devices/system/cpu/online"
        node_cpus = {0: _cpu_count(online.read_text()) if online.exists() else 1}
        node_kib = {0: int(m.group(1)) if m else 0}
    packages = {
        p.read_text().strip()
        for p in (sysroot / "sys/devices/system/cpu").glob("cpu[0-9]*/topology/physical_package_id")
    }
    cpuinfo = sysroot / "proc/cpuinfo"
    text = cpuinfo.read_text(errors="replace") if cpuinfo.exists() else ""
    arch = "aarch64" if re.search(r"^CPU implementer", text, re.M) else "x86_64"
    return ReportedMachine(node_cpus, node_kib, max(1, len(packages)), arch)


def guest_topology(machine: ReportedMachine) -> Topology:
    """The reporter's layout at the lab's size (see the module's docstring)."""
    reported = sorted(machine.node_cpus)
    if len(reported) > MAX_NODES:
        raise LabError(
            f"lab: the report has {len(reported)} NUMA nodes; the lab emulates up to {MAX_NODES}"
        )
    nodes = [n for n in reported if machine.node_cpus[n] > 0] or reported[:1]
    cpus = min(GUEST_CPUS, sum(machine.node_cpus[n] for n in nodes))
    per_node = max(1, cpus // len(nodes))
    total_kib = sum(machine.node_kib[n] for n in nodes) or 1
    budget_mib = min(GUEST_MEMORY_MIB, max(MIN_NODE_MIB * len(nodes), total_kib // 1024))
    sockets = machine.sockets if len(nodes) % machine.sockets == 0 else len(nodes)
    sockets = min(sockets, len(nodes))
    guest_nodes = []
    for i, n in enumerate(nodes):
        share = budget_mib * machine.node_kib[n] / total_kib
        mib = max(MIN_NODE_MIB, int(share // STEP_MIB) * STEP_MIB)
        guest_nodes.append(NumaNode(tuple(range(i * per_node, (i + 1) * per_node)), mib))
    topology = Topology(
        sockets=sockets,
        cores_per_socket=per_node * len(nodes) // sockets,
        nodes=tuple(guest_nodes),
    )
    topology.check()
    return topology


def describe_topology(t: Topology) -> str:
    nodes = ", ".join(f"{len(n.cpus)} CPU(s) + {n.memory_mib} MiB" for n in t.nodes)
    return f"{t.cpus} CPUs in {t.sockets} socket(s), nodes: {nodes}"


def check_option_file(path: Path) -> str:
    """The option file's text; a clear error for anything but a readable text file."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise LabError(f"lab: cannot read the option file {path}: {exc}") from exc
    if "[" not in text:
        raise LabError(f"lab: {path} has no [group] line: not an option file")
    return text


def stage_option_file(path: Path, workdir: Path) -> Path:
    """A copy in the guest's directory (what was reproduced stays with the guest)."""
    check_option_file(path)
    copy = workdir / "bug-report.cnf"
    shutil.copyfile(path, copy)
    return copy
