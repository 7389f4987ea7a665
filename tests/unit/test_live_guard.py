"""The live server's guard (``accelerate.live``): windows from counter samples and the
verdict against the before window's noise; the restart command of ``ServerHandle``."""

from __future__ import annotations

import random
from typing import Any

import pytest

from myaccel.accelerate.live import Sample, Window, judge, window_from
from myaccel.actions.target import CommandServer, UnmanagedServer, target_from_record
from myaccel.clone.preflight import RestartMethod


def _samples(
    qps: list[float], *, latency_ms: float | None = None, errors: float = 0.0
) -> list[Sample]:
    out, q, n, wait, err = [], 1000, 0, 0, 0.0
    for i, rate in enumerate([0.0, *qps]):
        q += int(rate) + (0 if not i else 1 if latency_ms is None else 2)  # the sampler's own
        n += int(rate)
        wait += int(rate * (latency_ms or 0) * 1e9)
        err += rate * errors
        digests = None if latency_ms is None else (n, wait, int(err))
        out.append(Sample(float(i), {"Questions": q, "Uptime": 100 + i, "Com_insert": n}, digests))
    return out


def test_window_rates_leave_the_samplers_own_statements_out() -> None:
    w = window_from("before", _samples([100, 110, 90], latency_ms=2.0))
    assert w.qps == [100, 110, 90]
    assert [round(x, 3) for x in w.latency_ms] == [2.0, 2.0, 2.0]
    assert w.com == {"Com_insert": 300} and not w.restarted


def test_a_restart_in_the_window_is_seen() -> None:
    s = _samples([100, 100])
    s[-1] = Sample(s[-1].t, {**s[-1].status, "Uptime": 1}, None)
    w = window_from("after", s)
    assert w.restarted and w.qps == [100]


def test_within_noise_is_no_breach() -> None:
    before = window_from("before", _samples([100, 130, 70, 100]))
    after = window_from("after", _samples([80, 85, 90]))
    assert judge(before, after).ok


def test_throughput_latency_errors_and_health_breach() -> None:
    before = window_from("before", _samples([100, 102, 98], latency_ms=1.0))
    assert "throughput fell" in judge(before, window_from("a", _samples([20, 21, 19]))).breaches[0]
    slow = judge(before, window_from("a", _samples([100, 100, 100], latency_ms=3.0)))
    assert any("latency rose" in b for b in slow.breaches)
    failing = judge(before, window_from("a", _samples([100, 100], latency_ms=1.0, errors=0.5)))
    assert any("error rate rose" in b for b in failing.breaches)
    down = judge(before, Window("after", 0.0), ["cannot connect: refused"])
    assert down.breaches == ["server not healthy: cannot connect: refused"]


def test_a_noisy_before_window_still_catches_a_collapse() -> None:
    """A stall in a short window makes its spread huge: halving is a breach anyway."""
    before = window_from("before", _samples([1000, 150, 780]))  # 643 +/- 434
    assert not judge(before, window_from("after", _samples([10, 9, 10]))).ok
    assert judge(before, window_from("after", _samples([400, 420, 380]))).ok


def test_an_idle_server_is_judged_on_health_only() -> None:
    before = window_from("before", _samples([0, 0, 0]))
    verdict = judge(before, window_from("after", _samples([0, 0, 0])))
    assert verdict.ok and "idle" in verdict.notes[0]


def test_restart_command_handle_round_trips() -> None:
    h = CommandServer(None, None, "systemctl restart db")
    back = target_from_record(h.describe())
    assert isinstance(back, CommandServer) and back.restart_command == "systemctl restart db"
    assert back.startable()
    assert RestartMethod(CommandServer, "x").known


def test_a_server_myaccel_cannot_restart_gets_online_changes_only() -> None:
    from myaccel.accelerate.existing import _server_target
    from myaccel.accelerate.request import ExistingServer
    from myaccel.actions.plan_apply import build_changes
    from myaccel.rules.model import Plan, Recommendation
    from myaccel.server.connection import ConnectParams

    params = ConnectParams(host=None, port=3306, socket="/s", user="u", password=None)
    target = ExistingServer(params=params, conf_dir=None)
    handle = _server_target(
        target, RestartMethod(UnmanagedServer, "pid 7 runs outside any systemd unit")
    )
    assert isinstance(handle, UnmanagedServer) and handle.conf_dir is None

    def rec(name: str, risk: str) -> Recommendation:
        return Recommendation.model_validate(
            {
                "id": f"r-{name}",
                "layer": "server",
                "title": name,
                "target": f"mysql:{name}",
                "current": None,
                "proposed": "1",
                "rationale": "-",
                "expected_effect": "-",
                "effect_source": "-",
                "risk": risk,
                "verify": "-",
            }
        )

    plan = Plan(
        created_at="t",
        myaccel_version="t",
        facts_digest="t",
        hostname=None,
        recommendations=[
            rec("innodb_log_file_size", "restart"),
            rec("innodb_io_capacity", "online"),
        ],
    )
    pc = build_changes(plan, handle, layers=["server"])
    assert [r.id for r in pc.recs] == ["r-innodb_io_capacity"] and not pc.restart_needed
    ((skipped, why),) = pc.skipped
    assert skipped.id == "r-innodb_log_file_size" and "cannot restart this server" in why


def test_the_plan_improves_only_with_an_interval_above_zero_and_an_improved_cell() -> None:
    from types import SimpleNamespace

    from myaccel.accelerate.existing import plan_improves
    from myaccel.bench.compare import Comparison

    def cmp(low: float | None, *verdicts: str) -> Comparison:
        cells = [SimpleNamespace(verdict=v) for v in verdicts]
        return Comparison.model_construct(cells=cells, geomean_ci_low_pct=low)

    assert plan_improves(cmp(3.9, "improved", "no change")) == (True, "improved")
    assert not plan_improves(cmp(3.9, "inconclusive", "inconclusive"))[0]  # 2+2 runs
    assert plan_improves(cmp(None, "improved"))[1] == "too few runs for an interval"
    assert "starts at -1.0%" in plan_improves(cmp(-1.0, "improved"))[1]
    assert plan_improves(cmp(10.0, "improved", "regressed"))[1] == "a workload regressed"


# ------------------------------------------- issue 33 item 3: stalls, bursts, a late sampler


def _series(
    rates: list[float],
    dts: list[float] | None = None,
    *,
    connected: list[int] | None = None,
    aborted: list[int] | None = None,
) -> list[Sample]:
    """Samples whose intervals (``dts``, 1 s by default) carry ``rates`` statements/s."""
    dts = dts or [1.0] * len(rates)
    t, q, ab = 0.0, 1000, 0
    out = [Sample(t, {"Questions": q, "Uptime": 100, "Threads_connected": 5}, None)]
    for i, (rate, dt) in enumerate(zip(rates, dts, strict=True)):
        t += dt
        q += round(rate * dt) + 1  # and the sampler's own SHOW GLOBAL STATUS
        ab += aborted[i] if aborted else 0
        status = {
            "Questions": q,
            "Uptime": 100 + int(t),
            "Threads_running": 1,
            "Threads_connected": 1 + (connected[i] if connected else 4),
            "Aborted_clients": ab,
        }
        out.append(Sample(t, status, None))
    return out


def _w(label: str, rates: list[float], dts: list[float] | None = None, **kw: Any) -> Window:
    return window_from(label, _series(rates, dts, **kw))


def _poisson(rng: random.Random, rate: float, seconds: int) -> list[float]:
    """Per-second counts of a Poisson process (statements arriving independently)."""
    out = []
    for _ in range(seconds):
        n, t = 0, rng.expovariate(rate)
        while t < 1.0:
            n, t = n + 1, t + rng.expovariate(rate)
        out.append(float(n))
    return out


def test_steady_traffic_is_no_breach() -> None:
    v = judge(_w("before", [600.0] * 30), _w("after", [600.0] * 30))
    assert v.ok and v.line() == "no breach"


@pytest.mark.parametrize("rate", [1.5, 3.0, 10.0, 60.0, 600.0])
def test_noisy_steady_traffic_gives_no_false_alarm(rate: float) -> None:
    """Poisson traffic, the same before and after: 300 pairs of 30 s windows per rate, not
    one breach (a quiet server's silent seconds are not a stall)."""
    rng = random.Random(int(rate * 10))
    alarms = [
        v.line()
        for _ in range(300)
        if not (
            v := judge(_w("before", _poisson(rng, rate, 30)), _w("after", _poisson(rng, rate, 30)))
        ).ok
    ]
    assert alarms == []


def test_bursty_steady_traffic_gives_no_false_alarm() -> None:
    """An application that pauses 4 s in every 12 (a batch job's rhythm) before and after:
    its own pauses set how long a stall must be."""
    rng = random.Random(7)
    for _ in range(100):
        off = rng.randrange(12)

        def rhythm(n: int, off: int) -> list[float]:
            return [0.0 if (i + off) % 12 < 4 else rng.gauss(300, 30) for i in range(n)]

        v = judge(_w("before", rhythm(60, 0)), _w("after", rhythm(60, off)))
        assert v.ok, v.line()


def test_a_stall_then_a_catch_up_burst_is_a_breach_though_the_mean_recovers() -> None:
    """The user's TPC-C run: ~600 statements/s, 41 s at almost nothing, then the clients
    catch up at 3.8x; the window's mean is back near the before rate."""
    before = _w("before", [578.0, 618.0] * 30)
    rates = [598.0] * 5 + [5.0] * 41 + [2252.0] * 14
    after = _w("after", rates)
    assert after.rate > 0.8 * before.rate  # the mean alone says nothing went wrong
    v = judge(before, after)
    assert not v.ok
    (line,) = v.breaches
    assert line.startswith("stall: 41 s of 60 below 10% of the before window's rate (")
    assert line.endswith(", then a burst at 3.8x")


def test_a_stall_without_a_burst_is_a_breach_and_a_short_dip_is_not() -> None:
    before = _w("before", [100.0] * 30)
    line = judge(before, _w("after", [100.0] * 10 + [0.0] * 10 + [100.0] * 10)).breaches[0]
    assert line == "stall: 10 s of 30 below 10% of the before window's rate (100.0 statements/s)"
    assert judge(before, _w("after", [100.0] * 14 + [0.0] * 2 + [100.0] * 14)).ok


def test_a_starved_sampler_rates_over_real_time_and_still_sees_the_stall() -> None:
    """Intervals of up to 9 s (the sampler held up): each rate is over its real length, so
    steady traffic stays steady (noted, no breach), and a stall of three long intervals is
    24 s of stall, not 3 intervals."""
    dts = [1.0, 1.0, 9.0, 1.0, 6.5, 1.0, 1.0, 8.0, 1.0, 1.0]
    before = _w("before", [200.0] * 30)
    steady = _w("after", [200.0] * len(dts), dts)
    assert steady.qps == pytest.approx([200.0] * len(dts), rel=0.01)
    v = judge(before, steady)
    assert v.ok and "held up: 3 of 10 intervals longer than 2x 1 s, the longest 9.0 s" in v.notes[0]
    stalled = _w("after", [200.0, 0.0, 0.0, 0.0, 900.0, 200.0], [1.0, 8.0, 8.0, 8.0, 1.0, 1.0])
    line = judge(before, stalled).breaches[0]
    assert line.startswith("stall: 24 s of 27 below 10%") and line.endswith("a burst at 4.5x")


def test_a_late_after_window_that_opens_on_a_burst_is_a_breach() -> None:
    """The old sampler's after window began 29 s late and saw only the catch-up."""
    before = _w("before", [598.0] * 30)
    after = _w("after", [2252.0] * 5 + [598.0] * 25)
    after.late_start_s = 29.0
    v = judge(before, after)
    assert v.breaches == [
        "the after window began 29 s late and opened on a burst at 3.8x the before window's "
        "rate: a catch-up after a stall it did not see"
    ]
    assert "the after window began 29.0 s late" in v.notes
    on_time = _w("after", [2252.0] * 5 + [598.0] * 25)
    assert judge(before, on_time).ok  # a busy application is no breach


def test_clients_disconnecting_are_breaches() -> None:
    before = _w("before", [100.0] * 30, aborted=[0] * 29 + [1])
    v = judge(before, _w("after", [100.0] * 30, aborted=[1] * 30))
    assert v.breaches == [
        "aborted connections: 30 in the after window against 1 in the before one (2.0 expected)"
    ]
    v = judge(before, _w("after", [100.0] * 30, connected=[1] * 30))
    assert v.breaches == ["clients left: Threads_connected fell from 4.0 to 1.0"]


def test_the_sampler_says_what_priority_it_got(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not root: no SCHED_RR, no negative nice; it runs at normal priority and says so."""
    from myaccel.accelerate import live

    def refuse(*a: Any) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(live.os, "sched_setscheduler", refuse)
    monkeypatch.setattr(live.os, "setpriority", refuse)
    assert live.raise_priority() == "normal (not permitted to raise it)"
    w = _w("after", [100.0] * 10)
    w.priority = live.raise_priority()
    notes = judge(_w("before", [100.0] * 10), w).notes
    assert notes[0] == (
        "the sampler ran at normal (not permitted to raise it): a busy host can hold it up"
    )


@pytest.mark.parametrize("rate", [0.05, 0.2, 1.0, 5.0])
def test_steadily_aborted_connections_give_no_false_alarm(rate: float) -> None:
    """Clients that never close their connections (scripts that exit): a steady Poisson
    rate of aborted connections before and after, 300 pairs of 30 s windows, no breach."""
    rng = random.Random(int(rate * 100))
    for _ in range(300):
        b = [int(x) for x in _poisson(rng, rate, 30)]
        a = [int(x) for x in _poisson(rng, rate, 30)]
        v = judge(_w("before", [100.0] * 30, aborted=b), _w("after", [100.0] * 30, aborted=a))
        assert v.ok, v.line()


def test_the_sampler_keeps_its_schedule_and_records_a_late_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fake server whose third answer takes 2.5 intervals: the samples after it are back
    on the schedule (``t0 + k * interval``), the long interval's rate is over its real
    length, and a window due 0.3 s before it was asked for began 0.3 s late."""
    import time

    from myaccel.accelerate import live

    interval = 0.05
    calls = {"status": 0}

    class Conn:
        def close(self) -> None:
            pass

    def rows(conn: Any, sql: str) -> list[tuple[Any, ...]]:
        if "performance_schema" in sql:
            return [("0",)]
        calls["status"] += 1
        if calls["status"] == 3:
            time.sleep(2.5 * interval)
        q = 1000 + 11 * calls["status"]  # 10 statements and the sampler's own per sample
        return [("Questions", q), ("Uptime", 100), ("Threads_connected", 3)]

    monkeypatch.setattr(live, "connect", lambda params: Conn())
    monkeypatch.setattr(live, "query_rows", rows)
    w = live.measure_window(
        None,  # type: ignore[arg-type]
        "after",
        20 * interval,
        interval_s=interval,
        due=time.monotonic() - 0.3,
    )
    assert w.priority  # whatever it got, it says
    assert 0.3 <= w.late_start_s < 0.3 + 10 * interval
    assert len(w.late_intervals()) == 1 and w.late_intervals()[0] >= 2.5 * interval
    # the sample after the late one comes at the next free slot, not an interval later
    assert sum(w.dt) == pytest.approx(w.seconds) and w.seconds <= 21 * interval
    long = w.dt.index(max(w.dt))
    assert w.qps[long] == pytest.approx(10 / w.dt[long])
