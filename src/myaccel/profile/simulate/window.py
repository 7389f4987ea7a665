"""One server run under valgrind around the counted window (start, prewarm, workload,
clean shutdown), and the result assembled from the runs."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import time
from collections.abc import Sequence
from pathlib import Path

from myaccel import proc
from myaccel.bench.records import USABLE_FAILURE_KINDS
from myaccel.bench.runner import (
    RunSpec,
    connection_args,
    execute,
    mask_password,
    run_argv,
    run_sysbench,
)
from myaccel.bench.sysbench_output import parse_output
from myaccel.errors import MyaccelError, ProcessFailed
from myaccel.model import same_named
from myaccel.owner import ProcessOwner
from myaccel.profile.simulate.figures import derive_metrics
from myaccel.profile.simulate.models import Progress, SimulationResult, SimulationRun
from myaccel.profile.simulate.parse import read_out_file
from myaccel.profile.simulate.request import Request
from myaccel.profile.simulate.valgrind import (
    COLLECT_FUNCTION,
    callgrind_control,
    function_table,
    valgrind_argv,
)
from myaccel.server.connection import ConnectParams
from myaccel.server.sandbox import Sandbox, ServerOptions
from myaccel.server.sandbox.install import parse_version_output

SHUTDOWN_TIMEOUT_S = 300.0
# Pause after a client exits so that the server has handled its COM_QUIT.
SETTLE_S = 1.0

# The SimulationResult fields that are the request's, under the same name.
_FROM_REQUEST = (
    "tool",
    "cache_sim",
    "branch_sim",
    "workload",
    "events",
    "threads",
    "tables",
    "table_size",
)


def one_run(
    sandbox: Sandbox,
    req: Request,
    valgrind: str,
    label: str,
    n_events: int,
    say: Progress,
) -> SimulationRun:
    out_file = req.out_dir / f"{req.tool}.{label}.out"
    log_file = req.out_dir / f"valgrind.{label}.log"
    for stale in (out_file, log_file):
        stale.unlink(missing_ok=True)
    wrapper = valgrind_argv(
        req.tool,
        out_file,
        log_file,
        cache_sim=req.cache_sim,
        branch_sim=req.branch_sim,
        valgrind=valgrind,
        extra=req.valgrind_options,
    )
    say(f"starting the server under {req.tool} ({label} run, {n_events} events)")
    t0 = time.monotonic()
    # owned by this process: if it is killed, the next myaccel command takes the sandbox
    # out from under valgrind (myaccel.cli.repair)
    started = sandbox.start(
        ServerOptions(req.config, req.sets, req.basedir),
        wrapper=wrapper,
        progress=say,
        owner=ProcessOwner.this_process("profile --simulate"),
    )
    start_s = time.monotonic() - t0
    pid = started.pid
    ran = sandbox.state.active_config
    binary = ran.binary or sandbox.state.binary
    server_version = _version_label(ran.version or sandbox.state.version_string)
    target = admin_target(sandbox, req.db)
    if req.tool == "callgrind":
        # Instrumented prewarm: the simulated caches start the window warm, as in the
        # cachegrind runs; its counts are then zeroed.
        callgrind_control(pid, "-i", "on")
    _prewarm(target, req, say)
    time.sleep(SETTLE_S)  # the prewarm connection's COM_QUIT is processed before zeroing
    if req.tool == "callgrind":
        callgrind_control(pid, "--zero")
    spec = RunSpec(
        workload=req.workload,
        threads=req.threads,
        duration_s=0,
        warmup_s=0,
        tables=req.tables,
        table_size=req.table_size,
        report_interval_s=0,
        seed=req.seed,
        db=req.db,
        extra=(f"--events={n_events}",),
    )
    argv, env = run_argv(spec, target)
    say(f"running {req.workload}: {n_events} events, {req.threads} thread(s), seed {req.seed}")
    t1 = time.monotonic()
    raw = execute(argv, env, timeout_s=req.timeout_s, password=target.password)
    workload_s = time.monotonic() - t1
    time.sleep(SETTLE_S)  # sysbench's COM_QUIT is processed inside the window
    if req.tool == "callgrind":
        callgrind_control(pid, "-i", "off")
    parsed = parse_output(raw.output, exit_code=raw.exit_code)
    if raw.timed_out or parsed.summary is None or parsed.failure not in USABLE_FAILURE_KINDS:
        why = "timed out" if raw.timed_out else "; ".join(parsed.failure_reasons) or "failed"
        raise ProcessFailed(
            f"sysbench under {req.tool} {why} (exit code {raw.exit_code})",
            hint=f"see {log_file} and the sandbox error log ({sandbox.error_log}); fewer "
            "events finish sooner",
        )
    t2 = time.monotonic()
    stopped = sandbox.stop_result(timeout_s=SHUTDOWN_TIMEOUT_S)
    stop_s = time.monotonic() - t2
    say(stopped.message)
    if stopped.killed:
        raise ProcessFailed(
            f"the server under {req.tool} did not shut down within {SHUTDOWN_TIMEOUT_S:.0f} s "
            "and was killed: valgrind wrote no complete output",
            hint=f"see {log_file}; a smaller dataset or fewer events shut down sooner",
        )
    summary = read_out_file(out_file)
    return SimulationRun(
        events_requested=n_events,
        transactions=parsed.summary.transactions,
        queries=parsed.summary.queries_total,
        totals=summary.totals,
        out_file=str(out_file),
        server_start_s=round(start_s, 1),
        workload_s=round(workload_s, 1),
        server_stop_s=round(stop_s, 1),
        server_binary=binary,
        server_version=server_version,
        valgrind_argv=wrapper,
        sysbench_argv=mask_password(argv),
    )


def admin_target(sandbox: Sandbox, db: str) -> ConnectParams:
    """The sandbox's admin user (root over the socket) in schema ``db``."""
    return dataclasses.replace(sandbox.connect_params(), database=db)


def _version_label(raw: str) -> str:
    """``/usr/sbin/mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 ...`` -> ``MariaDB 10.11.19``."""
    try:
        return parse_version_output(raw).label
    except MyaccelError:
        return raw.strip()


def _prewarm(target: ConnectParams, req: Request, say: Progress) -> None:
    """Load the tables into the buffer pool (sysbench's ``prewarm``) before the window."""
    argv = [
        proc.require("sysbench"),
        "oltp_read_only",
        *connection_args(target),
        f"--mysql-db={req.db}",
        f"--tables={req.tables}",
        f"--table-size={req.table_size}",
        "--threads=1",
        "prewarm",
    ]
    say("prewarming the buffer pool")
    done = run_sysbench(argv, target.password, timeout_s=req.timeout_s)
    if not done.ok:
        tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-3:])
        raise ProcessFailed(
            f"sysbench prewarm under {req.tool} failed (exit {done.returncode}): {tail}",
            hint="see the sandbox error log and the valgrind log in the output directory",
        )


def assemble(
    req: Request,
    runs: Sequence[SimulationRun],
    version: str,
    warnings: list[str],
    top_n: int,
) -> SimulationResult:
    measured = runs[-1]
    out_path = Path(measured.out_file)
    caches = read_out_file(out_path).caches
    if req.tool == "callgrind":
        totals = dict(measured.totals)
        transactions, queries = measured.transactions, measured.queries
        window = (
            "callgrind: instrumented from the prewarm on (warm caches), counts zeroed after "
            f"it and switched off after the workload; collected inside {COLLECT_FUNCTION} on "
            "the client's connection thread only"
        )
        annotate_file = out_path
    else:
        base = runs[0]
        totals = {k: v - base.totals.get(k, 0) for k, v in measured.totals.items()}
        transactions = measured.transactions - base.transactions
        queries = measured.queries - base.queries
        window = (
            f"difference of two complete cachegrind runs ({measured.events_requested} minus "
            f"{base.events_requested} events); the whole server process is counted"
        )
        annotate_file = req.out_dir / "cachegrind.diff.out"
        diffed = proc.run(
            [proc.require("cg_diff"), base.out_file, measured.out_file], timeout_s=300.0
        )
        if not diffed.ok:
            raise ProcessFailed(
                f"cg_diff failed with exit code {diffed.returncode}",
                hint=f"check {base.out_file} and {measured.out_file}",
            )
        annotate_file.write_text(diffed.stdout)
        if transactions != req.events:
            warnings.append(f"the two runs differ by {transactions} transactions, not {req.events}")
        negative = {k: v for k, v in totals.items() if v < 0}
        if negative:
            # Near-zero counts (LL misses when the dataset fits the last level) differ
            # between the two runs by a few events either way: noise, shown as zero.
            shown = ", ".join(f"{k} {v:+,}" for k, v in negative.items())
            warnings.append(
                f"counts smaller in the longer cachegrind run ({shown}): run-to-run noise of "
                "background work exceeds what the workload adds to them; taken as 0"
            )
            totals = {k: max(0, v) for k, v in totals.items()}
    ir = totals.get("Ir", 0)
    top_self, top_incl = function_table(req.tool, annotate_file, ir, top_n=top_n)
    binary = Path(measured.server_binary)
    return SimulationResult(
        **same_named(req, _FROM_REQUEST),
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        valgrind_version=version,
        valgrind_argv=list(measured.valgrind_argv),
        window=window,
        caches=list(caches),
        server_binary=str(binary),
        server_binary_sha256=file_sha256(binary),
        server_version=measured.server_version,
        rand_seed=req.seed,
        server_settings=dict(req.sets),
        config_file=req.config,
        transactions=transactions,
        queries=queries,
        totals=totals,
        metrics=derive_metrics(totals, transactions, queries),
        top_self=top_self,
        top_inclusive=top_incl,
        runs=list(runs),
        duration_s=0.0,
        warnings=warnings,
    )


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
