"""The valgrind simulation fallback against a real server (issue 6, acceptance 3).

A sandbox of this module's own (the session's ``pytest`` sandbox must not be stopped)
runs a small bounded workload under callgrind twice and under cachegrind twice: the
instruction counts of the two runs of each tool agree within 1%, the simulated caches
miss, and afterwards the server runs normally again with its own configuration. About
2 minutes on a 2-core VM (event counts below the documented ones).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from myaccel import proc
from myaccel.errors import SandboxError, UsageError
from myaccel.profile.simulate import (
    SIMULATION_LABEL,
    SimulationRequest,
    SimulationResult,
    Tool,
    compare_simulations,
    simulate,
)
from myaccel.server.sandbox import Sandbox, ServerOptions

# callgrind and cachegrind runs of a real server, ~110 s: `make system-test`
pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.system,
    pytest.mark.skipif(
        proc.which("mariadbd") is None and proc.which("mysqld") is None,
        reason="no mariadbd/mysqld installed",
    ),
    pytest.mark.skipif(proc.which("valgrind") is None, reason="valgrind not installed"),
    pytest.mark.skipif(proc.which("sysbench") is None, reason="sysbench not installed"),
]

TABLES = 2
TABLE_SIZE = 2_000


@pytest.fixture(scope="module")
def sim_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    home = tmp_path_factory.mktemp("simhome")
    sb = Sandbox.init("sim", home=home, timeout_s=120)
    # a configuration of its own, to check that it comes back after the simulation
    sb.restart(ServerOptions(sets={"max_connections": "77"}))
    try:
        yield sb
    finally:
        sb.destroy()


def _run(
    sb: Sandbox,
    tmp: Path,
    tool: Tool,
    workload: str,
    events: int,
    progress: Callable[[str], None] | None = None,
) -> SimulationResult:
    return simulate(
        sb,
        SimulationRequest(
            out_dir=tmp,
            tool=tool,
            workload=workload,
            events=events,
            tables=TABLES,
            table_size=TABLE_SIZE,
            base_events=5,
        ),
        progress,
    )


def _check_restored(sb: Sandbox) -> None:
    st = sb.status()
    assert st.running
    assert st.active_config.wrapper == []
    assert st.active_config.sets == {"max_connections": "77"}
    # the simulation-only settings are gone
    assert sb.query("SELECT @@max_connections, @@innodb_buffer_pool_dump_at_shutdown") == [(77, 1)]


def _check_result(r: SimulationResult, events: int) -> None:
    assert r.label == SIMULATION_LABEL
    assert r.valgrind_version.startswith("3.")
    assert len(r.server_binary_sha256) == 64
    assert r.events == events and r.transactions == events
    assert r.instructions > 0
    for miss in ("I1mr", "D1mr", "Bcm"):
        assert r.totals[miss] > 0, miss
    assert r.metrics["l1i_mpki"] > 0 and r.metrics["l1d_mpki"] > 0
    assert r.metrics["ir_per_transaction"] == pytest.approx(r.instructions / events, rel=1e-3)
    assert r.server_settings["innodb_use_native_aio"] == "0"
    assert r.top_self and r.top_self[0].ir_self > 0
    for run in r.runs:
        assert Path(run.out_file).is_file()


def test_callgrind_is_reproducible_within_one_percent(sim_sandbox: Sandbox, tmp_path: Path) -> None:
    seen: list[list[str]] = []

    def during(msg: str) -> None:
        if msg.startswith("prewarming"):  # the server runs under valgrind now
            seen.append(sim_sandbox.status().active_config.wrapper)
            with pytest.raises(SandboxError, match="already running"):
                sim_sandbox.start(wrapper=["valgrind", "--tool=none"])

    a = _run(sim_sandbox, tmp_path / "a", "callgrind", "oltp_point_select", 1000, during)
    assert len(seen) == 1 and Path(seen[0][0]).name == "valgrind"
    assert "--tool=callgrind" in seen[0]
    _check_restored(sim_sandbox)
    b = _run(sim_sandbox, tmp_path / "b", "callgrind", "oltp_point_select", 1000)
    _check_restored(sim_sandbox)
    for r in (a, b):
        _check_result(r, 1000)
        assert r.queries == 1000
        assert r.top_inclusive[0].function.startswith("do_command(")
    assert abs(a.instructions - b.instructions) / a.instructions < 0.01
    rows = {row.name: row for row in compare_simulations(a, b)}
    assert rows["ir_per_query"].after_pct_of_before == pytest.approx(100.0, abs=1.0)


def test_cachegrind_difference_is_reproducible_within_one_percent(
    sim_sandbox: Sandbox, tmp_path: Path
) -> None:
    # Startup work that depends on the clock (timer calibration, ...) does not cancel
    # out: 0.5-3 M instructions per run here, so the window must be a few 100 M.
    a = _run(sim_sandbox, tmp_path / "a", "cachegrind", "oltp_read_only", 200)
    b = _run(sim_sandbox, tmp_path / "b", "cachegrind", "oltp_read_only", 200)
    _check_restored(sim_sandbox)
    for r in (a, b):
        _check_result(r, 200)
        assert len(r.runs) == 2 and r.runs[1].transactions - r.runs[0].transactions == 200
        assert r.queries == 200 * 16  # 14 statements + BEGIN/COMMIT per transaction
    assert abs(a.instructions - b.instructions) / a.instructions < 0.01


def test_bad_input_changes_nothing(sim_sandbox: Sandbox, tmp_path: Path) -> None:
    pid = sim_sandbox.pid
    with pytest.raises(UsageError, match="events must be at least 1"):
        _run(sim_sandbox, tmp_path, "callgrind", "oltp_read_only", 0)
    with pytest.raises(UsageError, match="unknown workload"):
        _run(sim_sandbox, tmp_path, "callgrind", "no_such_workload", 10)
    with pytest.raises(UsageError, match="dataset"):
        # another dataset than the one there (or none): refused, nothing prepared
        simulate(
            sim_sandbox,
            SimulationRequest(out_dir=tmp_path, events=10, tables=3, table_size=7, prepare=False),
        )
    assert sim_sandbox.pid == pid  # never restarted
