"""`myaccel bench`: sysbench runs against a sandbox or an existing server."""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import click

from myaccel import proc
from myaccel.bench.campaign import (
    BenchContext,
    host_info,
    measure_run,
    new_campaign_id,
    now_iso,
    server_info,
)
from myaccel.bench.profiles import Profile, get_profile, normalize_workload
from myaccel.bench.run_record import CampaignIndex, RunRecord, config_digest, private_dir
from myaccel.bench.runner import (
    ROW_BYTES,
    RunSpec,
    cleanup_dataset,
    preflight,
    prepare_dataset,
    verify_dataset,
)
from myaccel.cli import ranges
from myaccel.cli.common import connection_options, server_options
from myaccel.cli.progress import RunProgress, note
from myaccel.errors import NoValidRuns, UsageError
from myaccel.paths import myaccel_home
from myaccel.server.connection import ConnectionOptions, ConnectParams, resolve


def parse_threads(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    try:
        vals = tuple(int(x) for x in text.replace(" ", "").split(",") if x)
    except ValueError:
        raise UsageError(
            f"--threads '{text}' is not a list of numbers", hint="e.g. --threads 1,8,32"
        ) from None
    if not vals or any(not 1 <= v <= ranges.MAX_THREADS for v in vals):
        raise UsageError(
            f"--threads '{text}' must list positive numbers (at most {ranges.MAX_THREADS:,})",
            hint="e.g. --threads 1,8,32",
        )
    return vals


def parse_cpu_list(text: str) -> list[int]:
    """The CPUs of a taskset-style list (``1``, ``2-3``, ``0,2-3``), or ValueError."""
    cpus: list[int] = []
    for part in text.replace(" ", "").split(","):
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(part)
        a, b = int(lo), int(hi) if sep else int(lo)
        if b < a:
            raise ValueError(part)
        cpus.extend(range(a, b + 1))
    return cpus


def check_pin_client(text: str | None) -> str | None:
    """``--pin-client`` checked before anything runs: a CPU list of CPUs this process may
    use (a wrong one used to make every run fail inside taskset, and bench exit 0)."""
    if text is None:
        return None
    allowed = sorted(os.sched_getaffinity(0))
    hint = f"pass CPUs this machine has (allowed here: {format_cpu_list(allowed)}), e.g. --pin-client {allowed[-1]}"
    try:
        cpus = parse_cpu_list(text)
    except ValueError:
        raise UsageError(f"--pin-client '{text}' is not a CPU list", hint=hint) from None
    missing = sorted(set(cpus) - set(allowed))
    if missing:
        raise UsageError(
            f"--pin-client '{text}': CPU {format_cpu_list(missing)} is not available to this process",
            hint=hint,
        )
    return text.replace(" ", "")


def format_cpu_list(cpus: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``0-2,5``."""
    out: list[str] = []
    for c in sorted(set(cpus)):
        if out and c == int(out[-1].split("-")[-1]) + 1:
            out[-1] = f"{out[-1].split('-')[0]}-{c}"
        else:
            out.append(str(c))
    return ",".join(out)


@dataclass(frozen=True)
class Resume:
    """An existing campaign of the same dataset and configuration that ``--out`` extends."""

    index: CampaignIndex
    next_run: int  # the number of the first new run file (run-NNN.json)


# profile fields that make runs comparable: a campaign is extended only when they match
_CAMPAIGN_KEYS = ("tables", "table_size", "scale", "duration_s", "warmup_s", "rand_type")


def check_results_dir(
    out_dir: str | None, *, kind: str, prof: Profile, variables: dict[str, str] | None = None
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
    try:
        idx = CampaignIndex.model_validate_json(idx_path.read_text())
    except (OSError, ValueError):
        raise UsageError(f"--out '{out}': its campaign.json is not readable", hint=hint) from None
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
            old = json.loads(last.read_text()).get("config_digest")
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


def targets(conn: ConnectionOptions) -> tuple[ConnectParams, ConnectParams, int | None]:
    """(benchmark user, admin, server pid) for a sandbox or an existing server."""
    if conn.sandbox is not None:
        from myaccel.server.sandbox import Sandbox

        sb = Sandbox.load(conn.sandbox)
        return sb.bench_params(tcp=False), sb.connect_params(), sb.pid
    p = resolve(conn)
    return p, p, _local_pid(p)


def _local_pid(p: ConnectParams) -> int | None:
    """The server's pid when it runs on this machine (from @@pid_file), else None."""
    from myaccel.errors import MyaccelError
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


def build_profile(kwargs: dict[str, Any]) -> Profile:
    prof = get_profile(kwargs["profile"])
    if kwargs.get("workload"):
        prof = replace(prof, workloads=tuple(normalize_workload(w) for w in kwargs["workload"]))
    else:
        for w in prof.workloads:
            normalize_workload(w)
    th = parse_threads(kwargs.get("threads"))
    if th:
        prof = replace(prof, threads=th)
    for key, field_ in (
        ("time", "duration_s"),
        ("warmup", "warmup_s"),
        ("tables", "tables"),
        ("table_size", "table_size"),
        ("runs", "runs_per_arm"),
        ("report_interval", "report_interval_s"),
    ):
        v = kwargs.get(key)
        if v is not None:
            if v < (0 if key == "warmup" else 1):
                raise UsageError(
                    f"--{key.replace('_', '-')} must be positive", hint="see myaccel bench --help"
                )
            prof = replace(prof, **{field_: v})
    if kwargs.get("scale") is not None:
        prof = prof.scaled(kwargs["scale"])
    for w in prof.workloads:
        if w.endswith(".lua") and not Path(w).is_file():
            raise UsageError(
                f"Lua script '{w}' does not exist", hint="pass the path of a sysbench Lua script"
            )
    return prof


def size_dataset(prof: Profile, kind: str | None, buffer_pool_bytes: int) -> Profile:
    if kind is None:
        return prof
    if buffer_pool_bytes <= 0:
        raise UsageError(
            "cannot size the dataset: innodb_buffer_pool_size unknown",
            hint="use --tables/--table-size",
        )
    if kind == "cpu-bound":
        rows = int(0.5 * buffer_pool_bytes / ROW_BYTES / prof.tables)
    else:
        rows = int(4.5 * buffer_pool_bytes / ROW_BYTES / prof.tables)
    return replace(prof, table_size=max(1000, rows))


def ensure_dataset(
    admin: ConnectParams, bench_p: ConnectParams, prof: Profile, *, cleanup: bool
) -> None:
    """Prepare the dataset, or verify and reuse the one that is there (never drop one of
    another size unless ``cleanup``)."""
    if cleanup:
        note("dropping the existing dataset (--cleanup)")
        cleanup_dataset(admin)
    if verify_dataset(admin, prof.tables, prof.table_size) == "empty":
        secs = prepare_dataset(bench_p, prof.tables, prof.table_size, log=note)
        note(f"dataset prepared in {secs:.0f} s")
    else:
        note(f"reusing the prepared dataset ({prof.tables} x {prof.table_size:,} rows, verified)")


def open_campaign(
    kind: str,
    out_dir: str | None,
    *,
    bench_p: ConnectParams,
    admin: ConnectParams,
    sinfo: dict[str, Any],
    prof: Profile,
    expect: str | None,
    pid: int | None = None,
    arms: dict[str, dict[str, Any]] | None = None,
    resume: Resume | None = None,
) -> BenchContext:
    """The results directory, its campaign index and the context runs are measured in
    (``resume``: the campaign of ``check_results_dir`` that new runs extend)."""
    cid = resume.index.campaign_id if resume is not None else new_campaign_id(kind)
    out = Path(out_dir) if out_dir else myaccel_home() / "results" / cid
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
            "expect": expect,
        },
        server_pid=pid,
        on_event=note,
    )
    ctx.index = CampaignIndex(
        campaign_id=cid,
        kind=kind,
        created_at=now_iso(),
        profile=asdict(prof),
        command=["myaccel", *sys.argv[1:]],
        arms=arms or {},
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


@click.command()
@server_options
@click.option(
    "--profile",
    default="quick",
    show_default=True,
    help="quick, standard, full, yitian, polardb-cpu, polardb-io, tdsql, kunpeng.",
)
@click.option(
    "--workload",
    "-w",
    multiple=True,
    help="Workload (repeatable): oltp_read_only ... or ro/rw/wo/ps, or a .lua path.",
)
@click.option("--threads", "-t", help="Thread counts, e.g. 1,8,32 (a sweep).")
@click.option("--time", type=ranges.RUN_SECONDS, help="Measured seconds per run (after warm-up).")
@click.option(
    "--warmup", type=ranges.WARMUP_SECONDS, help="Warm-up seconds excluded from the summary."
)
@click.option("--tables", type=ranges.TABLES, help="Number of tables.")
@click.option("--table-size", type=ranges.TABLE_ROWS, help="Rows per table.")
@click.option(
    "--dataset",
    type=click.Choice(["cpu-bound", "io-bound"]),
    help="Size the data from the buffer pool (<= 50% / >= 4x) and check it after the run.",
)
@click.option("--runs", type=ranges.RUNS, help="Repetitions per cell.")
@click.option(
    "--scale", type=ranges.SCALE, help="Shrink rows and time (0 < F <= 1) for small machines."
)
@click.option("--seed", type=ranges.SEED, help="Random seed (default: one per run, recorded).")
@click.option(
    "--ps-mode", type=click.Choice(["auto", "disable"]), default="auto", show_default=True
)
@click.option(
    "--ignore-errors", help="sysbench --mysql-ignore-errors list (default: sysbench's own)."
)
@click.option(
    "--report-interval", type=ranges.REPORT_INTERVAL_S, help="Seconds between interval reports."
)
@click.option(
    "--percentile",
    type=click.IntRange(1, 100),
    default=95,
    show_default=True,
    help="Latency percentile sysbench reports (one per run).",
)
@click.option(
    "--pin-client",
    metavar="CPUS",
    help="Pin sysbench to these CPUs (taskset list, e.g. 1 or 2-3); recorded. Default: unpinned.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    help="Results directory (default under $MYACCEL_HOME/results).",
)
@click.option(
    "--cleanup", is_flag=True, help="Drop an existing dataset of another size and prepare anew."
)
@click.option("--prepare-only", is_flag=True, help="Prepare (or verify) the dataset and stop.")
def bench(**kwargs: Any) -> None:
    """Run sysbench workloads and record one JSON document per run."""
    conn = connection_options(kwargs)
    prof = build_profile(kwargs)
    pin = check_pin_client(kwargs["pin_client"])
    proc.require("sysbench")
    bench_p, admin_p, pid = targets(conn)
    sinfo, variables = server_info(admin_p)
    prof = size_dataset(prof, kwargs["dataset"], int(sinfo.get("buffer_pool_bytes") or 0))
    resume = (
        None
        if kwargs["prepare_only"]
        else check_results_dir(kwargs["out_dir"], kind="bench", prof=prof, variables=variables)
    )
    t_start = time.monotonic()

    specs = [
        RunSpec(
            workload=w,
            threads=t,
            duration_s=prof.duration_s,
            warmup_s=prof.warmup_s,
            tables=prof.tables,
            table_size=prof.table_size,
            report_interval_s=prof.report_interval_s,
            rand_type=prof.rand_type,
            ps_mode=kwargs["ps_mode"],
            ignore_errors=kwargs["ignore_errors"],
            client_cpus=pin,
            percentile=kwargs["percentile"],
        )
        for w, t in prof.cells
    ]
    preflight(admin_p, max(specs, key=lambda s: s.threads))

    ensure_dataset(admin_p, bench_p, prof, cleanup=kwargs["cleanup"])
    if kwargs["prepare_only"]:
        return

    ctx = open_campaign(
        "bench",
        kwargs["out_dir"],
        bench_p=bench_p,
        admin=admin_p,
        sinfo=sinfo,
        prof=prof,
        expect=kwargs["dataset"],
        pid=pid,
        resume=resume,
    )
    out = ctx.out_dir
    assert ctx.index is not None
    total = len(specs) * prof.runs_per_arm
    first = resume.next_run if resume is not None else 1
    n = 0
    for r in range(prof.runs_per_arm):
        for spec in specs:
            n += 1
            seed = kwargs["seed"] if kwargs["seed"] is not None else 1000 + r
            s = replace(spec, seed=seed)
            pg = RunProgress()
            ctx.on_report = pg.report
            pg.start(f"[{n}/{total}] {s.workload} {s.threads} thr", s.total_s)
            rec = measure_run(ctx, s, index=first + n - 1)
            pg.stop(_result_line(rec))
    ctx.index = ctx.index.model_copy(update={"finished": True})
    ctx.save_index()
    click.echo(format_runs_table(ctx.records))
    require_valid_runs(ctx.records, out)
    wall = time.monotonic() - t_start
    harness = sum(r.harness_cpu_s or 0 for r in ctx.records)
    run_wall = sum(r.wall_s for r in ctx.records) or 1
    click.echo(f"results: {out}")
    click.echo(
        f"duration: {wall:.0f} s; harness CPU {harness:.2f} s = {100 * harness / run_wall:.2f}% of one CPU over the runs"
    )


def _result_line(rec: RunRecord) -> str:
    if rec.summary is None or not rec.validity.valid:
        return "INVALID: " + "; ".join(rec.validity.reasons)
    s = rec.summary
    w = f" ({'; '.join(rec.validity.warnings)})" if rec.validity.warnings else ""
    return f"tps {s.tps:,.1f} qps {s.qps:,.1f} p95 {s.latency_ms_p95 or 0:.2f} ms{w}"


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


def format_runs_table(records: list[RunRecord]) -> str:
    cells: dict[tuple[str, int], list[RunRecord]] = {}
    for r in records:
        cells.setdefault((r.workload, r.threads), []).append(r)
    lines = [
        "| workload | threads | runs (valid) | median TPS | median QPS | median p95 ms | CV % |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for (w, t), rs in cells.items():
        ok = [r.summary for r in rs if r.summary is not None and r.validity.valid]
        if ok:
            tps = [s.tps for s in ok]
            cv = 100 * statistics.stdev(tps) / statistics.mean(tps) if len(tps) > 1 else 0.0
            p95 = [s.latency_ms_p95 for s in ok if s.latency_ms_p95 is not None]
            lines.append(
                f"| {w} | {t} | {len(rs)} ({len(ok)}) | {statistics.median(tps):,.1f} | {statistics.median([s.qps for s in ok]):,.1f} | "
                f"{statistics.median(p95) if p95 else float('nan'):.2f} | {cv:.1f} |"
            )
        else:
            lines.append(f"| {w} | {t} | {len(rs)} (0) | - | - | - | - |")
    return "\n".join(lines)
