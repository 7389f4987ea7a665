"""`accelerate` on a sandbox: its base configuration against the plan's server layer
(``tuned.cnf``), interleaved A B B A with the dataset restored from a snapshot. With a
captured workload (``--workload-file``) the A/B replays it; with ``--allow-ddl`` the sandbox
gets the touched schemas from the DDL the capture stored when it lacks them.

With ``--build`` (``build_arm``) a third arm joins the same campaign, round-robin: the
PGO+LTO build of the sandbox's server version with the plan; the comparisons are distro +
plan and build + plan against distro defaults (``comparison.json``,
``comparison-build.json``) and build + plan against distro + plan
(``comparison-build-vs-plan.json``). ``--swap-binary`` then points the sandbox at the
build as a journaled change (``sandbox:NAME/basedir``; `myaccel rollback` undoes it)."""

from __future__ import annotations

from pathlib import Path

from myaccel.accelerate.build_arm import BuiltServer, ensure_build
from myaccel.accelerate.candidate import write_candidate
from myaccel.accelerate.common import probe_and_plan
from myaccel.accelerate.dataset_check import dataset_conflict
from myaccel.accelerate.request import (
    AccelerateRequest,
    AccelerateResult,
    Progress,
    SandboxTarget,
)
from myaccel.accelerate.versions import (
    VersionHeadroom,
    headroom_for,
    next_version,
    sandbox_version,
    save_headroom,
    version_arms,
)
from myaccel.bench import ab
from myaccel.bench.replay import create_schemas
from myaccel.bench.session import HarnessOptions
from myaccel.errors import UsageError
from myaccel.server.sandbox import Sandbox, ServerInstall, find_server


def _dataset_hint(name: str) -> str:
    return (
        f"accelerate never drops a dataset: choose --profile/--scale to match the one in "
        f"sandbox '{name}', or drop it first with `myaccel bench --sandbox {name} --cleanup` "
        "(with the same --profile/--scale)"
    )


def run_on_sandbox(
    req: AccelerateRequest, target: SandboxTarget, progress: Progress
) -> AccelerateResult:
    name = target.name
    create = ab.sandbox_needs_creation(name, create=target.create, explicit=target.explicit)
    newer = _newer_version(name, create, target.basedir) if req.versions else None
    # made or loaded once here, then passed on (the A/B, the swap)
    sb = ab.open_sandbox(name, create=create, basedir=target.basedir, note=progress.note)
    if not create and req.workload is None and sb.is_running():
        # before anything is restarted, probed or written
        conflict = dataset_conflict(sb.connect_params(), req.profile.tables, req.profile.table_size)
        if conflict is not None:
            raise UsageError(conflict.message, hint=_dataset_hint(name))
    if not create:
        if target.basedir is not None:
            progress.note(f"sandbox '{name}' exists: it keeps its server ({sb.binary_path})")
        ab.restore_base_config(sb, progress.note)  # its own (base) configuration
    if req.workload is not None:
        made = create_schemas(sb.connect_params(), req.workload, allow_ddl=req.allow_ddl)
        if made:
            progress.note(
                f"created schema(s) {', '.join(made)} from the capture's DDL (empty tables: "
                "load a dump first for reads that find rows)"
            )
    built = None
    if req.build is not None:
        progress.step("optimized build (PGO+LTO) of the sandbox's server version")
        built = ensure_build(req.build, sb.binary_path, progress.note)
        if Path(sb.state.basedir).resolve() == built.install.resolve():
            raise UsageError(
                f"sandbox '{name}' already runs the build {built.install}",
                hint="undo the earlier --swap-binary with `myaccel rollback` first",
            )
    progress.note("probing the machine, the server and its binary")
    facts, plan, out = probe_and_plan(req, sb.connect_params(), progress.note)
    cand = write_candidate(plan, facts, out / "tuned.cnf")
    if not cand.applied:
        raise UsageError(
            "the plan has no server change to measure on this sandbox",
            hint=f"see {out / 'plan.json'} (everything may already be tuned)",
        )
    progress.note(
        f"plan: {len(cand.applied)} server change(s) to measure, {len(cand.not_applied)} not applied here (see report)"
    )
    for r in cand.applied:
        progress.note(f"  {r.id}: {r.target} {r.current} -> {r.proposed}")
    head = headroom_for(sb, newer) if newer is not None else None
    try:
        result = ab_against_base(req, sb, cand.path, out, progress, built=built, versions=head)
    except UsageError as exc:
        if "--cleanup" not in exc.hint:  # bench's option: accelerate has none
            raise
        raise UsageError(exc.message, hint=_dataset_hint(name)) from exc
    journal = None
    if built is not None and req.build is not None and req.build.swap_binary:
        journal = swap_binary(sb, built, plan.created_at, plan.facts_digest, progress)
    return AccelerateResult(
        out_dir=out,
        facts=facts,
        plan=plan,
        comparison=result.comparison,
        candidate=cand,
        journal=journal,
        more=result.more,
        build=built,
        versions=head,
    )


def _newer_version(name: str, create: bool, basedir: Path | None) -> ServerInstall:
    """``--versions``: the next release line installed here, found before the sandbox is
    made or anything runs (a ``ToolMissing`` with the install hint when there is none)."""
    if create:
        install = find_server(basedir)
        return next_version(install.flavor, install.version)
    sb = Sandbox.load(name)
    return next_version(sb.state.flavor, sandbox_version(sb))


def ab_against_base(
    req: AccelerateRequest,
    sandbox: Sandbox | str,
    candidate: Path,
    out: Path,
    progress: Progress,
    *,
    built: BuiltServer | None = None,
    versions: VersionHeadroom | None = None,
) -> ab.AbResult:
    """The interleaved A/B of ``accelerate``: the sandbox's base configuration against the
    ``candidate`` option file (and, with ``built``, the build with it as a third arm), in
    ``out/ab``; arms without a valid run raise. ``sandbox``: loaded already, or its name."""
    sb = None if isinstance(sandbox, str) else sandbox
    abreq = ab.AbRequest(
        sandbox=sandbox if isinstance(sandbox, str) else sandbox.name,
        profile=req.profile,
        baseline=ab.make_arm("baseline", None, (), None),
        candidate=ab.make_arm("candidate", str(candidate), (), None),
        command=req.command,
        out_dir=out / "ab",
        candidate_label="tuned",
        workload=req.workload,
        adaptive=req.adaptive,
        instructions=req.instructions,
        harness=HarnessOptions(quiet_wait_s=req.quiet_wait_s),
    )
    if built is not None:
        abreq = three_arms(abreq, built)
        progress.step("three arms, interleaved: distro defaults, distro + plan, build + plan")
    if versions is not None:
        abreq = version_arms(abreq, versions)
        save_headroom(out, versions)
        for line in versions.advice():
            progress.note(f"version: {line}")
        c, n = versions.current_label, versions.newer_label
        progress.step(f"four arms, interleaved: {c} as is, {c} + plan, {n} as is, {n} + plan")
    result = ab.run(abreq, progress, sandbox=sb)
    progress.ab_done(result)
    ab.require_valid_arms(result.records, result.out_dir)
    return result


BUILD_ARM = "build"


def three_arms(abreq: ab.AbRequest, built: BuiltServer) -> ab.AbRequest:
    """The A/B of ``abreq`` with the build + plan arm and its two comparisons."""
    from dataclasses import replace

    assert abreq.candidate.config is not None
    arm = ab.Arm(BUILD_ARM, config=abreq.candidate.config, basedir=built.install)
    d, p, b = "distro defaults", "distro + plan", "build + plan"
    return replace(
        abreq,
        baseline_label=d,
        candidate_label=p,
        more=(arm,),
        pairs=(
            ab.ArmPair("build", "baseline", BUILD_ARM, d, b),
            ab.ArmPair("build-vs-plan", "candidate", BUILD_ARM, p, b),
        ),
    )


def swap_binary(
    sb: Sandbox, built: BuiltServer, plan_id: str, facts_digest: str, progress: Progress
) -> Path:
    """Point the sandbox at the build, journaled (`myaccel rollback` puts it back), and
    restart it on its base configuration with the new binary."""
    from myaccel.actions.protocol import apply_with_restart
    from myaccel.actions.settings import setting_for
    from myaccel.actions.target import UnmanagedServer

    setting = setting_for(f"sandbox:{sb.name}/basedir")
    res = apply_with_restart(
        # the journal records no server, as it always did for this swap: `myaccel
        # rollback` puts the basedir back without a restart or a health check
        UnmanagedServer(),
        [(setting, str(built.install))],
        restart=False,  # the restart below is on the base configuration, not journaled
        note=progress.note,
        plan_id=plan_id,
        facts_digest=facts_digest,
    )
    progress.note(
        f"sandbox '{sb.name}' now runs {built.install} (journal {res.journal_path}; "
        "undo with: myaccel rollback)"
    )
    ab.restore_base_config(sb, progress.note)
    return Path(res.journal_path or "")
