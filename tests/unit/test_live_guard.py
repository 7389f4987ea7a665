"""The live server's guard (``accelerate.live``): windows from counter samples and the
verdict against the before window's noise; the restart command of ``ServerHandle``."""

from __future__ import annotations

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
