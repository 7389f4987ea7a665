"""Probe on the ARM fixture sysroots (tests/fixtures/sysroots/PROVENANCE.md: built from
public dumps of real Kunpeng 920, Yitian 710 and Graviton2 machines)."""

from pathlib import Path

import pytest

from myaccel.facts.collect import collect_facts
from myaccel.model import Facts

ROOTS = Path(__file__).parent.parent / "fixtures" / "sysroots"

# machine: (model, family, implementer, part, sockets, cores, threads/core, numa nodes,
#           line sizes L1d/L1i/L2/L3, lse, sve)
EXPECTED = {
    "kunpeng920-2s": (
        "Kunpeng 920 (TSV110)",
        "kunpeng920",
        "0x48",
        "0xd01",
        2,
        128,
        1,
        4,
        (64, 64, 64, 128),
        True,
        False,
    ),
    "yitian710-g8y2xlarge": (
        "Neoverse N2",
        "neoverse-n2",
        "0x41",
        "0xd49",
        1,
        8,
        1,
        1,
        (64, 64, 64, 64),
        True,
        True,
    ),
    "graviton2-m6g": (
        "Neoverse N1",
        "neoverse-n1",
        "0x41",
        "0xd0c",
        1,
        16,
        1,
        1,
        (64, 64, 64, 64),
        True,
        False,
    ),
}


def probe(name: str) -> Facts:
    return collect_facts(ROOTS / name, perf_live_test=False)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_decoding_topology_caches_lse(name: str) -> None:
    model, family, impl, part, sockets, cores, tpc, nodes, lines, lse, sve = EXPECTED[name]
    c = probe(name).cpu
    assert c.arch.value == "aarch64"
    assert (c.model.value, c.family.value, c.implementer.value, c.part.value) == (
        model,
        family,
        impl,
        part,
    )
    assert c.sockets.value == sockets
    assert c.physical_cores.value == cores and c.logical_cpus.value == cores * tpc
    assert c.threads_per_core.value == tpc
    assert c.numa_nodes.value is not None and len(c.numa_nodes.value) == nodes
    caches = {(x.level, x.type): x for x in c.caches.value or []}
    got = (
        caches[(1, "Data")].line_size_bytes,
        caches[(1, "Instruction")].line_size_bytes,
        caches[(2, "Unified")].line_size_bytes,
        caches[(3, "Unified")].line_size_bytes,
    )
    assert got == lines
    assert c.has_lse.value is lse and c.has_sve.value is sve
    assert not c.has_avx2.known


def test_kunpeng_numa_and_l3_instances() -> None:
    f = probe("kunpeng920-2s")
    nodes = f.cpu.numa_nodes.value or []
    assert [n.cpus for n in nodes] == ["0-31", "32-63", "64-95", "96-127"]
    assert all(n.cpu_count == 32 for n in nodes)
    l3 = next(x for x in f.cpu.caches.value or [] if x.level == 3)
    assert l3.instances == 4 and l3.shared_cpu_count == 32 and l3.size_bytes == 32 * 1024**2
    assert f.memory.numa_balancing.value == 1
    assert f.kernel.sched_location.value == "procfs"  # 5.10 keeps them in /proc/sys/kernel


def test_graviton_kernel_61_sched_in_debugfs() -> None:
    k = probe("graviton2-m6g").kernel
    assert k.sched_location.value == "debugfs"
    assert "min_granularity_ns" in k.sched_knobs
    assert (
        k.sched_knobs["min_granularity_ns"].source == "/sys/kernel/debug/sched/min_granularity_ns"
    )
    assert k.madv_collapse.value is True


def test_yitian_hugetext_control() -> None:
    f = probe("yitian710-g8y2xlarge")
    assert f.memory.thp_hugetext_enabled.known
    assert f.kernel.file_thp.value is True


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_pmu_events_seen(name: str) -> None:
    ev = probe(name).perf.events.value or {}
    assert ev["cpu_cycles"] and ev["inst_retired"]
    if name.startswith("yitian"):
        assert ev["stall_slot_frontend"] and ev["stall_slot_backend"]
