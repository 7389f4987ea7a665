"""`accelerate` on an existing server: nothing is benchmarked on the server itself.

preflight (restart method, privileges, disk for the clone, a sysbench dataset on the server
that the A/B on its clone could not use: all before any side effect) -> probe and plan
(without a way to restart: online changes only, or a refusal; the results directory is
written after that check) -> clone (``myaccel.clone``) ->
interleaved A/B on the clone (its configuration = the user's server, vs the plan) -> if the
plan improves, a journaled apply to the server -> guarded verification with the server's
own counters (``live``) over a window before and after; a breach rolls back.

Figures from the clone are causal (interleaved arms, identical data); figures from the
live server are observational (its own traffic, before vs after). No table, user or schema
is created on the server."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from pathlib import Path

from myaccel.accelerate.candidate import write_candidate
from myaccel.accelerate.clone_plan import ScaledPlan, plan_memory, scale_plan
from myaccel.accelerate.common import facts_and_plan, save_facts_and_plan
from myaccel.accelerate.dataset_check import can_read_schema, dataset_conflict
from myaccel.accelerate.live import Verdict
from myaccel.accelerate.request import (
    AccelerateRequest,
    AccelerateResult,
    ExistingServer,
    Progress,
    ServerBuildHooks,
)
from myaccel.accelerate.rollout import LIVE_FIGURES, guarded_apply
from myaccel.accelerate.sandbox_mode import ab_against_base
from myaccel.accelerate.versions import VersionHeadroom, headroom_for, next_version
from myaccel.actions import journals_dir, plan_changes
from myaccel.actions.plan_apply import PlannedChanges, build_changes
from myaccel.actions.session import derive_conf_dir, refuse_unfinished
from myaccel.actions.target import (
    CommandServer,
    SandboxServer,
    ServerTarget,
    SystemdServer,
    UnmanagedServer,
    sandbox_target,
    server_target,
)
from myaccel.artifacts import write_text
from myaccel.bench.compare import Comparison
from myaccel.bench.runner import DB, ROW_BYTES
from myaccel.clone import CloneRequest, RestartMethod, make_clone, preflight
from myaccel.clone.errors import MissingPrivileges, NoDiskForCopy
from myaccel.clone.preflight import DiskCheck, disk_for_ab, redo_bytes
from myaccel.clone.source import SourceServer, read_source
from myaccel.errors import UsageError
from myaccel.model import Facts
from myaccel.rules.model import Plan
from myaccel.server.connection import ConnectParams
from myaccel.server.flavors import adapter_for
from myaccel.server.sandbox import Sandbox, ServerInstall
from myaccel.server.sandbox.layout import sandboxes_root
from myaccel.units import size_or_none

CLONE_FIGURES = "from the clone: interleaved A/B (ABBA) on a copy of the server, causal"


def plan_improves(cmp: Comparison) -> tuple[bool, str]:
    """The plan improves when the geometric mean's 95% interval lies above zero, at least
    one cell's verdict is ``improved`` and none is ``regressed``; else why not."""
    verdicts = [c.verdict for c in cmp.cells]
    if "regressed" in verdicts:
        return False, "a workload regressed"
    if cmp.geomean_ci_low_pct is None:
        return False, "too few runs for an interval"
    if cmp.geomean_ci_low_pct <= 0:
        return False, f"its 95% interval starts at {cmp.geomean_ci_low_pct:+.1f}%"
    if "improved" not in verdicts:
        return False, "no workload's verdict is improved (more runs per arm decide)"
    return True, "improved"


def _server_target(target: ExistingServer, restart: RestartMethod) -> ServerTarget:
    """The server as the preflight found it restartable: its sandbox, its systemd unit (or
    ``--server-unit``), the user's restart command, or none (online changes only)."""
    unit: str | None = None
    kind = restart.kind
    if kind is SandboxServer and target.restart_command is None:
        return sandbox_target(restart.detail, create=True, params=target.params)
    if kind is CommandServer:
        return server_target(
            target.params, conf_dir=target.conf_dir, restart_command=restart.detail
        )
    if kind is SystemdServer:
        unit = target.unit or restart.detail
    elif kind is UnmanagedServer:
        unit = target.unit  # --server-unit for a server the preflight found no unit for
    if unit:
        return server_target(target.params, conf_dir=target.conf_dir, unit=unit)
    return server_target(
        target.params, conf_dir_reason=f"myaccel cannot restart this server ({restart.detail})"
    )


# accelerate has no option to drop a dataset: the clone's A/B would drop a copy of the
# user's schema, so it refuses instead and says how to match it
_DATASET_HINT = (
    "the A/B runs on a copy of the server and accelerate never drops a dataset: choose "
    "--profile/--scale so that the A/B needs what is there ({have}), or move it out of "
    "schema 'sbtest' on the server (the clone copies that schema)"
)
_FOREIGN_TABLES_HINT = (
    "accelerate prepares its dataset in schema 'sbtest' of the clone, which copies the "
    "server's: move those tables out of 'sbtest' on the server (accelerate never drops "
    "tables it did not prepare)"
)
DISK_HINT = (
    "free space there, or set MYACCEL_HOME to a larger file system: the A/B runs on a full "
    "copy of the server's data"
)


def check_dataset(params: ConnectParams, req: AccelerateRequest) -> None:
    """The server's sysbench schema, copied into the clone, must hold nothing or the
    dataset the A/B needs (checked with SELECTs before the clone is made)."""
    prof = req.profile
    if req.workload is not None:
        return
    if not can_read_schema(params):
        raise MissingPrivileges(
            f"the account {params.user} cannot read schema '{DB}' (the A/B's dataset is "
            "checked there before the clone)",
            hint=f"GRANT SELECT ON {DB}.* TO '{params.user}'@'HOST' (as an administrator)",
        )
    conflict = dataset_conflict(params, prof.tables, prof.table_size)
    if conflict is not None:
        hint = _DATASET_HINT.format(have=conflict.have) if conflict.ours else _FOREIGN_TABLES_HINT
        raise UsageError(conflict.message, hint=hint)


_REDO_KNOBS = ("innodb_redo_log_capacity", "innodb_log_file_size")


def check_ab_disk(
    src: SourceServer, pc: PlannedChanges, *, arms: int, dataset_bytes: int = 0
) -> DiskCheck:
    """Before the clone: room for it and for its A/B, whose snapshots carry each arm's
    redo log written out (the plan's may be far larger than the server's)."""
    now = redo_bytes(src.variables)
    planned_vars = dict(src.variables)  # the plan's redo knobs over the server's
    for r in pc.recs:
        name = r.target.removeprefix("mysql:")
        if name in _REDO_KNOBS and (size := size_or_none(r.proposed)) is not None:
            planned_vars[name] = str(size)
    planned = redo_bytes(planned_vars)
    check = disk_for_ab(
        src.data_bytes,
        now,
        [now, *[planned] * (arms - 1)],
        sandboxes_root(),
        dataset_bytes=dataset_bytes,
        binlog=src.variables.get("log_bin", "").upper() in ("ON", "1"),
    )
    if not check.fits:
        raise NoDiskForCopy(
            f"not enough disk for the clone's A/B: {check.describe()}", hint=DISK_HINT
        )
    return check


def run_on_server(
    req: AccelerateRequest,
    target: ExistingServer,
    progress: Progress,
    build: ServerBuildHooks | None = None,  # --build (existing_build.ServerBuild)
) -> AccelerateResult:
    params = target.params
    progress.step("preflight")
    refuse_unfinished(journals_dir())
    src = read_source(params)
    pre = preflight(
        src, purpose="apply", target=sandboxes_root(), restart_command=target.restart_command
    )
    pre.require()
    pre_clone = preflight(src, purpose="clone", target=sandboxes_root(), disk_hint=DISK_HINT)
    pre_clone.require()
    check_dataset(params, req)
    if build is not None:
        build.check(src, pre.restart, progress)
    # --versions: the next release line installed here, before anything is written
    newer = next_version(adapter_for(src.version).name, src.version) if req.versions else None
    progress.note(f"restart method: {pre.restart.describe()}")
    for p in pre.problems + pre_clone.problems:
        progress.note(f"note: {p.message} ({p.hint})")
    server = _server_target(target, pre.restart)
    progress.step("probe and plan")
    facts, plan = facts_and_plan(req, params, progress.note)
    if server.startable():  # the option files of a server myaccel restarts (a sandbox's own)
        server = derive_conf_dir(server, facts, progress.note)
    pc = build_changes(plan, server, layers=["server"])
    planned, _ = plan_changes(pc.changes)
    for r, why in pc.skipped:
        progress.note(f"not applied {r.id}: {why}")
    if not planned:  # refused before the results directory is written
        if not server.startable():
            raise UsageError(
                f"myaccel cannot restart this server ({pre.restart.detail}) and the plan has "
                "no online change left",
                hint="give --restart-command CMD (or --server-unit UNIT) for the changes that "
                "need a restart; `myaccel plan` with the same server options shows the plan",
            )
        raise UsageError(
            "the plan has nothing to apply on this server",
            hint="`myaccel plan` with the same server options shows the plan",
        )
    dataset = 0 if req.workload is not None else req.profile.tables * req.profile.table_size
    # before anything is written
    arms = 2 + (build is not None) + 3 * (newer is not None)  # the upgraded copy: one more
    disk = check_ab_disk(src, pc, arms=arms, dataset_bytes=dataset * ROW_BYTES)
    progress.note(f"disk: {disk.describe()}")
    out = save_facts_and_plan(req, facts, plan)
    if not server.startable():
        progress.note(
            "online changes only: myaccel cannot restart this server "
            f"({pre.restart.detail}); restart-only changes are left out"
        )
    for s, desired, ch in planned:
        progress.note(f"will change {s.target}: {ch.current} -> {desired}")
    if build is not None:
        build.make(progress)
    clone_name = f"accel-{uuid.uuid4().hex[:8]}"
    progress.step(f"clone '{clone_name}' of the server")
    try:
        cmp, scaled, more, head = _ab_on_clone(
            req, target, plan, pc, facts, out, clone_name, progress, build, newer
        )
    finally:
        if not target.keep_clone and Sandbox.exists(clone_name):
            progress.note(f"removing clone '{clone_name}'")
            Sandbox.destroy_named(clone_name)
    improves, why = plan_improves(cmp)
    result = AccelerateResult(
        out_dir=out,
        facts=facts,
        plan=plan,
        comparison=cmp,
        clone=clone_name,
        figures=[_clone_figures(scaled)],
        clone_plan=scaled.summary(),
        more=more,
        versions=head,
    )
    if build is not None:
        result = build.measured(result, progress)
    if not improves and not target.force:
        gain = "n/a" if cmp.geomean_delta_pct is None else f"{cmp.geomean_delta_pct:+.1f}%"
        progress.note(
            f"the clone's A/B does not show the plan improving (geomean {gain}; {why}): "
            "nothing applied to the server (--force applies anyway, under the same guard)"
        )
        _save_summary(out, result, None)
        return result
    progress.step("apply to the server, guarded")
    if not target.yes and not progress.confirm(f"apply {len(planned)} change(s) to the server?"):
        raise UsageError("applying to an existing server needs confirmation", hint="pass --yes")
    done = _apply_and_verify(result, target, server, pc, progress)
    return build.after_apply(done, server, pc, progress) if build is not None else done


def _ab_on_clone(
    req: AccelerateRequest,
    target: ExistingServer,
    plan: Plan,
    pc: PlannedChanges,
    facts: Facts,
    out: Path,
    clone_name: str,
    progress: Progress,
    build: ServerBuildHooks | None = None,
    newer: ServerInstall | None = None,
) -> tuple[Comparison, ScaledPlan, dict[str, Comparison], VersionHeadroom | None]:
    only = plan.model_copy(update={"recommendations": pc.recs})
    made = make_clone(
        CloneRequest(source=target.params, name=clone_name, candidate_memory=plan_memory(only)),
        progress.note,
        disk_hint=DISK_HINT,
    )
    progress.note(f"clone ready in {made.duration_s:.1f} s: {made.record_path}")
    scaled = scale_plan(only, made.record.memory_factor)
    if scaled.scaled:
        progress.note(scaled.describe())
    cand = write_candidate(scaled.plan, facts, out / "tuned.cnf")
    progress.step("interleaved A/B on the clone: the server's configuration vs the plan")
    head = None
    try:
        if build is not None:
            return build.arms(req, clone_name, cand.path, out, progress), scaled, {}, None
        if newer is not None:  # on the clone's copy of the data, never the server's
            head = headroom_for(Sandbox.load(clone_name), newer)
        res = ab_against_base(req, clone_name, cand.path, out, progress, versions=head)
    except UsageError as exc:
        # a dataset refusal on the clone names --cleanup, an option of bench and ab that
        # accelerate does not have (the pre-check cannot see a schema the account may not
        # read): say what accelerate's user can do
        if "--cleanup" not in exc.hint:
            raise
        raise UsageError(
            exc.message, hint=_DATASET_HINT.format(have="the clone's copy of it")
        ) from exc
    return res.comparison, scaled, res.more, head


def _clone_figures(scaled: ScaledPlan) -> str:
    return CLONE_FIGURES + (f" ({scaled.describe()})" if scaled.scaled else "")


def _apply_and_verify(
    result: AccelerateResult,
    target: ExistingServer,
    server: ServerTarget,
    pc: PlannedChanges,
    progress: Progress,
) -> AccelerateResult:
    def record(verdict: Verdict, journal: Path) -> None:
        done = replace(
            result, journal=journal, live=verdict.summary(), figures=[*result.figures, LIVE_FIGURES]
        )
        _save_summary(result.out_dir, done, verdict)

    rollout = guarded_apply(
        result.plan,
        pc,
        server,
        window_s=target.window_s,
        settle_s=target.settle_s,
        say=progress.note,
        record=record,
    )
    return replace(
        result,
        journal=rollout.journal,
        live=rollout.verdict.summary(),
        figures=[*result.figures, LIVE_FIGURES],
    )


def _save_summary(out: Path, result: AccelerateResult, verdict: Verdict | None) -> None:
    cmp = result.comparison
    doc = {
        "clone": {
            "name": result.clone,
            "source": result.figures[0] if result.figures else CLONE_FIGURES,
            "geomean_delta_pct": cmp.geomean_delta_pct,
            "ci_low_pct": cmp.geomean_ci_low_pct,
            "ci_high_pct": cmp.geomean_ci_high_pct,
            "plan_on_clone": result.clone_plan,
        },
        # --versions: advice only, measured on the clone's upgraded copy of the data
        "versions": None if result.versions is None else result.versions.summary(),
        "applied": result.journal is not None,
        "journal": str(result.journal) if result.journal else None,
        "live": None if verdict is None else {**verdict.summary(), "source": LIVE_FIGURES},
    }
    write_text(out / "existing.json", json.dumps(doc, indent=2) + "\n", private=True)
