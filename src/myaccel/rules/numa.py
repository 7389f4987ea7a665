"""Where the server's memory and threads go on a NUMA machine: bind, interleave or leave
alone, from the nodes that hold the server's own CPUs (its affinity: systemd CPUAffinity,
a cpuset) and memory (Mems_allowed_list).

Pure: the NUMA rule (``os_rules.numa_binding``) gives the nodes, the server's CPUs and
memory nodes, and the buffer pool; ``place`` answers with a policy and one row per node
saying what it is for. What it guarantees (issue 34's defects 1-3):

- a node without the server's CPUs, outside its memory nodes, or without memory (a
  memory-only node: HBM, CXL) is never bound nor interleaved over;
- a binding's CPUs are the server's own CPUs on the chosen nodes: it never widens them;
- memory is bound strictly only with headroom (the pool at most ``HEADROOM`` of the chosen
  nodes' memory), within one socket (the nearer side of the distance table's largest
  step, ``_near``; with distances unknown,
  at most half the candidate nodes), and never to every candidate node (that is what
  interleave is for). Otherwise: interleave over the candidates, or nothing.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

from myaccel.cpulist import format_cpu_list, parse_cpu_list
from myaccel.model import NumaNode
from myaccel.units import format_bytes

HEADROOM = 0.70  # strict binding only if the pool fills at most 70% of the nodes' memory
LOCAL = 10  # the firmware's distance of a node to itself
# Linux's REMOTE_DISTANCE (include/linux/topology.h): the default distance to another
# socket's node; within a socket the tables seen are below it (11-12 Intel SNC and AMD
# NPS, 16 Kunpeng 920), across sockets at or above it (21, 25-33, 32)
REMOTE = 20

Policy = Literal["bind", "interleave", "none"]


@dataclass(frozen=True)
class NodeRow:
    node: int
    cpus: str
    server_cpus: str
    memory_bytes: int | None
    distance: int | None  # from the anchor node
    role: Literal["bind", "interleave", "unused"]
    why: str


@dataclass(frozen=True)
class Placement:
    policy: Policy
    nodes: tuple[int, ...]
    cpus: tuple[int, ...]  # the server's CPUs on ``nodes`` (a binding's CPUAffinity)
    rows: tuple[NodeRow, ...]
    reason: str


def _max_distance(group: list[NumaNode], index: dict[int, int]) -> int | None:
    """The largest distance between two nodes of ``group`` (``LOCAL`` for one node); None
    when a node has no distances."""
    if any(n.distances is None for n in group):
        return None
    return max((n.distances or [])[index[m.node]] for n in group for m in group)


def _near(group: list[NumaNode], index: dict[int, int]) -> int | None:
    """The largest distance that still counts as one socket among ``group``: the remote
    distances sorted, split at their largest step (by ratio). Cross-socket distances need
    not be one value: Kunpeng 920's table has 16 within a socket and 25, 32 and 33 across
    it, so "below the largest distance" would call nodes 0-2 one socket. With one remote
    value there is no step: only a single node counts as near (the two cannot be told
    apart: 21 across two sockets, 12 within one EPYC socket); nor when the step is among
    distances of ``REMOTE`` and above. None without distances."""
    if any(n.distances is None for n in group):
        return None
    remote = sorted(
        {(n.distances or [])[index[m.node]] for n in group for m in group if m.node != n.node}
    )
    if len(remote) < 2:
        return LOCAL
    steps = [(b / a, a) for a, b in pairwise(remote) if a > 0]
    near = max(steps)[1] if steps else LOCAL
    # a step among remote-socket distances only (a 4-socket table: 21 and 31) is no socket
    return near if near < REMOTE else LOCAL


@dataclass(frozen=True)
class _Nodes:
    """The nodes sorted out: each node's CPUs the server may use, why a node is no
    candidate, and the candidates (the server's CPUs, memory nodes and memory)."""

    all: list[NumaNode]
    own: dict[int, list[int]]
    unused: dict[int, str]
    cand: list[NumaNode]

    @property
    def index(self) -> dict[int, int]:
        return {n.node: i for i, n in enumerate(self.all)}

    def rows(
        self, chosen: set[int], role: Literal["bind", "interleave"], anchor: int | None, spare: str
    ) -> tuple[NodeRow, ...]:
        index = self.index
        a = self.all[index[anchor]] if anchor is not None else None
        out = []
        for n in self.all:
            dist = a.distances[index[n.node]] if a is not None and a.distances else None
            used = n.node in chosen
            out.append(
                NodeRow(
                    node=n.node,
                    cpus=n.cpus,
                    server_cpus=format_cpu_list(self.own[n.node]),
                    memory_bytes=n.memory_total_bytes,
                    distance=dist,
                    role=role if used else "unused",
                    why=role if used else self.unused.get(n.node, spare),
                )
            )
        return tuple(out)


def _sort(
    nodes: list[NumaNode],
    server_cpus: AbstractSet[int] | None,
    server_mems: AbstractSet[int] | None,
) -> _Nodes:
    own: dict[int, list[int]] = {}
    unused: dict[int, str] = {}
    cand: list[NumaNode] = []
    for n in nodes:
        cpus = parse_cpu_list(n.cpus)
        own[n.node] = [c for c in cpus if server_cpus is None or c in server_cpus]
        if not cpus:
            unused[n.node] = "no CPUs (a memory-only node: HBM, CXL)"
        elif not own[n.node]:
            unused[n.node] = "none of the server's CPUs"
        elif server_mems is not None and n.node not in server_mems:
            unused[n.node] = "not among the server's memory nodes (Mems_allowed_list)"
        elif not n.memory_total_bytes:
            unused[n.node] = "no memory, or its size unknown"
        else:
            cand.append(n)
    return _Nodes(nodes, own, unused, cand)


def _memory(group: list[NumaNode]) -> int:
    return sum(n.memory_total_bytes or 0 for n in group)


def _grow(ns: _Nodes, anchor: NumaNode, pool_bytes: int) -> list[NumaNode]:
    """The nearest candidates to ``anchor`` (by distance, else node order), up to the
    first set whose memory holds the pool with headroom (or all of them)."""
    index = ns.index
    if anchor.distances is not None and all(n.distances is not None for n in ns.cand):
        ad = anchor.distances
        order = sorted(ns.cand, key=lambda n: (ad[index[n.node]], n.node))
    else:
        order = sorted(ns.cand, key=lambda n: (n.node != anchor.node, n.node))
    chosen: list[NumaNode] = []
    for n in order:
        chosen.append(n)
        if pool_bytes <= HEADROOM * _memory(chosen):
            break
    return chosen


def place(
    nodes: list[NumaNode],
    server_cpus: AbstractSet[int] | None,
    server_mems: AbstractSet[int] | None,
    pool_bytes: int,
) -> Placement:
    """The placement for a buffer pool of ``pool_bytes`` of a server that may run on
    ``server_cpus`` and allocate on ``server_mems`` (None: no limit known)."""
    ns = _sort(nodes, server_cpus, server_mems)
    if not ns.cand:
        return Placement(
            "none", (), (), ns.rows(set(), "bind", None, ""),
            "no node holds both the server's CPUs and memory",
        )  # fmt: skip
    anchor = max(ns.cand, key=lambda n: (len(ns.own[n.node]), -n.node))
    chosen = _grow(ns, anchor, pool_bytes)
    held = pool_bytes <= HEADROOM * _memory(chosen)
    ids = {n.node for n in chosen}
    pool = f"the pool ({format_bytes(pool_bytes)})"
    if len(ns.cand) == 1:
        if held:
            return Placement(
                "bind", tuple(sorted(ids)), tuple(ns.own[anchor.node]),
                ns.rows(ids, "bind", anchor.node, ""),
                f"{pool} fits node {anchor.node}'s {format_bytes(_memory(chosen))} with headroom "
                f"(at most {HEADROOM:.0%}), and the server runs on its CPUs",
            )  # fmt: skip
        return Placement(
            "none", (), (), ns.rows(set(), "bind", anchor.node, "the pool does not fit"),
            f"{pool} does not fit node {anchor.node}'s {format_bytes(_memory(chosen))} with "
            "headroom: local-first allocation spills over safely",
        )  # fmt: skip
    index = ns.index
    within, near = _max_distance(chosen, index), _near(ns.cand, index)
    if within is not None and near is not None:
        narrow = within <= near
    else:
        narrow = 2 * len(chosen) <= len(ns.cand)
    if held and len(chosen) < len(ns.cand) and narrow:
        cpus = tuple(sorted(c for n in chosen for c in ns.own[n.node]))
        return Placement(
            "bind", tuple(sorted(ids)), cpus,
            ns.rows(ids, "bind", anchor.node, "the pool fits the bound nodes"),
            f"{pool} fits node(s) {format_cpu_list(sorted(ids))} "
            f"({format_bytes(_memory(chosen))}) with headroom, within one socket",
        )  # fmt: skip
    if not held:
        why = f"{pool} needs more than {HEADROOM:.0%} of {format_bytes(_memory(ns.cand))}"
    elif len(chosen) == len(ns.cand):
        why = f"{pool} needs every node that holds the server's CPUs"
    else:
        why = (
            f"binding {len(chosen)} of {len(ns.cand)} nodes would span sockets (the largest "
            "distance) and idle the others' CPUs; a strict bind turns spill-over into an "
            "OOM kill"
        )
    every = {n.node for n in ns.cand}
    return Placement(
        "interleave", tuple(sorted(every)), (), ns.rows(every, "interleave", anchor.node, ""),
        f"{why}: interleave over the server's nodes",
    )  # fmt: skip


def table(p: Placement) -> list[str]:
    """One line per node: what the placement does with it and why."""
    lines = [f"NUMA placement: {p.policy} ({p.reason})"]
    for r in p.rows:
        dist = "-" if r.distance is None else str(r.distance)
        lines.append(
            f"node {r.node}: cpus {r.cpus or '-'}, server's {r.server_cpus or '-'}, "
            f"memory {format_bytes(r.memory_bytes)}, distance {dist}: {r.role}"
            + (f" ({r.why})" if r.role == "unused" and r.why else "")
        )
    return lines
