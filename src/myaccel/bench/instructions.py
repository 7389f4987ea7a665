"""The figure that noise cannot move: instructions per transaction of the server, per arm,
beside the TPS of an A/B (`ab --instructions`, `accelerate --instructions`).

On a busy or virtual machine the TPS of a CPU-bound cell moves by 5-25% from run to run;
the instructions the server executes for the same transactions do not. Each arm's server
runs a short, fixed-event workload under callgrind (``profile/simulate``: one client
thread, a seeded sysbench run, only ``do_command()`` counted), twice, in ABBA order; the
repeats of one arm agree within a few tenths of a percent here (docs/simulation.md), so a
difference of a few percent between arms is a verdict where the TPS is inconclusive.
Where a PMU exists the same figure could come from ``perf stat -e instructions`` on the
normal server; these machines have none, so the count is always valgrind's (the figure
says which tool counted).

What the figure can decide: the CPU cost of a transaction, which is what a build (PGO, LTO,
BOLT, LSE) or a CPU-side knob changes. It cannot see I/O, waits or contention (one thread,
a dataset in memory), so it decides an inconclusive cell only when the arms differ by their
server build or by knobs in ``CPU_SIDE_KNOBS``; otherwise it is shown and TPS decides."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from myaccel.bench.compare import CellResult, Comparison, InstructionFigure
from myaccel.server.optionfile import read_option_file

if TYPE_CHECKING:
    from myaccel.server.sandbox import Sandbox


class Arm(Protocol):
    """What this module reads of an A/B arm (``ab.Arm``, which imports this module)."""

    @property
    def config(self) -> Path | None: ...
    @property
    def sets(self) -> dict[str, str]: ...
    @property
    def basedir(self) -> Path | None: ...


# the cells whose transactions are CPU work on a dataset in memory
CPU_BOUND_WORKLOADS = ("oltp_read_only", "oltp_point_select")
REPEATS = 2  # per arm, ABBA: the repeats show the count's own spread
MIN_EFFECT_PCT = 1.0  # below this, "no change" whatever the spread
SPREAD_FACTOR = 3.0  # a difference counts when it is this many times the repeats' spread
# Knobs whose effect is the CPU work of a transaction (no I/O, no memory sizing): an
# instruction count can decide between arms that differ only in these.
CPU_SIDE_KNOBS = frozenset(
    {
        "innodb_adaptive_hash_index",
        "innodb_spin_wait_delay",
        "innodb_sync_spin_loops",
        "optimizer_switch",
        "performance_schema",
        "query_cache_type",
        "query_cache_size",
        "thread_handling",
        "table_open_cache",
        "table_definition_cache",
        "skip_name_resolve",
        "log_bin",
        "innodb_stats_on_metadata",
    }
)


def _spread_pct(counts: Sequence[float]) -> float:
    lo, hi = min(counts), max(counts)
    return 100.0 * (hi - lo) / lo if lo > 0 else 0.0


def instruction_figure(
    workload: str,
    events: int,
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    tool: str,
) -> InstructionFigure:
    """One workload's counts per arm (instructions per transaction of each repeat) and
    the verdict: fewer instructions is ``improved``, more is ``regressed``, a difference
    within max(``MIN_EFFECT_PCT``, ``SPREAD_FACTOR`` x the repeats' spread) ``no change``."""
    if not baseline or not candidate:
        raise ValueError("an instruction figure needs counts of both arms")
    b = sum(baseline) / len(baseline)
    c = sum(candidate) / len(candidate)
    delta = 100.0 * (c - b) / b
    spread = max(_spread_pct(baseline), _spread_pct(candidate))
    bound = max(MIN_EFFECT_PCT, SPREAD_FACTOR * spread)
    if delta <= -bound:
        verdict = "improved"
    elif delta >= bound:
        verdict = "regressed"
    else:
        verdict = "no change"
    reason = (
        f"instructions per transaction {delta:+.2f}% ({b:,.0f} -> {c:,.0f}; repeats of "
        f"one arm within {spread:.2f}%, so a change counts beyond +-{bound:.2f}%)"
    )
    return InstructionFigure(
        workload=workload,
        events=events,
        tool=tool,
        baseline=list(baseline),
        candidate=list(candidate),
        delta_pct=round(delta, 3),
        spread_pct=round(spread, 3),
        verdict=verdict,
        reason=reason,
    )


def decides(
    baseline: tuple[Mapping[str, str], str | None], candidate: tuple[Mapping[str, str], str | None]
) -> str | None:
    """Why the count may decide between two arms, each given as (its settings, its server
    build), or None: the builds differ and the settings are equal, or every setting that
    differs is in ``CPU_SIDE_KNOBS``."""
    (b_sets, b_dir), (c_sets, c_dir) = baseline, candidate
    keys = {
        k.replace("-", "_") for k in set(b_sets) | set(c_sets) if b_sets.get(k) != c_sets.get(k)
    }
    other = sorted(keys - CPU_SIDE_KNOBS)
    if other:
        return None
    if b_dir != c_dir and not keys:
        return "the arms differ by their server build"
    if keys:
        return "the arms differ only in CPU-side knobs (" + ", ".join(sorted(keys)) + ")"
    return None


def with_instructions(
    cmp: Comparison, figures: Sequence[InstructionFigure], why_decides: str | None
) -> Comparison:
    """``cmp`` with the figures, and (when ``why_decides``) each cell whose TPS verdict is
    inconclusive decided by its workload's figure when that is improved or regressed."""
    by_workload = {f.workload: f for f in figures}

    def cell(c: CellResult) -> CellResult:
        f = by_workload.get(c.workload)
        if f is None or why_decides is None or c.verdict != "inconclusive":
            return c
        if f.verdict not in ("improved", "regressed"):
            return c
        return c.model_copy(
            update={
                "verdict": f.verdict,
                "decided_by": "instructions",
                "advice": [],
                "reason": f"TPS inconclusive ({c.reason}); decided by the instruction count, "
                f"as {why_decides}: {f.reason}",
            }
        )

    return cmp.model_copy(
        update={"cells": [cell(c) for c in cmp.cells], "instructions": list(figures)}
    )


# (arm name, workload, out dir) -> (instructions per transaction, events)
Counter = Callable[[str, str, Path], tuple[float, int]]


@dataclass(frozen=True)
class Counting:
    """What counts them for a campaign's sandbox and arms: callgrind
    (``profile/simulate/arms.py``) or the PMU (``profile/perfstat/arms.py``); the bench
    layer does not import the profiler, the commands hand it in."""

    tool: str  # as the figure names it
    make: Callable[[Sandbox, Mapping[str, Arm], Callable[[str], None]], Counter]


SERVER_GROUPS = ("mysqld", "server", "mariadb", "mariadbd")


def arm_settings(arm: Arm) -> tuple[dict[str, str], str | None]:
    """What an arm sets (its option file's server groups, then its --set values) and its
    server build, for ``decides``."""
    sets: dict[str, str] = {}
    if arm.config is not None:
        of = read_option_file(arm.config, missing_ok=True)
        for group in SERVER_GROUPS:
            sets.update({k: v or "" for k, v in of.groups.get(group, {}).items()})
    sets.update(arm.sets)
    return sets, str(arm.basedir) if arm.basedir is not None else None


Counts = dict[str, dict[str, tuple[list[float], int]]]  # workload -> arm -> (per repeat, events)


def instruction_counts(
    sb: Sandbox,
    arms: Mapping[str, Arm],
    workloads: Sequence[str],
    counting: Counting,
    out_dir: Path,
    note: Callable[[str], None],
) -> Counts:
    """Every arm's counts for the CPU-bound ones of ``workloads`` (none: an empty dict)."""
    wls = [w for w in dict.fromkeys(workloads) if w in CPU_BOUND_WORKLOADS]
    if not wls:
        note(
            "instructions: no CPU-bound workload in the campaign ("
            + ", ".join(CPU_BOUND_WORKLOADS)
            + "): no instruction figure"
        )
        return {}
    return measure(list(arms), wls, counting.make(sb, arms, note), out_dir, note)


def pair_figures(
    counts: Counts, arms: Mapping[str, Arm], baseline: str, candidate: str, tool: str
) -> tuple[list[InstructionFigure], str | None]:
    """The figures of two arms, and why they may decide (``decides``)."""
    figures = [
        instruction_figure(wl, per[baseline][1], per[baseline][0], per[candidate][0], tool=tool)
        for wl, per in counts.items()
    ]
    return figures, decides(arm_settings(arms[baseline]), arm_settings(arms[candidate]))


def measure(
    arms: Sequence[str],
    workloads: Sequence[str],
    count: Counter,
    out_dir: Path,
    note: Callable[[str], None],
    repeats: int = REPEATS,
) -> Counts:
    """Each workload's counts per arm, the arms in ABBA order (A B C C B A for three) over
    ``repeats`` rounds."""
    got: Counts = {}
    for wl in workloads:
        per: dict[str, tuple[list[float], int]] = {a: ([], 0) for a in arms}
        for r in range(repeats):
            order = list(arms) if r % 2 == 0 else list(reversed(arms))
            for arm in order:
                ir, events = count(arm, wl, out_dir / f"{wl}-{arm}-{r + 1}")
                note(f"instructions: {wl}, {arm} (repeat {r + 1}): {ir:,.0f} per transaction")
                per[arm] = ([*per[arm][0], ir], events)
        got[wl] = per
    return got
