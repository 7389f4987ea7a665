"""A run whose client ran another number of statements per transaction than the workload
it was asked for is left out (``bench.campaign._shape_check``)."""

from __future__ import annotations

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


def spec(workload: str, extra: tuple[str, ...] = ()) -> RunSpec:
    return RunSpec(
        workload=workload,
        threads=16,
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


def test_not_judged_with_workload_options_retries_or_other_workloads() -> None:
    odd = summary(127_551, 382_624)
    assert _shape_check(spec("oltp_write_only", ("--delete_inserts=0",)), odd) is None
    assert _shape_check(spec("oltp_write_only"), summary(127_551, 382_624, ignored=5)) is None
    assert _shape_check(spec("/tmp/mine.lua"), odd) is None
    assert _shape_check(spec("oltp_read_only"), summary(1_000, 16_000)) is None
    assert _shape_check(spec("oltp_read_only"), summary(1_000, 12_000)) is not None
