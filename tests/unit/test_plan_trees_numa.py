"""Issue 34's placement and sizing defects (1-4, and 8's CPU lists) on fixture trees: copies
of the captured Kunpeng 920 and Graviton2 trees (tests/fixtures/sysroots/PROVENANCE.md) with
the server's process written into them (``proc/PID/status``, ``proc/PID/cgroup`` and its
cgroup's ``memory.max``/``cpu.max``), read by ``facts/process.py`` as a live server's
would be: the collectors are in the loop, not only the rules. The added values are SYNTH.

- kunpeng-pinned: mariadb pinned by systemd to the second socket (CPUs 64-127) with a
  100 GiB cgroup: bound within its own CPUs (defect 1; before: node 0, CPUs 0-31).
- grace-like: the Graviton2 tree with a CPU-less 96 GiB node beside its 16 CPUs (NVIDIA's
  Grace Hopper whitepaper describes the HBM as such a node): never bound or interleaved
  onto, every CPU list well-formed (defect 2).
- kunpeng-three-of-four: a pool that fits 3 of the 4 nodes: interleaved over all of them,
  not bound across the sockets (defect 3).
- kunpeng-quota: MariaDB with a cgroup quota of 8 CPUs on the 128-CPU host: its thread
  pool sized by the 8, not the 128 it sees (defect 4).
- garbage: a Cpus_allowed_list that is not a CPU list: unknown, said so, the plan still made
  (defect 8 at the collector; the facts-file side is test_facts_file.py)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from test_plan_trees import copy, write
from test_rules import MARIADB_1011, MYSQL_80, drop_in, ids, server

from myaccel.cpulist import parse_cpu_list
from myaccel.facts.collect import collect_facts
from myaccel.facts.process import process_facts
from myaccel.facts.sysroot import Sysroot
from myaccel.model import Facts, ServerFacts
from myaccel.rules.engine import make_plan
from myaccel.rules.model import Plan
from myaccel.units import parse_size

GIB = 1024**3
PID = 4242
UNIT = "/system.slice/mariadb.service"


def server_process(
    root: Path,
    cpus: str,
    mems: str,
    memory_max: int | None = None,
    cpu_max: str | None = None,
    *,
    cpus_line: str | None = None,
) -> None:
    """The server's process in the tree, as the kernel shows a systemd service's."""
    write(
        root,
        f"/proc/{PID}/status",
        f"Name:\tmariadbd\nPid:\t{PID}\nCpus_allowed_list:\t{cpus_line or cpus}\n"
        f"Mems_allowed_list:\t{mems}\n",
    )
    write(root, f"/proc/{PID}/cgroup", f"0::{UNIT}\n")
    write(root, f"/sys/fs/cgroup{UNIT}/memory.max", f"{memory_max}\n" if memory_max else "max\n")
    write(root, f"/sys/fs/cgroup{UNIT}/cpu.max", f"{cpu_max or 'max'} 100000\n")


def facts(root: Path, srv: ServerFacts) -> Facts:
    """The tree's machine, and the server's process read from the tree."""
    proc = process_facts(Sysroot(root), PID)
    placed = srv.model_copy(update=asdict(proc))
    return collect_facts(root, perf_live_test=False).model_copy(update={"server": placed})


def mysql(pool: int | None = None) -> ServerFacts:
    variables = dict(MYSQL_80)
    if pool is not None:
        variables["innodb_buffer_pool_size"] = str(pool)
    return server("8.0.34", "MySQL Community Server - GPL", variables)


def placement_lists(p: Plan) -> dict[str, str]:
    got = drop_in(p, "numa-binding") or drop_in(p, "numa-interleave")
    for key in ("NUMAMask", "CPUAffinity"):
        if key in got:
            text = got[key]
            assert text and "," not in (text[0], text[-1]) and ",," not in text, got
            assert parse_cpu_list(text), got
    return got


def test_a_server_pinned_to_the_second_socket_is_bound_there(tmp_path: Path) -> None:
    root = copy(tmp_path, "kunpeng920-2s")
    server_process(root, "64-127", "0-3", memory_max=100 * GIB)
    f = facts(root, mysql())
    assert f.server is not None and f.server.cpus_allowed.value == "64-127"
    assert f.server.cgroup_limit_bytes.value == 100 * GIB
    p = make_plan(f)
    assert "numa-binding" in ids(p), [s.reason for s in p.skipped if s.id.startswith("numa")]
    got = placement_lists(p)
    assert got["NUMAPolicy"] == "bind"
    assert set(parse_cpu_list(got["NUMAMask"])) <= {2, 3}
    assert set(parse_cpu_list(got["CPUAffinity"])) <= set(range(64, 128))
    # the same tree with the server on every CPU: the first socket is as good as any
    server_process(root, "0-127", "0-3", memory_max=100 * GIB)
    free = placement_lists(make_plan(facts(root, mysql())))
    assert free["NUMAPolicy"] == "bind" and set(parse_cpu_list(free["NUMAMask"])) <= {0, 1}


def _grace_like(tmp_path: Path) -> Path:
    root = copy(tmp_path, "graviton2-m6g")
    base = "/sys/devices/system/node"
    node0 = (root / base.lstrip("/") / "node0/meminfo").read_text()
    hbm_kb = 96 * 1024 * 1024
    write(
        root,
        f"{base}/node1/meminfo",
        "".join(
            line.replace("Node 0", "Node 1")
            if "MemTotal" not in line
            else f"Node 1 MemTotal:       {hbm_kb} kB\n"
            for line in node0.splitlines(keepends=True)
        ),
    )
    write(root, f"{base}/node1/cpulist", "\n")
    write(root, f"{base}/node0/distance", "10 80\n")
    write(root, f"{base}/node1/distance", "80 10\n")
    for name, value in (("online", "0-1"), ("possible", "0-1"), ("has_memory", "0-1")):
        write(root, f"{base}/{name}", f"{value}\n")
    return root


def test_a_memory_only_node_is_never_placed_on(tmp_path: Path) -> None:
    root = _grace_like(tmp_path)
    server_process(root, "0-15", "0-1", memory_max=40 * GIB)
    f = facts(root, mysql())
    nodes = f.cpu.numa_nodes.value or []
    assert [(n.node, n.cpu_count) for n in nodes] == [(0, 16), (1, 0)]
    p = make_plan(f)
    got = placement_lists(p)
    assert got == {"NUMAPolicy": "bind", "NUMAMask": "0", "CPUAffinity": "0-15"}, got
    rec = next(r for r in p.recommendations if r.id == "numa-binding")
    assert "memory-only" in rec.evidence["placement"], rec.evidence
    # a pool larger than node 0 may hold: no policy at all, never the CPU-less node
    server_process(root, "0-15", "0-1", memory_max=150 * GIB)
    p = make_plan(facts(root, mysql()))
    assert placement_lists(p) == {}
    assert "spills over" in {s.id: s.reason for s in p.skipped}["numa-binding"]


def test_a_pool_on_three_of_four_nodes_is_not_bound_across_the_sockets(tmp_path: Path) -> None:
    """A 340 GiB cgroup: the plan's pool (255 GiB) fits nodes 0-2 with headroom. Node 2 is
    on the other socket (distance 32; 16 within a socket, 25-33 across). Found by this
    tree: the first `place` took "below the largest distance (33)" for one socket and bound
    nodes 0-2, CPUs 0-95."""
    root = copy(tmp_path, "kunpeng920-2s")
    server_process(root, "0-127", "0-3", memory_max=340 * GIB)
    f = facts(root, mysql())
    nodes = f.cpu.numa_nodes.value or []
    assert len(nodes) == 4 and nodes[0].distances == [10, 16, 32, 33]
    p = make_plan(f)
    pool = next(r for r in p.recommendations if r.id == "server-buffer-pool-size")
    node = nodes[0].memory_total_bytes
    assert 0.7 * 2 * node < parse_size(pool.proposed) <= 0.7 * 3 * node, pool.proposed
    got = placement_lists(p)
    assert got == {"NUMAPolicy": "interleave", "NUMAMask": "0-3"}, got
    rec = next(r for r in p.recommendations if r.id == "numa-interleave")
    assert "span sockets" in rec.rationale or "span sockets" in rec.evidence["placement"], rec
    # a pool that fits one socket (nodes 0-1, distance 16) is bound there
    server_process(root, "0-127", "0-3", memory_max=200 * GIB)
    one = placement_lists(make_plan(facts(root, mysql())))
    assert one["NUMAPolicy"] == "bind" and set(parse_cpu_list(one["NUMAMask"])) <= {0, 1}, one


def test_a_cpu_quota_sizes_the_thread_pool(tmp_path: Path) -> None:
    root = copy(tmp_path, "kunpeng920-2s")
    server_process(root, "0-127", "0-3", cpu_max="800000")
    srv = server(
        "10.11.19-MariaDB-0+deb12u1",
        "Debian 12",
        {**MARIADB_1011, "thread_pool_size": "128"},
        status={"Max_used_connections": "400"},
    )
    f = facts(root, srv)
    assert f.server is not None and f.server.cpu_quota_cpus.value == 8.0
    got = ids(make_plan(f))
    assert got["server-thread-pool"] == "pool-of-threads"
    assert got["server-thread-pool-size"] == "8"
    server_process(root, "0-127", "0-3")  # no quota: the default (the 128 it sees) is right
    assert "server-thread-pool-size" not in ids(make_plan(facts(root, srv)))


def test_a_garbage_cpu_list_is_unknown_and_the_plan_is_still_made(tmp_path: Path) -> None:
    root = copy(tmp_path, "kunpeng920-2s")
    server_process(root, "", "0-3", cpus_line="0-,64")
    f = facts(root, mysql())
    assert f.server is not None and not f.server.cpus_allowed.known
    assert "Cpus_allowed_list '0-,64'" in (f.server.cpus_allowed.unknown or "")
    p = make_plan(f)
    assert p.recommendations


def test_the_plan_shows_the_placement_per_node(tmp_path: Path) -> None:
    """`myaccel plan` prints the placement with a line per node, also when it leaves the
    placement alone; a one-node machine has none."""
    from myaccel.rules.render import format_markdown, format_text

    root = copy(tmp_path, "kunpeng920-2s")
    server_process(root, "64-127", "0-3", memory_max=100 * GIB)
    p = make_plan(facts(root, mysql()))
    assert p.numa_placement is not None and p.numa_placement[0].startswith("NUMA placement: bind")
    text = format_text(p)
    assert "  node 0: cpus 0-31, server's -," in text and "(none of the server's CPUs)" in text
    assert "  node 2: cpus 64-95, server's 64-95, memory 126 GiB, distance 10: bind" in text
    assert "- node 2: cpus 64-95" in format_markdown(p)
    grace = _grace_like(tmp_path / "g")
    server_process(grace, "0-15", "0-1", memory_max=150 * GIB)
    alone = make_plan(facts(grace, mysql()))
    assert alone.numa_placement is not None and "none" in alone.numa_placement[0]
    assert "memory-only" in format_text(alone)
    single = copy(tmp_path, "yitian710-g8y2xlarge")
    server_process(single, "0-7", "0")
    assert make_plan(facts(single, mysql())).numa_placement is None


def test_offline_cpus_are_never_in_the_affinity(tmp_path: Path) -> None:
    """CPUs 64-71 offline (``/sys/devices/system/cpu/online``): node 3 holds more of the
    server's online CPUs than node 2 (32 against 24) and is the one bound; no offline CPU
    in an affinity, with server facts and without."""
    root = copy(tmp_path, "kunpeng920-2s")
    write(root, "/sys/devices/system/cpu/online", "0-63,72-127\n")
    server_process(root, "64-127", "0-3", memory_max=100 * GIB)
    got = placement_lists(make_plan(facts(root, mysql())))
    assert got == {"NUMAPolicy": "bind", "NUMAMask": "3", "CPUAffinity": "96-127"}, got
    host_only = collect_facts(root, perf_live_test=False)
    bound = placement_lists(make_plan(host_only, layers=["numa"]))
    assert not set(parse_cpu_list(bound.get("CPUAffinity", "0"))) & set(range(64, 72)), bound


def test_a_pool_below_a_gib_is_spelled_as_it_is(tmp_path: Path) -> None:
    """Seen in the aarch64 lab guest (2 nodes of 1 GiB, a 640 MiB pool): the placement said
    "the pool (1 GiB) fits node(s) 0 (1 GiB) with headroom", each size rounded to a whole
    GiB, which reads as a pool that fills its node."""
    root = copy(tmp_path, "kunpeng920-2s")
    server_process(root, "64-127", "0-3", memory_max=2 * GIB)
    p = make_plan(facts(root, mysql()))
    pool = next(r for r in p.recommendations if r.id == "server-buffer-pool-size")
    size = parse_size(pool.proposed)
    assert size < GIB, pool.proposed
    assert p.numa_placement is not None
    said = p.numa_placement[0]
    assert f"the pool ({size // 2**20} MiB)" in said, said
    assert "(0 GiB)" not in said and "(1 GiB)" not in said, said
