"""The instruction count of an A/B's arms where the machine has a PMU
(``bench/instructions.py``): each arm's server started normally with the arm's option
file, settings and build, and counted by ``perf stat -p PID -- sysbench ... --events N``
(perf counts the server while sysbench runs, and stops when it ends).

Where no core PMU exists (these virtual machines: ``perf stat`` says ``<not supported>``),
the commands use callgrind instead (``profile/simulate/arms.py``); ``counting_for`` picks.
This path follows perf's documentation and has not run on hardware counters here: the VMs
this project is built on have none. The window holds sysbench's connection and statement
preparation besides its N transactions (the same in every arm, so it cancels in the
comparison but not in the absolute figure), and every thread of the server process (its
background threads too: the figure is the server's cost, not one query's)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from myaccel import proc
from myaccel.bench.instructions import Counter, Counting
from myaccel.bench.records import USABLE_FAILURE_KINDS
from myaccel.bench.runner import (
    RunSpec,
    connection_args,
    execute,
    prepare_dataset,
    run_argv,
    run_sysbench,
    verify_dataset,
)
from myaccel.bench.sysbench_output import parse_output
from myaccel.errors import ProcessFailed
from myaccel.facts.sysroot import Sysroot
from myaccel.profile.perfstat.errors import perf_stat_error
from myaccel.profile.perfstat.events import collect_event_inventory
from myaccel.profile.perfstat.parse import parse_perf_stat_csv
from myaccel.server.connection import ConnectParams
from myaccel.server.sandbox.state import ServerOptions

if TYPE_CHECKING:
    from myaccel.bench.instructions import Arm
    from myaccel.server.sandbox import Sandbox

TOOL = "perf stat (hardware counters), one client thread"
DB = "myaccel_sim"  # the simulation's schema: the same small dataset as callgrind counts
TABLES, TABLE_SIZE, SEED = 2, 10_000, 1
# transactions per counted run: at native speed, enough for the setup to be a small part
EVENTS = {"oltp_read_only": 5_000, "oltp_point_select": 100_000}
TIMEOUT_S = 900.0
# perf's generic name; on arm64 it maps to INST_RETIRED
EVENT = "instructions"


def has_pmu(sysroot: Sysroot | None = None) -> bool:
    """Whether this machine has a core PMU that counts instructions."""
    inv = collect_event_inventory(sysroot or Sysroot("/"))
    return inv.has_core_pmu and (inv.has("instructions") or inv.has("inst_retired"))


def _target(sb: Sandbox) -> ConnectParams:
    return dataclasses.replace(sb.connect_params(), database=DB)


def _ready(sb: Sandbox) -> ConnectParams:
    """The small dataset in its own schema (prepared once), loaded into the buffer pool."""
    sb.query(f"CREATE DATABASE IF NOT EXISTS `{DB}`")
    target = _target(sb)
    if verify_dataset(target, TABLES, TABLE_SIZE, DB) == "empty":
        prepare_dataset(target, TABLES, TABLE_SIZE, db=DB, log=lambda _m: None)
    argv = [
        proc.require("sysbench"),
        "oltp_read_only",
        *connection_args(target),
        f"--mysql-db={DB}",
        f"--tables={TABLES}",
        f"--table-size={TABLE_SIZE}",
        "--threads=1",
        "prewarm",
    ]
    done = run_sysbench(argv, target.password, timeout_s=TIMEOUT_S)
    if not done.ok:
        raise ProcessFailed(
            f"sysbench prewarm failed (exit {done.returncode})",
            hint="see the sandbox's error log",
        )
    return target


def instructions_per_transaction(perf_csv: str, transactions: int) -> float:
    """perf stat's CSV (``-x,``) and sysbench's transactions -> instructions per
    transaction; raises when the counter was not counted."""
    counts = parse_perf_stat_csv(perf_csv).totals()
    value = counts.get(EVENT)
    if value is None or transactions <= 0:
        raise ProcessFailed(
            f"perf stat did not count {EVENT} ({counts})",
            hint="a PMU that counts instructions is needed: see `myaccel doctor profile`",
        )
    return value / transactions


def pmu_counting(events: int | None = None) -> Counting:
    """``Counting`` by ``perf stat``; ``events``: transactions per run (default ``EVENTS``)."""

    def counting(sb: Sandbox, arms: Mapping[str, Arm], note: Callable[[str], None]) -> Counter:
        perf = proc.require("perf")
        prior = sb.status().active_config

        def count(arm_name: str, workload: str, out: Path) -> tuple[float, int]:
            arm = arms[arm_name]
            n = events or EVENTS.get(workload, 5_000)
            out.mkdir(parents=True, exist_ok=True)
            sb.stop()
            try:
                started = sb.start(
                    ServerOptions(arm.config, dict(arm.sets), arm.basedir), progress=note
                )
                target = _ready(sb)
                spec = RunSpec(
                    workload=workload,
                    threads=1,
                    duration_s=0,
                    warmup_s=0,
                    tables=TABLES,
                    table_size=TABLE_SIZE,
                    report_interval_s=0,
                    seed=SEED,
                    db=DB,
                    extra=(f"--events={n}",),
                )
                argv, env = run_argv(spec, target)
                csv = out / "perf-stat.csv"
                wrapped = [perf, "stat", "-x,", "-o", str(csv), "-e", EVENT, "-p", str(started.pid)]
                raw = execute(
                    [*wrapped, "--", *argv], env, timeout_s=TIMEOUT_S, password=target.password
                )
                (out / "sysbench.out").write_text(raw.output)
                err = perf_stat_error(raw.exit_code, raw.output)
                if err is not None:
                    raise err
                parsed = parse_output(raw.output, exit_code=raw.exit_code)
                if parsed.summary is None or parsed.failure not in USABLE_FAILURE_KINDS:
                    raise ProcessFailed(
                        f"sysbench under perf stat failed (exit {raw.exit_code})",
                        hint=f"see {out / 'sysbench.out'}",
                    )
                text = csv.read_text(errors="replace") if csv.exists() else ""
                return instructions_per_transaction(text, parsed.summary.transactions), n
            finally:
                sb.stop()
                sb.start(prior.options(), progress=note)

        return count

    return Counting(TOOL, counting)


def counting_for(events: int | None, sysroot: Sysroot | None = None) -> Counting:
    """The PMU's count where a core PMU counts instructions, else callgrind's; the tool it
    needs is checked here, before anything runs."""
    if has_pmu(sysroot):
        proc.require("perf")
        return pmu_counting(events)
    from myaccel.profile.simulate.arms import simulation_counting

    proc.require("valgrind")
    return simulation_counting(events)
