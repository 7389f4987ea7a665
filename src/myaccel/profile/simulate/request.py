"""What a simulation is asked for: its defaults, the server settings it runs with, the
request checked before anything runs, and what makes its counts hard to compare."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from myaccel.bench.profiles import WRITE_WORKLOADS
from myaccel.errors import UsageError
from myaccel.profile.simulate.models import Tool
from myaccel.profile.simulate.valgrind import TOP_N

DEFAULT_TOOL: Tool = "callgrind"
DEFAULT_SEED = 1
# Events per run sized for "under 3 minutes" on a 2-core VM (docs/simulation.md).
DEFAULT_EVENTS: dict[str, int] = {"oltp_read_only": 300, "oltp_point_select": 10_000}
FALLBACK_EVENTS = 300
# The dataset: small enough that prewarm under valgrind takes seconds.
DEFAULT_TABLES = 2
DEFAULT_TABLE_SIZE = 10_000
# The simulation's own schema (the admin user runs sysbench in it): never conflicts with
# the dataset a benchmark left in ``sbtest``.
SIM_DATABASE = "myaccel_sim"
# cachegrind's baseline run executes this many events; the measured run that many more.
DEFAULT_BASE_EVENTS = 10
SIM_BUFFER_POOL_MIB = 128

# Server settings for the simulation only (never kept): fit under valgrind and make the
# counts steadier. ``loose-`` where a flavor or version may lack the variable.
SIMULATION_SETTINGS: dict[str, str] = {
    # synchronous I/O threads: no io_uring/libaio completions arriving by kernel timing
    # under valgrind (MariaDB's own test runner falls back to this under rr)
    "innodb_use_native_aio": "0",
    # a small pool that holds the bounded dataset: quick to set up under valgrind
    "innodb_buffer_pool_size": f"{SIM_BUFFER_POOL_MIB}M",
    # recent releases reserve address space for growth (8 TiB by default): valgrind
    # cannot map that ("Cannot map innodb_buffer_pool_size_max")
    "loose-innodb_buffer_pool_size_max": f"{SIM_BUFFER_POOL_MIB}M",
    # no asynchronous page loading at startup, nothing to dump at shutdown
    "innodb_buffer_pool_load_at_startup": "0",
    "innodb_buffer_pool_dump_at_shutdown": "0",
    # no hash index built (or not) depending on timing and history
    "innodb_adaptive_hash_index": "0",
    # no background statistics recalculation
    "innodb_stats_auto_recalc": "0",
    "loose-query_cache_type": "0",
    "loose-query_cache_size": "0",
    "loose-performance_schema": "0",
    # the server's own SIGSEGV handler is useless under valgrind (as mysql-test-run does)
    "loose-stack_trace": "0",
    "thread_handling": "one-thread-per-connection",
}


@dataclass(frozen=True, kw_only=True)
class SimulationRequest:
    """What ``simulate()`` is asked to run (``simulate(sandbox, SimulationRequest(...))``).

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
    Valgrind's files and logs stay in ``out_dir``; ``top_n`` functions are kept.
    """

    out_dir: Path
    tool: Tool = DEFAULT_TOOL
    workload: str = "oltp_read_only"
    events: int | None = None
    threads: int = 1
    tables: int = DEFAULT_TABLES
    table_size: int = DEFAULT_TABLE_SIZE
    rand_seed: int = DEFAULT_SEED
    db: str = SIM_DATABASE
    config: Path | str | None = None
    sets: Mapping[str, str] | None = None
    basedir: Path | str | None = None
    settings: Mapping[str, str] | None = None
    cache_sim: bool = True
    branch_sim: bool = True
    valgrind_options: Sequence[str] = ()
    base_events: int = DEFAULT_BASE_EVENTS
    prepare: bool = True
    top_n: int = TOP_N
    workload_timeout_s: float = 1800.0


@dataclass(frozen=True)
class Request:
    """A ``SimulationRequest`` resolved against the sandbox: what the valgrind runs use."""

    tool: Tool
    workload: str
    events: int
    threads: int
    tables: int
    table_size: int
    seed: int
    db: str
    config: str | None
    sets: dict[str, str]
    basedir: str | None
    cache_sim: bool
    branch_sim: bool
    valgrind_options: tuple[str, ...]
    out_dir: Path
    timeout_s: float


def check_request(tool: str, n_events: int, threads: int, db: str, base_events: int) -> None:
    """Bad input fails before anything runs."""
    if n_events < 1:
        raise UsageError(
            f"events must be at least 1 (got {n_events})",
            hint="pass the number of sysbench events (transactions) to simulate, e.g. 300",
        )
    if threads < 1:
        raise UsageError(f"threads must be at least 1 (got {threads})", hint="use --threads 1")
    if tool not in ("cachegrind", "callgrind"):
        raise UsageError(f"unknown valgrind tool '{tool}'", hint="use cachegrind or callgrind")
    if not re.fullmatch(r"[A-Za-z0-9_]{1,64}", db):
        raise UsageError(
            f"invalid schema name '{db}'",
            hint="use letters, digits and '_' (at most 64), e.g. myaccel_sim",
        )
    if base_events < 1:
        raise UsageError(
            f"base_events must be at least 1 (got {base_events})",
            hint="the cachegrind baseline run needs at least one event",
        )


def request_warnings(wl: str, threads: int) -> list[str]:
    """What makes the counts of this request hard to compare."""
    warnings: list[str] = []
    if threads > 1:
        warnings.append(
            f"{threads} client threads: the events are shared between threads in a "
            "timing-dependent way, so counts vary between runs; use 1 thread to compare"
        )
    if wl in WRITE_WORKLOADS:
        warnings.append(
            f"{wl} changes the data: a repeated simulation starts from other data; "
            "restore a snapshot between simulations you compare"
        )
    return warnings


def fit_buffer_pool(req: Request, data_bytes: int, warnings: list[str]) -> Request:
    """Grow the simulation's buffer pool when the dataset would not fit (never shrink)."""
    need_mib = math.ceil(data_bytes * 1.3 / (64 << 20)) * 64
    if need_mib <= SIM_BUFFER_POOL_MIB:
        return req
    warnings.append(
        f"the dataset takes {data_bytes / (1 << 20):.0f} MiB: buffer pool raised to "
        f"{need_mib} MiB; prewarm and startup under valgrind take longer with big datasets"
    )
    sets = dict(req.sets)
    sets["innodb_buffer_pool_size"] = f"{need_mib}M"
    sets["loose-innodb_buffer_pool_size_max"] = f"{need_mib}M"
    return dataclasses.replace(req, sets=sets)
