"""``simulate()``: restart a sandbox's server under valgrind for a bounded workload and
put the server back as it ran before."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from myaccel import proc
from myaccel.bench.profiles import normalize_workload
from myaccel.bench.runner import dataset_state, prepare_dataset, verify_dataset
from myaccel.errors import MyaccelError, SandboxError, UsageError
from myaccel.profile.simulate.models import Progress, SimulationResult, SimulationRun, Tool
from myaccel.profile.simulate.request import (
    DEFAULT_BASE_EVENTS,
    DEFAULT_EVENTS,
    DEFAULT_SEED,
    DEFAULT_TABLE_SIZE,
    DEFAULT_TABLES,
    DEFAULT_TOOL,
    FALLBACK_EVENTS,
    SIM_DATABASE,
    SIMULATION_SETTINGS,
    Request,
    check_request,
    fit_buffer_pool,
    request_warnings,
)
from myaccel.profile.simulate.valgrind import TOP_N, valgrind_version
from myaccel.profile.simulate.window import SHUTDOWN_TIMEOUT_S, admin_target, assemble, one_run
from myaccel.server.sandbox import ActiveConfig, Sandbox, find_server
from myaccel.server.sandbox.options import check_sets


def _noop(_msg: str) -> None:
    pass


def simulate(
    sandbox: Sandbox,
    *,
    out_dir: Path,
    tool: Tool = DEFAULT_TOOL,
    workload: str = "oltp_read_only",
    events: int | None = None,
    threads: int = 1,
    tables: int = DEFAULT_TABLES,
    table_size: int = DEFAULT_TABLE_SIZE,
    rand_seed: int = DEFAULT_SEED,
    db: str = SIM_DATABASE,
    config: Path | str | None = None,
    sets: Mapping[str, str] | None = None,
    basedir: Path | str | None = None,
    settings: Mapping[str, str] | None = None,
    cache_sim: bool = True,
    branch_sim: bool = True,
    valgrind_options: Sequence[str] = (),
    base_events: int = DEFAULT_BASE_EVENTS,
    prepare: bool = True,
    top_n: int = TOP_N,
    workload_timeout_s: float = 1800.0,
    progress: Progress | None = None,
) -> SimulationResult:
    """Run a bounded sysbench workload against ``sandbox``'s server under valgrind.

    ``config``/``sets``/``basedir`` choose what runs, as in ``Sandbox.restart``: each one
    given replaces that part of the sandbox's active configuration, each one left None
    keeps it. ``settings`` (default ``SIMULATION_SETTINGS``) are added on top for the
    simulated run only; ``valgrind_options`` are passed to valgrind (e.g. ``--LL=...``).
    ``events`` defaults to ``DEFAULT_EVENTS`` for the workload (sized so that the whole
    call takes 1-2 minutes on a 2-core VM, docs/simulation.md). The dataset (``tables`` x
    ``table_size`` rows in schema ``db``, used by the sandbox's admin user so that it
    never meets a benchmark's ``sbtest``) is prepared with the normal server when the
    schema is empty and ``prepare`` is set; another dataset there is an error. With the
    default ``settings``, the buffer pool grows to hold a dataset bigger than 128 MiB.

    Afterwards the server runs again as it did before (or stays stopped if it was).
    Valgrind's files and logs stay in ``out_dir``. Raises ``ToolMissing`` without
    valgrind or sysbench, ``UsageError`` for bad input, ``SandboxError``/``ProcessFailed``
    when the server or a tool fails (the server is restarted normally in every case).
    """
    say = progress or _noop
    t_start = time.monotonic()
    wl = normalize_workload(workload)
    n_events = events if events is not None else DEFAULT_EVENTS.get(wl, FALLBACK_EVENTS)
    check_request(tool, n_events, threads, db, base_events)
    valgrind = _require_tools(tool)
    version = valgrind_version()
    warnings = request_warnings(wl, threads)

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
    sim_sets = dict(prior.sets if sets is None else sets)
    sim_sets.update(SIMULATION_SETTINGS if settings is None else settings)
    # Bad input fails here, before the server is touched.
    check_sets(sim_sets, sandbox.dir)
    if config is not None and not Path(config).expanduser().is_file():
        raise UsageError(
            f"config file '{config}' does not exist",
            hint="pass an existing option file (my.cnf) with a [mysqld] section",
        )
    if basedir is not None:
        find_server(Path(basedir))
    req = Request(
        tool=tool,
        workload=wl,
        events=n_events,
        threads=threads,
        tables=tables,
        table_size=table_size,
        seed=rand_seed,
        db=db,
        config=str(config) if config is not None else prior.config_file,
        sets=sim_sets,
        basedir=str(basedir) if basedir is not None else prior.basedir,
        cache_sim=cache_sim,
        branch_sim=branch_sim,
        valgrind_options=tuple(valgrind_options),
        out_dir=out_dir.resolve(),  # the server runs with its cwd in the sandbox
        timeout_s=workload_timeout_s,
    )
    req.out_dir.mkdir(parents=True, exist_ok=True)

    runs: list[SimulationRun] = []
    try:
        # The dataset is checked (and prepared) with the server running normally.
        if not was_running:
            sandbox.start(prior.options(), progress=say)
        sandbox.query(f"CREATE DATABASE IF NOT EXISTS `{db}`")
        target = admin_target(sandbox, db)
        if verify_dataset(target, tables, table_size, db) == "empty":
            if not prepare:
                raise UsageError(
                    f"sandbox '{sandbox.name}' has no sysbench dataset in schema '{db}'",
                    hint="let simulate() prepare it (prepare=True), or prepare "
                    f"{tables} x {table_size:,} rows there with sysbench",
                )
            prepare_dataset(target, tables, table_size, db=db, log=say)
        if settings is None:
            req = fit_buffer_pool(req, dataset_state(target, db).size_bytes, warnings)
        say(sandbox.stop())
        if tool == "callgrind":
            runs.append(one_run(sandbox, req, valgrind, "run", n_events, say))
        else:
            runs.append(one_run(sandbox, req, valgrind, "base", base_events, say))
            runs.append(one_run(sandbox, req, valgrind, "run", base_events + n_events, say))
    finally:
        _restore(sandbox, prior, was_running, say)

    result = assemble(req, runs, version, warnings, top_n)
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
    if was_running and not sandbox.is_running():
        res = sandbox.start(prior.options(), progress=say)
        say(res.message)
    elif not was_running and sandbox.is_running():
        say(sandbox.stop())
