"""`accelerate` on an existing server: baseline runs, the plan's server layer applied with
a journal (undone by `myaccel rollback`), tuned runs, and their comparison. The phases are
not interleaved: the comparison says so."""

from __future__ import annotations

from pathlib import Path

from myaccel.accelerate.common import probe_and_plan
from myaccel.accelerate.request import (
    AccelerateRequest,
    AccelerateResult,
    ExistingServer,
    Progress,
)
from myaccel.actions import apply_changes, plan_changes
from myaccel.actions.plan_apply import ServerHandle, build_changes, health_check, save_handle
from myaccel.artifacts import save
from myaccel.bench.compare import compare_runs
from myaccel.bench.run_record import RunRecord
from myaccel.bench.session import BenchRequest, local_server_pid, require_valid_runs, run_bench
from myaccel.errors import UsageError

NOT_INTERLEAVED = (
    "arms were not interleaved: before/after on a live server, "
    "drift between the phases is not controlled"
)


def run_on_server(
    req: AccelerateRequest, target: ExistingServer, progress: Progress
) -> AccelerateResult:
    params = target.params
    facts, plan, out = probe_and_plan(req, params, progress.note)
    handle = ServerHandle(
        kind="systemd" if target.unit else "none",
        params=params,
        conf_dir=target.conf_dir,
        unit=target.unit,
    )
    pc = build_changes(plan, handle, layers=["server"])
    planned, _ = plan_changes(pc.changes)
    if not planned:
        raise UsageError(
            "the plan has nothing to apply on this server", hint=f"see {out / 'plan.json'}"
        )
    for s, desired, ch in planned:
        progress.note(f"will change {s.target}: {ch.current} -> {desired}")
    for r, why in pc.skipped:
        progress.note(f"not applied {r.id}: {why}")

    def measure(phase: str) -> list[RunRecord]:
        result = run_bench(
            BenchRequest(
                bench=params,
                admin=params,
                profile=req.profile,
                command=req.command,
                server_pid=local_server_pid(params),  # a restart changes it
                out_dir=out / phase,
            ),
            progress,
        )
        assert result is not None  # not prepare_only
        progress.bench_done(result)
        require_valid_runs(result.records, result.out_dir)
        return result.records

    progress.step("baseline runs")
    before = measure("before")
    if not target.yes and not progress.confirm(f"apply {len(planned)} change(s) to the server?"):
        raise UsageError("applying to an existing server needs confirmation", hint="pass --yes")
    res = apply_changes(
        pc.changes,
        plan_id=plan.created_at,
        facts_digest=plan.facts_digest,
        server=handle.describe(),
    )
    save_handle(Path(res.journal_path or ""), handle)
    if pc.restart_needed:
        handle.restart(progress.note)
    problems = health_check(handle, pc.server_values)
    if problems:
        progress.note("warning: " + "; ".join(problems))
    progress.step("tuned runs")
    after = measure("after")
    cmp = compare_runs(before, after, candidate_label="tuned")
    cmp = cmp.model_copy(update={"warnings": [*cmp.warnings, NOT_INTERLEAVED]})
    save(out / "comparison.json", cmp)
    return AccelerateResult(
        out_dir=out,
        facts=facts,
        plan=plan,
        comparison=cmp,
        journal=Path(res.journal_path) if res.journal_path else None,
    )
