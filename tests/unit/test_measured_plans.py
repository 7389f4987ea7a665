"""Plans from measured facts: storage measured, host-only NUMA, guests, build headroom."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from test_rules import MARIADB_1011, MYSQL_80, arm_binary, host, ids, server

from myaccel.model import Facts, StorageMeasurement, known
from myaccel.rules.engine import make_plan


def _measured(f: Facts, read_iops: float, write_iops: float) -> Facts:
    m = StorageMeasurement(
        tool="fio 3.33",
        measured_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        scratch_dir="/var/lib",
        device_key="vda-ext4",
        block_size_bytes=16384,
        file_size_bytes=1 << 28,
        seconds_each=4,
        direct_io=True,
        random_read_iops=read_iops,
        random_write_iops=write_iops,
        fsync_write_iops=3000,
        fsync_latency_ms_p50=0.2,
        fsync_latency_ms_p99=3.0,
    )
    storage = f.storage.model_copy(update={"measured": known(m, "measured: fio 3.33")})
    return f.model_copy(update={"storage": storage})


def _vm_mariadb() -> Facts:
    return host("this-vm").model_copy(
        update={"server": server("10.11.19-MariaDB-0+deb12u1", "Debian 12", MARIADB_1011)}
    )


def test_rotational_flag_alone_gives_the_hdd_values() -> None:
    got = ids(make_plan(_vm_mariadb()))
    assert "server-io-capacity" not in got  # 200 already suits "hdd"
    assert "server-flush-neighbors" not in got


def test_measured_solid_state_sets_io_capacity_from_the_write_iops() -> None:
    plan = make_plan(_measured(_vm_mariadb(), read_iops=48_000, write_iops=37_000))
    got = ids(plan)
    assert got["server-io-capacity"] == "3700"  # a tenth of 37,000 random writes/s
    assert got["server-io-capacity-max"] == "7400"
    assert got["server-flush-neighbors"] == "0"
    rec = next(r for r in plan.recommendations if r.id == "server-io-capacity")
    assert rec.evidence["storage.random_write_iops"] == "37000"
    assert "37,000" in rec.rationale


def test_measured_values_stay_in_range() -> None:
    fast = ids(make_plan(_measured(_vm_mariadb(), 900_000, 800_000)))
    assert fast["server-io-capacity"] == "10000"
    slow = make_plan(_measured(_vm_mariadb(), read_iops=180, write_iops=150))
    assert "server-io-capacity" not in ids(slow)  # 200 is already right for a disk
    assert "server-flush-neighbors" not in ids(slow)


def test_host_only_numa_sizes_the_pool_from_memory_not_zero() -> None:
    plan = make_plan(host("kunpeng920-2s"))
    got = ids(plan)
    assert "numa-binding" not in got  # a 75% pool does not fit one node of four
    assert "numa-interleave" in got
    rec = next(r for r in plan.recommendations if r.id == "numa-interleave")
    assert "no server facts" in rec.evidence["innodb_buffer_pool_size"]


def test_guests_get_no_prefetch_advice() -> None:
    plan = make_plan(host("this-vm"))
    reason = next(s.reason for s in plan.skipped if s.id == "hardware-prefetch")
    assert "guest" in reason
    kp = host("kunpeng920-2s")  # the captured tree holds no DMI: hypervisor unknown
    assert not kp.cpu.hypervisor.known
    # issue 34 defect 5: unknown is not bare metal; it gets no host-level advice, said so
    p = make_plan(kp)
    assert "hardware-prefetch" not in ids(p)
    assert "hypervisor unknown" in {s.id: s.reason for s in p.skipped}["hardware-prefetch"]

    def hv(value: str) -> Facts:
        return kp.model_copy(
            update={"cpu": kp.cpu.model_copy(update={"hypervisor": known(value, "dmi")})}
        )

    assert "hardware-prefetch" in ids(make_plan(hv("none")))  # bare metal, known
    assert "hardware-prefetch" not in ids(make_plan(hv("kvm")))


def _with_stripped_binary(f: Facts) -> Facts:
    return f.model_copy(update={"binary": arm_binary("outline")})


def test_build_headroom_cites_the_figure_for_the_flavor_and_series() -> None:
    plan = make_plan(_with_stripped_binary(_vm_mariadb()), layers=["build"])
    rec = next(r for r in plan.recommendations if r.id == "build-pgo-lto")
    assert "+45%" in rec.expected_effect and "10.11" in rec.effect_source
    my = host("this-vm").model_copy(update={"server": server("8.0.40", "", MYSQL_80)})
    rec = next(
        r
        for r in make_plan(_with_stripped_binary(my), layers=["build"]).recommendations
        if r.id == "build-pgo-lto"
    )
    assert "27%" in rec.expected_effect and "seeds/003" in rec.effect_source


def test_fixture_roots_exist() -> None:
    assert (Path(__file__).parent.parent / "fixtures" / "sysroots" / "this-vm").is_dir()


def test_mysql_dedicated_server_sizes_its_own_pool_and_redo() -> None:
    on = {**MYSQL_80, "innodb_dedicated_server": "ON"}
    f = host("this-vm").model_copy(update={"server": server("8.0.40", "", on)})
    plan = make_plan(f)
    got = ids(plan)
    assert "server-buffer-pool-size" not in got and "server-redo-capacity" not in got
    reasons = {s.id: s.reason for s in plan.skipped}
    assert "innodb_dedicated_server=ON" in reasons["server-buffer-pool-size"]
    off = host("this-vm").model_copy(update={"server": server("8.0.40", "", MYSQL_80)})
    assert "server-buffer-pool-size" in ids(make_plan(off))
