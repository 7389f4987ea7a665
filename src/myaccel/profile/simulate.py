"""Simulated micro-architecture figures with valgrind: the fallback where no PMU exists.

Virtual machines like these have no hardware counters (``perf stat`` says ``<not
supported>``). Valgrind runs the server on a synthetic CPU instead and counts every
instruction it executes (``Ir``), with a model of the I1/D1/last-level caches
(``--cache-sim=yes``) and a simple branch predictor (``--branch-sim=yes``). The counts are
exact for that model and do not depend on the machine's load, so they suit before/after
comparisons of builds and settings (issue 7's "instructions per query") where wall-time
benchmarks are noisy. They are a SIMULATION: three LRU caches (I1, D1, LL) sized from
CPUID, no TLB, no prefetcher, no out-of-order core and no timing, and the server runs
20-50 times slower, one thread at a time. docs/simulation.md has the figures measured here.

``simulate()`` restarts a sandbox's server under valgrind, runs a bounded, deterministic
sysbench workload (``--events N --time 0 --rand-seed S``, one client thread), shuts the
server down cleanly so valgrind writes its file, starts the server again as it ran before,
and parses what valgrind wrote. Only the workload window is counted:

* callgrind: ``--instr-atstart=no`` runs startup uninstrumented; ``callgrind_control -i
  on`` switches instrumentation on before the prewarm (so the simulated caches are warm),
  ``--zero`` clears the counts after it and ``-i off`` ends the window after the
  workload. ``--collect-atstart=no --toggle-collect=do_command*`` then counts
  only what the server does inside ``do_command()`` (one client command, MariaDB and MySQL
  alike) on the client's own connection thread: background threads (purge, page cleaner,
  master thread timers) and connection set-up are left out. This is the deterministic
  window; the default tool.
* cachegrind (valgrind 3.19 here has neither ``--instr-at-start`` nor the client requests
  to switch counting on; they came in 3.22, and only the program itself could make those
  requests): two complete runs, one with ``base_events`` and one with
  ``base_events + events`` events, everything else identical. Their difference (totals
  from each file's ``summary:`` line, functions from ``cg_diff``) is what the extra
  ``events`` transactions cost. Startup, prewarm, connection set-up, statement
  preparation and shutdown cancel out; what does not cancel is work that depends on the
  clock (timer calibration at startup, background threads), 0.3-3 M instructions per run
  here, so the window should hold a few hundred million instructions. A startup-only
  baseline was not chosen because the baseline run must contain the client's connection
  and statement preparation to cancel them.

The result (``SimulationResult``) is labelled as a simulation, records the valgrind
version, the binary and its digest, the workload and the server settings used, and fits in
the profile artifact (``Profile.simulation``). ``compare_simulations`` gives the
before/after table normalised to baseline = 100% (``metrics.NormalizedRow``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import logging
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field

from myaccel import proc
from myaccel.bench.profiles import WRITE_WORKLOADS, normalize_workload
from myaccel.bench.records import USABLE_FAILURE_KINDS
from myaccel.bench.runner import (
    RunSpec,
    connection_args,
    dataset_state,
    execute,
    mask_password,
    prepare_dataset,
    run_argv,
    run_sysbench,
    verify_dataset,
)
from myaccel.bench.sysbench_output import parse_output
from myaccel.errors import MyaccelError, ProcessFailed, SandboxError, UsageError
from myaccel.model import Frozen
from myaccel.profile.metrics import NormalizedRow, normalize
from myaccel.server.connection import ConnectParams
from myaccel.server.sandbox import ActiveConfig, Sandbox, find_server
from myaccel.server.sandbox.install import parse_version_output
from myaccel.server.sandbox.options import check_sets

log = logging.getLogger(__name__)

Tool = Literal["cachegrind", "callgrind"]
Progress = Callable[[str], None]

SIMULATION_LABEL = (
    "SIMULATION (valgrind): instruction counts and miss rates of valgrind's cache and "
    "branch model, not hardware counters"
)
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
# One client command in MariaDB and MySQL: sql_parse.cc do_command(THD*, ...).
COLLECT_FUNCTION = "do_command*"
SHUTDOWN_TIMEOUT_S = 300.0
SIM_BUFFER_POOL_MIB = 128
# Pause after a client exits so that the server has handled its COM_QUIT.
SETTLE_S = 1.0
TOP_N = 25

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

# Units of the metrics compare_simulations normalises.
METRIC_UNITS: dict[str, str] = {
    "ir_per_transaction": "instructions",
    "ir_per_query": "instructions",
    "l1i_mpki": "MPKI",
    "l1d_mpki": "MPKI",
    "lli_mpki": "MPKI",
    "lld_mpki": "MPKI",
    "ll_mpki": "MPKI",
    "branch_mpki": "MPKI",
    "l1i_miss_pct": "%",
    "l1d_miss_pct": "%",
    "ll_miss_pct": "%",
    "branch_mispredict_pct": "%",
    "data_refs_per_instruction": "ratio",
}


# ---------------------------------------------------------------- the result


class CacheSpec(Frozen):
    """One simulated cache as valgrind configured it (from CPUID unless overridden)."""

    name: str  # I1, D1, LL
    size_bytes: int
    line_bytes: int
    ways: int


class FunctionCost(Frozen):
    """One function's share of the window. ``events`` are the self counts per event."""

    function: str
    location: str | None = None  # source file (or ???) and, for callgrind, the object
    ir_self: int
    self_pct: float
    ir_inclusive: int | None = None  # callgrind only
    inclusive_pct: float | None = None
    events: dict[str, int] = Field(default_factory=dict)


class SimulationRun(Frozen):
    """One server run under valgrind."""

    events_requested: int
    transactions: int
    queries: int
    totals: dict[str, int]  # over what the tool counted in this run
    out_file: str
    server_start_s: float
    workload_s: float
    server_stop_s: float
    server_binary: str
    server_version: str
    valgrind_argv: list[str] = Field(default_factory=list)
    sysbench_argv: list[str] = Field(default_factory=list)


class SimulationResult(Frozen):
    """Valgrind's counts over a bounded workload: a SIMULATION, not hardware counters."""

    kind: Literal["simulation"] = "simulation"
    label: str = SIMULATION_LABEL
    created_at: str
    tool: Tool
    valgrind_version: str
    valgrind_argv: list[str]
    window: str  # how the workload window was isolated
    cache_sim: bool
    branch_sim: bool
    caches: list[CacheSpec] = Field(default_factory=list)
    server_binary: str
    server_binary_sha256: str
    server_version: str
    workload: str
    events: int  # sysbench events (transactions) measured
    threads: int
    tables: int
    table_size: int
    rand_seed: int
    server_settings: dict[str, str]  # --set values the simulated server ran with
    config_file: str | None = None
    transactions: int
    queries: int
    totals: dict[str, int]  # event -> count in the window
    metrics: dict[str, float]
    top_self: list[FunctionCost] = Field(default_factory=list)
    top_inclusive: list[FunctionCost] = Field(default_factory=list)
    runs: list[SimulationRun] = Field(default_factory=list)
    duration_s: float
    warnings: list[str] = Field(default_factory=list)

    @property
    def instructions(self) -> int:
        return self.totals.get("Ir", 0)


# ---------------------------------------------------------------- valgrind command


def valgrind_version() -> str:
    """``valgrind-3.19.0`` -> ``3.19.0``."""
    done = proc.run([proc.require("valgrind"), "--version"], timeout_s=30.0)
    text = (done.stdout or done.stderr).strip()
    m = re.search(r"(\d+\.\d+(?:\.\d+)?)", text)
    if not done.ok or not m:
        raise ProcessFailed(
            f"cannot read the valgrind version ({text[:80]!r})",
            hint="reinstall valgrind: apt-get install valgrind",
        )
    return m.group(1)


def valgrind_argv(
    tool: Tool,
    out_file: Path,
    log_file: Path,
    *,
    cache_sim: bool = True,
    branch_sim: bool = True,
    collect_function: str = COLLECT_FUNCTION,
    valgrind: str = "valgrind",
    extra: Sequence[str] = (),
) -> list[str]:
    """The argv prefix that runs the server under ``tool``.

    callgrind starts with instrumentation off (``callgrind_control -i on`` switches it on
    for the window) and collects only inside ``collect_function``. ``extra`` options come
    last, e.g. ``--LL=8388608,16,64`` to model another last-level cache than this CPU's."""
    yes_no = {True: "yes", False: "no"}
    argv = [
        valgrind,
        f"--tool={tool}",
        f"--log-file={log_file}",
        f"--cache-sim={yes_no[cache_sim]}",
        f"--branch-sim={yes_no[branch_sim]}",
    ]
    if tool == "cachegrind":
        argv.append(f"--cachegrind-out-file={out_file}")
    else:
        argv += [
            f"--callgrind-out-file={out_file}",
            "--instr-atstart=no",
            "--collect-atstart=no",
            f"--toggle-collect={collect_function}",
            "--separate-threads=no",
            "--dump-instr=no",
        ]
    return argv + list(extra)


# ---------------------------------------------------------------- parsing


@dataclass(frozen=True)
class OutFileSummary:
    """What the header and the summary line of a cachegrind/callgrind out file say."""

    creator: str | None
    command: str | None
    events: tuple[str, ...]
    totals: dict[str, int]
    caches: tuple[CacheSpec, ...]


_CACHE_DESC_RE = re.compile(
    r"^desc:\s*(I1|D1|LL) cache:\s*(\d+) B, (\d+) B, (\d+)-way associative", re.IGNORECASE
)


def _counts(names: Sequence[str], values: str) -> dict[str, int]:
    nums = [int(v) for v in values.split()]
    # trailing zero counts may be left out in the file format
    nums += [0] * (len(names) - len(nums))
    return dict(zip(names, nums, strict=False))


def parse_out_file(text: str) -> OutFileSummary:
    """Totals and cache model from a ``cachegrind.out``/``callgrind.out`` file's text.

    The totals are the ``totals:`` line (callgrind; its ``summary:`` line is wrong after
    ``--toggle-collect`` and zeroing) or else the ``summary:`` line (cachegrind). A file
    cut short (server killed before valgrind wrote it all) has neither: ``UsageError``."""
    events: tuple[str, ...] = ()
    summary: str | None = None
    totals_line: str | None = None
    creator = command = None
    caches: list[CacheSpec] = []
    for line in text.splitlines():
        if line.startswith("events:"):
            events = tuple(line.split(":", 1)[1].split())
        elif line.startswith("summary:"):
            summary = line.split(":", 1)[1]
        elif line.startswith("totals:"):
            totals_line = line.split(":", 1)[1]
        elif line.startswith("creator:"):
            creator = line.split(":", 1)[1].strip()
        elif line.startswith("cmd:"):
            command = line.split(":", 1)[1].strip()
        elif line.startswith("desc:"):
            m = _CACHE_DESC_RE.match(line)
            if m:
                caches.append(
                    CacheSpec(
                        name=m.group(1),
                        size_bytes=int(m.group(2)),
                        line_bytes=int(m.group(3)),
                        ways=int(m.group(4)),
                    )
                )
    counts = totals_line if totals_line is not None else summary
    if not events or counts is None:
        raise UsageError(
            "the valgrind output file has no events/summary line (incomplete?)",
            hint="the server must shut down cleanly for valgrind to write its file; see the "
            "valgrind log next to it",
        )
    return OutFileSummary(
        creator=creator,
        command=command,
        events=events,
        totals=_counts(events, counts),
        caches=tuple(caches),
    )


def read_out_file(path: Path) -> OutFileSummary:
    """``parse_out_file`` on the header and summary lines of a (large) out file."""
    keep: list[str] = []
    try:
        with open(path, errors="replace") as fh:
            for line in fh:
                if line.startswith(("events:", "summary:", "totals:", "creator:", "cmd:", "desc:")):
                    keep.append(line.rstrip("\n"))
    except OSError as exc:
        raise UsageError(
            f"cannot read valgrind output '{path}': {exc.strerror or exc}",
            hint="the server must shut down cleanly for valgrind to write its file",
        ) from exc
    return parse_out_file("\n".join(keep))


@dataclass(frozen=True)
class AnnotatedFunction:
    location: str | None
    function: str
    counts: dict[str, int]


_COUNT_RE = re.compile(r"^-?[\d,]+$|^\.$")


def parse_annotate(text: str) -> tuple[tuple[str, ...], dict[str, int], list[AnnotatedFunction]]:
    """Parse ``cg_annotate``/``callgrind_annotate --show-percs=no --auto=no`` text output.

    Returns the shown event names, the PROGRAM TOTALS row and one row per function line,
    in the tool's order (sorted by the first event). Count columns are numbers with
    thousands separators (``.`` = zero); the rest of the line is ``file:function`` and,
    for callgrind, `` [object]``. Lines that do not fit are skipped."""
    lines = text.splitlines()
    shown: tuple[str, ...] = ()
    for ln in lines:
        if ln.startswith("Events shown:"):
            shown = tuple(ln.split(":", 1)[1].split())
            break
    totals: dict[str, int] = {}
    rows: list[AnnotatedFunction] = []
    in_functions = False
    for ln in lines:
        stripped = ln.strip()
        if not stripped or stripped.startswith("-----"):
            continue
        if shown and stripped.split()[: len(shown)] == list(shown):
            # a column header; the one ending in file:function starts the function table
            in_functions = stripped.endswith("file:function")
            continue
        parts = stripped.split()
        if len(parts) <= len(shown) or not shown:
            continue
        cols = parts[: len(shown)]
        if not all(_COUNT_RE.match(c) for c in cols):
            if in_functions and rows:
                # source annotation or the end of the table
                in_functions = False
            continue
        counts = {
            e: (0 if c == "." else int(c.replace(",", "")))
            for e, c in zip(shown, cols, strict=True)
        }
        rest = _rest_after_columns(stripped, len(shown))
        if rest == "PROGRAM TOTALS":
            totals = counts
            continue
        if not in_functions:
            continue
        location, function = _split_location(rest)
        rows.append(AnnotatedFunction(location=location, function=function, counts=counts))
    return shown, totals, rows


def _rest_after_columns(line: str, ncols: int) -> str:
    """The text after the first ``ncols`` whitespace-separated columns."""
    m = re.match(r"^\s*" + r"\S+\s+" * ncols, line)
    return line[m.end() :].strip() if m else ""


_OBJECT_RE = re.compile(r"\s+\[([^\]]+)\]$")


def _split_location(rest: str) -> tuple[str | None, str]:
    """``file:function [object]`` -> ("file [object]", "function")."""
    obj = None
    m = _OBJECT_RE.search(rest)
    if m:
        obj = m.group(1)
        rest = rest[: m.start()]
    file, sep, function = rest.partition(":")
    if not sep:
        return obj, rest
    location = file if obj is None else f"{file} [{obj}]"
    return location, function


def _run_annotate(argv: Sequence[str]) -> str:
    done = proc.run(argv, timeout_s=300.0)
    if not done.ok:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
        raise ProcessFailed(
            f"'{Path(argv[0]).name}' failed with exit code {done.returncode}"
            + (f": {tail[0]}" if tail else ""),
            hint="check the valgrind output file it was given (complete? same tool?)",
        )
    return done.stdout


def function_table(
    tool: Tool, out_file: Path, total_ir: int, *, top_n: int = TOP_N
) -> tuple[list[FunctionCost], list[FunctionCost]]:
    """Top functions by self Ir (all events), and for callgrind by inclusive Ir."""
    common = ["--auto=no", "--show-percs=no", "--sort=Ir"]
    if tool == "cachegrind":
        text = _run_annotate([proc.require("cg_annotate"), *common, "--threshold=0", str(out_file)])
        _, _, rows = parse_annotate(text)
        return _costs(rows, total_ir, top_n), []
    annotate = proc.require("callgrind_annotate")
    self_text = _run_annotate([annotate, *common, "--threshold=100", str(out_file)])
    # Ir only: with every event shown, callgrind_annotate 3.19 cuts the inclusive table
    # short (its inclusive PROGRAM TOTALS overflow under --toggle-collect).
    incl_text = _run_annotate(
        [annotate, *common, "--show=Ir", "--threshold=100", "--inclusive=yes", str(out_file)]
    )
    _, _, self_rows = parse_annotate(self_text)
    _, _, incl_rows = parse_annotate(incl_text)
    incl_by_key = {(r.location, r.function): r.counts.get("Ir", 0) for r in incl_rows}
    top_self = _costs(self_rows, total_ir, top_n, incl_by_key)
    self_by_key = {(r.location, r.function): r for r in self_rows}
    top_incl: list[FunctionCost] = []
    for r in incl_rows[:top_n]:
        s = self_by_key.get((r.location, r.function))
        ir_incl = r.counts.get("Ir", 0)
        ir_self = s.counts.get("Ir", 0) if s else 0
        top_incl.append(
            FunctionCost(
                function=r.function,
                location=r.location,
                ir_self=ir_self,
                self_pct=_pct(ir_self, total_ir),
                ir_inclusive=ir_incl,
                inclusive_pct=_pct(ir_incl, total_ir),
                events=dict(s.counts) if s else {},
            )
        )
    return top_self, top_incl


def _pct(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 3) if whole else 0.0


def _costs(
    rows: Sequence[AnnotatedFunction],
    total_ir: int,
    top_n: int,
    inclusive: Mapping[tuple[str | None, str], int] | None = None,
) -> list[FunctionCost]:
    ordered = sorted(rows, key=lambda r: r.counts.get("Ir", 0), reverse=True)[:top_n]
    out = []
    for r in ordered:
        incl = inclusive.get((r.location, r.function)) if inclusive is not None else None
        out.append(
            FunctionCost(
                function=r.function,
                location=r.location,
                ir_self=r.counts.get("Ir", 0),
                self_pct=_pct(r.counts.get("Ir", 0), total_ir),
                ir_inclusive=incl,
                inclusive_pct=_pct(incl, total_ir) if incl is not None else None,
                events=dict(r.counts),
            )
        )
    return out


# ---------------------------------------------------------------- metrics


def derive_metrics(totals: Mapping[str, int], transactions: int, queries: int) -> dict[str, float]:
    """Per-transaction/query instructions, MPKI and miss ratios from valgrind's counts.

    MPKI = misses per thousand instructions. L1d and LL data count reads and writes;
    ``ll_mpki`` counts instruction and data misses of the last level; branches count
    conditional and indirect mispredictions together. Events the run did not simulate
    yield no metric."""
    ir = totals.get("Ir", 0)
    out: dict[str, float] = {}
    if ir <= 0:
        return out
    out["ir"] = float(ir)
    if transactions > 0:
        out["ir_per_transaction"] = round(ir / transactions, 1)
    if queries > 0:
        out["ir_per_query"] = round(ir / queries, 1)

    def has(*names: str) -> bool:
        return all(n in totals for n in names)

    def mpki(n: int) -> float:
        return round(1000.0 * n / ir, 4)

    data_refs = totals.get("Dr", 0) + totals.get("Dw", 0)
    if has("Dr", "Dw"):
        out["data_refs_per_instruction"] = round(data_refs / ir, 4)
    if has("I1mr"):
        out["l1i_mpki"] = mpki(totals["I1mr"])
        out["l1i_miss_pct"] = round(100.0 * totals["I1mr"] / ir, 4)
    if has("D1mr", "D1mw"):
        d1 = totals["D1mr"] + totals["D1mw"]
        out["l1d_mpki"] = mpki(d1)
        if data_refs > 0:
            out["l1d_miss_pct"] = round(100.0 * d1 / data_refs, 4)
    if has("ILmr"):
        out["lli_mpki"] = mpki(totals["ILmr"])
    if has("DLmr", "DLmw"):
        out["lld_mpki"] = mpki(totals["DLmr"] + totals["DLmw"])
    if has("ILmr", "DLmr", "DLmw"):
        ll = totals["ILmr"] + totals["DLmr"] + totals["DLmw"]
        out["ll_mpki"] = mpki(ll)
        out["ll_miss_pct"] = round(100.0 * ll / (ir + data_refs), 4)
    if has("Bc", "Bcm", "Bi", "Bim"):
        miss = totals["Bcm"] + totals["Bim"]
        out["branch_mpki"] = mpki(miss)
        branches = totals["Bc"] + totals["Bi"]
        if branches > 0:
            out["branch_mispredict_pct"] = round(100.0 * miss / branches, 4)
    return out


def compare_simulations(before: SimulationResult, after: SimulationResult) -> list[NormalizedRow]:
    """``after`` as a percentage of ``before`` (baseline = 100%), metric by metric.

    Per-transaction and per-query instructions and the miss rates are normalised, so the
    event counts may differ; the tool, workload and dataset must match (the window and
    the work would differ otherwise)."""
    for what, a, b in (
        ("tool", before.tool, after.tool),
        ("workload", before.workload, after.workload),
        ("tables", before.tables, after.tables),
        ("table size", before.table_size, after.table_size),
        ("random seed", before.rand_seed, after.rand_seed),
    ):
        if a != b:
            raise UsageError(
                f"cannot compare simulations with different {what}: {a} vs {b}",
                hint="simulate both with the same tool, workload, dataset and seed",
            )
    names = [n for n in METRIC_UNITS if n in before.metrics or n in after.metrics]
    rows = normalize(
        {n: before.metrics.get(n) for n in names}, {n: after.metrics.get(n) for n in names}
    )
    return [r.model_copy(update={"unit": METRIC_UNITS.get(r.name, r.unit)}) for r in rows]


def format_simulation(result: SimulationResult, *, top_n: int = 10) -> str:
    """A short markdown summary: the label, totals, metrics and the top functions."""
    m = result.metrics
    lines = [
        f"**{result.label}**",
        "",
        f"{result.tool} (valgrind {result.valgrind_version}), {result.workload}, "
        f"{result.events} events, {result.threads} thread(s), {result.tables} x "
        f"{result.table_size:,} rows, seed {result.rand_seed}; {result.server_version} "
        f"({Path(result.server_binary).name} sha256 {result.server_binary_sha256[:12]})",
        f"window: {result.window}",
        "",
        "| metric | value |",
        "|---|---:|",
        f"| instructions (Ir) | {result.instructions:,} |",
        f"| transactions / queries | {result.transactions:,} / {result.queries:,} |",
    ]
    for name, unit in METRIC_UNITS.items():
        if name in m:
            lines.append(f"| {name} ({unit}) | {m[name]:,.4g} |")
    if result.top_self:
        lines += ["", "| function | self Ir % | inclusive Ir % |", "|---|---:|---:|"]
        for f in result.top_self[:top_n]:
            incl = f"{f.inclusive_pct:.2f}" if f.inclusive_pct is not None else "-"
            lines.append(f"| `{f.function}` | {f.self_pct:.2f} | {incl} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- running


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _noop(_msg: str) -> None:
    pass


@dataclass(frozen=True)
class _Request:
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
    _check_request(tool, n_events, threads, db, base_events)
    valgrind = _require_tools(tool)
    version = valgrind_version()
    warnings = _request_warnings(wl, threads)

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
    req = _Request(
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
            sandbox.start(
                config=prior.config_file, sets=prior.sets, basedir=prior.basedir, progress=say
            )
        sandbox.query(f"CREATE DATABASE IF NOT EXISTS `{db}`")
        target = _target(sandbox, db)
        if verify_dataset(target, tables, table_size, db) == "empty":
            if not prepare:
                raise UsageError(
                    f"sandbox '{sandbox.name}' has no sysbench dataset in schema '{db}'",
                    hint="let simulate() prepare it (prepare=True), or prepare "
                    f"{tables} x {table_size:,} rows there with sysbench",
                )
            prepare_dataset(target, tables, table_size, db=db, log=say)
        if settings is None:
            req = _fit_buffer_pool(req, dataset_state(target, db).size_bytes, warnings)
        say(sandbox.stop())
        if tool == "callgrind":
            runs.append(_one_run(sandbox, req, valgrind, "run", n_events, say))
        else:
            runs.append(_one_run(sandbox, req, valgrind, "base", base_events, say))
            runs.append(_one_run(sandbox, req, valgrind, "run", base_events + n_events, say))
    finally:
        _restore(sandbox, prior, was_running, say)

    result = _assemble(req, runs, version, warnings, top_n)
    return result.model_copy(update={"duration_s": round(time.monotonic() - t_start, 1)})


def _check_request(tool: str, n_events: int, threads: int, db: str, base_events: int) -> None:
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


def _request_warnings(wl: str, threads: int) -> list[str]:
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


def _restore(sandbox: Sandbox, prior: ActiveConfig, was_running: bool, say: Progress) -> None:
    """Stop a server still running under valgrind; start it as before if it ran."""
    with contextlib.suppress(MyaccelError):
        if sandbox.is_running() and sandbox.status().active_config.wrapper:
            say(sandbox.stop(timeout_s=SHUTDOWN_TIMEOUT_S))
    if was_running and not sandbox.is_running():
        res = sandbox.start(
            config=prior.config_file, sets=prior.sets, basedir=prior.basedir, progress=say
        )
        say(res.message)
    elif not was_running and sandbox.is_running():
        say(sandbox.stop())


def _one_run(
    sandbox: Sandbox,
    req: _Request,
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
    started = sandbox.start(
        config=req.config, sets=req.sets, basedir=req.basedir, wrapper=wrapper, progress=say
    )
    start_s = time.monotonic() - t0
    pid = started.pid
    ran = sandbox.state.active_config
    binary = ran.binary or sandbox.state.binary
    server_version = _version_label(ran.version or sandbox.state.version_string)
    target = _target(sandbox, req.db)
    if req.tool == "callgrind":
        # Instrumented prewarm: the simulated caches start the window warm, as in the
        # cachegrind runs; its counts are then zeroed.
        _callgrind_control(pid, "-i", "on")
    _prewarm(target, req, say)
    time.sleep(SETTLE_S)  # the prewarm connection's COM_QUIT is processed before zeroing
    if req.tool == "callgrind":
        _callgrind_control(pid, "--zero")
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
        _callgrind_control(pid, "-i", "off")
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


def _target(sandbox: Sandbox, db: str) -> ConnectParams:
    """The sandbox's admin user (root over the socket) in schema ``db``."""
    return dataclasses.replace(sandbox.connect_params(), database=db)


def _fit_buffer_pool(req: _Request, data_bytes: int, warnings: list[str]) -> _Request:
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


def _version_label(raw: str) -> str:
    """``/usr/sbin/mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 ...`` -> ``MariaDB 10.11.19``."""
    try:
        return parse_version_output(raw).label
    except MyaccelError:
        return raw.strip()


def _prewarm(target: ConnectParams, req: _Request, say: Progress) -> None:
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


def _callgrind_control(pid: int, *args: str) -> None:
    """``callgrind_control ARGS PID`` (through vgdb); raise when it did not reach it."""
    done = proc.run([proc.require("callgrind_control"), *args, str(pid)], timeout_s=120.0)
    text = (done.stdout + done.stderr).strip()
    log.debug("callgrind_control %s %s: %s", " ".join(args), pid, text)
    # it exits 0 even when no callgrind run has that pid ("Error: Callgrind task ...")
    failed = any(ln.startswith("Error") for ln in text.splitlines())
    if not done.ok or failed or "OK." not in text:
        raise ProcessFailed(
            f"callgrind_control {' '.join(args)} failed for pid {pid}: {text[:200] or 'no output'}",
            hint="callgrind_control talks to valgrind through vgdb, which needs ptrace "
            "(kernel.yama.ptrace_scope <= 1 and no seccomp filter blocking it)",
        )


def _assemble(
    req: _Request,
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
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        tool=req.tool,
        valgrind_version=version,
        valgrind_argv=list(measured.valgrind_argv),
        window=window,
        cache_sim=req.cache_sim,
        branch_sim=req.branch_sim,
        caches=list(caches),
        server_binary=str(binary),
        server_binary_sha256=file_sha256(binary),
        server_version=measured.server_version,
        workload=req.workload,
        events=req.events,
        threads=req.threads,
        tables=req.tables,
        table_size=req.table_size,
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
