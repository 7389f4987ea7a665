"""perf stat: CSV parsing, event selection, argv, error mapping, metric sets, normalization.

Fixtures: tests/fixtures/perfstat/ (README.md says which are recorded on this VM and which
are built by hand; expected values below are computed by hand from the counts).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_runner import Recording, ReplayRunner

from myaccel.env import Environment, using
from myaccel.errors import ProcessFailed, ToolMissing, UsageError
from myaccel.facts.sysroot import Sysroot
from myaccel.model import PerfFacts, known, unknown
from myaccel.profile import metrics as m
from myaccel.profile import perfstat as ps

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "perfstat"
SYSROOTS = Path(__file__).resolve().parents[1] / "fixtures" / "sysroots"


def parse(name: str) -> ps.PerfStatResult:
    return ps.parse_perf_stat_csv((FIX / name).read_text())


def values(family: str, result: ps.PerfStatResult) -> dict[str, float | None]:
    return {v.name: v.value for v in m.compute(family, result)}


# ---------------------------------------------------------------- parsing: recorded


def test_parse_vm_capture_not_supported_verbatim() -> None:
    r = parse("vm-cycles-instructions.csv")
    assert [c.event for c in r.counts] == ["cycles", "instructions"]
    for c in r.counts:
        assert c.value is None
        assert c.reason == ps.NOT_SUPPORTED
        assert c.run_time_ns == 0
        assert c.enabled_pct == 100.0
        assert not c.multiplexed
    assert r.totals() == {"cycles": None, "instructions": None}
    assert r.reasons() == {"cycles": "not supported", "instructions": "not supported"}
    assert r.unparsed == []


def test_parse_vm_capture_software_events_count() -> None:
    r = parse("vm-software-and-hardware.csv")
    tc = r.get("task-clock")
    assert tc is not None
    assert tc.value == pytest.approx(1.16)
    assert tc.unit == "msec"
    assert tc.run_time_ns == 1158746
    assert tc.metrics[0].value == pytest.approx(0.011)
    assert tc.metrics[0].unit == "CPUs utilized"
    totals = r.totals()
    assert totals["context-switches"] == 9
    assert totals["page-faults"] == 76
    assert totals["branch-misses"] is None


def test_parse_nonroot_modifier_is_stripped() -> None:
    r = parse("vm-nonroot-task-clock.csv")
    (c,) = r.counts
    assert c.event == "task-clock:u"
    assert c.name == "task-clock"


# ---------------------------------------------------------------- parsing: built fixtures


def test_parse_n1_multiplexing_flags() -> None:
    r = parse("neoverse-n1-graviton2-perf6.csv")
    assert len(r.counts) == 14
    cyc = r.get("cpu_cycles")
    assert cyc is not None
    assert cyc.value == 320_000_000_000  # kept as printed (perf's scaled estimate)
    assert cyc.enabled_pct == pytest.approx(66.67)
    assert cyc.multiplexed
    assert cyc.model_dump()["multiplexed"] is True  # the flag is part of the artifact
    mux = r.multiplexed()
    assert mux["itlb_walk"] == pytest.approx(49.98)
    assert mux["l2d_cache_refill"] == pytest.approx(83.33)
    assert "task-clock" not in mux
    assert r.reasons() == {}


def test_parse_n2_comment_lines_from_output_file() -> None:
    r = parse("neoverse-n2-yitian710-perf5-pid.csv")
    assert r.comments == ["# started on Sun Nov 22 04:10:00 2026"]
    assert r.unparsed == []
    assert r.totals()["stall_slot"] == 350_000_000_000


def test_parse_kunpeng_old_layout_and_raw_alias() -> None:
    r = parse("kunpeng920-perf4-layout.csv")
    fb = r.get("fetch_bubble")
    assert fb is not None
    assert fb.event == "r2014"
    assert fb.value == 2_400_000_000_000
    assert fb.run_time_ns == 853_376_000_000
    assert fb.metrics == []  # four trailing separators, no metric
    tc = r.get("task-clock")
    assert tc is not None and tc.value == pytest.approx(1280123.456789)


def test_parse_intel_metric_columns_and_not_supported() -> None:
    r = parse("x86-intel-icelake-topdown-perf6.csv")
    ins = r.get("instructions")
    assert ins is not None
    assert ins.metrics[0].value == pytest.approx(1.5)
    assert ins.metrics[0].unit == "insn per cycle"
    ret = r.get("topdown-retiring")
    assert ret is not None and ret.metrics[0].unit == "retiring"
    assert not ret.multiplexed
    l1i = r.get("L1-icache-load-misses")
    assert l1i is not None and l1i.name == "l1-icache-load-misses" and l1i.multiplexed
    assert r.reasons() == {
        "stalled-cycles-frontend": "not supported",
        "stalled-cycles-backend": "not supported",
    }


# ---------------------------------------------------------------- parsing: layout variants


def test_parse_interval_prefix_sums_deltas() -> None:
    text = (
        "     1.001002003,1000,,cycles,1000000,100.00,,\n"
        "     2.002003004,1500,,cycles,1000000,100.00,,\n"
    )
    r = ps.parse_perf_stat_csv(text)
    assert [c.timestamp_s for c in r.counts] == [
        pytest.approx(1.001002003),
        pytest.approx(2.002003004),
    ]
    assert r.totals()["cycles"] == 2500


def test_parse_per_core_prefix_and_per_thread() -> None:
    text = (
        "S0-D0-C0,2,3000,,instructions,2000000,100.00,1.50,insn per cycle\n"
        "S0-D0-C1,2,<not counted>,,instructions,0,0.00,,\n"
        "mariadbd-4242,123,,context-switches,5000,100.00,24.6,K/sec\n"
    )
    r = ps.parse_perf_stat_csv(text)
    a, b, t = r.counts
    assert (a.aggregate, a.aggregate_cpus, a.value) == ("S0-D0-C0", 2, 3000)
    assert a.metrics[0].value == 1.5
    assert (b.aggregate, b.value, b.reason, b.enabled_pct) == ("S0-D0-C1", None, "not counted", 0.0)
    assert not b.multiplexed
    assert (t.aggregate, t.value, t.name) == ("mariadbd-4242", 123, "context-switches")
    assert r.totals()["instructions"] == 3000  # the uncounted core adds nothing


def test_parse_variance_column_with_repeats() -> None:
    r = ps.parse_perf_stat_csv("123456,,cycles,0.52%,998877,87.50,,\n")
    (c,) = r.counts
    assert c.variance_pct == pytest.approx(0.52)
    assert c.run_time_ns == 998877
    assert c.enabled_pct == pytest.approx(87.5)
    assert c.multiplexed


def test_parse_metric_continuation_and_json_metric_unit() -> None:
    text = (
        "2000,,instructions,1000,100.00,2.00,insn per cycle\n"
        ",,,,,0.25,stalled cycles per insn\n"
        ",,,,,31.2,%  tma_retiring\n"
    )
    r = ps.parse_perf_stat_csv(text)
    (c,) = r.counts
    assert [(x.value, x.unit) for x in c.metrics] == [
        (2.0, "insn per cycle"),
        (0.25, "stalled cycles per insn"),
        (31.2, "%  tma_retiring"),
    ]


def test_parse_pmu_event_with_commas_and_hybrid_prefix() -> None:
    text = (
        "42,,cpu/event=0x3c,umask=0x0/,1000,100.00,,\n"
        "77,,cpu_core/cycles/,1000,100.00,,\n"
        "88,,armv8_pmuv3_0/inst_retired/,1000,100.00,,\n"
    )
    r = ps.parse_perf_stat_csv(text)
    assert [c.event for c in r.counts] == [
        "cpu/event=0x3c,umask=0x0/",
        "cpu_core/cycles/",
        "armv8_pmuv3_0/inst_retired/",
    ]
    assert [c.name for c in r.counts] == ["cpu/event=0x3c,umask=0x0/", "cycles", "inst_retired"]


def test_parse_ignores_noise_lines() -> None:
    text = "# started on x\n\nsome workload output\n12,,cycles,10,100.00,,\nError: junk\n"
    r = ps.parse_perf_stat_csv(text)
    assert [c.name for c in r.counts] == ["cycles"]
    assert r.unparsed == ["some workload output", "Error: junk"]


def test_parse_other_separator() -> None:
    r = ps.parse_perf_stat_csv("235733;;ld_spec;1248820;100.00;;\n", sep=";")
    assert r.totals() == {"ld_spec": 235733}


# ---------------------------------------------------------------- metrics per family


def test_metrics_neoverse_n1() -> None:
    v = values("neoverse-n1", parse("neoverse-n1-graviton2-perf6.csv"))
    assert v["ipc"] == pytest.approx(0.8)
    assert v["frontend_stall_cycles_pct"] == pytest.approx(30.0)
    assert v["backend_stall_cycles_pct"] == pytest.approx(40.0)
    assert v["frontend_stall_rate_pct"] == pytest.approx(100 * 96 / 224)
    assert v["backend_stall_rate_pct"] == pytest.approx(100 * 128 / 224)
    assert (v["itlb_mpki"], v["l1i_mpki"], v["branch_mpki"]) == pytest.approx((1.0, 25.0, 6.0))
    assert (v["dtlb_mpki"], v["l1d_mpki"], v["l2d_mpki"]) == pytest.approx((2.0, 20.0, 8.0))
    assert "frontend_bound_pct" not in v  # N1 has no slot events


def test_metrics_neoverse_n2_slot_topdown_with_correction() -> None:
    res = m.compute("neoverse-n2", parse("neoverse-n2-yitian710-perf5-pid.csv"))
    v = {x.name: x.value for x in res}
    assert v["frontend_bound_pct"] == pytest.approx(10.0)
    assert v["backend_bound_pct"] == pytest.approx(40.0)
    assert v["retiring_pct"] == pytest.approx(45.0)
    assert v["bad_speculation_pct"] == pytest.approx(5.0)
    total = sum(
        v[k] or 0
        for k in ("frontend_bound_pct", "backend_bound_pct", "retiring_pct", "bad_speculation_pct")
    )
    assert total == pytest.approx(100.0)
    assert v["ipc"] == pytest.approx(1.6)
    assert v["frontend_stall_rate_pct"] == pytest.approx(40.0)
    fe = next(x for x in res if x.name == "frontend_bound_pct")
    assert "5 * cpu_cycles" in fe.formula and "- cpu_cycles" in fe.formula
    assert fe.multiplexed == {
        "stall_slot_frontend": pytest.approx(40.01),
        "cpu_cycles": pytest.approx(40.01),
    }
    assert "neoverse-n2-v2/metrics.json" in fe.source


def test_metrics_neoverse_v1_and_v2_use_eight_slots() -> None:
    c = {
        "cpu_cycles": 100.0,
        "stall_slot_frontend": 240.0,
        "stall_slot_backend": 320.0,
        "stall_slot": 560.0,
        "op_retired": 90.0,
        "op_spec": 100.0,
        "br_mis_pred": 2.0,
        "inst_retired": 150.0,
    }
    v1 = {x.name: x.value for x in m.compute("neoverse-v1", c)}
    # fe = 240/800 - 4*2/100 = 0.30 - 0.08; bs = 0.1*(1-0.7) + 0.08; ret = 0.9*0.3; be = 0.4
    assert v1["frontend_bound_pct"] == pytest.approx(22.0)
    assert v1["bad_speculation_pct"] == pytest.approx(11.0)
    assert v1["retiring_pct"] == pytest.approx(27.0)
    assert v1["backend_bound_pct"] == pytest.approx(40.0)
    v2 = {x.name: x.value for x in m.compute("neoverse-v2", c)}
    # Arm V2 telemetry: fe = 0.30 - 2/100; be = 0.40 - 3*2/100
    assert v2["frontend_bound_pct"] == pytest.approx(28.0)
    assert v2["backend_bound_pct"] == pytest.approx(34.0)
    assert v2["bad_speculation_pct"] == pytest.approx(11.0)
    assert v2["retiring_pct"] == pytest.approx(27.0)
    assert sum(
        v2[k] or 0
        for k in ("frontend_bound_pct", "backend_bound_pct", "retiring_pct", "bad_speculation_pct")
    ) == pytest.approx(100.0)


def test_metrics_kunpeng920_fetch_bubble() -> None:
    v = values("kunpeng920", parse("kunpeng920-perf4-layout.csv"))
    assert v["frontend_bound_pct"] == pytest.approx(30.0)
    assert v["bad_speculation_pct"] == pytest.approx(5.0)
    assert v["retiring_pct"] == pytest.approx(15.0)
    assert v["backend_bound_pct"] == pytest.approx(50.0)
    assert v["ipc"] == pytest.approx(0.6)
    assert (v["l1i_mpki"], v["branch_mpki"], v["l2d_mpki"]) == pytest.approx((30.0, 8.0, 12.0))


def test_metrics_x86_intel_icelake_topdown_uses_sum_of_four() -> None:
    v = values("x86-intel", parse("x86-intel-icelake-topdown-perf6.csv"))
    # slots is 4.02e11 but the four topdown counts sum to 4.00e11: perf divides by the sum
    assert v["retiring_pct"] == pytest.approx(25.0)
    assert v["bad_speculation_pct"] == pytest.approx(5.0)
    assert v["frontend_bound_pct"] == pytest.approx(30.0)
    assert v["backend_bound_pct"] == pytest.approx(40.0)
    assert v["frontend_stall_rate_pct"] == pytest.approx(100 * 12 / 28)
    assert v["ipc"] == pytest.approx(1.5)
    assert (v["itlb_mpki"], v["l1i_mpki"], v["branch_mpki"]) == pytest.approx((1.0, 20.0, 5.0))
    assert (v["dtlb_mpki"], v["l1d_mpki"], v["llc_mpki"]) == pytest.approx((2.0, 30.0, 1.0))


def test_metrics_x86_intel_pre_icelake_formulas() -> None:
    c = {
        "topdown-total-slots": 1000.0,
        "topdown-slots-issued": 500.0,
        "topdown-slots-retired": 400.0,
        "topdown-fetch-bubbles": 200.0,
        "topdown-recovery-bubbles": 50.0,
    }
    v = {x.name: x.value for x in m.compute("x86-intel", c)}
    assert v["frontend_bound_pct"] == pytest.approx(20.0)
    assert v["bad_speculation_pct"] == pytest.approx(15.0)  # (500 - 400 + 50) / 1000
    assert v["retiring_pct"] == pytest.approx(40.0)
    assert v["backend_bound_pct"] == pytest.approx(25.0)  # 1 - (200 + 500 + 50) / 1000


def test_metrics_unavailable_with_reason_on_this_vm() -> None:
    res = m.compute("x86-intel", parse("vm-software-and-hardware.csv"))
    byname = {x.name: x for x in res}
    assert all(x.value is None for x in res)
    assert byname["ipc"].unavailable == "instructions not supported; cycles not supported"
    assert "topdown-fe-bound not measured" in (byname["frontend_bound_pct"].unavailable or "")


def test_metrics_fallback_alternative_and_zero_division() -> None:
    c = {"inst_retired": 2000.0, "l1i_tlb_refill": 10.0, "cpu_cycles": 0.0}
    res = {x.name: x for x in m.compute("neoverse-n1", c)}
    itlb = res["itlb_mpki"]
    assert itlb.value == pytest.approx(5.0)
    assert itlb.formula == "l1i_tlb_refill / inst_retired * 1000"
    ipc = res["ipc"]
    assert ipc.value is None and ipc.unavailable == "division by zero (cpu_cycles = 0)"
    assert res["l2d_mpki"].unavailable == "l2d_cache_refill not measured"
    # Names as Arm documents spell them (uppercase) are canonicalized.
    upper = {
        x.name: x.value for x in m.compute("neoverse-n1", {"CPU_CYCLES": 10, "INST_RETIRED": 5})
    }
    assert upper["ipc"] == pytest.approx(0.5)


def test_metric_sets_cover_every_family_with_sources() -> None:
    for fam in (
        "neoverse-n1",
        "neoverse-n2",
        "neoverse-v1",
        "neoverse-v2",
        "kunpeng920",
        "x86-intel",
        "x86-amd",
    ):
        defs = m.metric_set(fam)
        assert defs
        for d in defs:
            assert d.source and d.description and d.unit
            for f, names in zip(d.formulas, d.inputs, strict=True):
                assert names and all(n == n.lower() for n in names)
                m.evaluate(f, dict.fromkeys(names, 1.0 + len(names)))  # parses
    assert m.metric_set("cortex-a72") == m.ARM_COMMON
    assert m.metric_set("x86-other") == m.METRIC_SETS["x86-amd"]


def test_evaluate_rejects_anything_but_arithmetic() -> None:
    with pytest.raises(m.FormulaError):
        m.evaluate("a ** 2", {"a": 2.0})
    assert m.evaluate("(topdown-fe-bound - x) / 2", {"topdown-fe-bound": 6.0, "x": 2.0}) == 2.0


def test_to_microarch_keys_match_profile_records() -> None:
    res = m.compute("neoverse-n1", parse("neoverse-n1-graviton2-perf6.csv"))
    ua = m.to_microarch(res)
    assert ua["frontend_bound_pct"] == pytest.approx(30.0)  # stall cycles stand in on N1
    assert ua["l1i_mpki"] == pytest.approx(25.0)
    assert ua["itlb_mpki"] == pytest.approx(1.0)


# ---------------------------------------------------------------- normalization


def test_normalize_seed000_style_table() -> None:
    before = m.compute("neoverse-n2", parse("neoverse-n2-yitian710-perf5-pid.csv"))
    after = m.compute("neoverse-n2", parse("neoverse-n2-yitian710-perf5-pid-after.csv"))
    rows = {r.name: r for r in m.normalize(before, after)}
    assert rows["itlb_mpki"].after_pct_of_before == pytest.approx(56.1)
    assert rows["itlb_mpki"].change_pct == pytest.approx(-43.9)
    assert rows["l1i_mpki"].after_pct_of_before == pytest.approx(74.2)
    assert rows["branch_mpki"].after_pct_of_before == pytest.approx(43.7)
    assert rows["dtlb_mpki"].after_pct_of_before == pytest.approx(52.7)
    assert rows["l2d_mpki"].after_pct_of_before == pytest.approx(81.5)
    assert rows["l1d_mpki"].after_pct_of_before == pytest.approx(100.0)
    assert rows["ipc"].unit == "per cycle"
    table = m.format_normalized(list(rows.values()))
    assert "| itlb_mpki | MPKI | 1 | 0.561 | 56.1% |" in table


def test_normalize_missing_and_zero_baseline() -> None:
    rows = m.normalize({"a": 2.0, "b": 0.0, "c": None}, {"a": 3.0, "b": 1.0, "c": 1.0, "d": 4.0})
    by = {r.name: r for r in rows}
    assert [r.name for r in rows] == ["a", "b", "c", "d"]
    assert by["a"].after_pct_of_before == pytest.approx(150.0)
    assert (
        by["b"].after_pct_of_before is None
        and by["b"].note == "zero in the baseline: no percentage"
    )
    assert by["c"].note == "not measured before"
    assert by["d"].note == "not measured before"


# ---------------------------------------------------------------- event selection


def test_select_events_graviton2_n1() -> None:
    inv = ps.collect_event_inventory(Sysroot(SYSROOTS / "graviton2-m6g"))
    assert inv.core_pmus == ["armv8_pmuv3_0"]
    plan = ps.select_events("neoverse-n1", inv)
    assert plan.groups == [
        ["cpu_cycles", "inst_retired", "stall_frontend", "stall_backend"],
        ["l1i_tlb_refill", "itlb_walk", "l1i_cache_refill", "br_mis_pred_retired", "br_mis_pred"],
        ["dtlb_walk", "l1d_tlb_refill", "l1d_cache_refill", "l2d_cache_refill"],
        ["task-clock"],
    ]
    assert plan.missing == {}
    # The N1 fixture's rows are exactly this plan's events, in order.
    fixture = [c.name for c in parse("neoverse-n1-graviton2-perf6.csv").counts]
    assert fixture == plan.events


def test_select_events_yitian_n2_has_slot_group() -> None:
    inv = ps.collect_event_inventory(Sysroot(SYSROOTS / "yitian710-g8y2xlarge"))
    plan = ps.select_events("neoverse-n2", inv)
    assert plan.groups[0] == [
        "cpu_cycles",
        "stall_slot_frontend",
        "stall_slot_backend",
        "stall_slot",
        "op_retired",
        "op_spec",
    ]
    assert plan.groups[1] == ["inst_retired", "stall_frontend", "stall_backend"]
    assert all(len([e for e in g if e != "cpu_cycles"]) <= 6 for g in plan.groups)
    needed = {n for d in m.metric_set("neoverse-n2") for n in d.inputs[0]}
    assert needed <= set(plan.events)


def test_select_events_slot_metrics_missing_on_n1_hardware() -> None:
    inv = ps.collect_event_inventory(Sysroot(SYSROOTS / "graviton2-m6g"))
    plan = ps.select_events("neoverse-v1", inv)  # e.g. a misdetected core
    assert "stall_slot_frontend" in plan.missing
    assert "not listed under" in plan.missing["op_spec"]
    assert plan.groups[0] == ["cpu_cycles"]


def test_select_events_kunpeng_uses_raw_fetch_bubble_and_ignores_uncore() -> None:
    inv = ps.collect_event_inventory(Sysroot(SYSROOTS / "kunpeng920-2s"))
    assert inv.core_pmus == ["armv8_pmuv3_0"]
    assert "flux_rd" not in inv.events  # hisi_sccl* uncore events are not core events
    plan = ps.select_events("kunpeng920", inv)
    assert plan.groups[0] == ["cpu_cycles", "inst_retired", "inst_spec", "fetch_bubble"]
    argv = ps.build_perf_stat_argv(plan, duration_s=10, system_wide=True)
    assert "{cpu_cycles,inst_retired,inst_spec,r2014}" in argv[argv.index("-e") + 1]
    # not on other Arm cores
    other = ps.select_events("neoverse-n1", inv.model_copy(update={}))
    assert "fetch_bubble" not in other.events


def test_select_events_this_vm_without_pmu() -> None:
    inv = ps.collect_event_inventory(Sysroot(SYSROOTS / "this-vm"))
    assert not inv.has_core_pmu
    plan = ps.select_events("x86-intel", inv)
    assert plan.groups == [["task-clock"]]
    assert not plan.hardware
    assert "no CPU PMU" in plan.missing["cycles"]
    assert plan.notes == ["no CPU PMU: only software events are counted"]


def test_select_events_intel_icelake_vs_skylake_vs_amd() -> None:
    icl = ps.EventInventory(
        pmus=["cpu", "software"],
        events=[
            "slots",
            "topdown-retiring",
            "topdown-bad-spec",
            "topdown-fe-bound",
            "topdown-be-bound",
            "instructions",
        ],
    )
    plan = ps.select_events("x86-intel", icl)
    assert plan.groups[0] == [
        "slots",
        "topdown-retiring",
        "topdown-bad-spec",
        "topdown-fe-bound",
        "topdown-be-bound",
    ]
    assert ["cycles", "instructions", "branch-misses"] in plan.groups
    ev = ps.format_event_list(plan.groups)
    assert ev.startswith(
        "{slots,topdown-retiring,topdown-bad-spec,topdown-fe-bound,topdown-be-bound},"
    )
    assert "{L1-icache-load-misses,iTLB-load-misses}" in ev
    assert "{dTLB-load-misses,L1-dcache-load-misses,LLC-load-misses}" in ev
    assert ev.endswith(",task-clock")

    skl = ps.EventInventory(
        pmus=["cpu"],
        events=[
            "topdown-total-slots",
            "topdown-slots-issued",
            "topdown-slots-retired",
            "topdown-fetch-bubbles",
            "topdown-recovery-bubbles",
        ],
    )
    plan = ps.select_events("x86-intel", skl)
    assert plan.groups[0][0] == "topdown-total-slots"
    assert any("pre-Ice Lake" in n for n in plan.notes)

    partial = ps.EventInventory(pmus=["cpu"], events=["slots", "topdown-retiring"])
    plan = ps.select_events("x86-intel", partial)
    assert "slots" not in plan.events
    assert plan.missing["slots"] == "topdown group incomplete on this CPU"

    amd = ps.EventInventory(pmus=["cpu", "amd_l3"], events=["cpu-cycles"])
    plan = ps.select_events("x86-amd", amd)
    assert plan.groups[0] == ["cycles", "instructions", "branch-misses", "stalled-cycles-frontend"]
    assert "topdown" in plan.missing


def test_inventory_from_facts() -> None:
    pf = PerfFacts(
        perf_path=known("/usr/bin/perf", "PATH"),
        perf_version=known("perf version 6.1", "perf --version"),
        paranoid=known(2, "/proc/sys/kernel/perf_event_paranoid"),
        kptr_restrict=known(0, "/proc/sys/kernel/kptr_restrict"),
        pmus=known(["armv8_pmuv3_0", "software"], "sysfs"),
        events=known({"cpu_cycles": True, "inst_retired": True, "op_spec": False}, "sysfs"),
        hardware_counters=unknown("not tested"),
    )
    inv = ps.inventory_from_facts(pf)
    assert inv.events == ["cpu_cycles", "inst_retired"]
    assert inv.has_core_pmu


# ---------------------------------------------------------------- argv


def test_argv_pid_and_system_wide() -> None:
    plan = ps.EventPlan(
        family="neoverse-n1", groups=[["cpu_cycles", "inst_retired"], ["task-clock"]]
    )
    argv = ps.build_perf_stat_argv(plan, duration_s=30, pid=4242, output_path="/tmp/x.csv")
    assert argv == [
        "perf", "stat", "-x,", "-o", "/tmp/x.csv",
        "-e", "{cpu_cycles,inst_retired},task-clock",
        "-p", "4242", "--", "sleep", "30",
    ]  # fmt: skip
    argv = ps.build_perf_stat_argv(plan, duration_s=0.5, system_wide=True, perf="/usr/bin/perf")
    assert argv[0] == "/usr/bin/perf"
    assert argv[-4:] == ["-a", "--", "sleep", "0.5"]
    assert "-p" not in argv


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"duration_s": 1}, "either one process"),
        ({"duration_s": 1, "pid": 1, "system_wide": True}, "either one process"),
        ({"duration_s": 0, "pid": 1}, "invalid duration"),
        ({"duration_s": 1, "pid": -3}, "invalid pid"),
    ],
)
def test_argv_rejects_bad_targets(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        ps.build_perf_stat_argv([["cycles"]], **kwargs)  # type: ignore[arg-type]


# ---------------------------------------------------------------- errors


def test_error_unknown_event_exit_129() -> None:
    err = ps.perf_stat_error(129, (FIX / "vm-unknown-event.stderr").read_text())
    assert isinstance(err, ps.PerfUnknownEvent)
    assert "nosuchevent" in err.message
    assert "perf list" in err.hint
    assert err.context["exit_code"] == "129"


def test_error_paranoid_gives_the_fix() -> None:
    err = ps.perf_stat_error(
        255, (FIX / "vm-paranoid-nonroot-system-wide.stderr").read_text(), system_wide=True
    )
    assert isinstance(err, ps.PerfPermissionDenied)
    assert "(now 2)" in err.message
    assert "sysctl -w kernel.perf_event_paranoid=1" in err.hint
    assert "root" in err.hint and "0 for system-wide" in err.hint


def test_error_group_and_topdown_not_supported() -> None:
    err = ps.perf_stat_error(255, (FIX / "vm-group-not-supported.stderr").read_text())
    assert isinstance(err, ps.PerfUnsupported) and "'cycles'" in err.message
    err = ps.perf_stat_error(234, (FIX / "vm-topdown-not-supported.stderr").read_text())
    assert isinstance(err, ps.PerfUnsupported) and "top-down" in err.message


def test_error_other_and_success() -> None:
    assert ps.perf_stat_error(0, "") is None
    err = ps.perf_stat_error(1, "something odd\n")
    assert isinstance(err, ProcessFailed) and "something odd" in err.message


def test_run_perf_stat_tool_missing() -> None:
    fake = ReplayRunner(missing=["perf"])
    plan = ps.EventPlan(family="x86-intel", groups=[["task-clock"]])
    with using(Environment(runner=fake)), pytest.raises(ToolMissing, match="perf"):
        ps.run_perf_stat(plan, duration_s=1, system_wide=True)
    assert fake.calls == []


def test_run_perf_stat_maps_exit_129() -> None:
    recorded = Recording.perfstat_stderr("vm-unknown-event.stderr", 129)
    fake = ReplayRunner().on(["perf", "stat"], recorded)
    plan = ps.EventPlan(family="x86-intel", groups=[["nosuchevent"]])
    with using(Environment(runner=fake)), pytest.raises(ps.PerfUnknownEvent):
        ps.run_perf_stat(plan, duration_s=1, pid=1)
    assert fake.argvs("run")[0][:2] == ("/usr/bin/perf", "stat")


def test_run_perf_stat_reads_output_file() -> None:
    captured = (FIX / "vm-software-and-hardware.csv").read_text()

    def perf_stat(argv: tuple[str, ...]) -> Recording:
        Path(argv[argv.index("-o") + 1]).write_text(captured)  # perf writes its CSV there
        return Recording(stderr="workload chatter\n", duration_s=0.1)

    fake = ReplayRunner().on(["perf", "stat"], perf_stat)
    plan = ps.EventPlan(family="x86-intel", groups=[["task-clock"], ["cycles"]])
    with using(Environment(runner=fake)):
        r = ps.run_perf_stat(plan, duration_s=0.1, system_wide=True)
    assert r.totals()["page-faults"] == 76
    assert r.unparsed == []
