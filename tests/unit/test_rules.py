"""Rules on fixture facts: the formulas directly, then whole plans per machine, then
properties over random facts."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from myaccel.errors import UsageError
from myaccel.facts.collect import collect_facts
from myaccel.model import AtomicsFacts, BinaryFacts, Facts, ServerFacts, known
from myaccel.rules.engine import Hints, load_rules, make_plan
from myaccel.rules.knobview import knob_view_for
from myaccel.rules.server_rules import (
    GiB,
    MiB,
    buffer_pool_target,
    os_reserve,
    pool_instances,
    pool_layout,
)
from myaccel.units import size_or_none as parse_size

ROOTS = Path(__file__).parent.parent / "fixtures" / "sysroots"

MARIADB_1011 = {
    "innodb_buffer_pool_size": "134217728",
    "innodb_log_file_size": "100663296",
    "innodb_log_buffer_size": "16777216",
    "innodb_io_capacity": "200",
    "innodb_io_capacity_max": "2000",
    "innodb_flush_neighbors": "1",
    "innodb_flush_method": "O_DIRECT",
    "innodb_flush_log_at_trx_commit": "1",
    "innodb_adaptive_hash_index": "OFF",
    "innodb_read_io_threads": "4",
    "innodb_write_io_threads": "4",
    "innodb_spin_wait_delay": "4",
    "innodb_sync_spin_loops": "30",
    "max_connections": "151",
    "thread_handling": "one-thread-per-connection",
    "performance_schema": "OFF",
    "log_bin": "OFF",
    "sync_binlog": "0",
    "thread_stack": "299008",
    "read_buffer_size": "131072",
    "read_rnd_buffer_size": "262144",
    "sort_buffer_size": "2097152",
    "join_buffer_size": "262144",
    "binlog_cache_size": "32768",
    "net_buffer_length": "16384",
    "key_buffer_size": "134217728",
    "aria_pagecache_buffer_size": "134217728",
    "query_cache_size": "1048576",
    "table_open_cache": "2000",
}
MYSQL_80 = {
    "innodb_buffer_pool_size": "134217728",
    "innodb_buffer_pool_instances": "1",
    "innodb_redo_log_capacity": "104857600",
    "innodb_log_buffer_size": "16777216",
    "innodb_io_capacity": "200",
    "innodb_io_capacity_max": "2000",
    "innodb_flush_neighbors": "0",
    "innodb_flush_method": "fsync",
    "innodb_flush_log_at_trx_commit": "1",
    "innodb_adaptive_hash_index": "ON",
    "innodb_thread_concurrency": "0",
    "innodb_spin_wait_delay": "6",
    "innodb_sync_spin_loops": "30",
    "innodb_read_io_threads": "4",
    "innodb_write_io_threads": "4",
    "max_connections": "151",
    "performance_schema": "ON",
    "log_bin": "ON",
    "sync_binlog": "1",
    "thread_stack": "1048576",
    "read_buffer_size": "131072",
    "read_rnd_buffer_size": "262144",
    "sort_buffer_size": "262144",
    "join_buffer_size": "262144",
    "binlog_cache_size": "32768",
    "net_buffer_length": "16384",
    "key_buffer_size": "8388608",
    "table_open_cache": "4000",
}


def server(
    version: str,
    comment: str,
    variables: dict[str, str],
    status: dict[str, str] | None = None,
    cgroup: int | None = None,
) -> ServerFacts:
    from myaccel.server.flavor import parse_server_version

    sv = parse_server_version(version, comment)
    assert sv is not None
    q = "test"
    return ServerFacts(
        connection="test",
        flavor=known(sv.flavor, q),
        version=known(sv.text, q),
        version_string=known(version, q),
        version_comment=known(comment, q),
        uptime_s=known(60, q),
        datadir=known("/var/lib/mysql", q),
        data_size_bytes=known(10 * GiB, q),
        pid=known(1, q),
        binary_path=known("/usr/sbin/mysqld", q),
        cpus_allowed=known("0-127", q),
        mems_allowed=known("0-3", q),
        cgroup_limit_bytes=known(cgroup, q),
        variables=known(dict(variables), q),
        status=known({"Uptime": "60", **(status or {})}, q),
    )


def host(name: str) -> Facts:
    return collect_facts(ROOTS / name, perf_live_test=False)


def with_memory(f: Facts, total: int, cgroup: int | None = None) -> Facts:
    m = f.memory.model_copy(
        update={
            "total_bytes": known(total, "/proc/meminfo"),
            "cgroup_limit_bytes": known(cgroup, "/sys/fs/cgroup/memory.max"),
            "effective_limit_bytes": known(min(total, cgroup or total), "test"),
        }
    )
    return f.model_copy(update={"memory": m})


def ids(plan) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {r.id: r.proposed for r in plan.recommendations}


def drop_in(plan, rec_id: str) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """The systemd keys a placement recommendation writes, as systemd spells them."""
    return {
        r.target.removeprefix("systemd:server/"): r.proposed
        for r in plan.recommendations
        if r.id == rec_id
    }


# ---------------------------------------------------------------- formulas


def test_os_reserve() -> None:
    assert os_reserve(2 * GiB) == 512 * MiB
    assert os_reserve(4 * GiB) == 1 * GiB
    assert os_reserve(32 * GiB) == int(3.2 * GiB)
    assert os_reserve(512 * GiB) == 8 * GiB


def test_buffer_pool_formula() -> None:
    # 32 GiB, 16 MiB globals, 151 x 3 MiB connections: 0.95 x (32 - 3.2 - ...) > 75% cap
    assert buffer_pool_target(32 * GiB, 16 * MiB, 3 * MiB, 151) == 24 * GiB
    # 2 GiB VM: 0.95 x (2048 - 512 - 16 - 453) MiB = 1013 MiB -> 896 MiB in 128 MiB chunks
    assert buffer_pool_target(2 * GiB, 16 * MiB, 3 * MiB, 151) == 896 * MiB
    # connections dominate: 1000 x 3 MiB on 4 GiB leaves 0
    assert buffer_pool_target(4 * GiB, 16 * MiB, 3 * MiB, 1000) < 128 * MiB


def test_parse_size() -> None:
    assert parse_size("128M") == 128 * MiB and parse_size("134217728") == 134217728
    assert parse_size("1G") == GiB and parse_size("ON") is None


# ---------------------------------------------------------------- machines


def arm_binary(klass: str = "outline") -> BinaryFacts:
    """Binary facts as the probe reports Debian's arm64 mariadbd 10.11.19 (measured:
    outline atomics, 25 helpers, 2125 calls; stripped; 64 KiB text alignment)."""
    q = "test"
    from myaccel.model import unknown

    return BinaryFacts(
        path="/usr/sbin/mariadbd",
        size_bytes=known(25_000_000, q),
        elf_class=known(64, q),
        machine=known("aarch64", q),
        pie=known(True, q),
        compiler=unknown("no .comment", q),
        build_id=known("x", q),
        stripped=known(True, q),
        debug_info=known(False, q),
        atomics=known(
            AtomicsFacts(
                klass=klass,
                lse_instructions=25,
                exclusive_loads=25,
                exclusive_stores=25,
                helper_sites=25,
                helper_calls=2125,
            ),
            q,
        ),
        lto=unknown("stripped", q),
        lto_evidence=known([], q),
        pgo=unknown("stripped", q),
        pgo_evidence=known([], q),
        instrumented=known(False, q),
        text_segment_align=known(0x10000, q),
        text_huge_page_ready=known(False, q),
        relocations=known(False, q),
    )


def test_kunpeng_128_cores_4_nodes_512g_mysql80() -> None:
    f = host("kunpeng920-2s").model_copy(
        update={
            "server": server("8.0.34", "MySQL Community Server - GPL", MYSQL_80),
            "binary": arm_binary(),
        }
    )
    p = make_plan(f)
    got = ids(p)
    bp = parse_size(got["server-buffer-pool-size"]) or 0
    budget = f.memory.effective_limit_bytes.value or 0
    # the 75% cap binds on 512 GB; MySQL keeps a size only as a multiple of chunk (128 MiB)
    # x instances, else it rounds it up past the plan: 3,019 chunks has no divisor from 48
    # to 64, so the size is rounded down to a multiple of 64 chunks
    unit = 128 * MiB * 64
    assert bp == int(budget * 0.75) // unit * unit
    assert got["server-buffer-pool-instances"] == "64"
    assert got["server-redo-capacity"] == "16G"  # 128 CPUs / 2 = 64 GiB, capped at 16
    assert got["server-thread-concurrency"] == "128"  # seed 004
    assert got["server-spin-wait-delay"] == "24" and got["server-sync-spin-loops"] == "100"
    assert got["server-adaptive-hash-index"] == "OFF"  # seed 002, 4 nodes
    # innodb_flush_method is a durability knob: proposed only under --durability relaxed
    assert "server-flush-method" not in got
    assert any(s.id == "server-flush-method" for s in p.skipped)
    assert ids(make_plan(f, durability="relaxed"))["server-flush-method"] == "O_DIRECT"
    assert got["server-io-capacity"] == "10000"  # NVMe
    assert got["server-read-io-threads"] == "16"
    # a 377 GiB buffer pool needs all four nodes' memory: interleave, keep balancing
    assert drop_in(p, "numa-interleave") == {"NUMAPolicy": "interleave", "NUMAMask": "0-3"}
    assert "numa-binding" not in got and "numa-balancing-off" not in got
    assert "build-cacheline" in got
    assert got["build-lse"].startswith("build with -mcpu=tsv110")
    assert "build-pgo-lto" in got and "build-text-alignment" in got  # file THP on, text not aligned
    assert "nic-irq-affinity-enp125s0f0" in got or any(
        k.startswith("nic-irq-affinity") for k in got
    )
    assert p.memory is not None and p.memory.within
    assert "server-binlog-durable" not in got  # sync_binlog=1 already
    assert not any(r.group == "durability" for r in p.recommendations)


def test_kunpeng_binding_when_the_pool_fits_one_node() -> None:
    """Seed 002's fix: a server whose memory fits one node is bound to it."""
    f = host("kunpeng920-2s").model_copy(
        update={
            "server": server("8.0.34", "MySQL Community Server - GPL", MYSQL_80, cgroup=100 * GiB)
        }
    )
    p = make_plan(f)
    got = ids(p)
    assert got["server-buffer-pool-size"] == "75G"
    # systemd's own keys (a single "cpus 0-31; memory bind nodes 0" was rejected by it)
    want = {"NUMAPolicy": "bind", "NUMAMask": "0", "CPUAffinity": "0-31"}
    assert drop_in(p, "numa-binding") == want
    assert got["numa-balancing-off"] == "0"


def test_yitian_8_vcpu_32g_mariadb() -> None:
    f = host("yitian710-g8y2xlarge").model_copy(
        update={"server": server("10.11.6-MariaDB", "MariaDB Server", MARIADB_1011)}
    )
    got = ids(make_plan(f))
    assert got["server-buffer-pool-size"] == "23680M"  # 75% of 30.9 GiB in 128 MiB chunks
    assert got["server-redo-capacity"] == "4G"  # 8 CPUs / 2
    assert "server-buffer-pool-instances" not in got  # MariaDB: one pool
    assert "server-thread-concurrency" not in got
    assert (
        got["server-io-capacity"] == "2000" and got["server-flush-neighbors"] == "0"
    )  # virtio SSD
    assert got["os-thp"] == "madvise"  # Alibaba Cloud Linux ships [always]
    assert "numa-binding" not in got


@pytest.mark.parametrize(
    ("version", "ceiling", "raised"),
    [
        # 11.8.2-11.8.6 (MDEV-29445): the ceiling is the pool the server started with
        ("11.8.3-MariaDB", "134217728", True),
        # 11.8.7+ (MDEV-38671): 8 TiB reserved; 11.8.9 from this machine's sid install
        ("11.8.9-MariaDB-4 from Debian", "8796093022208", False),
        # before MDEV-29445 there is no ceiling to raise
        ("11.8.1-MariaDB", None, False),
    ],
)
def test_mariadb_118_buffer_pool_ceiling(version: str, ceiling: str | None, raised: bool) -> None:
    """A grown pool on MariaDB whose innodb_buffer_pool_size_max is below the target gets
    the ceiling raised too (a restart); otherwise SET GLOBAL is refused and nothing grows."""
    variables = dict(MARIADB_1011)
    if ceiling is not None:
        variables["innodb_buffer_pool_size_max"] = ceiling
    f = host("yitian710-g8y2xlarge").model_copy(
        update={"server": server(version, "mariadb.org binary distribution", variables)}
    )
    p = make_plan(f, knobs=knob_view_for(f))  # as `myaccel plan` does
    got = ids(p)
    assert got["server-buffer-pool-size"] == "23680M"
    if raised:
        assert got["server-buffer-pool-size-max"] == "23680M"
        rec = next(r for r in p.recommendations if r.id == "server-buffer-pool-size-max")
        assert rec.target == "mysql:innodb_buffer_pool_size_max" and rec.risk == "restart"
    else:
        assert "server-buffer-pool-size-max" not in got
    pool = next(r for r in p.recommendations if r.id == "server-buffer-pool-size")
    assert pool.risk == "online"  # resizable with SET GLOBAL up to the ceiling


def test_2g_vm() -> None:
    f = with_memory(host("this-vm"), 2 * GiB).model_copy(
        update={"server": server("10.11.6-MariaDB", "", MARIADB_1011)}
    )
    p = make_plan(f)
    got = ids(p)
    # globals: log buffer 64 (raised by server-log-buffer, which runs first) + key buffer
    # 128 + aria 128 + query cache 1 = 321 MiB; per connection 3,117,056 B x 151 = 448.9 MiB;
    # 0.95 x (2048 - 512 - 321 - 448.9) = 727.8 MiB -> 640 MiB in 128 MiB chunks
    assert got["server-log-buffer"] == "64M"
    assert got["server-buffer-pool-size"] == "640M"
    assert p.memory is not None and p.memory.within


def test_container_4g_limit_on_64g_host() -> None:
    f = with_memory(host("this-vm"), 64 * GiB, cgroup=4 * GiB)
    f = f.model_copy(
        update={
            "server": server("8.0.36", "MySQL Community Server - GPL", MYSQL_80, cgroup=4 * GiB)
        }
    )
    p = make_plan(f)
    bp = parse_size(ids(p)["server-buffer-pool-size"]) or 0
    assert bp <= 3 * GiB  # sized from the 4 GiB limit, not the 64 GiB host
    assert p.memory is not None and p.memory.budget_bytes == 4 * GiB and p.memory.within


def test_this_vm_mariadb_defaults() -> None:
    f = host("this-vm").model_copy(
        update={"server": server("10.11.19-MariaDB-0+deb12u1", "Debian 12", MARIADB_1011)}
    )
    got = ids(make_plan(f, hints=Hints(threads=64)))
    assert got["server-redo-capacity"] == "1G"  # 2 CPUs / 2
    # 64 clients on 2 CPUs: no thread pool (it cost 26.5% at 128 threads on this VM)
    plan = make_plan(f, hints=Hints(threads=64))
    assert "server-thread-pool" not in got
    why = next(s.reason for s in plan.skipped if s.id == "server-thread-pool")
    assert "below 8" in why
    assert "server-max-connections" not in got  # 64 + 50 headroom fits in 151


def test_thread_pool_on_a_server_with_enough_cpus() -> None:
    f = host("graviton2-m6g").model_copy(
        update={"server": server("10.11.19-MariaDB-0+deb12u1", "Debian 12", MARIADB_1011)}
    )
    assert ids(make_plan(f, hints=Hints(threads=64)))["server-thread-pool"] == "pool-of-threads"
    assert "server-thread-pool" not in ids(make_plan(f, hints=Hints(threads=16)))


def test_durability_group_only_when_relaxed() -> None:
    f = host("this-vm").model_copy(update={"server": server("8.0.36", "", MYSQL_80)})
    strict = make_plan(f)
    relaxed = make_plan(f, durability="relaxed")
    assert not any(r.risk == "durability" for r in strict.recommendations)
    assert any(s.id == "durability-flush-log-at-trx-commit" for s in strict.skipped)
    rel = {r.id: r for r in relaxed.recommendations}
    assert rel["durability-flush-log-at-trx-commit"].group == "durability"
    assert rel["durability-sync-binlog"].proposed == "0"


def test_layers_filter_and_bad_input() -> None:
    f = host("kunpeng920-2s")
    p = make_plan(f, layers=["os", "numa"])
    assert {r.layer for r in p.recommendations} <= {"os", "numa"}
    assert any(s.id == "server-buffer-pool-size" for s in make_plan(f).skipped)  # no server facts
    with pytest.raises(UsageError):
        make_plan(f, layers=["bogus"])
    with pytest.raises(UsageError):
        make_plan(f.model_copy(update={"schema_version": "myaccel.facts/0"}))


def test_unknown_facts_skip_with_reason() -> None:
    f = host("this-vm")
    from myaccel.model import unknown

    c = f.cpu.model_copy(update={"logical_cpus": unknown("test: unknown")})
    f = f.model_copy(update={"cpu": c, "server": server("8.0.36", "", MYSQL_80)})
    p = make_plan(f)
    sk = {s.id: s.reason for s in p.skipped}
    assert sk["server-redo-capacity"] == "CPU count unknown"


def test_every_rule_has_metadata() -> None:
    for spec in load_rules().values():
        assert spec.rationale and spec.source and spec.title
        assert spec.id == spec.id.lower() and " " not in spec.id


# ---------------------------------------------------------------- properties


@settings(max_examples=60, deadline=None)
@given(
    ram_gib=st.integers(min_value=1, max_value=1024),
    cgroup_gib=st.one_of(st.none(), st.integers(min_value=1, max_value=512)),
    max_conn=st.integers(min_value=10, max_value=3000),
    sort_mib=st.integers(min_value=0, max_value=64),
    mysql=st.booleans(),
    relaxed_flag=st.booleans(),
)
def test_properties(
    ram_gib: int,
    cgroup_gib: int | None,
    max_conn: int,
    sort_mib: int,
    mysql: bool,
    relaxed_flag: bool,
) -> None:
    base = dict(MYSQL_80 if mysql else MARIADB_1011)
    base["max_connections"] = str(max_conn)
    base["sort_buffer_size"] = str(sort_mib * MiB)
    ver = ("8.0.36", "MySQL Community Server - GPL") if mysql else ("10.11.6-MariaDB", "")
    f = with_memory(_THIS_VM, ram_gib * GiB, cgroup=cgroup_gib * GiB if cgroup_gib else None)
    f = f.model_copy(
        update={"server": server(*ver, base, cgroup=cgroup_gib * GiB if cgroup_gib else None)}
    )
    strict = make_plan(f)
    # no durability knob is ever touched under strict
    dur = {"innodb_flush_log_at_trx_commit", "sync_binlog", "innodb_doublewrite"}
    assert not any(
        r.target.removeprefix("mysql:") in dur and r.action == "apply"
        for r in strict.recommendations
    )
    # a proposed buffer pool keeps the memory sum inside the budget
    if any(r.id == "server-buffer-pool-size" for r in strict.recommendations):
        assert strict.memory is not None and strict.memory.within, strict.memory
    if relaxed_flag:
        make_plan(f, durability="relaxed")


_THIS_VM = collect_facts(ROOTS / "this-vm", perf_live_test=False)


def test_docs_rules_md_is_generated_from_metadata() -> None:
    from myaccel.rules.render import rules_markdown

    doc = Path(__file__).parent.parent.parent / "docs" / "rules.md"
    assert doc.read_text() == rules_markdown(), (
        "regenerate: myaccel explain --all --md > docs/rules.md"
    )


def test_unknown_server_version_uses_nearest_known_with_warning() -> None:
    from myaccel.rules.knobview import knob_view_for

    f = host("this-vm").model_copy(update={"server": server("10.8.3-MariaDB", "", MARIADB_1011)})
    view = knob_view_for(f)
    assert view is not None and view.warnings
    p = make_plan(f, knobs=view)
    assert any("10.8" in w and "10.6" in w for w in p.warnings), p.warnings
    assert any(r.id == "server-buffer-pool-size" for r in p.recommendations)


def test_settings_enforced_by_tuned_are_left_alone() -> None:
    from myaccel.model import ManagerFacts

    f = host("yitian710-g8y2xlarge")
    m = f.memory.model_copy(
        update={"swap_total_bytes": known(2 * GiB, "t"), "swappiness": known(60, "t")}
    )
    managers = ManagerFacts(
        tuned_running=known(True, "t"),
        tuned_profile=known("throughput-performance", "t"),
        tuned_sysctls=known(
            {"vm.swappiness": "10", "sys:kernel/mm/transparent_hugepage/enabled": "always"}, "t"
        ),
        atune_running=known(False, "t"),
        bpftune_running=known(False, "t"),
    )
    p = make_plan(f.model_copy(update={"memory": m, "managers": managers}))
    sk = {s.id: s.reason for s in p.skipped}
    assert "tuned profile 'throughput-performance'" in sk["os-swappiness"]
    assert "tuned profile" in sk["os-thp"]
    assert not any(r.id in ("os-swappiness", "os-thp") for r in p.recommendations)


@given(st.integers(min_value=128 * MiB, max_value=4 << 40), st.integers(min_value=1, max_value=256))
def test_mysql_pool_layout_is_kept_as_set(pool: int, cpus: int) -> None:
    """MySQL rounds a buffer pool that is not a multiple of chunk x instances up (past the
    memory budget): the planned size is such a multiple, never above the target, and loses
    less than one chunk per wanted instance."""
    size, n = pool_layout(pool, cpus)
    want = pool_instances(pool, cpus)
    assert size % (128 * MiB * n) == 0 and 0 < size <= pool
    assert 3 * want <= 4 * n <= 4 * want
    assert pool - size < 128 * MiB * want
    assert pool_layout(size, cpus) == (size, n)  # the instances rule sees the same layout


def test_mysql_pool_layout_examples() -> None:
    assert pool_layout(75 * GiB, 128) == (75 * GiB, 60)  # 600 chunks = 60 x 10
    assert pool_layout(18048 * MiB, 2) == (17920 * MiB, 2)  # 141 chunks: odd, round down


def test_simple_rules_data_is_checked(tmp_path: Path) -> None:
    """The rows of rules/data/simple_rules.json load; a row naming an unknown condition or
    a formula with an unknown name is refused with a hint, not run."""
    import json

    from myaccel.rules.simple import DATA_PATH, SimpleRulesError, load_rows

    rows = load_rows()
    assert {r.id for r in rows} <= set(load_rules())
    raw = json.loads(DATA_PATH.read_text())
    raw["rules"][0]["when"] = [{"need": "no-such-condition", "else": "x"}]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(raw))
    with pytest.raises(SimpleRulesError, match="unknown conditions"):
        load_rows(bad)
    raw = json.loads(DATA_PATH.read_text())
    io = next(r for r in raw["rules"] if r["id"] == "server-io-threads")
    io["set"][0]["to"] = "min(16, ram_bytes)"
    bad.write_text(json.dumps(raw))
    with pytest.raises(SimpleRulesError, match="formula"):
        load_rows(bad)


def test_no_code_huge_pages_on_a_64k_page_kernel() -> None:
    """Issue 34 defect 6: on a 64K-page arm64 kernel the PMD huge page is 512 MiB, bigger
    than the server's whole text; the +5-11% of code huge pages cannot happen there."""
    f = host("kunpeng920-2s").model_copy(
        update={
            "server": server("8.0.34", "MySQL Community Server - GPL", MYSQL_80),
            "binary": arm_binary().model_copy(update={"text_huge_page_ready": known(True, "test")}),
        }
    )
    assert "os-code-huge-pages" in ids(make_plan(f))  # 2 MiB PMD: proposed
    p = make_plan(
        f.model_copy(
            update={
                "memory": f.memory.model_copy(
                    update={"pmd_page_bytes": known(512 * MiB, "/sys/kernel/mm/.../hpage_pmd_size")}
                )
            }
        )
    )
    assert "os-code-huge-pages" not in ids(p)
    assert "512 MiB" in {s.id: s.reason for s in p.skipped}["os-code-huge-pages"]
    k64 = f.model_copy(
        update={
            "memory": f.memory.model_copy(
                update={"pmd_page_bytes": known(512 * MiB, "/sys/kernel/mm/.../hpage_pmd_size")}
            ),
            "binary": arm_binary(),  # not aligned: build-text-alignment would be proposed
        }
    )
    p = make_plan(k64)
    got = ids(p)
    assert "os-code-huge-pages" not in got and "build-text-alignment" not in got
    why = {s.id: s.reason for s in p.skipped}
    assert "512 MiB" in why["build-text-alignment"]


def test_thread_pool_sized_by_the_cpu_quota() -> None:
    """Issue 34 defect 4: under a cgroup quota of 8 CPUs on a 128-CPU host, MariaDB sizes
    its pool by the 128 CPUs it sees; the plan sets thread_pool_size to the 8 it may use.
    Without a quota the default already equals the CPUs, so nothing more is proposed."""
    srv = server(
        "10.11.19-MariaDB-0+deb12u1",
        "Debian 12",
        {**MARIADB_1011, "thread_pool_size": "128"},
        status={"Max_used_connections": "400"},
    )
    f = host("kunpeng920-2s").model_copy(update={"server": srv})
    assert "server-thread-pool-size" not in ids(make_plan(f))  # 400 clients on 128 CPUs
    many = srv.model_copy(
        update={"status": known({"Uptime": "60", "Max_used_connections": "600"}, "t")}
    )
    got = ids(make_plan(f.model_copy(update={"server": many})))
    assert got["server-thread-pool"] == "pool-of-threads"
    assert "server-thread-pool-size" not in got  # 128 CPUs seen, 128 usable: the default
    quota = srv.model_copy(update={"cpu_quota_cpus": known(8.0, "cpu.max 800000 100000")})
    p = make_plan(f.model_copy(update={"server": quota}))
    got = ids(p)
    assert got["server-thread-pool"] == "pool-of-threads"
    assert got["server-thread-pool-size"] == "8"
    rec = next(r for r in p.recommendations if r.id == "server-thread-pool-size")
    assert rec.current == "128" and rec.evidence["visible_cpus"] == "128"


def test_writeback_judged_by_the_servers_budget_not_the_hosts_ram() -> None:
    """Issue 34 defect 7b: a 2 GiB container on a 124 GiB host got os-dirty, judged on
    the host's RAM; the per-cgroup dirty limits scale with the cgroup's memory."""
    big = host("kunpeng920-2s")
    assert ids(make_plan(big))["os-dirty-background"] == "5"
    small = with_memory(big, 124 * GiB, cgroup=2 * GiB)
    p = make_plan(small)
    assert "os-dirty-background" not in ids(p)
    why = {s.id: s.reason for s in p.skipped}["os-dirty"]
    assert "below 64 GiB (2 GiB" in why
    # the server's own cgroup limit binds the same way
    srv = server("8.0.34", "MySQL Community Server - GPL", MYSQL_80, cgroup=8 * GiB)
    assert "os-dirty-background" not in ids(make_plan(big.model_copy(update={"server": srv})))
