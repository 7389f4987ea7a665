"""Plans over generated topologies (issue 34): sockets and NUMA nodes with and without
CPUs, distances known or not, SMT, memory per node, a server pinned or not, CPU quotas and
cgroup memory limits, containers, guests (hypervisor known or not), PMD page sizes, MariaDB
and MySQL. For every one: the plan is made without an error, and it never

- binds the server outside its own CPUs, or onto a node without CPUs, or strictly without
  headroom, or to every node that holds its CPUs;
- sizes the buffer pool past the server's memory budget;
- sizes a thread pool by more CPUs than the server may use;
- applies a host-wide kernel setting from inside a container (or where that is unknown),
  or gives host hardware advice anywhere but on known bare metal;
- proposes code huge pages or 2 MiB text alignment where the PMD page is not 2 MiB;
- places NIC interrupts on CPUs that are not online.

``MYACCEL_TOPOLOGY_EXAMPLES`` sets the number of topologies (2,000 in `make test`).
Derandomized: CI sees the same topologies every run."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_rules import MARIADB_1011, MYSQL_80, arm_binary, host, server

from myaccel.cpulist import format_cpu_list, parse_cpu_list
from myaccel.model import Facts, NumaNode, known, unknown
from myaccel.rules.engine import Hints, make_plan
from myaccel.rules.model import Plan
from myaccel.rules.numa import HEADROOM
from myaccel.rules.ownership import scope_of

GiB = 1024**3
MiB = 1024**2
EXAMPLES = int(os.environ.get("MYACCEL_TOPOLOGY_EXAMPLES", "2000"))


@dataclass(frozen=True)
class Topo:
    nodes: list[NumaNode]
    online: list[int]
    server_cpus: list[int] | None  # None: not pinned
    server_mems: list[int] | None
    quota: float | None
    server_cgroup: int | None
    container: str | None  # None: unknown
    hypervisor: str | None  # None: unknown
    pmd: int
    flavor: str
    clients: int
    pool_ready: bool


@st.composite
def topologies(draw: st.DrawFn) -> Topo:
    sockets = draw(st.integers(1, 4))
    per_socket = draw(st.integers(1, 4))
    cpus_per_node = draw(st.integers(1, 16))
    smt = draw(st.sampled_from([1, 2]))
    gib = draw(st.integers(1, 1024))
    memory_only = draw(st.integers(0, 3))
    with_distances = draw(st.booleans())
    cpu_nodes = sockets * per_socket
    count = cpu_nodes + memory_only
    nodes: list[NumaNode] = []
    cpu = 0
    for i in range(count):
        if i < cpu_nodes:
            n = cpus_per_node * smt
            cpus, cpu = list(range(cpu, cpu + n)), cpu + n
            mem = gib * GiB
        else:
            cpus, mem = [], draw(st.sampled_from([0, 16, 96, 144])) * GiB
        row = None
        if with_distances:
            row = [
                10
                if j == i
                else 12
                if j < cpu_nodes and i < cpu_nodes and j // per_socket == i // per_socket
                else 40
                if j >= cpu_nodes or i >= cpu_nodes
                else 32
                for j in range(count)
            ]
        nodes.append(
            NumaNode(
                node=i,
                cpus=format_cpu_list(cpus),
                cpu_count=len(cpus),
                memory_total_bytes=mem,
                distances=row,
            )
        )
    online = list(range(cpu))
    pin = draw(st.sampled_from(["none", "node", "subset", "last-socket"]))
    server_cpus: list[int] | None
    if pin == "none":
        server_cpus = None
    elif pin == "node":
        server_cpus = parse_cpu_list(nodes[draw(st.integers(0, cpu_nodes - 1))].cpus)
    elif pin == "subset":
        server_cpus = sorted(
            draw(st.sets(st.sampled_from(online), min_size=1, max_size=len(online)))
        )
    else:
        last = range((sockets - 1) * per_socket, cpu_nodes)
        server_cpus = [c for i in last for c in parse_cpu_list(nodes[i].cpus)]
    server_mems = None
    if draw(st.booleans()):
        server_mems = sorted(draw(st.sets(st.integers(0, count - 1), min_size=1)))
    quota = draw(st.one_of(st.none(), st.floats(0.5, float(len(online)))))
    cgroup = draw(st.one_of(st.none(), st.integers(256, 1024 * 1024).map(lambda m: m * MiB)))
    return Topo(
        nodes=nodes,
        online=online,
        server_cpus=server_cpus,
        server_mems=server_mems,
        quota=quota,
        server_cgroup=cgroup,
        container=draw(st.sampled_from(["none", "docker", None])),
        hypervisor=draw(st.sampled_from(["none", "kvm", None])),
        pmd=draw(st.sampled_from([2 * MiB, 32 * MiB, 512 * MiB])),
        flavor=draw(st.sampled_from(["mariadb", "mysql"])),
        clients=draw(st.sampled_from([16, 200, 2000])),
        pool_ready=draw(st.booleans()),
    )


@functools.cache
def _base() -> Facts:
    return host("kunpeng920-2s")


def facts_for(t: Topo) -> Facts:
    base = _base()
    total = sum(n.memory_total_bytes or 0 for n in t.nodes)
    src = "generated"
    cpu = base.cpu.model_copy(
        update={
            "logical_cpus": known(len(t.online), src),
            "online_cpus": known(format_cpu_list(t.online), src),
            "numa_nodes": known(t.nodes, src),
            "hypervisor": known(t.hypervisor, src) if t.hypervisor else unknown("no DMI", src),
        }
    )
    memory = base.memory.model_copy(
        update={
            "total_bytes": known(total, src),
            "effective_limit_bytes": known(total, src),
            "cgroup_limit_bytes": known(None, src),
            "pmd_page_bytes": known(t.pmd, src),
        }
    )
    if t.flavor == "mariadb":
        srv = server(
            "10.11.19-MariaDB-0+deb12u1",
            "Debian 12",
            {**MARIADB_1011, "thread_pool_size": str(len(t.server_cpus or t.online))},
        )
    else:
        srv = server("8.0.34", "MySQL Community Server - GPL", MYSQL_80)
    srv = srv.model_copy(
        update={
            "cpus_allowed": known(format_cpu_list(t.server_cpus or t.online), src),
            "mems_allowed": known(
                format_cpu_list(t.server_mems if t.server_mems else [n.node for n in t.nodes]), src
            ),
            "cgroup_limit_bytes": known(t.server_cgroup, src),
            "cpu_quota_cpus": known(t.quota, src),
            "status": known({"Uptime": "60", "Max_used_connections": str(t.clients)}, src),
        }
    )
    binary = arm_binary().model_copy(update={"text_huge_page_ready": known(t.pool_ready, src)})
    container = known(t.container, src) if t.container else unknown("nothing readable", src)
    return base.model_copy(
        update={
            "cpu": cpu,
            "memory": memory,
            "server": srv,
            "binary": binary,
            "container": container,
        }
    )


def _drop_in(p: Plan) -> dict[str, str]:
    return {
        r.target.removeprefix("systemd:server/"): r.proposed
        for r in p.recommendations
        if r.target.startswith("systemd:server/")
    }


def check(t: Topo, p: Plan) -> None:
    allowed = set(t.server_cpus or t.online)
    cpu_nodes = {n.node for n in t.nodes if n.cpus}
    by_node = {n.node: n for n in t.nodes}
    # 1. placement
    d = _drop_in(p)
    if "CPUAffinity" in d:
        cpus = parse_cpu_list(d["CPUAffinity"])
        assert cpus and set(cpus) <= allowed, (d, allowed)
    if "NUMAMask" in d:
        mask = set(parse_cpu_list(d["NUMAMask"]))
        assert mask and mask <= cpu_nodes, (d, cpu_nodes)
        assert all(set(parse_cpu_list(by_node[m].cpus)) & allowed for m in mask), d
        if d.get("NUMAPolicy") == "bind":
            pool = next(
                int(r.evidence["innodb_buffer_pool_size"].split()[0])
                for r in p.recommendations
                if r.id == "numa-binding"
            )
            mem = sum(by_node[m].memory_total_bytes or 0 for m in mask)
            assert pool <= HEADROOM * mem, (pool, mem)
            usable = {
                n.node
                for n in t.nodes
                if set(parse_cpu_list(n.cpus)) & allowed
                and (t.server_mems is None or n.node in t.server_mems)
                and n.memory_total_bytes
            }
            assert mask != usable or len(usable) == 1, (mask, usable)
    # 2. memory within the budget
    if p.memory is not None and any(r.id == "server-buffer-pool-size" for r in p.recommendations):
        budget = min(
            x for x in (sum(n.memory_total_bytes or 0 for n in t.nodes), t.server_cgroup) if x
        )
        assert p.memory.within and p.memory.budget_bytes <= budget, (p.memory, budget)
    # 3. thread pool sized by the usable CPUs
    usable_cpus = len(allowed)
    if t.quota is not None:
        usable_cpus = min(usable_cpus, max(1, -(-t.quota // 1)))
    for r in p.recommendations:
        if r.target == "mysql:thread_pool_size":
            assert int(r.proposed) <= usable_cpus, (r.proposed, usable_cpus)
    # 4. who owns what
    for r in p.recommendations:
        scope = scope_of(r.target)
        if t.container != "none" and scope == "host-kernel":
            assert r.action == "advisory", r
        if scope == "host-hardware":
            assert t.container == "none" and t.hypervisor == "none", r
    # 5. no code huge pages without a 2 MiB PMD
    if t.pmd != 2 * MiB:
        ids = {r.id for r in p.recommendations}
        assert "os-code-huge-pages" not in ids and "build-text-alignment" not in ids
    # 6. IRQs on online CPUs; every skip says why
    online = set(t.online)
    for r in p.recommendations:
        if r.target.startswith("irq:"):
            assert set(parse_cpu_list(r.proposed)) <= online, r
    assert all(s.reason.strip() for s in p.skipped)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(topologies(), st.sampled_from(["strict", "relaxed"]))
def test_plans_hold_on_every_topology(t: Topo, durability: str) -> None:
    f = facts_for(t)
    p = make_plan(f, durability=durability, hints=Hints())
    check(t, p)
