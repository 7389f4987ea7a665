"""Profiles -> findings -> rule ids: folded stack parsing, /proc/stat series, the profile
artifact (schema refusal, round trip) and one test per finding on synthesized fixtures
(tests/fixtures/profiles/README.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from profile_captures import PROFILES, capture, host

from myaccel.errors import UsageError
from myaccel.model import AtomicsFacts, BinaryFacts, Facts, ServerFacts, known, unknown
from myaccel.profile.diagnose import (
    FINDING_IDS,
    RULE_IDS,
    diagnose,
    finding_ids,
    format_findings,
)
from myaccel.profile.folded import (
    KERNEL_DSO,
    Frame,
    format_top,
    normalize_symbol,
    parse_folded,
    parse_frame,
    summarize,
)
from myaccel.profile.records import (
    PROFILE_SCHEMA,
    Finding,
    NodeCpus,
    Recording,
    build_profile,
    cpu_series,
    derive_microarch,
    load_profile,
    parse_cpulist,
    profile_from_dict,
    save_profile,
)
from myaccel.rules.engine import Hints, load_rules, make_plan

# ---------------------------------------------------------------- helpers


def with_server(
    f: Facts,
    flavor: str,
    variables: dict[str, str] | None = None,
    cpus_allowed: str = "0-127",
) -> Facts:
    version, comment = (
        ("10.11.6-MariaDB-0+deb12u1", "Debian 12")
        if flavor == "mariadb"
        else ("8.0.34", "MySQL Community Server - GPL")
    )
    q = "test"
    base = {
        "innodb_buffer_pool_size": "134217728",
        "innodb_adaptive_hash_index": "ON",
        "innodb_spin_wait_delay": "6",
        "innodb_sync_spin_loops": "30",
        "innodb_thread_concurrency": "0",
        "thread_handling": "one-thread-per-connection",
    }
    server = ServerFacts(
        connection="test",
        flavor=known(flavor, q),
        version=known(version.split("-")[0], q),
        version_string=known(version, q),
        version_comment=known(comment, q),
        uptime_s=known(3600, q),
        datadir=known("/var/lib/mysql", q),
        data_size_bytes=known(100 * 2**30, q),
        pid=known(1, q),
        binary_path=known("/usr/sbin/mysqld", q),
        cpus_allowed=known(cpus_allowed, q),
        mems_allowed=known("0-3", q),
        cgroup_limit_bytes=known(None, q),
        variables=known({**base, **(variables or {})}, q),
        status=known({"Uptime": "3600"}, q),
    )
    return f.model_copy(update={"server": server})


def with_binary(
    f: Facts, *, klass: str = "outline", pgo: bool = False, aligned: bool = False
) -> Facts:
    q = "test"
    b = BinaryFacts(
        path="/usr/sbin/mariadbd",
        size_bytes=known(25_000_000, q),
        elf_class=known(64, q),
        machine=known("aarch64", q),
        pie=known(True, q),
        compiler=unknown("no .comment", q),
        build_id=known("x", q),
        stripped=known(False, q),
        debug_info=known(False, q),
        atomics=known(AtomicsFacts(klass=klass), q),
        lto=known(pgo, q),
        lto_evidence=known([], q),
        pgo=known(pgo, q),
        pgo_evidence=known([], q),
        instrumented=known(False, q),
        text_segment_align=known(0x200000 if aligned else 0x10000, q),
        text_huge_page_ready=known(aligned, q),
        relocations=known(False, q),
    )
    return f.model_copy(update={"binary": b})


def ids(findings: list[Finding]) -> list[str]:
    return [f.id for f in findings]


def one(findings: list[Finding], fid: str) -> Finding:
    (f,) = [f for f in findings if f.id == fid]
    return f


def effects(f: Finding) -> dict[str, str]:
    return {r.rule: r.direction for r in f.rules}


# ---------------------------------------------------------------- folded stacks


@pytest.mark.parametrize(
    ("raw", "frame"),
    [
        ("ut_delay", Frame("ut_delay")),
        ("_raw_spin_lock_[k]", Frame("_raw_spin_lock", KERNEL_DSO, True)),
        ("row_search_mvcc_[i]", Frame("row_search_mvcc")),
        ("btr_search_guess_on_hash [mariadbd]", Frame("btr_search_guess_on_hash", "mariadbd")),
        ("memcpy (/usr/lib/aarch64-linux-gnu/libc.so.6)", Frame("memcpy", "libc.so.6")),
        ("tcp_v4_rcv ([kernel.kallsyms])", Frame("tcp_v4_rcv", KERNEL_DSO, True)),
        ("schedule [kernel.kallsyms]", Frame("schedule", KERNEL_DSO, True)),
        ("[libc.so.6]", Frame("[libc.so.6]", "libc.so.6")),
        ("[unknown]", Frame("[unknown]")),
        ("[kernel.kallsyms]", Frame("[kernel.kallsyms]", KERNEL_DSO, True)),
        ("do_command+0x1a4", Frame("do_command")),
        (
            "PolicyMutex<TTASEventMutex<GenericPolicy> >::enter(unsigned int, unsigned int, "
            "char const*, unsigned int)",
            Frame("PolicyMutex<TTASEventMutex<GenericPolicy> >::enter"),
        ),
        ("operator[] [mysqld]", Frame("operator[]", "mysqld")),
        ("finish_task_switch.isra.0", Frame("finish_task_switch")),
        ("buf_flush_page_cleaner() [clone .cold]", Frame("buf_flush_page_cleaner")),
    ],
)
def test_parse_frame_conventions(raw: str, frame: Frame) -> None:
    assert parse_frame(raw) == frame


def test_normalize_keeps_anonymous_namespace_and_operators() -> None:
    assert normalize_symbol("(anonymous namespace)::foo(int)") == "(anonymous namespace)::foo"
    assert normalize_symbol("std::function<void ()>::operator()() const") == (
        "std::function<void ()>::operator()"
    )


def test_kernel_frames_found_structurally() -> None:
    fs = parse_folded(
        "mariadbd;do_command;vio_read;recv;entry_SYSCALL_64_after_hwframe;do_syscall_64;"
        "__x64_sys_recvfrom;tcp_recvmsg 30\n"
        "mariadbd;do_command;row_search_mvcc 60\n"
        "swapper;secondary_startup_64_no_verify;default_idle 10\n"
    )
    s = summarize(fs)
    assert s.total_samples == 100
    assert s.kernel_pct == pytest.approx(40.0)
    assert s.user_pct == pytest.approx(60.0)
    by = {x.symbol: x for x in s.symbols}
    assert by["tcp_recvmsg"].kernel and by["do_syscall_64"].kernel
    assert not by["recv"].kernel and not by["row_search_mvcc"].kernel
    assert by["default_idle"].kernel


def test_self_inclusive_and_recursion_counted_once() -> None:
    fs = parse_folded(
        "# a comment\n"
        "\n"
        "mysqld;a;b;a;c 10\n"
        "mysqld;a;c 30\n"
        "mysqld;d 60\n"
        "mysqld;a;c 0\n"
        "not a stack line\n"
    )
    assert fs.skipped_lines == 2  # zero count, no count
    s = summarize(fs, top_n=2)
    by = {x.symbol: x for x in s.symbols}
    assert by["a"].inclusive_pct == pytest.approx(40.0)  # not 50: recursion once
    assert by["c"].self_pct == pytest.approx(40.0)
    assert by["d"].self_pct == pytest.approx(60.0)
    assert by["mysqld"].inclusive_pct == pytest.approx(100.0)
    assert [x.symbol for x in s.top_self] == ["d", "c"]
    assert [x.symbol for x in s.top_inclusive] == ["mysqld", "d"]


def test_dso_tables() -> None:
    fs = parse_folded(
        "mariadbd;do_command [mariadbd];row_search_mvcc [mariadbd] 70\n"
        "mariadbd;do_command [mariadbd];memcpy [libc.so.6] 20\n"
        "mariadbd;do_command [mariadbd];recv [libc.so.6];tcp_recvmsg [kernel.kallsyms] 10\n"
    )
    s = summarize(fs)
    dself = {d.dso: d.self_pct for d in s.top_dso_self}
    dincl = {d.dso: d.inclusive_pct for d in s.top_dso_inclusive}
    assert dself == pytest.approx({"mariadbd": 70.0, "libc.so.6": 20.0, KERNEL_DSO: 10.0})
    assert dincl["mariadbd"] == pytest.approx(100.0)
    assert dincl["libc.so.6"] == pytest.approx(30.0)
    assert s.kernel_pct == pytest.approx(10.0)
    assert s.dso_known_pct == pytest.approx(100.0)
    table = format_top(s, n=2).splitlines()
    assert table[1].split() == ["70.00", "70.00", "row_search_mvcc", "[mariadbd]"]
    assert len(table) == 3


def test_group_inclusive_is_a_union() -> None:
    fs = parse_folded(
        "mysqld;row_search_mvcc;btr_search_guess_on_hash;btr_search_info_update_slow 20\n"
        "mysqld;row_search_mvcc;btr_search_guess_on_hash 10\n"
        "mysqld;row_search_mvcc 70\n"
    )
    g = summarize(fs).groups["ahi"]
    assert g.self_pct == pytest.approx(30.0)
    assert g.inclusive_pct == pytest.approx(30.0)  # not 50 (20 counted for two members)
    assert g.top_self == {"btr_search_info_update_slow": 20.0, "btr_search_guess_on_hash": 10.0}


def test_unreadable_folded_input_is_a_usage_error() -> None:
    with pytest.raises(UsageError) as e:
        parse_folded("this is perf script output, not folded\n", source="x.txt")
    assert "stackcollapse" in e.value.hint
    assert parse_folded("").total_samples == 0


# ---------------------------------------------------------------- /proc/stat, micro-arch


def test_proc_stat_series_and_context_switches() -> None:
    a = "cpu  0 0 0 0 0 0 0 0\ncpu0 100 0 50 800 50 0 0 0 0 0\ncpu1 0 0 0 1000 0 0 0 0\nctxt 1000\n"
    b = "cpu  0 0 0 0 0 0 0 0\ncpu0 160 0 70 800 50 0 20 0 0 0\ncpu1 10 0 0 1090 0 0 0 0\nctxt 5000\n"
    (iv,) = cpu_series([(0.0, a), (1.0, b)])
    assert iv.cpus[0].user_pct == pytest.approx(60.0)
    assert iv.cpus[0].softirq_pct == pytest.approx(20.0)
    assert iv.cpus[0].busy_pct == pytest.approx(100.0)
    assert iv.cpus[1].idle_pct == pytest.approx(90.0)
    p = build_profile(
        Recording(duration_s=1.0),
        proc_stat=[(0.0, a), (1.0, b)],
        numa_nodes=[NodeCpus(node=0, cpus=[0]), NodeCpus(node=1, cpus=[1])],
    )
    assert p.cpu is not None
    assert p.cpu.node_busy_spread_pct == pytest.approx(90.0)
    assert p.cpu.max_softirq_cpu == 0
    assert p.context_switches is not None
    assert p.context_switches.per_s == pytest.approx(4000.0)
    assert p.context_switches.per_cpu_per_s == pytest.approx(2000.0)


def test_cpulist() -> None:
    assert parse_cpulist("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]


def test_derive_microarch() -> None:
    m = derive_microarch(
        {
            "CPU_CYCLES": 1000.0,
            "INST_RETIRED": 2000.0,
            "STALL_FRONTEND": 300.0,
            "L1I_CACHE_REFILL": 40.0,
            "ITLB_WALK": 2.0,
            "stall_backend_pct": 25.0,
            "bogus": float("nan"),
        }
    )
    assert m["frontend_bound_pct"] == pytest.approx(30.0)
    assert m["backend_bound_pct"] == pytest.approx(25.0)  # alias kept, not derived
    assert m["l1i_mpki"] == pytest.approx(20.0)
    assert m["itlb_mpki"] == pytest.approx(1.0)
    assert m["ipc"] == pytest.approx(2.0)
    assert "bogus" not in m
    # perf stat / sysfs spell events in lowercase; canonical names win over aliases
    low = derive_microarch(
        {
            "cpu_cycles": 100.0,
            "inst_retired": 1000.0,
            "stall_frontend": 45.0,
            "l1i_tlb_refill": 3.0,
            "frontend_stall_cycles_pct": 99.0,
            "frontend_bound_pct": 45.0,
        }
    )
    assert low["frontend_bound_pct"] == pytest.approx(45.0)
    assert low["itlb_mpki"] == pytest.approx(3.0)


# ---------------------------------------------------------------- the artifact


def test_profile_round_trip(tmp_path: Path) -> None:
    p = capture("seed002-ahi-kunpeng920-4n")
    p = p.model_copy(update={"findings": diagnose(p)})
    path = save_profile(p, tmp_path / "profile.json")
    back = load_profile(path)
    assert back == p
    assert back.schema_version == PROFILE_SCHEMA
    assert diagnose(back) == p.findings


@pytest.mark.parametrize("schema", ["myaccel.profile/2", "myaccel.facts/1", None])
def test_other_schema_refused(tmp_path: Path, schema: str | None) -> None:
    doc = json.loads(capture("healthy-kunpeng920-4n").model_dump_json())
    if schema is None:
        del doc["schema_version"]
    else:
        doc["schema_version"] = schema
    f = tmp_path / "profile.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(UsageError) as e:
        load_profile(f)
    assert PROFILE_SCHEMA in e.value.message
    assert "record the profile again" in e.value.hint


def test_bad_profile_files(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        load_profile(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(UsageError, match="not readable JSON"):
        load_profile(tmp_path / "x.json")
    with pytest.raises(UsageError, match="recording"):
        profile_from_dict({"schema_version": PROFILE_SCHEMA, "created_at": "now"})


# ---------------------------------------------------------------- findings: one per id


def test_healthy_profile_has_no_findings() -> None:
    p = capture("healthy-kunpeng920-4n")
    assert diagnose(p) == []
    assert diagnose(p, host("kunpeng920-2s")) == []
    assert format_findings([]).startswith("no findings")


def test_spin_hot_spot_seed004() -> None:
    p = capture("seed004-spin-kunpeng920")
    found = diagnose(p)
    assert ids(found) == ["spin-hot-spot", "scheduler-churn"]
    f = one(found, "spin-hot-spot")
    assert f.severity == "high"
    assert f.evidence[0].value >= 40
    assert "MVCC::view_open" in f.evidence[0].detail
    assert "PolicyMutex<TTASEventMutex<GenericPolicy> >::enter" in f.evidence[0].detail
    assert any("system time" in e.metric for e in f.evidence)
    eff = effects(f)
    assert eff["server-spin-wait"] == "raise"
    assert eff["server-thread-concurrency"] == "raise"
    assert "build-lse" not in eff  # no helpers hot and the binary is unknown
    # on the seed's machine (Kunpeng 920) with MySQL: the 128-byte cache line too
    kp = with_server(host("kunpeng920-2s"), "mysql")
    eff = effects(one(diagnose(p, kp), "spin-hot-spot"))
    assert eff["build-cacheline"] == "raise"
    assert "server-thread-pool" not in eff


def test_spin_hot_spot_llsc_helpers_raise_build_lse() -> None:
    p = capture("llsc-graviton2-mariadb")
    found = diagnose(p)
    assert ids(found) == ["spin-hot-spot"]
    f = found[0]
    assert f.severity == "medium"
    assert any("atomics" in e.metric and e.value >= 5 for e in f.evidence)
    assert effects(f)["build-lse"] == "raise"
    # MariaDB: the thread pool, not innodb_thread_concurrency (ignored since 10.5)
    g2 = with_server(host("graviton2-m6g"), "mariadb", cpus_allowed="0-15")
    eff = effects(one(diagnose(p, g2), "spin-hot-spot"))
    assert eff["server-thread-pool"] == "raise"
    assert "server-thread-concurrency" not in eff
    # the binary already inlines LSE: a rebuild is not the fix
    eff = effects(one(diagnose(p, with_binary(g2, klass="inline-lse")), "spin-hot-spot"))
    assert eff["build-lse"] == "lower"


def test_ahi_hot_spot_seed002() -> None:
    p = capture("seed002-ahi-kunpeng920-4n")
    found = diagnose(p)
    assert ids(found) == ["ahi-hot-spot", "numa-imbalance"]
    f = one(found, "ahi-hot-spot")
    assert f.severity == "high"
    assert 25 <= f.evidence[0].value <= 40
    assert "btr_search_guess_on_hash" in f.evidence[0].detail
    assert effects(f) == {"server-adaptive-hash-index": "raise", "numa-binding": "raise"}
    # without topology (no nodes in the profile, no facts): AHI only
    single = p.model_copy(update={"numa_nodes": [], "cpu": None})
    assert effects(one(diagnose(single), "ahi-hot-spot")) == {"server-adaptive-hash-index": "raise"}
    # topology from facts when the profile has none
    assert "numa-binding" in effects(one(diagnose(single, host("kunpeng920-2s")), "ahi-hot-spot"))


def test_ahi_found_from_symbol_list_when_groups_missing() -> None:
    p = capture("seed002-ahi-kunpeng920-4n")
    assert p.stacks is not None
    bare = p.model_copy(update={"stacks": p.stacks.model_copy(update={"groups": {}})})
    f = one(diagnose(bare), "ahi-hot-spot")
    assert f.evidence[0].value >= 25


def test_numa_imbalance_seed002() -> None:
    p = capture("seed002-ahi-kunpeng920-4n")
    f = one(diagnose(p), "numa-imbalance")
    assert f.severity == "high"
    assert f.evidence[0].unit == "points"
    assert f.evidence[0].value >= 40
    assert "node0 9" in f.evidence[0].detail
    assert effects(f) == {"numa-binding": "raise"}
    # a server already bound to node 0: the other nodes' idleness is intended
    bound = with_server(host("kunpeng920-2s"), "mysql", cpus_allowed="0-31")
    assert "numa-imbalance" not in ids(diagnose(p, bound))


def test_frontend_bound() -> None:
    p = capture("frontend-yitian710-mysql80")
    found = diagnose(p)
    assert ids(found) == ["frontend-bound"]
    f = found[0]
    assert f.severity == "high"
    assert {e.unit for e in f.evidence} == {"%", "MPKI"}
    assert effects(f) == {
        "build-pgo-lto": "raise",
        "os-code-huge-pages": "raise",
        "build-text-alignment": "raise",
    }
    done = with_binary(host("yitian710-g8y2xlarge"), klass="inline-lse", pgo=True, aligned=True)
    assert effects(one(diagnose(p, done), "frontend-bound")) == {
        "build-pgo-lto": "lower",
        "os-code-huge-pages": "raise",
        "build-text-alignment": "lower",
    }


def test_network_softirq() -> None:
    p = capture("net-softirq-x86-16vcpu")
    found = diagnose(p)
    assert ids(found) == ["network-softirq"]
    f = found[0]
    assert f.severity == "high"
    assert any("cpu0" in e.metric and e.value >= 50 for e in f.evidence)
    assert effects(f) == {"nic-irq-affinity": "raise"}


def test_softirq_without_network_stacks_is_not_a_nic_finding() -> None:
    p = capture("net-softirq-x86-16vcpu")
    assert p.stacks is not None
    groups = dict(p.stacks.groups)
    groups["net-rx"] = groups["net-rx"].model_copy(update={"inclusive_pct": 0.5})
    quiet = p.model_copy(update={"stacks": p.stacks.model_copy(update={"groups": groups})})
    assert diagnose(quiet) == []


def test_io_wait() -> None:
    p = capture("io-bound-mariadb-8vcpu")
    found = diagnose(p)
    assert ids(found) == ["io-wait", "buffer-pool-misses"]
    f = one(found, "io-wait")
    assert f.severity == "high"
    assert f.evidence[0].metric.startswith("iowait") and f.evidence[0].value >= 25
    assert effects(f) == {"server-buffer-pool-size": "raise", "server-io-capacity": "raise"}


def test_buffer_pool_misses() -> None:
    p = capture("io-bound-mariadb-8vcpu")
    f = one(diagnose(p), "buffer-pool-misses")
    assert f.severity == "medium"
    assert f.evidence[0].value == pytest.approx(4.0)
    assert "delta" in f.evidence[0].source
    assert effects(f) == {"server-buffer-pool-size": "raise", "server-io-capacity": "raise"}
    # no status in the profile: cumulative counters from the facts, named as such
    f2 = with_server(host("this-vm"), "mariadb")
    assert f2.server is not None
    srv = f2.server.model_copy(
        update={
            "status": known(
                {
                    "Innodb_buffer_pool_reads": "50000",
                    "Innodb_buffer_pool_read_requests": "1000000",
                },
                "SHOW GLOBAL STATUS",
            )
        }
    )
    no_status = p.model_copy(update={"status": None})
    g = one(diagnose(no_status, f2.model_copy(update={"server": srv})), "buffer-pool-misses")
    assert g.evidence[0].value == pytest.approx(5.0)
    assert "since server start" in g.evidence[0].source
    assert g.severity == "high"


def test_scheduler_churn() -> None:
    p = capture("futex-churn-mariadb-1024thr")
    found = diagnose(p)
    assert ids(found) == ["scheduler-churn"]
    f = found[0]
    assert f.severity == "high"
    assert f.evidence[0].unit == "/s" and f.evidence[0].value >= 30_000
    assert effects(f)["server-thread-pool"] == "raise"
    assert effects(f)["os-scheduler"] == "raise"
    md = with_server(host("this-vm"), "mariadb")
    assert "server-thread-concurrency" not in effects(one(diagnose(p, md), "scheduler-churn"))
    pooled = with_server(host("this-vm"), "mariadb", {"thread_handling": "pool-of-threads"})
    eff = effects(one(diagnose(p, pooled), "scheduler-churn"))
    assert "server-thread-pool" not in eff


# ---------------------------------------------------------------- contract with the rules

ALL = [
    "healthy-kunpeng920-4n",
    "seed002-ahi-kunpeng920-4n",
    "seed004-spin-kunpeng920",
    "llsc-graviton2-mariadb",
    "frontend-yitian710-mysql80",
    "net-softirq-x86-16vcpu",
    "io-bound-mariadb-8vcpu",
    "futex-churn-mariadb-1024thr",
]


def test_every_finding_is_covered_and_names_real_rules() -> None:
    registry = set(load_rules())
    assert registry >= RULE_IDS
    seen: set[str] = set()
    kebab = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
    for name in ALL:
        for f in diagnose(capture(name)):
            seen.add(f.id)
            assert kebab.match(f.id)
            assert f.evidence and f.likely_cause and f.confirm
            assert all(e.source for e in f.evidence)
            for r in f.rules:
                assert r.rule in registry, (f.id, r.rule)
    assert seen == set(FINDING_IDS)
    assert {p.stem.removesuffix(".capture") for p in PROFILES.glob("*.capture.json")} == set(ALL)


def test_findings_feed_the_rules_through_hints() -> None:
    """spin-hot-spot turns on the spin-wait rule on a machine it would otherwise skip."""
    facts = with_server(host("this-vm"), "mysql", cpus_allowed="0-1")
    found = diagnose(capture("seed004-spin-kunpeng920"))
    plain = make_plan(facts, layers=["server"])
    hinted = make_plan(facts, layers=["server"], hints=Hints(findings=finding_ids(found)))
    targets = {r.target for r in hinted.recommendations}
    assert "mysql:innodb_spin_wait_delay" in targets
    assert "mysql:innodb_spin_wait_delay" not in {r.target for r in plain.recommendations}
    text = format_findings(found)
    assert "[high] spin-hot-spot" in text and "raises server-spin-wait" in text
