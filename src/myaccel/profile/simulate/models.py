"""What a valgrind simulation records: the result that fits in ``Profile.simulation``,
its runs, its simulated caches and the top functions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import Field

from myaccel.model import Frozen

Tool = Literal["cachegrind", "callgrind"]
Progress = Callable[[str], None]

SIMULATION_LABEL = (
    "SIMULATION (valgrind): instruction counts and miss rates of valgrind's cache and "
    "branch model, not hardware counters"
)


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
