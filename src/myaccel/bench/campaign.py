"""Measured runs: quietness check, counters and CPU time around sysbench, parsing, validity,
and the run record written to disk as soon as the run ends."""

from __future__ import annotations

import datetime as dt
import resource
import socket
import statistics
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from myaccel.artifacts import Source, read_document, save, schema_of, validate, write_text
from myaccel.bench.profiles import STATEMENTS_PER_EVENT, normalize_workload
from myaccel.bench.records import USABLE_FAILURE_KINDS, FailureKind, Summary, SysbenchOutput
from myaccel.bench.run_record import (
    CAMPAIGN_SCHEMA,
    CampaignIndex,
    RunRecord,
    RunSummary,
    SeriesPoint,
    Validity,
    config_digest,
)
from myaccel.bench.runner import (
    ProgressFn,
    RunSpec,
    execute,
    host_quietness,
    mask_password,
    process_cpu_s,
    run_argv,
)
from myaccel.bench.sysbench_myaccel import describe_threads
from myaccel.bench.sysbench_output import parse_output
from myaccel.bench.work_counters import (
    hit_ratio,
    host_counters,
    others_cpu_s,
    others_warning,
    per_transaction,
    server_counters,
)
from myaccel.errors import MyaccelError, UsageError
from myaccel.model import same_named
from myaccel.server.connection import ConnectParams, connect, query_rows

EventFn = Callable[[str], None]


def new_campaign_id(kind: str) -> str:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{kind}-{uuid.uuid4().hex[:6]}"


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


@dataclass
class BenchContext:
    target: ConnectParams  # the benchmark user
    admin: ConnectParams  # reads variables and status
    out_dir: Path
    campaign_id: str
    host: dict[str, Any]
    server: dict[str, Any]
    dataset: dict[str, Any]
    server_pid: int | None = None
    on_report: ProgressFn | None = None
    on_event: EventFn | None = None
    index: CampaignIndex | None = None
    records: list[RunRecord] = field(default_factory=list)
    # a replay's campaign: what its runs record of it (``bench.replay.replay_info``)
    replay: dict[str, Any] | None = None

    def event(self, msg: str) -> None:
        if self.on_event:
            self.on_event(msg)

    def save_index(self) -> None:
        if self.index is not None:
            save(self.out_dir / "campaign.json", self.index, private=True)


def host_info() -> dict[str, Any]:
    from myaccel.facts.cpu import collect_cpu
    from myaccel.facts.sysroot import Sysroot

    sr = Sysroot("/")
    c = collect_cpu(sr)
    rel = sr.read("/proc/sys/kernel/osrelease")
    return {
        "hostname": socket.gethostname(),
        "cpu_model": c.model.value,
        "arch": c.arch.value,
        "logical_cpus": c.logical_cpus.value,
        "kernel": rel.value,
    }


def server_info(admin: ConnectParams) -> tuple[dict[str, Any], dict[str, str]]:
    from myaccel.server.flavor import parse_server_version

    conn = connect(admin)
    try:
        v, c = query_rows(conn, "SELECT VERSION(), @@version_comment")[0]
        variables = {str(k): str(val) for k, val in query_rows(conn, "SHOW GLOBAL VARIABLES")}
    finally:
        conn.close()
    sv = parse_server_version(str(v), str(c or ""))
    info = {
        "version_string": str(v),
        "flavor": sv.flavor if sv else None,
        "version": sv.text if sv else None,
        "buffer_pool_bytes": int(variables.get("innodb_buffer_pool_size", "0") or 0),
    }
    return info, variables


NOT_THE_WORKLOAD = "not the workload asked for"


def _shape_check(spec: RunSpec, s: RunSummary) -> str | None:
    """Why the run is not the workload asked for, judged by its statements per event
    (``STATEMENTS_PER_EVENT``); None when it is, or when it cannot be judged (options
    passed through, retried errors, another workload)."""
    want = STATEMENTS_PER_EVENT.get(normalize_workload(spec.workload))
    if want is None or spec.extra or s.ignored_errors or s.reconnects or s.transactions < 100:
        return None
    got = s.queries / s.transactions
    # the window's counters are differences taken while transactions run: at each edge up to
    # one transaction per thread is split (its statements on one side, its commit on the
    # other), so a short, slow window may differ by up to threads x want statements in all
    # (in the lab's TCG guest: 137 transactions of 8 threads gave 15.37 where 16 is right)
    edges = spec.threads * want / s.transactions
    if abs(got - want) <= 0.02 * want + edges:
        return None
    return (
        f"the client ran {got:.2f} statements per transaction where {spec.workload} runs "
        f"{want}: {NOT_THE_WORKLOAD}, so the run is left out"
    )


ROW_COUNTERS = ("Handler_write", "Handler_update", "Handler_delete")


def _server_rows(c0: dict[str, int], c1: dict[str, int], transactions: int) -> str:
    """What the server itself changed per transaction during a run the client's count
    flagged (issue 35, defect 3: is the client's count or the workload wrong?)."""
    if transactions <= 0 or not all(k in c0 and k in c1 for k in ROW_COUNTERS):
        return ""
    rows = sum(c1[k] - c0[k] for k in ROW_COUNTERS) / transactions
    return f" (the server changed {rows:.2f} rows per transaction: {ROW_COUNTERS} deltas)"


def ran_another_workload(rec: RunRecord) -> bool:
    """Whether ``rec`` was left out by ``_shape_check`` (its cell is worth running again)."""
    return any(NOT_THE_WORKLOAD in r for r in rec.validity.reasons)


# How a run ends when its server went away under it (restarted, crashed): sysbench exits
# on the lost connection, or with --mysql-ignore-errors reconnects, and Debian's 1.0.20
# then often dies of SIGSEGV (akopytov/sysbench#527; here: exit -11 when a sandbox was
# restarted 4 s into a 12 s run).
LOST_CLIENT_KINDS = frozenset(
    {FailureKind.CRASHED, FailureKind.CONNECTION_LOST, FailureKind.RECONNECTS_PRESENT}
)


def worth_running_again(rec: RunRecord) -> str | None:
    """Why ``rec``'s cell should be measured once more from a fresh start, or None: the
    client ran another workload than asked, or it lost its server mid-run."""
    if ran_another_workload(rec):
        return "was not the workload asked for"
    if rec.validity.failure in LOST_CLIENT_KINDS:
        first = rec.validity.reasons[0] if rec.validity.reasons else rec.validity.failure
        return f"lost its client ({first})"
    return None


def _steady_cv(series: list[SeriesPoint], warmup_s: int) -> float | None:
    vals = [p.tps for p in series if p.t_s > warmup_s]
    if len(vals) > 2:
        vals = vals[:-1]  # the last interval may be partial
    if len(vals) < 3:
        return None
    m = statistics.mean(vals)
    return 100.0 * statistics.stdev(vals) / m if m > 0 else None


def _run_summary(s: Summary) -> RunSummary:
    """sysbench's summary as a run record keeps it (rates over the measured window)."""
    pct = s.percentile
    window = s.window_s or s.total_time_s
    return RunSummary(
        tps=s.transactions_per_s or (s.transactions / window if window else 0.0),
        qps=s.queries_per_s or (s.queries_total / window if window else 0.0),
        reads=s.queries_read,
        writes=s.queries_write,
        other=s.queries_other,
        transactions=s.transactions,
        queries=s.queries_total,
        ignored_errors=s.ignored_errors,
        reconnects=s.reconnects,
        latency_ms_min=s.latency_ms_min,
        latency_ms_avg=s.latency_ms_avg,
        latency_ms_max=s.latency_ms_max,
        latency_ms_p95=s.latency_ms_pct if pct == 95 else None,
        latency_ms_p99=s.latency_ms_pct if pct == 99 else None,
        window_s=window,
    )


def _all_events(parsed: SysbenchOutput) -> int:
    """Transactions in the whole run, warm-up included (the counters around it count the
    warm-up's work too): the interval reports' events, else the summary's count scaled
    from its window to the run's length."""
    events = [i.events for i in parsed.intervals]
    if events and all(e is not None for e in events):
        return sum(e or 0 for e in events)
    s = parsed.summary
    if s is None:
        return 0
    if not s.window_s:
        return s.transactions
    return round(s.transactions * s.total_time_s / s.window_s)


def _cache_check(expect: Any, hit: float | None) -> str | None:
    """Whether the dataset's expected cache behaviour ("cpu-bound": hit >= 99%,
    "io-bound": below) held during the run."""
    if not expect or hit is None:
        return None
    if expect == "cpu-bound":
        return (
            "holds"
            if hit >= 99.0
            else f"violated: buffer pool hit ratio {hit:.2f}% < 99% on a CPU-bound dataset"
        )
    if expect == "io-bound":
        return (
            "holds"
            if hit < 99.0
            else f"violated: buffer pool hit ratio {hit:.2f}% >= 99% on an IO-bound dataset"
        )
    return None


def _replay_part(
    ctx: BenchContext, output: str, parsed: SysbenchOutput, warnings: list[str]
) -> dict[str, Any] | None:
    """A replay's part of the record (``bench.replay``: its pool, and the statements it
    issued per class, errors counted apart), and its warning when statements failed."""
    replay = None
    if ctx.replay is not None:
        from myaccel.bench.replay import replay_counts

        replay = {**ctx.replay, **(replay_counts(output) or {})}
    if replay is not None and "failed" in replay:
        if replay["failed"]:
            warnings.append(
                f"{replay['failed']:,} of {replay['statements']:,} replayed statements failed "
                f"({replay['duplicate_key_errors']:,} on a duplicate key): counted apart, "
                "not retried"
            )
    elif parsed.failure is FailureKind.IGNORED_ERRORS_PRESENT:
        warnings.append("ignored errors were retried: latency and query counts are inflated")
    return replay


def measure_run(
    ctx: BenchContext, spec: RunSpec, *, index: int, arm: str | None = None
) -> RunRecord:
    quiet = host_quietness(1.0)
    variables: dict[str, str] = {}
    # the server as this run finds it: each arm's own (before, every record carried what
    # was read once before the campaign: a candidate's runs showed the baseline's pool)
    server = ctx.server
    try:
        server, variables = server_info(ctx.admin)
    except MyaccelError as exc:
        ctx.event(f"warning: could not read server variables before the run: {exc.message}")
    c0 = server_counters(ctx.admin)
    k0 = host_counters()
    s0 = process_cpu_s(ctx.server_pid)
    h0 = resource.getrusage(resource.RUSAGE_SELF)
    argv, env = run_argv(spec, ctx.target)
    raw = execute(
        argv,
        env,
        timeout_s=spec.total_s + 120,
        on_report=ctx.on_report,
        password=ctx.target.password,
    )
    h1 = resource.getrusage(resource.RUSAGE_SELF)
    s1 = process_cpu_s(ctx.server_pid)
    k1 = host_counters()
    c1 = server_counters(ctx.admin)
    parsed = parse_output(raw.output, exit_code=raw.exit_code)

    out_file = ctx.out_dir / f"run-{index:03d}.out"
    write_text(out_file, raw.output, private=True)

    summary = _run_summary(parsed.summary) if parsed.summary is not None else None
    # A series point is an interval report's fields under the same names.
    series = [SeriesPoint(**same_named(i, SeriesPoint.model_fields)) for i in parsed.intervals]

    reasons: list[str] = []
    warnings: list[str] = []
    if raw.timed_out:
        reasons.append("sysbench did not finish in time and was killed")
    if parsed.failure not in USABLE_FAILURE_KINDS or summary is None:
        reasons.append(
            f"{parsed.failure.value}: "
            + "; ".join(parsed.failure_reasons or ("no usable summary",))
        )
    replay = _replay_part(ctx, raw.output, parsed, warnings)
    err_rate = None
    recon = 0
    if summary is not None:
        denom = summary.transactions + summary.ignored_errors
        err_rate = 100.0 * summary.ignored_errors / denom if denom else 0.0
        recon = summary.reconnects
        if recon > 0:
            reasons.append(f"the client reconnected {recon} time(s)")
        if err_rate > 1.0:
            warnings.append(f"error rate {err_rate:.1f}% of transactions")
        shape = _shape_check(spec, summary)
        if shape:
            reasons.append(
                shape
                + _server_rows(c0, c1, summary.transactions)
                + describe_threads(parsed.threads_ran)
            )
    cv = _steady_cv(series, spec.warmup_s)
    if cv is not None and cv > 25:
        warnings.append(f"throughput not steady: per-second TPS CV {cv:.0f}% after warm-up")

    hit = hit_ratio(c0, c1)
    cache_check = _cache_check(ctx.dataset.get("expect"), hit)
    if cache_check and cache_check != "holds":
        warnings.append(cache_check)

    # Quiet = little CPU use by others in the second before the run. The load average is
    # not used for the verdict: it lags a minute and so counts our own previous run.
    is_quiet = None
    if quiet:
        is_quiet = quiet.get("busy_pct", 0) < 25 and quiet.get("steal_pct", 0) < 5
        if not is_quiet:
            warnings.append(
                f"host busy before the run ({quiet.get('busy_pct', 0):.0f}% CPU in use, steal {quiet.get('steal_pct', 0):.1f}%)"
            )

    harness = (h1.ru_utime - h0.ru_utime) + (h1.ru_stime - h0.ru_stime)
    server_s = s1 - s0 if s0 is not None and s1 is not None else None
    others = others_cpu_s(k0, k1, (server_s or 0.0) + raw.client_cpu_s + harness)
    if busy := others_warning(others, k0, k1):
        warnings.append(busy)
    rec = RunRecord(
        run_id=f"{ctx.campaign_id}/{index:03d}",
        campaign_id=ctx.campaign_id,
        index=index,
        arm=arm,
        workload=spec.workload,
        threads=spec.threads,
        seed=spec.seed,
        spec=asdict(spec),
        command=mask_password(raw.argv),
        started_at=dt.datetime.fromtimestamp(raw.started_at, dt.UTC).isoformat(timespec="seconds"),
        wall_s=round(raw.wall_s, 3),
        host=ctx.host,
        server=server,
        config_digest=config_digest(variables) if variables else None,
        dataset=ctx.dataset,
        summary=summary,
        series=series,
        validity=Validity(
            valid=not reasons,
            reasons=reasons,
            warnings=warnings,
            exit_code=raw.exit_code,
            failure=parsed.failure.value,
            error_rate_pct=err_rate,
            reconnects=recon,
            steady_cv_pct=cv,
            buffer_pool_hit_pct=hit,
            cache_check=cache_check,
            quiet=is_quiet,
            load1=quiet.get("load1"),
            steal_pct=quiet.get("steal_pct"),
            busy_pct_before=quiet.get("busy_pct"),
        ),
        client_cpu_s=round(raw.client_cpu_s, 3),
        server_cpu_s=round(server_s, 3) if server_s is not None else None,
        harness_cpu_s=round(harness, 3),
        others_cpu_s=round(others, 3) if others is not None else None,
        per_txn={
            k: round(v, 4) for k, v in per_transaction(c0, c1, k0, k1, _all_events(parsed)).items()
        },
        output_file=out_file.name,
        replay=replay,
    )
    path = ctx.out_dir / f"run-{index:03d}.json"
    save(path, rec, private=True)
    ctx.records.append(rec)
    if ctx.index is not None:
        ctx.index = ctx.index.model_copy(update={"runs": [*ctx.index.runs, path.name]})
        ctx.save_index()
    return rec


_RUN_HINT = "pass files written by `myaccel bench` or `myaccel ab` of this version"


def load_runs(path: Path) -> list[RunRecord]:
    """Runs from a campaign directory, a campaign.json, or a single run JSON."""
    if path.is_dir():
        files = sorted(path.glob("run-*.json"))
    elif path.is_file():
        files = [path]
    else:
        raise UsageError(
            f"'{path}' does not exist", hint="pass a results directory or a run/campaign JSON file"
        )
    runs: list[RunRecord] = []
    for f in files:
        src = Source(f, "run record", _RUN_HINT, UsageError)
        doc = read_document(src)
        if schema_of(doc) == CAMPAIGN_SCHEMA:
            runs += load_runs(f.parent)
            continue
        runs.append(validate(doc, RunRecord, src))
    if not runs:
        raise UsageError(
            f"no runs found in '{path}'",
            hint="pass a directory written by `myaccel bench` or `myaccel ab`",
        )
    return runs
