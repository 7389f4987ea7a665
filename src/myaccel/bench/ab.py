"""Interleaved A/B campaigns on a sandbox: two configurations (or two server builds), one
prepared dataset restored from a snapshot before every write-workload run, arms in ABBA
order, paired seeds, identical client placement. More than two arms (``AbRequest.more``,
e.g. `accelerate --build`: distro defaults, distro + plan, build + plan) run round-robin,
the order rotated every round (A B C, B C A, C A B, ...), each extra comparison
(``ArmPair``) with the same statistics as the main one.

``run`` is the whole of ``myaccel ab`` (and the measuring step of ``accelerate``): the
sandbox made or loaded, the dataset and its snapshot, the interleaved runs, the sandbox
put back on its own configuration whatever happens, and the comparison. Over 600 lines
(604), on purpose: the campaign's loop, its sandbox care and its request are one flow, which
split across modules would pass the same state back and forth (the arms are in arms.py)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from myaccel import proc, signals
from myaccel.artifacts import save
from myaccel.bench.adaptive import AdaptiveOptions, SequentialStop, sequential_comparison

# the arms (bench/arms.py), re-exported through __all__: ab.Arm, ab.make_arm are the A/B's vocabulary
from myaccel.bench.arms import (
    SNAPSHOT,
    Arm,
    DatasetMaker,
    check_arm,
    durability_trades,
    durability_warning,
    make_arm,
)
from myaccel.bench.campaign import BenchContext, measure_run, server_info, worth_running_again
from myaccel.bench.compare import Comparison, compare_runs
from myaccel.bench.dataset import ensure_dataset
from myaccel.bench.instructions import (
    Counting,
    instruction_counts,
    pair_figures,
    with_instructions,
)
from myaccel.bench.profiles import WRITE_WORKLOADS, Profile
from myaccel.bench.replay import check_schemas, replay_info
from myaccel.bench.run_record import QuietGate, RunRecord
from myaccel.bench.runner import RunSpec, connection_args, preflight, run_sysbench
from myaccel.bench.session import (
    DEFAULT_HARNESS,
    BenchProgress,
    CampaignSetup,
    HarnessOptions,
    campaign_gates,
    cell_spec,
    finish_campaign,
    open_campaign,
    quiet_gate,
    replay_ignore_errors,
    require_valid_runs,
)
from myaccel.bench.workload import Workload
from myaccel.errors import MyaccelError, UsageError
from myaccel.owner import ProcessOwner
from myaccel.server.connection import ConnectParams
from myaccel.server.sandbox import Sandbox
from myaccel.server.sandbox.layout import validate_name
from myaccel.server.sandbox.redo_files import densify_redo


def abba_order(rounds: int) -> list[str]:
    """A B B A A B B A ...: each arm equally often first, drift cancels to first order."""
    return interleaved_order(["baseline", "candidate"], rounds)


def interleaved_order(names: Sequence[str], rounds: int) -> list[str]:
    """Round-robin with the order rotated every round: A B C, B C A, C A B, A B C, ...
    Every arm is first (and last) equally often over ``len(names)`` rounds; for two arms
    this is A B B A."""
    n = len(names)
    order: list[str] = []
    for r in range(rounds):
        k = r % n
        order += [*names[k:], *names[:k]]
    return order


def prewarm(sb: Sandbox, prof: Profile) -> None:
    """Load the dataset into the buffer pool after a restart (sysbench's prewarm command),
    so that both arms start every visit from a warm cache."""
    sysbench = proc.require("sysbench")
    target = sb.bench_params(tcp=False)
    argv = [
        sysbench,
        "oltp_common",
        *connection_args(target),
        "--mysql-db=sbtest",
        f"--tables={prof.tables}",
        f"--table-size={prof.table_size}",
        f"--threads={min(prof.tables, 2)}",
        "prewarm",
    ]
    run_sysbench(argv, target.password, timeout_s=600)


@dataclass
class AbPlan:
    sandbox: Sandbox
    profile: Profile
    arms: dict[str, Arm]
    seed_base: int = 1000
    ps_mode: str = "auto"
    client_cpus: str | None = None
    on_event: Callable[[str], None] | None = None
    prewarm: bool = True  # sysbench's prewarm of the sbtest dataset after each restart
    ignore_errors: str | None = None
    # after each round (every arm once per cell): a reason to stop adding rounds, or None
    stop: Callable[[list[RunRecord]], str | None] | None = None
    # whether a cell (workload, threads) has its verdict: its runs stop, the others go on
    decided: Callable[[tuple[str, int]], bool] | None = None
    quiet_wait_s: float | None = None  # the quiet gate before the first run (quiet.py)

    def event(self, msg: str) -> None:
        if self.on_event:
            self.on_event(msg)


def run_campaign(
    plan: AbPlan,
    ctx: BenchContext,
    *,
    before_run: Callable[[int, int, RunSpec, str], None] | None = None,
    after_run: Callable[[RunRecord], None] | None = None,
) -> list[RunRecord]:
    sb, prof = plan.sandbox, plan.profile
    snaps: dict[str, str] = {}
    if any(is_write(w) for w, _ in prof.cells) or own_data(plan.arms):
        snaps = arm_snapshots(sb, plan.arms, plan.event)
    try:
        # the server is stopped here: all the CPU in use is other processes'
        quiet_gate(ctx, plan.quiet_wait_s, plan.event)
        return _interleaved_runs(plan, ctx, snaps, before_run=before_run, after_run=after_run)
    finally:
        for snap in snaps.values():
            with contextlib.suppress(MyaccelError):
                sb.snapshot_delete(snap)


def is_write(workload: str) -> bool:
    """Whether runs of ``workload`` change the data (each then restores its snapshot)."""
    return workload in WRITE_WORKLOADS or workload.endswith(".lua")


def own_data(arms: dict[str, Arm]) -> bool:
    """Whether some arm runs on data of its own: then every arm restores its snapshot when
    the data on disk is another arm's, read-only runs too."""
    return any(a.dataset is not None for a in arms.values())


def arm_snapshots(sb: Sandbox, arms: dict[str, Arm], note: Callable[[str], None]) -> dict[str, str]:
    """Per arm, the dataset snapshot as the arm's server leaves it: started once on the
    arm's options (a redo log of another size is created then), stopped cleanly, its redo
    log files made dense as on a server that has run a while (`redo_files.py`). Write
    runs restore their arm's snapshot, so every run of every arm writes into a redo log
    of the same kind; before, the arm whose redo size matched the dataset snapshot's ran
    on a copied log and the other on one its server had just created."""
    out: dict[str, str] = {}
    for i, (name, arm) in enumerate(arms.items()):
        snap = f"{SNAPSHOT}-arm{i}"
        sb.stop()
        sb.snapshot_restore(arm.data)
        sb.start(arm.options(), wrapper=arm.launch, owner=arm_owner())
        sb.stop()
        written = densify_redo(sb.datadir)
        if any(s.name == snap for s in sb.snapshot_list()):
            sb.snapshot_delete(snap)
        sb.snapshot_save(snap)
        out[name] = snap
        note(
            f"{name}: dataset snapshot with the arm's redo log saved "
            f"({written / 2**20:,.0f} MiB written to make the log dense)"
        )
    return out


def _interleaved_runs(
    plan: AbPlan,
    ctx: BenchContext,
    snaps: dict[str, str],
    *,
    before_run: Callable[[int, int, RunSpec, str], None] | None,
    after_run: Callable[[RunRecord], None] | None,
) -> list[RunRecord]:
    sb, prof = plan.sandbox, plan.profile
    current: tuple[Any, ...] | None = None
    names = list(plan.arms)
    total = prof.runs_per_arm * len(names) * len(prof.cells)
    n = 0
    order = interleaved_order(names, prof.runs_per_arm)
    on_disk = plan.arms[names[-1]].data if snaps else None  # arm_snapshots' last copy
    for visit, arm_name in enumerate(order):
        arm = plan.arms[arm_name]
        rnd = visit // len(names)
        for w, t in prof.cells:
            if plan.decided is not None and plan.decided((w, t)):
                continue
            spec = replace(
                cell_spec(prof, w, t),
                seed=plan.seed_base + rnd,  # paired: all arms of a round share the seed
                ps_mode=plan.ps_mode,
                client_cpus=plan.client_cpus,
                ignore_errors=plan.ignore_errors,
            )
            writes = is_write(w)
            for attempt in range(2):
                # another arm's data (an upgraded copy) is restored for read-only runs too
                restore = writes or (bool(snaps) and on_disk != arm.data)
                if restore or current != arm.key():
                    sb.stop()
                    if restore:
                        sb.snapshot_restore(snaps[arm_name])
                        on_disk = arm.data
                    sb.start(arm.options(), wrapper=arm.launch, owner=arm_owner())
                    current = arm.key()
                    ctx.server_pid = sb.pid
                    if plan.prewarm:
                        prewarm(sb, prof)
                n += 1
                if before_run:
                    before_run(n, total, spec, arm_name)
                rec = measure_run(ctx, replace(spec), index=n, arm=arm_name)
                if after_run:
                    after_run(rec)
                why = worth_running_again(rec)
                if attempt or why is None:
                    break
                # once per cell: sysbench now and then runs fewer statements per
                # transaction for a whole run (docs/benchmarking.md), or loses its server
                # mid-run; the run is left out and the cell measured again from a fresh start
                plan.event(f"run {n} {why}: running it again")
                total += 1
                current = None
        at_round_end = (visit + 1) % len(names) == 0
        if plan.stop is not None and at_round_end and (stop_why := plan.stop(ctx.records)):
            plan.event(f"stopping after round {(visit + 1) // len(names)}: {stop_why}")
            break
    return ctx.records


def sandbox_needs_creation(name: str, *, create: bool, explicit: bool) -> bool:
    """Whether sandbox ``name`` must be created, checked before anything changes: a name
    that was given (``--sandbox``) and does not exist is refused unless ``--create`` says
    to make it, so a typo never creates a sandbox and starts a long benchmark."""
    validate_name(name)
    if Sandbox.exists(name):
        return False
    if explicit and not create:
        names = [sb.name for sb in Sandbox.list_all()]
        have = f"sandboxes here: {', '.join(names)}" if names else "there is no sandbox yet"
        raise UsageError(
            f"no sandbox named '{name}' ({have})",
            hint="pass --create to make it with the distribution's defaults, "
            "or --sandbox with one of the existing names (myaccel sandbox list)",
        )
    return True


def open_sandbox(
    name: str, *, create: bool, basedir: Path | None, note: Callable[[str], None]
) -> Sandbox:
    """Sandbox ``name``, made with the distribution's defaults when ``create`` (see
    ``sandbox_needs_creation``), else loaded: once per command, then passed on."""
    if create:
        note(f"creating sandbox '{name}' with the distribution's default configuration")
        return Sandbox.init(name, basedir=basedir, progress=note)
    return Sandbox.load(name)


def arm_owner() -> ProcessOwner:
    """This process, as the owner of an arm's configuration on the sandbox: if it is
    killed (SIGKILL) before ``restore_base_config``, the next myaccel command puts the
    sandbox back on its base configuration (``myaccel.cli.repair``)."""
    return ProcessOwner.this_process("an A/B")


def restore_base_data(
    sb: Sandbox, made: Sequence[DatasetMaker], note: Callable[[str], None]
) -> None:
    """After a campaign with arms on data of their own (an upgraded copy the sandbox's
    server refuses): the campaign's dataset back in the datadir, those copies deleted."""
    with signals.shielded():
        sb.stop()
        names = {s.name for s in sb.snapshot_list()}
        if SNAPSHOT in names:
            sb.snapshot_restore(SNAPSHOT)
            note("the sandbox's datadir is back on the dataset snapshot (its own version's)")
        for m in made:
            if m.snapshot in names:
                sb.snapshot_delete(m.snapshot)


def restore_base_config(sb: Sandbox, note: Callable[[str], None]) -> None:
    """Put the sandbox back on its own (base) configuration, signals held meanwhile."""
    with signals.shielded():
        sb.stop()
        sb.start(progress=note)


def require_valid_arms(records: list[RunRecord], out: Path) -> None:
    """An A/B with an arm that has no valid run measured nothing: fail with exit 7."""
    for arm in dict.fromkeys(r.arm for r in records if r.arm):
        runs = [r for r in records if r.arm == arm]
        if runs and not any(r.summary is not None and r.validity.valid for r in runs):
            require_valid_runs(runs, out, what=f"{arm} run")


@dataclass(frozen=True)
class ArmPair:
    """An extra comparison of a campaign with more than two arms, saved as
    ``comparison-<name>.json`` next to the main ``comparison.json``."""

    name: str  # file name part: comparison-<name>.json
    baseline: str  # arm names
    candidate: str
    baseline_label: str
    candidate_label: str


@dataclass(frozen=True)
class AbRequest:
    """An interleaved A/B of two arms on a sandbox (``myaccel ab``); ``more`` arms join the
    round-robin, compared as ``pairs`` say."""

    sandbox: str
    profile: Profile
    baseline: Arm
    candidate: Arm
    command: list[str]
    create: bool = False  # make the sandbox first (``sandbox_needs_creation``)
    harness: HarnessOptions = DEFAULT_HARNESS
    out_dir: Path | None = None
    candidate_label: str = "candidate"
    workload: Workload | None = None  # a captured workload the profile replays
    replay: dict[str, Any] | None = None  # what its runs record (``replay.replay_info``)
    baseline_label: str = "baseline"
    more: tuple[Arm, ...] = ()  # further arms, by their own names
    pairs: tuple[ArmPair, ...] = ()  # comparisons beyond baseline vs candidate
    adaptive: AdaptiveOptions | None = None  # rounds until a sequential decision (adaptive.py)
    # --instructions: each arm's instructions per transaction, beside TPS (instructions.py)
    instructions: Counting | None = None
    datasets: tuple[DatasetMaker, ...] = ()  # arms' own copies of the data (Arm.dataset)

    @property
    def arms(self) -> dict[str, Arm]:
        return {"baseline": self.baseline, "candidate": self.candidate} | {
            a.name: a for a in self.more
        }


@dataclass(frozen=True)
class AbResult:
    comparison: Comparison  # also written to OUT/comparison.json
    records: list[RunRecord]
    out_dir: Path
    manifests: list[Path]  # the build manifest of each arm's --*-basedir, when there is one
    started_s: float  # time.monotonic() when the A/B started
    more: dict[str, Comparison] = field(default_factory=dict)  # ArmPair.name -> comparison


def arm_manifests(arms: Sequence[Arm]) -> list[Path]:
    """Builds of `myaccel build` keep their manifest next to the install tree
    (OUT/install, OUT/manifest.json): reports show each arm's flags beside the gain."""
    return list(
        dict.fromkeys(
            m
            for a in arms
            if a.basedir is not None
            and (m := a.basedir.resolve().parent / "manifest.json").is_file()
        )
    )


def run(req: AbRequest, progress: BenchProgress, sandbox: Sandbox | None = None) -> AbResult:
    """The A/B of ``req``; the sandbox ends on its own configuration, whatever happens
    (an error, Ctrl-C, SIGTERM), never on a candidate's. Arms without a valid run are
    returned as they are (see ``require_valid_arms``). ``sandbox``: ``req.sandbox``
    already made or loaded by the caller (else made or loaded here, ``req.create``)."""
    started_s = time.monotonic()
    prof = req.profile
    if prof.runs_per_arm < 3:
        progress.note(
            f"warning: {prof.runs_per_arm} run(s) per arm cannot give a verdict; 5 is the default"
        )
    if req.baseline.key() == req.candidate.key():
        progress.note("note: both arms have the same configuration (an A/A comparison)")
    for a in req.more:
        check_arm(a)
        if a.name in ("baseline", "candidate"):
            raise UsageError(f"arm name '{a.name}' is taken", hint="name extra arms otherwise")
    sb = (
        sandbox
        if sandbox is not None
        else open_sandbox(
            req.sandbox, create=req.create, basedir=req.baseline.basedir, note=progress.note
        )
    )
    stop = SequentialStop(req.adaptive, req.profile.cells) if req.adaptive is not None else None
    try:
        ctx = _measure(sb, req, progress, stop)
    finally:
        if req.datasets:
            restore_base_data(sb, req.datasets, progress.note)
        restore_base_config(sb, progress.note)
    finish_campaign(ctx)
    records = ctx.records
    main = ArmPair("", "baseline", "candidate", req.baseline_label, req.candidate_label)
    gates = campaign_gates(ctx)
    cmp = compare_pair(records, req.arms, main, gates)
    if stop is not None:
        cmp = sequential_comparison(cmp, stop)
    counts = (
        instruction_counts(
            sb,
            req.arms,
            req.profile.workloads,
            req.instructions,
            ctx.out_dir / "instructions",
            progress.note,
        )
        # never on arms with data of their own: a newer server would upgrade the data on disk
        if req.instructions is not None and not own_data(req.arms)
        else {}
    )
    tool = req.instructions.tool if req.instructions is not None else ""
    if counts:
        cmp = with_instructions(cmp, *pair_figures(counts, req.arms, "baseline", "candidate", tool))
    save(ctx.out_dir / "comparison.json", cmp, private=True)
    more: dict[str, Comparison] = {}
    for pair in req.pairs:
        more[pair.name] = compare_pair(records, req.arms, pair, gates)
        if counts:
            figures = pair_figures(counts, req.arms, pair.baseline, pair.candidate, tool)
            more[pair.name] = with_instructions(more[pair.name], *figures)
        save(ctx.out_dir / f"comparison-{pair.name}.json", more[pair.name], private=True)
    return AbResult(
        comparison=cmp,
        records=records,
        out_dir=ctx.out_dir,
        manifests=arm_manifests(list(req.arms.values())),
        started_s=started_s,
        more=more,
    )


def compare_pair(
    records: Sequence[RunRecord],
    arms: dict[str, Arm],
    pair: ArmPair,
    gates: Sequence[QuietGate] = (),
) -> Comparison:
    """One comparison of two arms of the campaign (builds may differ in server version
    strings when their basedirs differ); ``gates``: the campaign's quiet gate."""
    cmp = compare_runs(
        [r for r in records if r.arm == pair.baseline],
        [r for r in records if r.arm == pair.candidate],
        allow_server_difference=arms[pair.baseline].basedir != arms[pair.candidate].basedir,
        baseline_label=pair.baseline_label,
        candidate_label=pair.candidate_label,
        gates=gates,
    )
    trades = [
        w
        for name, label in (
            (pair.baseline, pair.baseline_label),
            (pair.candidate, pair.candidate_label),
        )
        if (w := durability_warning(label, durability_trades(arms[name]))) is not None
    ]
    if not trades:
        return cmp
    return cmp.model_copy(update={"warnings": [*cmp.warnings, *trades]})


@dataclass(frozen=True)
class Prepared:
    """A sandbox ready for interleaved runs: connections, server info, the sized profile;
    the dataset is saved in the ``SNAPSHOT`` snapshot and the server is stopped."""

    admin: ConnectParams
    bench: ConnectParams
    sinfo: dict[str, Any]
    profile: Profile
    workload: Workload | None = None  # a captured workload the profile replays


def prepare_snapshot(
    sb: Sandbox,
    profile: Profile,
    baseline: Arm,
    *,
    harness: HarnessOptions = DEFAULT_HARNESS,
    workload: Workload | None = None,
    note: Callable[[str], None],
) -> Prepared:
    """Start ``sb`` on the baseline arm, size and check the dataset (or the schemas a
    captured ``workload`` needs), prepare it and save it as the ``SNAPSHOT`` snapshot that
    write workloads restore before every run."""
    sb.stop()
    sb.start(baseline.options(), progress=note, owner=arm_owner())
    admin, bench_p = sb.connect_params(), sb.bench_params(tcp=False)
    if workload is not None:
        bench_p = admin  # the benchmark user has rights on sbtest only
    sinfo, _ = server_info(admin)
    prof = harness.sized(profile, sinfo)
    biggest = cell_spec(prof, prof.workloads[0], max(prof.threads))
    preflight(admin, replace(biggest, duration_s=1, warmup_s=0, ps_mode=harness.ps_mode))
    if workload is not None:
        check_schemas(admin, workload)
    else:
        ensure_dataset(admin, bench_p, prof, cleanup=harness.cleanup, note=note)
    sb.stop()
    if any(s.name == SNAPSHOT for s in sb.snapshot_list()):
        sb.snapshot_delete(SNAPSHOT)
    sb.snapshot_save(SNAPSHOT)
    note("dataset snapshot saved; write workloads start from it in every run")
    return Prepared(admin=admin, bench=bench_p, sinfo=sinfo, profile=prof, workload=workload)


def _measure(
    sb: Sandbox, req: AbRequest, progress: BenchProgress, stop: SequentialStop | None = None
) -> BenchContext:
    """Dataset, snapshot and the interleaved runs; the caller restores the sandbox."""
    h = req.harness
    ready = prepare_snapshot(
        sb, req.profile, req.baseline, harness=h, workload=req.workload, note=progress.note
    )
    for maker in req.datasets:
        maker.make(sb, SNAPSHOT, progress.note)
    setup = CampaignSetup(
        kind="ab",
        command=req.command,
        expect=h.dataset,
        arms={k: a.describe() for k, a in req.arms.items()},
        out_dir=req.out_dir,
        replay=req.replay or (replay_info(req.workload) if req.workload is not None else None),
    )
    return interleave(sb, ready, req.arms, setup=setup, progress=progress, harness=h, stop=stop)


def interleave(
    sb: Sandbox,
    ready: Prepared,
    arms: dict[str, Arm],
    *,
    setup: CampaignSetup,
    progress: BenchProgress,
    harness: HarnessOptions = DEFAULT_HARNESS,
    stop: SequentialStop | None = None,
) -> BenchContext:
    """One campaign (``ready.profile.runs_per_arm`` runs per arm and cell) of the two
    ``arms`` in ABBA order on the prepared sandbox, recorded in ``setup.out_dir``."""
    note = progress.note
    ctx = open_campaign(
        setup,
        bench_p=ready.bench,
        admin=ready.admin,
        sinfo=ready.sinfo,
        prof=ready.profile,
        note=note,
    )
    ctx.on_report = progress.run_report
    plan = AbPlan(
        sandbox=sb,
        profile=ready.profile,
        arms=arms,
        ps_mode=harness.ps_mode,
        client_cpus=harness.pin_client,
        on_event=note,
        prewarm=ready.workload is None,
        ignore_errors=replay_ignore_errors(None, ready.workload),
        stop=stop,
        decided=stop.decided if stop is not None else None,
        quiet_wait_s=harness.quiet_wait_s,
    )

    def before(n: int, total: int, spec: RunSpec, arm: str) -> None:
        progress.run_started(
            f"[{n}/{total}] {arm:9s} {spec.workload} {spec.threads} thr", spec.total_s
        )

    run_campaign(plan, ctx, before_run=before, after_run=progress.run_finished)
    return ctx


__all__ = [
    "SNAPSHOT",
    "Arm",
    "DatasetMaker",
    "check_arm",
    "durability_trades",
    "durability_warning",
    "make_arm",
]
