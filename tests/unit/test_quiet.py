"""The quiet-machine gate (bench/quiet.py): its decision with an injected load reader and
clock, and the sentence every output leads with when the figures are disturbed."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from myaccel.bench.compare import compare_runs, format_markdown
from myaccel.bench.quiet import THRESHOLD_PCT, disturbed_banner, others_load, wait_for_quiet
from myaccel.bench.run_record import QuietGate, RunRecord
from myaccel.bench.work_counters import OTHERS_WARNING_PREFIX

DEMO = Path(__file__).parents[1] / "fixtures" / "report" / "accelerate-demo" / "ab"
FLAG = f"{OTHERS_WARNING_PREFIX} 30% of the host's CPU time during the run"


class FakeHost:
    """Loads read in turn (the last one repeats); a clock that moves by the sample and by
    each sleep, so the wait is measured as the gate would measure it."""

    def __init__(self, loads: list[float | None]) -> None:
        self.loads: Iterator[float | None] = iter(loads)
        self.last = loads[-1]
        self.now = 100.0
        self.slept: list[float] = []
        self.notes: list[str] = []

    def read(self, sample_s: float) -> float | None:
        self.now += sample_s
        self.last = next(self.loads, self.last)
        return self.last

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s

    def clock(self) -> float:
        return self.now

    def gate(self, wait_s: float, **kw: float) -> QuietGate:
        return wait_for_quiet(
            self.read,
            wait_s=wait_s,
            note=self.notes.append,
            sleep=self.sleep,
            clock=self.clock,
            **kw,
        )


def test_a_quiet_host_is_measured_once_and_not_waited_for() -> None:
    host = FakeHost([3.0])
    g = host.gate(60)
    assert (g.verdict, g.others_pct, g.samples, host.slept) == ("quiet", 3.0, 1, [])
    assert host.notes == ["host quiet: other processes use 3% of the CPU"]


def test_the_gate_waits_while_loud_and_goes_on_once_quiet() -> None:
    host = FakeHost([70.0, 45.0, 4.0])
    g = host.gate(120, sample_s=2, poll_s=10)
    assert g.verdict == "quiet" and g.samples == 3 and g.first_pct == 70.0
    assert host.slept == [10, 10]
    assert g.waited_s == pytest.approx(2 + 10 + 2 + 10 + 2)
    # progress while waiting: the load measured, the threshold and the time so far
    assert host.notes[0].startswith("host busy: other processes use 70% of the CPU")
    assert f"at most {THRESHOLD_PCT:.0f}%" in host.notes[0] and "(2 of 120 s" in host.notes[0]
    assert host.notes[-1] == "host quiet after waiting 26 s: other processes use 4% of the CPU"


@pytest.mark.parametrize("wait_s", [0.0, 5.0, 30.0, 61.0])
def test_a_host_that_stays_loud_is_waited_for_at_most_the_limit(wait_s: float) -> None:
    host = FakeHost([80.0, 75.0, 66.0])
    g = host.gate(wait_s, sample_s=2, poll_s=10)
    assert g.verdict == "loud" and g.others_pct == host.last
    assert g.waited_s <= max(wait_s, 2)  # never past the limit (one sample at least)
    # it gave up only when one more poll and sample would have passed the limit
    assert g.waited_s + 10 + 2 > wait_s
    assert g.samples == len(host.slept) + 1
    assert host.notes[-1].startswith("warning: host still busy")
    assert f"{g.others_pct:.0f}% of the CPU" in host.notes[-1]


def test_at_the_threshold_a_host_is_quiet() -> None:
    assert FakeHost([THRESHOLD_PCT]).gate(60).verdict == "quiet"
    assert FakeHost([THRESHOLD_PCT + 0.5]).gate(0).verdict == "loud"


def test_an_unreadable_load_is_unknown_and_says_nothing_of_disturbance() -> None:
    host = FakeHost([None])
    g = host.gate(60)
    assert g.verdict == "unknown" and g.others_pct is None and host.slept == []
    assert disturbed_banner([g], _runs()) is None


def test_the_live_reader_gives_a_share() -> None:
    pct = others_load(None)(0.2)
    assert pct is not None and 0.0 <= pct <= 100.0


def _runs(flagged: int = 0) -> list[RunRecord]:
    """The demo campaign's runs, the first ``flagged`` of them disturbed during the run."""
    runs = [
        RunRecord.model_validate(json.loads(p.read_text())) for p in sorted(DEMO.glob("run-*.json"))
    ]
    return [
        r.model_copy(update={"validity": r.validity.model_copy(update={"warnings": [FLAG]})})
        if i < flagged
        else r
        for i, r in enumerate(runs)
    ]


def _loud(pct: float = 57.0) -> QuietGate:
    host = FakeHost([pct])
    return host.gate(0)


def test_a_loud_gate_leads_with_its_measured_figure() -> None:
    g = _loud(57.0)
    b = disturbed_banner([g], _runs())
    assert b is not None and b.startswith(
        "the host was busy before the first run: other processes used 57% of its CPU"
    )
    assert b.endswith("measure on a quiet host")
    quiet = FakeHost([2.0]).gate(0)
    assert disturbed_banner([quiet], _runs()) is None


def test_most_runs_disturbed_lead_too_and_a_few_only_where_any_counts() -> None:
    n = len(_runs())
    most, few = n // 2 + 1, 1
    b = disturbed_banner([], _runs(most))
    assert b is not None and b.startswith(f"{most} of {n} valid runs were disturbed")
    assert disturbed_banner([], _runs(few)) is None  # the comparison lists it per arm
    assert disturbed_banner([], _runs(few), lead_share=0.0) is not None  # the report
    both = disturbed_banner([_loud()], _runs(most))
    assert both is not None and "before the first run" in both and f"{most} of {n}" in both


def _compare(runs: list[RunRecord], gates: list[QuietGate]) -> str:
    base = [r for r in runs if r.arm == "baseline"]
    cand = [r for r in runs if r.arm == "candidate"]
    return format_markdown(compare_runs(base, cand, gates=gates))


def test_the_comparison_text_starts_with_the_banner() -> None:
    text = _compare(_runs(), [_loud(48.0)])
    first = text.splitlines()[0]
    assert first.startswith("**Disturbed**: the host was busy before the first run")
    assert "48%" in first
    assert _compare(_runs(), []).startswith("| workload |")  # a quiet campaign: the table


def test_the_report_leads_with_the_gate_of_its_campaign(tmp_path: Path) -> None:
    from myaccel.report import write_report

    d = tmp_path / "ab"
    shutil.copytree(DEMO, d)
    camp = json.loads((d / "campaign.json").read_text())
    camp["quiet_gate"] = _loud(61.0).model_dump()
    (d / "campaign.json").write_text(json.dumps(camp))
    runs = _runs()
    base = [r for r in runs if r.arm == "baseline"]
    cand = [r for r in runs if r.arm == "candidate"]
    (d / "comparison.json").write_text(compare_runs(base, cand).model_dump_json())
    html, md = write_report([d], d, html=True, md=True)
    summary = md.read_text().split("## Summary", 1)[1].strip().splitlines()
    assert summary[0].startswith("**Disturbed**: the host was busy before the first run"), summary
    assert "61%" in summary[0]
    assert "<strong>Disturbed:</strong> the host was busy" in html.read_text()


def test_the_bench_summary_starts_with_the_banner(capsys: pytest.CaptureFixture[str]) -> None:
    from myaccel.bench.session import BenchResult
    from myaccel.cli.bench import render_bench

    runs = _runs()
    banner = disturbed_banner([_loud(52.0)], runs)
    render_bench(BenchResult(out_dir=DEMO, records=runs, duration_s=1.0, disturbed=banner))
    first = capsys.readouterr().out.splitlines()[0]
    assert first == f"Disturbed: {banner}."
