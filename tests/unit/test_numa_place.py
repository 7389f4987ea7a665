"""NUMA placement on the layouts that went wrong (issue 34 defects 1-3): a server pinned to
the second socket, a memory-only node (Grace Hopper-like), k-1 of k nodes (EPYC NPS4, 16
nodes). Sizes are SYNTH; the layouts follow the vendors' descriptions (NVIDIA Grace Hopper
whitepaper: 72 cores, 480 GB LPDDR5X, 96 GB HBM3 as a CPU-less node; AMD EPYC NPS4: four
nodes per socket, distance 12 in a socket, 32 across)."""

from __future__ import annotations

from test_rules import MYSQL_80, drop_in, host, ids, server

from myaccel.cpulist import format_cpu_list, parse_cpu_list
from myaccel.model import NumaNode, known
from myaccel.rules.engine import make_plan
from myaccel.rules.numa import HEADROOM, place, table

GiB = 1024**3


def grid(sockets: int, per_socket: int, cpus: int, gib: int) -> list[NumaNode]:
    """``sockets`` x ``per_socket`` nodes of ``cpus`` CPUs and ``gib`` GiB each, distance
    12 within a socket and 32 across."""
    count = sockets * per_socket
    rows = [
        [10 if j == i else 12 if j // per_socket == i // per_socket else 32 for j in range(count)]
        for i in range(count)
    ]
    return _table(rows, gib, cpus)


def test_k_minus_one_of_k_nodes_is_interleaved_not_bound() -> None:
    for sockets, per in ((2, 4), (4, 4)):  # EPYC NPS4 2-socket (8 nodes), 16 nodes
        nodes = grid(sockets, per, 32, 64)
        k = len(nodes)
        pool = int(HEADROOM * (k - 1) * 64 * GiB)  # fits k-1 nodes exactly
        p = place(nodes, None, None, pool)
        assert p.policy == "interleave", table(p)
        assert p.nodes == tuple(range(k)) and p.cpus == ()
        assert "span sockets" in p.reason


def test_a_pool_that_fits_one_socket_binds_within_it() -> None:
    nodes = grid(2, 4, 32, 64)
    p = place(nodes, None, None, int(HEADROOM * 4 * 64 * GiB))
    assert p.policy == "bind" and p.nodes == (0, 1, 2, 3)
    assert p.cpus == tuple(range(128))
    assert place(nodes, None, None, 200 * GiB).policy == "interleave"  # > one socket's 70%


def test_a_memory_only_node_is_never_used() -> None:
    nodes = [
        NumaNode(node=0, cpus="0-71", cpu_count=72, memory_total_bytes=480 * GiB),
        NumaNode(node=1, cpus="", cpu_count=0, memory_total_bytes=96 * GiB),
        *(NumaNode(node=i, cpus="", cpu_count=0, memory_total_bytes=0) for i in range(2, 10)),
    ]
    for pool in (100 * GiB, 300 * GiB, 400 * GiB, 500 * GiB):
        p = place(nodes, None, None, pool)
        assert 1 not in p.nodes and all(n == 0 for n in p.nodes), table(p)
        assert format_cpu_list(list(p.cpus)) in ("", "0-71")
        rows = {r.node: r for r in p.rows}
        assert rows[1].role == "unused" and "memory-only" in rows[1].why
    assert place(nodes, None, None, 300 * GiB).policy == "bind"  # 300 <= 70% of 480
    assert place(nodes, None, None, 400 * GiB).policy == "none"  # spills over: no policy


def test_a_pinned_server_is_placed_on_its_own_socket() -> None:
    nodes = grid(2, 2, 32, 126)
    pinned = set(range(64, 128))
    p = place(nodes, pinned, {0, 1, 2, 3}, 75 * GiB)
    assert p.policy == "bind" and set(p.nodes) <= {2, 3}
    assert set(p.cpus) <= pinned
    rows = {r.node: r for r in p.rows}
    assert rows[0].role == "unused" and "none of the server's CPUs" in rows[0].why
    # memory nodes the server may not use are not chosen either
    p = place(nodes, pinned, {3}, 75 * GiB)
    assert p.nodes == (3,) and set(p.cpus) == set(range(96, 128))


def test_kunpeng_server_pinned_to_the_second_socket() -> None:
    """The whole plan: Kunpeng 920 2 sockets, 4 nodes, the server pinned (systemd
    CPUAffinity) to 64-127 with a 100 GiB cgroup: bound to a node of the second socket,
    with CPUs among its own. Before: NUMAMask 0, CPUAffinity 0-31."""
    srv = server("8.0.34", "MySQL Community Server - GPL", MYSQL_80, cgroup=100 * GiB)
    srv = srv.model_copy(update={"cpus_allowed": known("64-127", "/proc/4242/status")})
    f = host("kunpeng920-2s").model_copy(update={"server": srv})
    p = make_plan(f)
    assert "numa-binding" in ids(p), [s.reason for s in p.skipped if s.id.startswith("numa")]
    d = drop_in(p, "numa-binding")
    assert set(parse_cpu_list(d["NUMAMask"])) <= {2, 3}
    assert set(parse_cpu_list(d["CPUAffinity"])) <= set(range(64, 128))
    rec = next(r for r in p.recommendations if r.target == "systemd:server/CPUAffinity")
    assert rec.current == "64-127"
    assert (
        "node 0:" in rec.evidence["placement"]
        and "none of the server's CPUs" in (rec.evidence["placement"])
    )


def test_nic_interrupts_keep_off_a_pinned_servers_cpus() -> None:
    """The Kunpeng tree's NIC (enp3s0) is on node 0 (CPUs 0-31) and gets 16 cores (one per
    8 of 128). A server pinned to 0-15 keeps them: the interrupts go to 16-31. Pinned to
    all of node 0, no core is free there: they share, and the rationale says so."""
    f = host("kunpeng920-2s")

    def irq(pinned: str) -> tuple[str, str]:
        srv = server("8.0.34", "MySQL Community Server - GPL", MYSQL_80)
        srv = srv.model_copy(update={"cpus_allowed": known(pinned, "/proc/4242/status")})
        p = make_plan(f.model_copy(update={"server": srv}))
        r = next(r for r in p.recommendations if r.target == "irq:enp3s0")
        return r.proposed, r.rationale

    cores, why = irq("0-15")
    assert cores == "16-31" and "outside the server's CPUs" in why
    cores, why = irq("0-31")
    assert cores == "16-31" and "shared with the server's CPUs (0-31)" in why
    cores, why = irq("0-127")
    assert cores == "16-31" and "shared" not in why and "outside" not in why


def _table(rows: list[list[int]], gib: int = 64, cpus: int = 16) -> list[NumaNode]:
    return [
        NumaNode(
            node=i,
            cpus=f"{i * cpus}-{i * cpus + cpus - 1}",
            cpu_count=cpus,
            memory_total_bytes=gib * GiB,
            distances=row,
        )
        for i, row in enumerate(rows)
    ]


def test_uneven_cross_socket_distances_are_still_across_sockets() -> None:
    """Kunpeng 920's table (16 within a socket; 25, 32, 33 across): nodes 0-2 are two
    sockets although 32 is below the largest distance; a 4-socket table (21 to a
    neighbour, 31 beyond) has no socket of two nodes at all."""
    kunpeng = _table([[10, 16, 32, 33], [16, 10, 25, 32], [32, 25, 10, 16], [33, 32, 16, 10]])
    p = place(kunpeng, None, None, int(HEADROOM * 3 * 64 * GiB))
    assert p.policy == "interleave" and "span sockets" in p.reason, table(p)
    p = place(kunpeng, None, None, int(HEADROOM * 2 * 64 * GiB))
    assert p.policy == "bind" and p.nodes == (0, 1), table(p)
    four = _table([[10, 21, 31, 21], [21, 10, 21, 31], [31, 21, 10, 21], [21, 31, 21, 10]])
    assert place(four, None, None, int(HEADROOM * 2 * 64 * GiB)).policy == "interleave"
    assert place(four, None, None, int(HEADROOM * 64 * GiB)).nodes == (0,)
