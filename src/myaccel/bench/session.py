"""A benchmark session: the results directory and its campaign (new or extended), the
runs of a profile against one server, and what a command reports while they go.

``bench`` is the whole of it; ``ab``, ``accelerate`` and ``profile`` use its pieces."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from myaccel import artifacts, proc
from myaccel.bench.campaign import (
    BenchContext,
    host_info,
    measure_run,
    new_campaign_id,
    now_iso,
    server_info,
    worth_running_again,
)
from myaccel.bench.dataset import ensure_dataset, size_dataset
from myaccel.bench.profiles import Profile
from myaccel.bench.quiet import disturbed_banner, others_load, wait_for_quiet
from myaccel.bench.replay import check_schemas, replay_info
from myaccel.bench.run_record import (
    CampaignIndex,
    QuietGate,
    RunRecord,
    config_digest,
    private_dir,
)
from myaccel.bench.runner import RunSpec, preflight
from myaccel.bench.seeds import fresh_seed_base
from myaccel.bench.workload import Workload
from myaccel.errors import MyaccelError, NoValidRuns, UsageError
from myaccel.paths import myaccel_home
from myaccel.server.connection import ConnectParams


class BenchProgress(Protocol):
    """What a benchmark tells the person waiting for it (the cli draws it)."""

    def note(self, msg: str) -> None:
        """One line of news (a dataset prepared, a server restarted, a warning)."""

    def run_started(self, label: str, total_s: float) -> None:
        """A measured run starts (``label``: its number, arm, workload and threads)."""

    def run_report(self, report: dict[str, Any]) -> None:
        """sysbench's interval report of the current run."""

    def run_finished(self, record: RunRecord) -> None:
        """The current run ended and was recorded."""


def cell_spec(prof: Profile, workload: str, threads: int) -> RunSpec:
    """A run of one cell as the profile defines it; callers ``replace`` the rest (seed,
    client placement, prepared statements)."""
    return RunSpec(
        workload=workload,
        threads=threads,
        duration_s=prof.duration_s,
        warmup_s=prof.warmup_s,
        tables=prof.tables,
        table_size=prof.table_size,
        report_interval_s=prof.report_interval_s,
        rand_type=prof.rand_type,
        extra=tuple(f"--{k}={v}" for k, v in sorted(prof.extra.items())),
    )


@dataclass(frozen=True)
class Resume:
    """An existing campaign of the same dataset and configuration that ``--out`` extends."""

    index: CampaignIndex
    next_run: int  # the number of the first new run file (run-NNN.json)


# profile fields that make runs comparable: a campaign is extended only when they match
_CAMPAIGN_KEYS = ("tables", "table_size", "scale", "duration_s", "warmup_s", "rand_type")


def check_results_dir(
    out_dir: Path | None, *, kind: str, prof: Profile, variables: dict[str, str] | None = None
) -> Resume | None:
    """Check ``--out`` before anything runs: a new or empty directory starts a campaign; a
    directory holding a campaign of the same kind, dataset, run length and server
    configuration is extended (new runs after the last one); anything else is refused, so
    that no run is overwritten and no stale run of another dataset stays beside new ones."""
    if not out_dir:
        return None
    out = Path(out_dir)
    if not out.is_dir() or not any(out.iterdir()):
        return None
    hint = (
        "choose a new directory, or omit --out "
        "(each campaign then gets its own under $MYACCEL_HOME/results)"
    )
    idx_path = out / "campaign.json"
    if not idx_path.is_file():
        raise UsageError(f"--out '{out}' is not empty and holds no myaccel campaign", hint=hint)
    idx = artifacts.load(
        idx_path,
        CampaignIndex,
        what=f"--out '{out}': its campaign.json",
        hint=hint,
        error=UsageError,
    )
    if idx.kind != kind:
        raise UsageError(
            f"--out '{out}' holds a '{idx.kind}' campaign, not a '{kind}' one", hint=hint
        )
    if kind != "bench":
        raise UsageError(
            f"--out '{out}' already holds a campaign ({kind}); it cannot be extended",
            hint=hint,
        )
    want = asdict(prof)
    diffs = [
        f"{k} {idx.profile.get(k)} here {want[k]}"
        for k in _CAMPAIGN_KEYS
        if idx.profile.get(k) != want[k]
    ]
    numbers = [
        int(m.group(1))
        for f in out.glob("run-*.json")
        if (m := re.match(r"run-(\d+)\.json$", f.name))
    ]
    if variables is not None and numbers:
        digest = config_digest(variables)
        last = out / f"run-{max(numbers):03d}.json"
        try:
            old = artifacts.read_json(last).get("config_digest")
        except (OSError, ValueError, AttributeError):
            old = None
        if old is not None and old != digest:
            diffs.append(f"server configuration {old} here {digest}")
    if diffs:
        raise UsageError(
            f"--out '{out}' holds a campaign of another dataset or configuration ({'; '.join(diffs)})",
            hint=hint,
        )
    return Resume(index=idx, next_run=max(numbers, default=0) + 1)


@dataclass(frozen=True)
class CampaignSetup:
    """What a new campaign records about itself besides its runs."""

    kind: str  # bench, ab, profile
    command: list[str]  # the myaccel command line (redacted when recorded)
    expect: str | None = None  # the dataset's cache behaviour (--dataset)
    pid: int | None = None  # the server's, for its CPU time
    arms: dict[str, dict[str, Any]] | None = None
    resume: Resume | None = None  # the campaign of ``check_results_dir`` that runs extend
    out_dir: Path | None = None  # the results directory; None: a new one under results/
    replay: dict[str, Any] | None = None  # a replay's campaign (``bench.replay.replay_info``)


def open_campaign(
    setup: CampaignSetup,
    *,
    bench_p: ConnectParams,
    admin: ConnectParams,
    sinfo: dict[str, Any],
    prof: Profile,
    note: Callable[[str], None],
) -> BenchContext:
    """The results directory, its campaign index and the context runs are measured in."""
    resume = setup.resume
    cid = resume.index.campaign_id if resume is not None else new_campaign_id(setup.kind)
    out = Path(setup.out_dir) if setup.out_dir else myaccel_home() / "results" / cid
    private_dir(out)
    ctx = BenchContext(
        target=bench_p,
        admin=admin,
        out_dir=out,
        campaign_id=cid,
        host=host_info(),
        server=sinfo,
        dataset={
            "tables": prof.tables,
            "table_size": prof.table_size,
            "profile": prof.name,
            "scale": prof.scale,
            "expect": setup.expect,
        },
        server_pid=setup.pid,
        on_event=note,
        replay=setup.replay,
    )
    ctx.index = CampaignIndex(
        campaign_id=cid,
        kind=setup.kind,
        created_at=now_iso(),
        profile=asdict(prof),
        command=list(setup.command),
        arms=setup.arms or {},
    )
    if resume is not None:
        ctx.index = resume.index.model_copy(
            update={
                "finished": False,
                "notes": [
                    *resume.index.notes,
                    f"extended at {now_iso()} from run {resume.next_run:03d}",
                ],
            }
        )
    ctx.save_index()
    return ctx


def quiet_gate(
    ctx: BenchContext, wait_s: float | None, note: Callable[[str], None]
) -> QuietGate | None:
    """The quiet gate before the campaign's first run (``wait_s`` None: none), recorded in
    its campaign.json; the server's own CPU (``ctx.server_pid``) is not other load."""
    if wait_s is None:
        return None
    gate = wait_for_quiet(others_load(ctx.server_pid), wait_s=wait_s, note=note)
    if ctx.index is not None:
        ctx.index = ctx.index.model_copy(update={"quiet_gate": gate})
        ctx.save_index()
    return gate


def campaign_gates(ctx: BenchContext) -> list[QuietGate]:
    """The quiet gate the campaign recorded, if any."""
    return [ctx.index.quiet_gate] if ctx.index and ctx.index.quiet_gate else []


def finish_campaign(ctx: BenchContext) -> None:
    """Mark the campaign complete (reports count the runs of an unfinished one as
    missing)."""
    if ctx.index is not None:
        ctx.index = ctx.index.model_copy(update={"finished": True})
        ctx.save_index()


def local_server_pid(p: ConnectParams) -> int | None:
    """The server's pid when it runs on this machine (from @@pid_file), else None."""
    from myaccel.facts.server import pid_from_file
    from myaccel.server.connection import connect, query_value

    try:
        conn = connect(p)
    except MyaccelError:
        return None
    try:
        pid_file = str(query_value(conn, "SELECT @@pid_file") or "")
    finally:
        conn.close()
    return pid_from_file(pid_file).value


def require_valid_runs(records: list[RunRecord], out: Path, *, what: str = "run") -> None:
    """Fail (``NoValidRuns``, exit 7) when no run in ``records`` is valid: a benchmark that
    measured nothing must not look like a success. The reasons of the first run are named."""
    if any(r.summary is not None and r.validity.valid for r in records):
        return
    reasons = "; ".join(records[0].validity.reasons) if records else "no run was made"
    raise NoValidRuns(
        f"every {what} was invalid ({len(records)} of {len(records)}): {reasons}"[:400],
        hint=f"see the sysbench output in {out}/run-*.out, fix the cause "
        "(the Lua script, --pin-client, the server's limits) and run again",
    )


def replay_ignore_errors(given: str | None, workload: Workload | None) -> str | None:
    """A replay ignores every error by default (captured writes can collide: a duplicate
    key, a lock wait); the runs count them and warn above 1%."""
    return given if given is not None or workload is None else "all"


@dataclass(frozen=True)
class HarnessOptions:
    """How ``bench`` and ``ab`` make their runs: the dataset sized from the buffer pool
    (``cpu-bound``, ``io-bound``; None: the profile's own), the prepared statements mode,
    the CPUs the client is pinned to (a checked list) and whether an existing dataset of
    another size is dropped; how long the quiet gate waits."""

    dataset: str | None = None
    ps_mode: str = "auto"
    pin_client: str | None = None
    cleanup: bool = False
    # the quiet gate before the first run (``quiet.py``): wait at most this long for a
    # quiet host; None: no gate (a tune trial, whose campaign is one of many)
    quiet_wait_s: float | None = None

    def sized(self, profile: Profile, sinfo: Mapping[str, Any]) -> Profile:
        """``profile`` with its dataset sized for the server (``sinfo``: ``server_info``)."""
        return size_dataset(profile, self.dataset, int(sinfo.get("buffer_pool_bytes") or 0))


DEFAULT_HARNESS = HarnessOptions()


@dataclass(frozen=True)
class BenchRequest:
    """Runs of a profile against one server (``myaccel bench``)."""

    bench: ConnectParams  # the benchmark user
    admin: ConnectParams  # reads variables and status, prepares the dataset
    profile: Profile
    command: list[str]
    server_pid: int | None = None
    harness: HarnessOptions = DEFAULT_HARNESS
    ignore_errors: str | None = None
    percentile: int = 95
    seed: int | None = None  # run r's seed is seed + r; None: a fresh base (seeds.py)
    out_dir: Path | None = None
    prepare_only: bool = False
    # a captured workload the profile replays (``bench.replay``): its schemas are checked
    # instead of a sysbench dataset prepared
    workload: Workload | None = None
    replay: dict[str, Any] | None = None  # what its runs record (``replay.replay_info``)


@dataclass(frozen=True)
class BenchResult:
    out_dir: Path
    records: list[RunRecord]
    duration_s: float  # from the dataset check to the last run
    # what the summary leads with when its figures are disturbed (``quiet.py``)
    disturbed: str | None = None


def run_bench(req: BenchRequest, progress: BenchProgress) -> BenchResult | None:
    """Prepare (or verify) the dataset and measure every cell of the profile
    ``runs_per_arm`` times; ``None`` with ``prepare_only``. Runs that are all invalid are
    returned as they are (see ``require_valid_runs``)."""
    proc.require("sysbench")
    sinfo, variables = server_info(req.admin)
    h = req.harness
    prof = h.sized(req.profile, sinfo)
    resume = (
        None
        if req.prepare_only
        else check_results_dir(req.out_dir, kind="bench", prof=prof, variables=variables)
    )
    t_start = time.monotonic()
    specs = [
        replace(
            cell_spec(prof, w, t),
            ps_mode=h.ps_mode,
            ignore_errors=replay_ignore_errors(req.ignore_errors, req.workload),
            client_cpus=h.pin_client,
            percentile=req.percentile,
        )
        for w, t in prof.cells
    ]
    preflight(req.admin, max(specs, key=lambda s: s.threads))
    if req.workload is not None:
        check_schemas(req.admin, req.workload)
    else:
        ensure_dataset(req.admin, req.bench, prof, cleanup=h.cleanup, note=progress.note)
    if req.prepare_only:
        return None
    setup = CampaignSetup(
        kind="bench",
        command=req.command,
        expect=h.dataset,
        pid=req.server_pid,
        resume=resume,
        out_dir=req.out_dir,
        replay=req.replay or (replay_info(req.workload) if req.workload is not None else None),
    )
    ctx = open_campaign(
        setup,
        bench_p=req.bench,
        admin=req.admin,
        sinfo=sinfo,
        prof=prof,
        note=progress.note,
    )
    ctx.on_report = progress.run_report
    gate = quiet_gate(ctx, h.quiet_wait_s, progress.note)
    total = len(specs) * prof.runs_per_arm
    first = resume.next_run if resume is not None else 1
    n = 0
    base = (req.seed if req.seed is not None else fresh_seed_base()) + first - 1
    for r in range(prof.runs_per_arm):
        for spec in specs:
            s = replace(spec, seed=base + r)
            for attempt in range(2):
                n += 1
                progress.run_started(f"[{n}/{total}] {s.workload} {s.threads} thr", s.total_s)
                rec = measure_run(ctx, s, index=first + n - 1)
                progress.run_finished(rec)
                why = worth_running_again(rec)
                if attempt or why is None:
                    break
                # once per run: left out (its record stays, invalid) and run again
                progress.note(f"run {n} {why}: running it again")
                total += 1
    finish_campaign(ctx)
    return BenchResult(
        out_dir=ctx.out_dir,
        records=ctx.records,
        duration_s=time.monotonic() - t_start,
        disturbed=disturbed_banner([gate] if gate else [], ctx.records),
    )
