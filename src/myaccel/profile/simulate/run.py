"""``simulate()``: restart a sandbox's server under valgrind for a bounded workload and
put the server back as it ran before."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from myaccel import proc
from myaccel.bench.profiles import normalize_workload
from myaccel.bench.runner import dataset_state, prepare_dataset, verify_dataset
from myaccel.errors import MyaccelError, SandboxError, UsageError
from myaccel.profile.simulate.models import Progress, SimulationResult, SimulationRun
from myaccel.profile.simulate.request import (
    DEFAULT_EVENTS,
    FALLBACK_EVENTS,
    SIMULATION_SETTINGS,
    Request,
    SimulationRequest,
    check_request,
    fit_buffer_pool,
    request_warnings,
)
from myaccel.profile.simulate.valgrind import valgrind_version
from myaccel.profile.simulate.window import SHUTDOWN_TIMEOUT_S, admin_target, assemble, one_run
from myaccel.server.sandbox import ActiveConfig, Sandbox, find_server
from myaccel.server.sandbox.options import check_sets


def _noop(_msg: str) -> None:
    pass


def simulate(
    sandbox: Sandbox, request: SimulationRequest, progress: Progress | None = None
) -> SimulationResult:
    """Run a bounded sysbench workload against ``sandbox``'s server under valgrind, as
    ``request`` asks (``SimulationRequest`` says what each field does).

    Afterwards the server runs again as it did before (or stays stopped if it was).
    Raises ``ToolMissing`` without valgrind or sysbench, ``UsageError`` for bad input,
    ``SandboxError``/``ProcessFailed`` when the server or a tool fails (the server is
    restarted normally in every case).
    """
    say = progress or _noop
    t_start = time.monotonic()
    wl = normalize_workload(request.workload)
    n_events = (
        request.events if request.events is not None else DEFAULT_EVENTS.get(wl, FALLBACK_EVENTS)
    )
    check_request(request.tool, n_events, request.threads, request.db, request.base_events)
    valgrind = _require_tools(request.tool)
    version = valgrind_version()
    warnings = request_warnings(wl, request.threads)

    before = sandbox.status()
    prior: ActiveConfig = before.active_config
    was_running = before.running
    if was_running and prior.wrapper:
        raise SandboxError(
            f"sandbox '{sandbox.name}' runs under {Path(prior.wrapper[0]).name} (an "
            "interrupted simulation?)",
            hint=f"stop it (`myaccel sandbox stop {sandbox.name}`) and start it again with "
            "the configuration you want; the simulation settings are still active in it",
        )
    sim_sets = dict(prior.sets if request.sets is None else request.sets)
    sim_sets.update(SIMULATION_SETTINGS if request.settings is None else request.settings)
    # Bad input fails here, before the server is touched.
    check_sets(sim_sets, sandbox.dir)
    if request.config is not None and not Path(request.config).expanduser().is_file():
        raise UsageError(
            f"config file '{request.config}' does not exist",
            hint="pass an existing option file (my.cnf) with a [mysqld] section",
        )
    if request.basedir is not None:
        find_server(Path(request.basedir))
    req = Request(
        tool=request.tool,
        workload=wl,
        events=n_events,
        threads=request.threads,
        tables=request.tables,
        table_size=request.table_size,
        seed=request.rand_seed,
        db=request.db,
        config=str(request.config) if request.config is not None else prior.config_file,
        sets=sim_sets,
        basedir=str(request.basedir) if request.basedir is not None else prior.basedir,
        cache_sim=request.cache_sim,
        branch_sim=request.branch_sim,
        valgrind_options=tuple(request.valgrind_options),
        out_dir=request.out_dir.resolve(),  # the server runs with its cwd in the sandbox
        timeout_s=request.workload_timeout_s,
    )
    req.out_dir.mkdir(parents=True, exist_ok=True)

    runs: list[SimulationRun] = []
    try:
        # The dataset is checked (and prepared) with the server running normally.
        if not was_running:
            sandbox.start(prior.options(), progress=say)
        sandbox.query(f"CREATE DATABASE IF NOT EXISTS `{request.db}`")
        target = admin_target(sandbox, request.db)
        if verify_dataset(target, request.tables, request.table_size, request.db) == "empty":
            if not request.prepare:
                raise UsageError(
                    f"sandbox '{sandbox.name}' has no sysbench dataset in schema '{request.db}'",
                    hint="let simulate() prepare it (prepare=True), or prepare "
                    f"{request.tables} x {request.table_size:,} rows there with sysbench",
                )
            prepare_dataset(target, request.tables, request.table_size, db=request.db, log=say)
        if request.settings is None:
            req = fit_buffer_pool(req, dataset_state(target, request.db).size_bytes, warnings)
        say(sandbox.stop())
        if request.tool == "callgrind":
            runs.append(one_run(sandbox, req, valgrind, "run", n_events, say))
        else:
            runs.append(one_run(sandbox, req, valgrind, "base", request.base_events, say))
            runs.append(one_run(sandbox, req, valgrind, "run", request.base_events + n_events, say))
    finally:
        _restore(sandbox, prior, was_running, say)

    result = assemble(req, runs, version, warnings, request.top_n)
    return result.model_copy(update={"duration_s": round(time.monotonic() - t_start, 1)})


def _require_tools(tool: str) -> str:
    """valgrind's path, after checking that sysbench and the tool's helpers are there."""
    valgrind = proc.require("valgrind")
    proc.require("sysbench")
    if tool == "callgrind":
        proc.require("callgrind_control")
        proc.require("callgrind_annotate")
    else:
        proc.require("cg_annotate")
        proc.require("cg_diff")
    return valgrind


def _restore(sandbox: Sandbox, prior: ActiveConfig, was_running: bool, say: Progress) -> None:
    """Stop a server still running under valgrind; start it as before if it ran."""
    with contextlib.suppress(MyaccelError):
        if sandbox.is_running() and sandbox.status().active_config.wrapper:
            say(sandbox.stop(timeout_s=SHUTDOWN_TIMEOUT_S))
        sandbox.forget_owner()  # put back by its owner: nothing for the next command
    if was_running and not sandbox.is_running():
        res = sandbox.start(prior.options(), progress=say)
        say(res.message)
    elif not was_running and sandbox.is_running():
        say(sandbox.stop())
