"""Per-transaction work counters: arithmetic, the medians a comparison keeps, and the
line the Markdown table prints under a cell."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from myaccel.bench.compare import compare_runs, format_markdown
from myaccel.bench.run_record import RunRecord
from myaccel.bench.work_counters import (
    OTHERS_WARNING_PREFIX,
    CounterMedians,
    counter_differences,
    others_cpu_s,
    others_warning,
    per_transaction,
)

DEMO = Path(__file__).parents[1] / "fixtures" / "report" / "accelerate-demo" / "ab"


def test_per_transaction_divides_increases_and_shares() -> None:
    s0 = {"Innodb_data_fsyncs": 100, "Innodb_os_log_written": 1_000, "Innodb_log_writes": 7}
    s1 = {"Innodb_data_fsyncs": 460, "Innodb_os_log_written": 521_000}
    h0 = {"system": 10.0, "iowait": 1.0, "softirq": 0.0, "total": 100.0, "ctx_switches": 5e5}
    h1 = {"system": 30.0, "iowait": 2.0, "softirq": 1.0, "total": 140.0, "ctx_switches": 5.143e5}
    got = per_transaction(s0, s1, h0, h1, 1000)
    assert got["data_fsyncs"] == pytest.approx(0.36)
    assert got["redo_bytes"] == pytest.approx(520.0)
    assert "redo_writes" not in got  # missing after the run: left out, not zero
    assert got["ctx_switches"] == pytest.approx(14.3)
    assert got["system_pct"] == pytest.approx(50.0) and got["iowait_pct"] == pytest.approx(2.5)
    assert per_transaction(s0, s1, h0, h1, 0) == {}


def test_differences_name_what_moved_and_skip_noise() -> None:
    line = counter_differences(
        {
            "data_fsyncs": CounterMedians(baseline=0.36, candidate=0.22),
            "redo_bytes": CounterMedians(baseline=515.0, candidate=530.0),  # 3%: noise
            "pages_flushed": CounterMedians(baseline=0.0, candidate=2.5),
            "ctx_switches": CounterMedians(baseline=14.3, candidate=16.9),
            "row_lock_waits": CounterMedians(baseline=0.0, candidate=0.0),
        }
    )
    assert line == (
        "pages flushed 0 -> 2.5; fsyncs 0.36 -> 0.22 (-39%); "
        "context switches (host) 14.3 -> 16.9 (+18%)"
    )
    assert counter_differences({"redo_bytes": CounterMedians(baseline=1.0, candidate=1.05)}) == ""


def _demo_runs() -> list[RunRecord]:
    return [
        RunRecord.model_validate(json.loads(p.read_text())) for p in sorted(DEMO.glob("run-*.json"))
    ]


def test_comparison_keeps_medians_and_prints_the_differences() -> None:
    runs = _demo_runs()
    fsyncs = {"baseline": [0.30, 0.36, 0.40], "candidate": [0.20, 0.22, 0.25]}
    seen = {"baseline": 0, "candidate": 0}
    marked = []
    for r in runs:
        arm = r.arm or "baseline"
        v = fsyncs[arm][seen[arm] % 3]
        seen[arm] += 1
        marked.append(r.model_copy(update={"per_txn": {"data_fsyncs": v, "redo_bytes": 500.0}}))
    base = [r for r in marked if r.arm == "baseline"]
    cand = [r for r in marked if r.arm == "candidate"]
    cmp = compare_runs(base, cand)
    cell = cmp.cells[0]
    assert set(cell.per_txn) == {"data_fsyncs", "redo_bytes"}
    assert cell.per_txn["redo_bytes"].baseline == cell.per_txn["redo_bytes"].candidate == 500.0
    md = format_markdown(cmp)
    assert "per transaction (baseline -> candidate, medians): fsyncs" in md
    assert "redo bytes" not in md  # equal in both arms


def test_runs_without_counters_compare_as_before() -> None:
    runs = _demo_runs()
    cmp = compare_runs(
        [r for r in runs if r.arm == "baseline"], [r for r in runs if r.arm == "candidate"]
    )
    assert all(c.per_txn == {} for c in cmp.cells)
    assert "per transaction" not in format_markdown(cmp)


def test_report_prints_what_a_transaction_cost(tmp_path: Path) -> None:
    def cost(old: RunRecord) -> RunRecord:
        flushed = 3.0 if old.arm == "candidate" else 0.5
        return old.model_copy(update={"per_txn": {"pages_flushed": flushed, "ctx_switches": 12.0}})

    html, md = _report_of(tmp_path, cost)
    text = md.read_text()
    assert "medians): pages flushed 0.5 -> 3 (+500%)." in text, text
    assert "context switches" not in text
    assert "pages flushed 0.5 -&gt; 3 (+500%)" in html.read_text()


def test_an_invalid_run_is_not_counted_as_disturbed() -> None:
    """Issue 35 defect 6: the per-arm counts included a run left out as invalid."""
    runs = _demo_runs()
    flag = f"{OTHERS_WARNING_PREFIX} 30% of the host's CPU time during the run"
    first = min(r.index for r in runs if r.arm == "baseline")
    marked = [
        r.model_copy(
            update={
                "validity": r.validity.model_copy(
                    update={"warnings": [flag], "valid": False, "reasons": ["not the workload"]}
                )
            }
        )
        if r.arm == "baseline" and r.index == first
        else r
        for r in runs
    ]
    base = [r for r in marked if r.arm == "baseline"]
    cand = [r for r in marked if r.arm == "candidate"]
    cmp = compare_runs(base, cand)
    assert not any("other processes" in w for w in cmp.warnings), cmp.warnings


def test_others_are_the_busy_time_beyond_our_own() -> None:
    h0 = {"total": 1000.0, "idle": 400.0}
    h1 = {"total": 1040.0, "idle": 404.0}  # 40 CPU-s in the run, 36 busy
    assert others_cpu_s(h0, h1, 30.0) == pytest.approx(6.0)
    assert others_cpu_s(h0, h1, 40.0) == 0.0  # never negative
    assert others_cpu_s({}, h1, 1.0) is None
    w = others_warning(6.0, h0, h1)
    assert w is not None and w.startswith(OTHERS_WARNING_PREFIX) and "15%" in w
    assert others_warning(3.0, h0, h1) is None  # 7.5%: the kernel's own I/O work


def test_comparison_counts_disturbed_runs_per_arm() -> None:
    runs = _demo_runs()
    flag = f"{OTHERS_WARNING_PREFIX} 30% of the host's CPU time during the run"
    marked = [
        r.model_copy(update={"validity": r.validity.model_copy(update={"warnings": [flag]})})
        if r.arm == "baseline" and r.index <= 3
        else r
        for r in runs
    ]
    base = [r for r in marked if r.arm == "baseline"]
    cand = [r for r in marked if r.arm == "candidate"]
    n_flagged = sum(r.index <= 3 for r in base)
    cmp = compare_runs(base, cand)
    assert any(
        w.startswith(
            f"other processes used more than 10% of the CPU during {n_flagged} of {len(base)} "
            "valid baseline"
        )
        and f"0 of {len(cand)} valid candidate" in w
        for w in cmp.warnings
    ), cmp.warnings
    assert not any(
        "other processes" in w
        for w in compare_runs(
            [r for r in runs if r.arm == "baseline"], [r for r in runs if r.arm == "candidate"]
        ).warnings
    )


def test_the_report_says_first_that_runs_were_disturbed(tmp_path: Path) -> None:
    """Issue 35 defect 5: report.md led with a bold gain and counted the disturbed runs
    150 lines further down."""
    flag = f"{OTHERS_WARNING_PREFIX} 30% of the host's CPU time during the run"

    def disturb(old: RunRecord) -> RunRecord:
        if not old.index % 2:
            return old
        return old.model_copy(
            update={"validity": old.validity.model_copy(update={"warnings": [flag]})}
        )

    html, md = _report_of(tmp_path, disturb)
    runs = _demo_runs()
    summary = md.read_text().split("## Summary", 1)[1].strip().splitlines()
    hit = sum(r.index % 2 for r in runs)
    assert summary[0].startswith(f"**Disturbed**: {hit} of {len(runs)} valid runs"), summary[:3]
    assert "<strong>Disturbed:</strong>" in html.read_text()


def _report_of(tmp_path: Path, change: Callable[[RunRecord], RunRecord]) -> tuple[Path, Path]:
    """The demo campaign with each run changed by ``change``, compared, and its report."""
    from myaccel.report import write_report

    d = tmp_path / "ab"
    shutil.copytree(DEMO, d)
    runs = [change(old) for old in _demo_runs()]
    for r in runs:
        (d / f"run-{r.index:03d}.json").write_text(r.model_dump_json())
    cmp = compare_runs(
        [r for r in runs if r.arm == "baseline"], [r for r in runs if r.arm == "candidate"]
    )
    (d / "comparison.json").write_text(cmp.model_dump_json())
    return write_report([d], d, html=True, md=True)


def test_a_flagged_run_says_what_the_server_itself_changed() -> None:
    from myaccel.bench.campaign import _server_rows

    c0 = {"Handler_write": 10, "Handler_update": 20, "Handler_delete": 5}
    c1 = {"Handler_write": 110, "Handler_update": 220, "Handler_delete": 105}
    assert "4.00 rows per transaction" in _server_rows(c0, c1, 100)
    assert _server_rows({}, c1, 100) == ""  # counters not read: nothing claimed
