"""The instruction count of an A/B's arms (``bench/instructions.py``): each arm's server
run under callgrind with the arm's option file, settings and build."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from myaccel.bench.instructions import CPU_SIDE_KNOBS, Counter, Counting, arm_settings
from myaccel.profile.simulate.request import SIMULATION_SETTINGS, SimulationRequest
from myaccel.profile.simulate.run import simulate

if TYPE_CHECKING:
    from myaccel.bench.instructions import Arm
    from myaccel.server.sandbox import Sandbox

TOOL = "callgrind, one client thread"


def simulation_counting(events: int | None = None) -> Counting:
    """``Counting`` by callgrind; ``events``: transactions per run (default: the
    simulation's own per workload, docs/simulation.md)."""

    def counting(sb: Sandbox, arms: Mapping[str, Arm], note: Callable[[str], None]) -> Counter:
        settings = arm_simulation_settings(arms)
        if settings is not None:
            kept = sorted(_key(k) for k in set(SIMULATION_SETTINGS) - set(settings))
            note(f"instructions: the arms' own {', '.join(kept)} run, not the simulation's")

        def count(arm_name: str, workload: str, out: Path) -> tuple[float, int]:
            arm = arms[arm_name]
            res = simulate(
                sb,
                SimulationRequest(
                    out_dir=out,
                    workload=workload,
                    events=events,
                    config=arm.config,
                    sets=dict(arm.sets),
                    basedir=arm.basedir,
                    settings=settings,
                ),
            )
            return res.metrics["ir_per_transaction"], res.events

        return count

    return Counting(TOOL, counting)


def _key(name: str) -> str:
    return name.removeprefix("loose-").replace("-", "_")


def arm_simulation_settings(arms: Mapping[str, Arm]) -> dict[str, str] | None:
    """The simulation's own settings without the CPU-side knobs an arm sets (those are
    what is measured: its value, not the simulation's, must run), or None when no arm
    sets one (the simulation's defaults, with a buffer pool fitted to the dataset)."""
    own = {_key(k) for a in arms.values() for k in arm_settings(a)[0]} & CPU_SIDE_KNOBS
    if not own:
        return None
    return {k: v for k, v in SIMULATION_SETTINGS.items() if _key(k) not in own}
