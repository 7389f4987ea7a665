"""Host collectors on the captured sysroot of this VM (tests/fixtures/sysroots/this-vm,
made with `myaccel probe --no-server --capture`: a 2-vCPU x86-64 KVM guest, Debian 12,
kernel 6.18)."""

from pathlib import Path

from myaccel.facts.collect import collect_facts

ROOT = Path(__file__).parent.parent / "fixtures" / "sysroots" / "this-vm"


def facts():  # type: ignore[no-untyped-def]
    return collect_facts(ROOT, perf_live_test=False)


def test_cpu() -> None:
    c = facts().cpu
    assert c.arch.value == "x86_64"
    assert c.family.value == "x86-intel"
    assert c.logical_cpus.value == 2
    assert c.sockets.value == 1 and c.threads_per_core.value == 1 and c.physical_cores.value == 2
    assert c.has_avx2.value is True
    assert not c.has_lse.known  # not applicable on x86
    caches = c.caches.value
    assert caches is not None
    assert {(x.level, x.type) for x in caches} == {
        (1, "Data"),
        (1, "Instruction"),
        (2, "Unified"),
        (3, "Unified"),
    }
    assert all(x.line_size_bytes == 64 for x in caches)
    l1d = next(x for x in caches if x.level == 1 and x.type == "Data")
    assert l1d.size_bytes == 48 * 1024 and l1d.instances == 2
    nodes = c.numa_nodes.value
    assert nodes is not None and len(nodes) == 1 and nodes[0].cpus == "0-1"
    assert not c.governor.known and "cpufreq" in (c.governor.unknown or "")


def test_memory_and_kernel() -> None:
    f = facts()
    m, k = f.memory, f.kernel
    assert m.total_bytes.value is not None and m.total_bytes.value > 20 * 1024**3
    assert m.thp_enabled.value == "madvise"
    assert m.cgroup_version.value == "v1"
    assert m.cgroup_limit_bytes.known and m.cgroup_limit_bytes.value is None  # no limit
    assert m.effective_limit_bytes.value == m.total_bytes.value
    assert not m.thp_hugetext_enabled.known
    assert k.release.value is not None and k.release.value.startswith("6.18")
    assert k.version_major_minor.value == [6, 18]
    assert k.sched_location.value == "debugfs"  # >= 5.13, debugfs not mounted here
    assert k.madv_collapse.value is True


def test_storage_network_perf() -> None:
    f = facts()
    s = f.storage
    assert s.fs_type.value == "ext4" and s.block_device.value == "vda"
    assert s.scheduler.value == "mq-deadline" and s.rotational.value is True
    ifs = {i.name: i for i in f.network.interfaces.value or []}
    eth0 = ifs["eth0"]
    assert eth0.driver == "virtio_net" and eth0.rx_queues == 1
    assert len(eth0.irqs) == 3 and all(q.affinity for q in eth0.irqs)
    assert f.network.irqbalance_running.value is False
    assert f.perf.paranoid.value == 2
    assert f.perf.pmus.value is not None and "software" in f.perf.pmus.value
    assert not f.perf.perf_path.known  # a sysroot is not a live system


def test_sources_are_logical_paths() -> None:
    f = facts()
    assert f.cpu.arch.source.startswith("/proc/")
    assert f.memory.thp_enabled.source == "/sys/kernel/mm/transparent_hugepage/enabled"
