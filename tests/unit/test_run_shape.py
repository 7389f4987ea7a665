"""A run whose client ran another number of statements per transaction than the workload
it was asked for is left out (``bench.campaign._shape_check``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from myaccel.bench.campaign import _shape_check
from myaccel.bench.run_record import RunSummary
from myaccel.bench.runner import RunSpec


def summary(transactions: int, queries: int, *, ignored: int = 0) -> RunSummary:
    return RunSummary(
        tps=transactions / 10,
        qps=queries / 10,
        reads=0,
        writes=queries - 2 * transactions,
        other=2 * transactions,
        transactions=transactions,
        queries=queries,
        ignored_errors=ignored,
        reconnects=0,
        latency_ms_min=0.1,
        latency_ms_avg=1.0,
        latency_ms_max=9.0,
        window_s=10.0,
    )


def spec(workload: str, extra: tuple[str, ...] = (), threads: int = 16) -> RunSpec:
    return RunSpec(
        workload=workload,
        threads=threads,
        duration_s=10,
        warmup_s=3,
        tables=8,
        table_size=1000,
        extra=extra,
    )


def test_write_only_with_six_statements_per_transaction_is_kept() -> None:
    assert _shape_check(spec("oltp_write_only"), summary(55_292, 331_729)) is None
    assert _shape_check(spec("wo"), summary(55_292, 331_729)) is None


def test_write_only_with_three_statements_per_transaction_is_left_out() -> None:
    # measured here: 127,551 transactions, 382,624 statements at twice the usual TPS
    why = _shape_check(spec("oltp_write_only"), summary(127_551, 382_624))
    assert why is not None
    assert "3.00 statements per transaction" in why and "runs 6" in why


def test_transactions_split_at_the_window_edges_are_no_other_workload() -> None:
    # the lab's TCG guest: 8 threads, 137 transactions in 5 s, 2,106 statements (15.37 per
    # transaction: up to 8 transactions in flight at each edge of the window); left out and
    # run again, every cell, before the edges were allowed for
    assert _shape_check(spec("oltp_read_only", threads=8), summary(137, 2_106)) is None
    # the defect itself stays caught at that size: half the writes
    assert _shape_check(spec("oltp_write_only", threads=8), summary(137, 411)) is not None
    # and with many transactions the edges allow almost nothing (2% still applies)
    assert _shape_check(spec("oltp_read_only", threads=8), summary(50_000, 780_000)) is not None


def test_not_judged_with_workload_options_retries_or_other_workloads() -> None:
    odd = summary(127_551, 382_624)
    assert _shape_check(spec("oltp_write_only", ("--delete_inserts=0",)), odd) is None
    assert _shape_check(spec("oltp_write_only"), summary(127_551, 382_624, ignored=5)) is None
    assert _shape_check(spec("/tmp/mine.lua"), odd) is None
    assert _shape_check(spec("oltp_read_only"), summary(1_000, 16_000)) is None
    assert _shape_check(spec("oltp_read_only"), summary(1_000, 12_000)) is not None


class FakeSandbox:
    """Counts what ``run_campaign`` asks of a sandbox (no server)."""

    pid = 4242

    def __init__(self) -> None:
        self.starts = 0
        self.restores: list[str] = []
        self.deleted: list[str] = []

    def stop(self) -> None:
        pass

    def snapshot_restore(self, name: str) -> None:
        self.restores.append(name)

    def snapshot_delete(self, name: str) -> None:
        self.deleted.append(name)

    def start(self, options: object, wrapper: object = (), owner: object = None) -> None:
        self.starts += 1


def test_a_run_of_another_workload_is_run_again_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    from myaccel.bench import ab
    from myaccel.bench.profiles import get_profile

    shapes = iter([6.0, 3.0, 6.0, 6.0, 4.0, 4.0])  # the 2nd run is odd, the 5th twice
    seen: list[tuple[int, str, int | None]] = []

    def fake_measure(ctx: object, spec: RunSpec, *, index: int, arm: str | None = None) -> object:
        seen.append((index, str(arm), spec.seed))
        per_tx = next(shapes)
        why = _shape_check(spec, summary(10_000, int(10_000 * per_tx)))
        reasons = [why] if why else []
        return SimpleNamespace(validity=SimpleNamespace(reasons=reasons, failure="ok"))

    monkeypatch.setattr(ab, "measure_run", fake_measure)
    monkeypatch.setattr(ab, "arm_snapshots", lambda sb, arms, note: {a: f"snap-{a}" for a in arms})
    prof = replace(get_profile("quick"), workloads=("oltp_write_only",), threads=(16,))
    prof = replace(prof, runs_per_arm=2)
    sb = FakeSandbox()
    plan = ab.AbPlan(
        sandbox=sb,  # type: ignore[arg-type]
        profile=prof,
        arms={"baseline": ab.Arm("baseline"), "candidate": ab.Arm("candidate")},
        prewarm=False,
    )
    ctx = SimpleNamespace(records=[], server_pid=None)
    ab.run_campaign(plan, ctx)  # type: ignore[arg-type]
    # ABBA: 4 visits. The 2nd run is odd: run again (same arm, same seed). The 4th visit's
    # run and its one retry are both odd: no third attempt.
    assert [(i, a) for i, a, _ in seen] == [
        (1, "baseline"),
        (2, "candidate"),
        (3, "candidate"),
        (4, "candidate"),
        (5, "baseline"),
        (6, "baseline"),
    ]
    assert seen[1][2] == seen[2][2]  # the retry keeps the round's seed
    # every attempt from its arm's restored snapshot; the arms' snapshots removed at the end
    assert sb.restores == [f"snap-{a}" for _, a, _ in seen] and sb.starts == 6
    assert sorted(sb.deleted) == ["snap-baseline", "snap-candidate"]


@pytest.mark.parametrize(
    ("failure", "again"),
    [
        ("crashed", True),
        ("connection-lost", True),
        ("reconnects-present", True),
        ("fatal-sql-error", False),
        ("ok", False),
    ],
)
def test_a_run_that_lost_its_server_is_worth_running_again(failure: str, again: bool) -> None:
    from myaccel.bench.campaign import worth_running_again

    rec = SimpleNamespace(validity=SimpleNamespace(reasons=[f"{failure}: why"], failure=failure))
    why = worth_running_again(rec)  # type: ignore[arg-type]
    assert (why is not None) == again
    if again:
        assert why == f"lost its client ({failure}: why)"
