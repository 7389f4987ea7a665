"""The plan A/B'd on a clone is memory-scaled like the clone's base configuration: the
factor chosen with the plan's buffers in view, the plan's memory knobs scaled by it, the
rest of the plan untouched, and the result saying so."""

from __future__ import annotations

from myaccel.accelerate.clone_plan import plan_memory, scale_plan
from myaccel.clone.rewrite import MIN_BUFFER_POOL, memory_factor, scale_memory, scaled_size
from myaccel.rules.model import Plan
from plans import make_plan

GIB = 1024**3
MIB = 1024**2


def _plan(**knobs: str) -> Plan:
    def target(name: str) -> str:
        return f"mycnf:mysqld/{name}" if name == "innodb_log_buffer_size" else f"mysql:{name}"

    return make_plan(*[(target(name), value, "restart") for name, value in knobs.items()])


def test_plan_memory_reads_only_memory_knobs() -> None:
    plan = _plan(
        innodb_buffer_pool_size="18048M",
        innodb_log_buffer_size="64M",
        innodb_log_file_size="1G",  # disk, not memory
        innodb_flush_log_at_trx_commit="2",
    )
    assert plan_memory(plan) == {
        "innodb_buffer_pool_size": 18048 * MIB,
        "innodb_log_buffer_size": 64 * MIB,
    }


def test_factor_takes_the_plan_into_account() -> None:
    variables = {"innodb_buffer_pool_size": str(128 * MIB), "key_buffer_size": str(8 * MIB)}
    # the source's buffers fit: no scaling without a plan
    assert memory_factor([], variables, 4 * GIB) == (1.0, 136 * MIB)
    assert scale_memory([], variables, 4 * GIB) == []
    # a plan of 16 GiB does not: one factor for both arms
    factor, peak = memory_factor([], variables, 4 * GIB, {"innodb_buffer_pool_size": 16 * GIB})
    assert peak == 16 * GIB + 8 * MIB and factor == 4 * GIB / peak
    rewrites = scale_memory([], variables, 4 * GIB, {"innodb_buffer_pool_size": 16 * GIB})
    # the base's buffer pool is at its floor already; the key buffer shrinks
    assert [r.variable for r in rewrites] == ["key_buffer_size"]
    assert "the plan to run on the clone" in rewrites[0].reason


def test_scaled_size_floors_and_never_grows() -> None:
    assert scaled_size("innodb_buffer_pool_size", 16 * GIB, 0.25) == 4 * GIB
    assert scaled_size("innodb_buffer_pool_size", 256 * MIB, 0.1) == MIN_BUFFER_POOL
    assert scaled_size("innodb_buffer_pool_size", 64 * MIB, 0.1) == 64 * MIB
    assert scaled_size("key_buffer_size", 10 * MIB, 0.05) == MIB
    assert scaled_size("key_buffer_size", 10 * MIB, 1.0) == 10 * MIB


def test_scale_plan_by_the_clone_factor() -> None:
    plan = _plan(
        innodb_buffer_pool_size="16G",
        innodb_log_buffer_size="64M",
        innodb_flush_log_at_trx_commit="2",
    )
    scaled = scale_plan(plan, 0.25)
    proposed = {r.title: r.proposed for r in scaled.plan.recommendations}
    assert proposed == {
        "innodb_buffer_pool_size": "4G",
        "innodb_log_buffer_size": "16M",
        "innodb_flush_log_at_trx_commit": "2",
    }
    assert scaled.scaled and scaled.factor == 0.25
    assert [(k.knob, k.planned, k.on_clone) for k in scaled.knobs] == [
        ("innodb_buffer_pool_size", "16G", "4G"),
        ("innodb_log_buffer_size", "64M", "16M"),
    ]
    assert "scaled by 0.25" in scaled.describe() and "16G -> 4G" in scaled.describe()
    summary = scaled.summary()
    assert summary["factor"] == 0.25 and len(summary["knobs"]) == 2
    # the plan itself (what the real server gets) is untouched
    assert plan.recommendations[0].proposed == "16G"


def test_scale_plan_without_scaling() -> None:
    plan = _plan(innodb_buffer_pool_size="1G")
    same = scale_plan(plan, 1.0)
    assert not same.scaled and same.plan is plan
    assert same.describe() == "the plan ran on the clone as written"
