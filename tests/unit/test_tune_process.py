"""The process layer of `tune` (``--layers server,process``) on the deterministic objective:
the space holds the server's CPU affinity and its thread pool (NUMA policy only with more
than one node), the limits hold on every measured configuration, a trial's affinity is the
candidate arm's start prefix only, and a winner becomes systemd settings of the plan."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
import tune_fixtures as fx

from myaccel import proc
from myaccel.actions.guard import ServerId, check_plan
from myaccel.bench import ab
from myaccel.cpulist import parse_cpu_list
from myaccel.errors import UsageError
from myaccel.model import NumaNode, known
from myaccel.tune import process
from myaccel.tune.process import (
    CPU_AFFINITY,
    NUMA_POLICY,
    THREAD_HANDLING,
    THREAD_POOL_SIZE,
    cpu_sets,
    launch_prefix,
    server_changes,
    server_cpus,
)
from myaccel.tune.request import TuneRequest
from myaccel.tune.result import tuned_plan
from myaccel.tune.search import Budget
from myaccel.tune.session import check_request

PROCESS = ("server", "process")


def test_the_space_has_the_process_layer_with_reasons() -> None:
    facts = fx.fixture_facts()  # 2 online CPUs (the affinity mask says 0-127), one NUMA node
    space, _ = fx.fixture_space(facts, fx.fixture_plan(facts), layers=PROCESS)
    assert server_cpus(facts) == [0, 1]
    assert space.dim(CPU_AFFINITY).choices == ("all", "0", "1")
    assert space.base[CPU_AFFINITY] == "all"
    assert space.dim(THREAD_HANDLING).choices == ("one-thread-per-connection", "pool-of-threads")
    pool = space.dim(THREAD_POOL_SIZE)
    assert pool.low == 1 and pool.high >= 4 and pool.needs == (THREAD_HANDLING, "pool-of-threads")
    assert NUMA_POLICY not in space.names()
    assert "1 NUMA node" in space.left_out[NUMA_POLICY]
    assert space.changes(space.base_params()) == {}  # the plan is a point of the space
    server_only, _ = fx.fixture_space(facts, fx.fixture_plan(facts))
    assert not set(server_only.names()) & set(process.PROCESS_PARAMS)
    assert "--layers server,process" in server_only.left_out[CPU_AFFINITY]


def test_numa_policy_only_with_several_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    facts = fx.fixture_facts()
    nodes = [NumaNode(node=i, cpus=str(i), cpu_count=1) for i in (0, 1)]
    cpu = facts.cpu.model_copy(update={"numa_nodes": known(nodes, "test")})
    two = facts.model_copy(update={"cpu": cpu})
    monkeypatch.setattr(proc, "which", lambda name: f"/usr/bin/{name}")
    space, _ = fx.fixture_space(two, fx.fixture_plan(two), layers=PROCESS)
    assert space.dim(NUMA_POLICY).choices == ("default", "interleave")
    monkeypatch.setattr(proc, "which", lambda name: None)
    space, _ = fx.fixture_space(two, fx.fixture_plan(two), layers=PROCESS)
    assert "numactl is not installed" in space.left_out[NUMA_POLICY]


def test_contiguous_cpu_sets() -> None:
    assert cpu_sets([0, 1]) == ["0", "1"]
    assert cpu_sets([0, 1, 2]) == ["0", "1", "2", "0-1", "1-2"]
    many = cpu_sets(list(range(16)))
    assert "0-7" in many and "8-15" in many and "4-7" in many and "3-6" not in many
    assert all(len(parse_cpu_list(s)) < 16 for s in many)
    assert cpu_sets([4, 5, 6, 7])[:4] == ["4", "5", "6", "7"]


def test_the_pool_size_is_a_change_only_with_the_pool() -> None:
    facts = fx.fixture_facts()
    space, _ = fx.fixture_space(facts, fx.fixture_plan(facts), layers=PROCESS)
    params = {**space.base_params(), THREAD_POOL_SIZE: 3}
    assert space.changes(params) == {}  # one thread per connection: the size does nothing
    params[THREAD_HANDLING] = "pool-of-threads"
    assert space.changes(params) == {THREAD_HANDLING: "pool-of-threads", THREAD_POOL_SIZE: "3"}


def _process_gain(changes: Mapping[str, str]) -> float:
    """The server pinned to one CPU loses 20%; the pool with 2 groups gains 6%."""
    g = 1.0
    if changes.get(CPU_AFFINITY, "all") != "all":
        g *= 0.8
    if changes.get(THREAD_HANDLING) == "pool-of-threads" and changes.get(THREAD_POOL_SIZE) == "2":
        g *= 1.06
    return g


def test_a_search_with_the_process_layer_keeps_every_limit(tmp_path: Path) -> None:
    obj = fx.FakeObjective(effect=_process_gain)
    ran = fx.search(
        tmp_path / "s",
        obj,
        Budget(trials=12, final_runs=5, max_pairs=3),
        only=("innodb_io_capacity",),
        layers=PROCESS,
    )
    assert set(process.PROCESS_PARAMS) - {NUMA_POLICY} <= set(ran.space.names())
    seen_process = [c for c in obj.seen if set(c) & set(process.PROCESS_PARAMS)]
    assert seen_process, "TPE never proposed a process change"
    for changes in obj.seen:
        assert ran.constraint.check(changes).ok, changes
        if THREAD_POOL_SIZE in changes:
            assert changes.get(THREAD_HANDLING, "one-thread-per-connection") == "pool-of-threads"
        assert set(parse_cpu_list(changes.get(CPU_AFFINITY, "0-1").replace("all", "0-1"))) <= {0, 1}
    o = ran.outcome
    assert o.winner.get(CPU_AFFINITY, "all") == "all"  # pinning lost every time it was tried
    assert all(a.knob in o.winner for a in o.ablation)


def test_constraint_refuses_cpus_the_server_cannot_use() -> None:
    facts = fx.fixture_facts()
    _, constraint = fx.fixture_space(facts, fx.fixture_plan(facts), layers=PROCESS)
    assert constraint.check({CPU_AFFINITY: "1"}).ok
    v = constraint.check({CPU_AFFINITY: "2-3"})
    assert not v.ok and "not available to the server" in v.reason


def test_launch_prefix_is_the_candidate_arms_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(proc, "require", lambda name, *a, **k: f"/usr/bin/{name}")
    changes = {CPU_AFFINITY: "1", "innodb_io_capacity": "500", NUMA_POLICY: "interleave"}
    assert launch_prefix(changes) == (
        "/usr/bin/taskset",
        "-c",
        "1",
        "/usr/bin/numactl",
        "--interleave=all",
    )
    assert launch_prefix({CPU_AFFINITY: "all"}) == ()
    assert server_changes(changes) == {"innodb_io_capacity": "500"}
    plain = ab.Arm("baseline")
    pinned = ab.Arm("candidate", launch=launch_prefix(changes))
    assert plain.key() != pinned.key()  # switching arms restarts the server
    assert pinned.describe()["launch"][0] == "/usr/bin/taskset"
    assert "launch" not in plain.describe()


def test_option_file_leaves_the_launch_parameters_out(tmp_path: Path) -> None:
    from myaccel.tune.sandbox_objective import SandboxObjective

    facts = fx.fixture_facts()
    obj = SandboxObjective(
        sandbox=None,  # type: ignore[arg-type]  # option files only
        plan=fx.fixture_plan(facts),
        facts=facts,
        server_knobs=fx.server_knobs(),
        out=tmp_path / "trials",
        progress=None,  # type: ignore[arg-type]
        command=[],
    )
    changes = {CPU_AFFINITY: "1", THREAD_HANDLING: "pool-of-threads", THREAD_POOL_SIZE: "2"}
    text = obj.option_file(changes, tmp_path / "t.cnf").read_text()
    assert "thread-handling = pool-of-threads" in text and "thread-pool-size = 2" in text
    assert "cpu_affinity" not in text and "taskset" not in text


def test_a_process_winner_becomes_systemd_settings_of_the_plan() -> None:
    facts = fx.fixture_facts()
    tp = tuned_plan(
        fx.fixture_plan(facts),
        {CPU_AFFINITY: "1", THREAD_HANDLING: "pool-of-threads", THREAD_POOL_SIZE: "2"},
        fx.server_knobs(),
    )
    got = {r.target: (r.proposed, r.layer) for r in tp.recommendations}
    assert got["systemd:server/CPUAffinity"] == ("1", "numa")
    assert got["mysql:thread_handling"][0] == "pool-of-threads"
    assert got["mysql:thread_pool_size"][0] == "2"
    assert tp.digest_ok
    check_plan(tp, ServerId("mariadb", "10.11.19-MariaDB-0+deb12u1", "server"))  # apply takes it


def test_a_measured_interleave_names_its_nodes() -> None:
    """systemd cannot start a unit with NUMAPolicy=interleave and no NUMAMask (the lab:
    "Failed to set NUMA memory policy: Invalid argument"): the mask comes with it."""
    facts = fx.fixture_facts()
    tp = tuned_plan(
        fx.fixture_plan(facts), {NUMA_POLICY: "interleave"}, fx.server_knobs(), numa_nodes="0-1"
    )
    got = {r.target: r.proposed for r in tp.recommendations if r.target.startswith("systemd:")}
    assert got == {"systemd:server/NUMAPolicy": "interleave", "systemd:server/NUMAMask": "0-1"}
    with pytest.raises(UsageError, match="NUMA nodes"):
        tuned_plan(fx.fixture_plan(facts), {NUMA_POLICY: "interleave"}, fx.server_knobs())
    default = tuned_plan(fx.fixture_plan(facts), {NUMA_POLICY: "default"}, fx.server_knobs())
    assert not any(r.target.endswith("/NUMAMask") for r in default.recommendations)


@pytest.mark.parametrize(
    ("layers", "ok"), [(("server", "process"), True), (("process",), False), (("gpu",), False)]
)
def test_layers_are_checked(layers: tuple[str, ...], ok: bool) -> None:
    from myaccel.bench.profiles import get_profile

    req = TuneRequest(sandbox="t", profile=get_profile("quick"), command=[], layers=layers)
    if ok:
        check_request(req)
    else:
        with pytest.raises(UsageError):
            check_request(req)


def test_no_thread_pool_search_where_the_pool_is_a_plugin() -> None:
    from myaccel.knobs.catalog import Catalog

    mysql = Catalog.load().for_server("mysql", "9.7.0")
    why = process._pool_left_out(mysql)
    assert why is not None and "thread pool" in why
    assert process._pool_left_out(fx.server_knobs()) is None  # MariaDB 10.11 has one
