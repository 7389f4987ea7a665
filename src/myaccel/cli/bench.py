"""`myaccel bench`: sysbench runs against a sandbox or an existing server."""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from myaccel import markdown
from myaccel.cli import options, ranges
from myaccel.cli.common import (
    ServerOptions,
    command_line,
    options_into,
    resolve,
    server_options,
)
from myaccel.errors import UsageError

if TYPE_CHECKING:  # the domain is imported where used: `--help` loads none of it
    from myaccel.bench.adaptive import AdaptiveOptions
    from myaccel.bench.instructions import Counting
    from myaccel.bench.profiles import Profile, ProfileOptions
    from myaccel.bench.run_record import RunRecord
    from myaccel.bench.session import BenchResult, HarnessOptions
    from myaccel.bench.workload import Workload
    from myaccel.server.connection import ConnectionOptions, ConnectParams


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


@dataclass(frozen=True, kw_only=True)
class ProfileFlags:
    """The options every benchmarking command has for its profile."""

    profile: str = "quick"
    workload: tuple[str, ...] = ()
    runs: int | None = None
    time: int | None = None
    warmup: int | None = None
    scale: float | None = None

    def profile_options(self) -> ProfileOptions:
        from myaccel.bench.profiles import ProfileOptions

        return ProfileOptions(
            name=self.profile,
            workloads=self.workload,
            runs_per_arm=self.runs,
            duration_s=self.time,
            warmup_s=self.warmup,
            scale=self.scale,
        )


@dataclass(frozen=True, kw_only=True)
class AdaptiveFlags:
    """``--target`` and ``--budget`` (``options.adaptive``)."""

    target_pct: float | None = None
    budget_min: float | None = None

    def adaptive(
        self, prof: Profile, *, runs_given: bool
    ) -> tuple[Profile, AdaptiveOptions | None]:
        from myaccel.bench.adaptive import adaptive_profile

        return adaptive_profile(prof, self.target_pct, self.budget_min, runs_given=runs_given)


@dataclass(frozen=True, kw_only=True)
class InstructionFlags:
    """``--instructions`` (``options.instructions``): counted by the PMU where one counts
    instructions, else by callgrind (``profile/perfstat/arms.counting_for``)."""

    instructions: bool = False
    instructions_events: int | None = None  # hidden: transactions per counted run (tests)

    def counting(self) -> Counting | None:
        if not self.instructions:
            return None
        from myaccel.profile.perfstat.arms import counting_for

        return counting_for(self.instructions_events)


@dataclass(frozen=True, kw_only=True)
class ReplayFlags:
    """``--workload-file`` and how it is replayed (``bench``, ``ab``, ``accelerate``)."""

    workload_file: str | None = None
    replay_mode: str = "mix"
    paced: bool = False
    replay_keys: str = "shift"

    def replay(
        self, prof: Profile, *, threads_given: bool, workloads_given: bool
    ) -> tuple[Profile, Workload | None]:
        """``prof`` replaying the workload file (``--replay-mode``, ``--paced``), or
        ``prof`` itself without one."""
        if self.workload_file is not None and workloads_given:
            raise UsageError(
                "--workload-file replays a captured workload: it cannot be combined with --workload",
                hint="drop --workload (or --workload-file)",
            )
        from typing import cast

        from myaccel.bench.choices import ReplayMode
        from myaccel.bench.replay import (
            captured_rate,
            check_pacing,
            replay_profile,
            write_replay_script,
        )
        from myaccel.bench.workload import load_replayable

        if self.workload_file is None:
            if self.paced or self.replay_mode != "mix" or self.replay_keys != "shift":
                raise UsageError(
                    "--paced, --replay-mode and --replay-keys apply to the replay of a captured workload",
                    hint="add --workload-file W.json (a file of `myaccel capture`)",
                )
            return prof, None
        check_pacing(self.replay_mode, self.paced)
        w = load_replayable(Path(self.workload_file))
        script = write_replay_script(
            w, mode=cast(ReplayMode, self.replay_mode), shift_keys=self.replay_keys == "shift"
        )
        rate = captured_rate(w) if self.paced else None
        return replay_profile(prof, w, script, threads_given=threads_given, rate_per_s=rate), w

    def replay_record(self, w: Workload | None) -> dict[str, object] | None:
        """What the runs of the replay record of it (``bench.replay.replay_info``)."""
        from typing import cast

        from myaccel.bench.choices import ReplayMode
        from myaccel.bench.replay import replay_info

        if w is None:
            return None
        info = replay_info(w, cast(ReplayMode, self.replay_mode), self.workload_file)
        return {**info, "keys": self.replay_keys}


@dataclass(frozen=True, kw_only=True)
class SweepFlags(ProfileFlags, ReplayFlags):
    """The profile options of ``bench`` and ``ab`` beyond ``ProfileFlags``."""

    threads: str | None = None
    tables: int | None = None
    table_size: int | None = None
    report_interval: int | None = None
    dataset: str | None = None
    ps_mode: str = "auto"
    pin_client: str | None = None
    out_dir: str | None = None
    cleanup: bool = False
    quiet_wait: float = 60.0

    def harness_options(self) -> HarnessOptions:
        """``--dataset``, ``--ps-mode``, ``--pin-client`` (checked here), ``--cleanup`` and
        ``--quiet-wait``."""
        from myaccel.bench.session import HarnessOptions
        from myaccel.model import same_named

        return HarnessOptions(
            **same_named(self, ("dataset", "ps_mode", "cleanup")),
            pin_client=check_pin_client(self.pin_client),
            quiet_wait_s=self.quiet_wait,
        )

    def profile_options(self) -> ProfileOptions:
        from myaccel.bench.profiles import ProfileOptions

        return ProfileOptions(
            name=self.profile,
            workloads=self.workload,
            threads=parse_threads(self.threads),
            duration_s=self.time,
            warmup_s=self.warmup,
            tables=self.tables,
            table_size=self.table_size,
            runs_per_arm=self.runs,
            report_interval_s=self.report_interval,
            scale=self.scale,
        )


def sweep_profile(flags: SweepFlags) -> tuple[Profile, Workload | None]:
    """The profile of ``flags``; with ``--workload-file``, the replay of that workload
    (``--replay-mode``, ``--paced``)."""
    from myaccel.bench.profiles import build_profile

    prof = build_profile(flags.profile_options())
    return flags.replay(
        prof, threads_given=flags.threads is not None, workloads_given=bool(flags.workload)
    )


@dataclass(frozen=True, kw_only=True)
class BenchOptions(ServerOptions, SweepFlags):
    seed: int | None = None
    ignore_errors: str | None = None
    percentile: int = 95
    prepare_only: bool = False


def targets(conn: ConnectionOptions) -> tuple[ConnectParams, ConnectParams, int | None]:
    """(benchmark user, admin, server pid) for a sandbox or an existing server."""
    from myaccel.bench.session import local_server_pid

    if conn.sandbox is not None:
        from myaccel.server.sandbox import Sandbox

        sb = Sandbox.load(conn.sandbox)
        return sb.bench_params(tcp=False), sb.connect_params(), sb.pid
    p = resolve(conn)
    return p, p, local_server_pid(p)


# The options of ``SweepFlags``, shared by ``bench`` and ``ab``: the profile, its overrides
# and how the runs are made (``tune`` and ``accelerate`` take some of them one by one).
sweep_options = options.compose(
    options.profile,
    options.workload,
    options.threads,
    options.time,
    options.warmup,
    options.tables,
    options.table_size,
    options.dataset,
    options.runs,
    options.scale,
    options.ps_mode,
    options.report_interval,
    options.pin_client,
    options.out_dir,
    options.cleanup,
    options.quiet_wait,
    options.workload_file,
    options.replay,
)


@click.command()
@server_options
@sweep_options
@click.option(
    "--seed",
    type=ranges.SEED,
    help="The first run's random seed; run r uses SEED + r (default: a fresh base per campaign; every run's seed is recorded).",
)
@click.option(
    "--ignore-errors", help="sysbench --mysql-ignore-errors list (default: sysbench's own)."
)
@click.option(
    "--percentile",
    type=click.IntRange(1, 100),
    default=95,
    show_default=True,
    help="Latency percentile sysbench reports (one per run).",
)
@click.option("--prepare-only", is_flag=True, help="Prepare (or verify) the dataset and stop.")
@options_into(BenchOptions)
def bench(opts: BenchOptions) -> None:
    """Run sysbench workloads and record one JSON document per run."""
    from myaccel.bench.replay import replay_scripts

    with replay_scripts():  # a replay's script lives as long as its campaign's runs
        _bench(opts)


def _bench(opts: BenchOptions) -> None:
    from myaccel.bench.session import BenchRequest, run_bench
    from myaccel.cli.progress import TerminalProgress

    if not opts.prepare_only:  # where the runs go: writable before the dataset is touched
        from myaccel.outdir import check_writable_dir
        from myaccel.paths import myaccel_home

        check_writable_dir(
            opts.out_dir or myaccel_home() / "results",
            "--out" if opts.out_dir else "the results directory (MYACCEL_HOME)",
        )
    prof, workload = sweep_profile(opts)
    harness = opts.harness_options()
    bench_p, admin_p, pid = targets(opts.conn)
    if workload is not None and opts.conn.sandbox is not None:
        bench_p = admin_p  # a sandbox's benchmark user has rights on sbtest only
    result = run_bench(
        BenchRequest(
            bench=bench_p,
            admin=admin_p,
            profile=prof,
            command=command_line(),
            server_pid=pid,
            harness=harness,
            ignore_errors=opts.ignore_errors,
            percentile=opts.percentile,
            seed=opts.seed,
            out_dir=Path(opts.out_dir) if opts.out_dir else None,
            prepare_only=opts.prepare_only,
            workload=workload,
            replay=opts.replay_record(workload),
        ),
        TerminalProgress(),
    )
    if result is not None:
        render_bench(result)


def render_bench(result: BenchResult) -> None:
    """The runs' table on stdout; exit 7 when no run is valid; where the results are."""
    from myaccel.bench.session import require_valid_runs

    if result.disturbed:  # first: the figures below are not to be read as they stand
        click.echo(f"Disturbed: {result.disturbed}.")
    click.echo(format_runs_table(result.records))
    for line in format_replay(result.records):
        click.echo(line)
    require_valid_runs(result.records, result.out_dir)
    harness = sum(r.harness_cpu_s or 0 for r in result.records)
    run_wall = sum(r.wall_s for r in result.records) or 1
    click.echo(f"results: {result.out_dir}")
    click.echo(
        f"duration: {result.duration_s:.0f} s; harness CPU {harness:.2f} s = {100 * harness / run_wall:.2f}% of one CPU over the runs"
    )


def format_replay(records: list[RunRecord]) -> list[str]:
    """A replay's lines under the runs' table: its pool (the observed concurrency) and,
    per run, the statements it issued, successes and errors apart."""
    reps = [(r, r.replay) for r in records if r.replay is not None]
    if not reps:
        return []
    info = reps[0][1] or {}
    out = [
        f"replay: {info.get('pool_threads')} thread(s) = the observed concurrency "
        f"({info.get('observed')}), not the {info.get('captured_sessions')} captured "
        "connection(s)"
        + ("; a new connection per session" if info.get("reconnect_per_session") else "")
    ]
    for r, rep in reps:
        if rep is None or "statements" not in rep:
            continue
        errnos = ", ".join(f"{k}: {v:,}" for k, v in rep.get("errors_by_errno", {}).items())
        given = (
            f" at {r.threads} thread(s) (--threads)"
            if r.threads != info.get("pool_threads")
            else ""
        )
        out.append(
            f"run {r.index:03d}{given}: {rep['statements']:,} statements, {rep['succeeded']:,} "
            f"succeeded, {rep['failed']:,} failed ({rep['error_pct']:.2f}%; duplicate key "
            f"{rep['duplicate_key_errors']:,}{'; by error ' + errnos if errnos else ''}), "
            f"{rep['sessions_opened']:,} connection(s) opened"
        )
    return out


def format_runs_table(records: list[RunRecord]) -> str:
    cells: dict[tuple[str, int], list[RunRecord]] = {}
    for r in records:
        cells.setdefault((r.workload, r.threads), []).append(r)
    rows: list[list[object]] = []
    for (w, t), rs in cells.items():
        ok = [r.summary for r in rs if r.summary is not None and r.validity.valid]
        if not ok:
            rows.append([w, t, f"{len(rs)} (0)", "-", "-", "-", "-"])
            continue
        tps = [s.tps for s in ok]
        cv = 100 * statistics.stdev(tps) / statistics.mean(tps) if len(tps) > 1 else 0.0
        p95 = [s.latency_ms_p95 for s in ok if s.latency_ms_p95 is not None]
        rows.append(
            [
                w,
                t,
                f"{len(rs)} ({len(ok)})",
                f"{statistics.median(tps):,.1f}",
                f"{statistics.median([s.qps for s in ok]):,.1f}",
                f"{statistics.median(p95) if p95 else float('nan'):.2f}",
                f"{cv:.1f}",
            ]
        )
    header = ["workload", "threads", "runs (valid)", "median TPS", "median QPS"]
    header += ["median p95 ms", "CV %"]
    return "\n".join(markdown.table(header, rows, "lrrrrrr"))
