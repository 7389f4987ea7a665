"""``myaccel profile`` as one function: check perf, drive the workload (if any), record,
and optionally simulate with valgrind on the same sandbox."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from myaccel.errors import MyaccelError, UsageError
from myaccel.paths import myaccel_home
from myaccel.profile.workload import NO_WORKLOAD, Target, WorkloadChoice, WorkloadDriver

if TYPE_CHECKING:
    from myaccel.model import Facts
    from myaccel.profile.record import RecordResult
    from myaccel.profile.simulate import SimulationResult

Note = Callable[[str], None]


@dataclass(frozen=True)
class ProfileRequest:
    target: Target
    duration_s: float = 10.0
    frequency_hz: int = 99
    call_graph: str = "fp"
    top_n: int = 20  # the tables shown; the profile keeps at least 30
    workload: WorkloadChoice = NO_WORKLOAD  # the load to drive while recording
    simulate: bool = False
    out_dir: Path | None = None  # default $MYACCEL_HOME/profiles/STAMP-PID
    command: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ProfileRun:
    record: RecordResult  # profile.json (with the simulation, if any), folded, flame graph
    out_dir: Path
    bench_dir: Path | None  # the runs of the driving workload


def check_simulate(target: Target) -> None:
    if target.sandbox is None:
        raise UsageError(
            "--simulate needs a sandbox: valgrind restarts the server it simulates",
            hint="profile a sandbox (--sandbox NAME), or drop --simulate",
        )


def collect_facts_quietly(target: Target, note: Note) -> Facts | None:
    """The machine's (and server's) facts for the diagnosis: flavor, NUMA nodes, binary.
    Taken before the workload starts; a failure only costs precision."""
    from myaccel.facts.collect import collect_facts

    try:
        return collect_facts("/", server=target.admin, perf_live_test=False)
    except MyaccelError as exc:
        note(f"warning: facts not collected, findings use the profile alone: {exc.message}")
        return None


def run_simulation(
    target: Target, driver: WorkloadDriver | None, out_dir: Path, note: Note
) -> SimulationResult:
    """``--simulate``: the valgrind fallback (``myaccel.profile.simulate``) on the same
    sandbox after the recording, with the workload's first sysbench workload and dataset.
    It restarts the sandbox's server under valgrind and back, so it runs last."""
    from myaccel.profile.simulate import SimulationRequest, simulate
    from myaccel.server.sandbox import Sandbox

    check_simulate(target)
    assert target.sandbox is not None
    kwargs: dict[str, Any] = {}
    if driver is not None and driver.specs:
        first = driver.specs[0]
        kwargs = {
            "workload": first.workload,
            "tables": first.tables,
            "table_size": first.table_size,
        }
    note("simulating with valgrind (the sandbox restarts under valgrind, then as before)")
    return simulate(
        Sandbox.load(target.sandbox), SimulationRequest(out_dir=out_dir, **kwargs), note
    )


def run_profile(req: ProfileRequest, note: Note) -> ProfileRun:
    """Record ``req.target`` (under ``req.workload``), write profile.json, the folded
    stacks and the flame graph; ``note`` hears the progress."""
    from myaccel.profile import record

    target = req.target
    if req.simulate:
        check_simulate(target)
    tools = record.require_tools()
    record.check_perf_access(target.pid)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = req.out_dir or myaccel_home() / "profiles" / f"{stamp}-{target.pid}"
    out.mkdir(parents=True, exist_ok=True)

    driver: WorkloadDriver | None = None
    if req.workload.name != "none":
        driver = WorkloadDriver(
            target=target,
            workload=req.workload,
            window_s=req.duration_s,
            out_dir=out / "bench",
            command=req.command,
            note=note,
        )
        driver.prepare()
    facts = collect_facts_quietly(target, note)
    if driver is not None:
        driver.start()
        note(f"workload {req.workload.name} started; waiting for its first report")
        driver.wait_started()
    try:
        result = record.record_profile(
            record.RecordOptions(
                pid=target.pid,
                duration_s=req.duration_s,
                out_dir=out,
                frequency_hz=req.frequency_hz,
                call_graph=req.call_graph,
                status_params=target.admin,
                top_n=max(30, req.top_n),
                facts=facts,
            ),
            tools=tools,
            on_event=note,
        )
    except BaseException:
        if driver is not None:
            driver.join(quiet=True)  # the recording's error is the one to report
        raise
    if driver is not None:
        driver.join()
        for line in driver.lines:
            note(f"workload: {line}")
    if req.simulate:
        from myaccel.profile.records import save_profile

        sim = run_simulation(target, driver, out / "simulate", note)
        result.profile = result.profile.model_copy(update={"simulation": sim})
        save_profile(result.profile, result.profile_path)
    return ProfileRun(
        record=result, out_dir=out, bench_dir=out / "bench" if driver is not None else None
    )
