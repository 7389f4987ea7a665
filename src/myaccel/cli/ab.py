"""`myaccel ab` (interleaved A/B on a sandbox) and `myaccel compare` (statistics)."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import click

from myaccel import proc
from myaccel.artifacts import save
from myaccel.bench.ab import SNAPSHOT, AbPlan, Arm, check_arm, run_campaign
from myaccel.bench.campaign import (
    BenchContext,
    load_runs,
    server_info,
)
from myaccel.bench.compare import Comparison, compare_runs, format_markdown
from myaccel.bench.profiles import Profile
from myaccel.bench.run_record import RunRecord
from myaccel.bench.runner import (
    RunSpec,
    preflight,
)
from myaccel.cli import ranges
from myaccel.cli.bench import (
    _result_line,
    build_profile,
    check_pin_client,
    check_results_dir,
    ensure_dataset,
    open_campaign,
    require_valid_runs,
    size_dataset,
)
from myaccel.cli.output import write_output
from myaccel.cli.progress import RunProgress, note
from myaccel.errors import Interrupted, UsageError
from myaccel.server.sandbox import Sandbox, parse_sets
from myaccel.server.sandbox.layout import validate_name


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


def given_on_command_line(param: str) -> bool:
    """True when the current command's ``param`` came from the command line."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return False
    return ctx.get_parameter_source(param) in (
        click.core.ParameterSource.COMMANDLINE,
        click.core.ParameterSource.ENVIRONMENT,
    )


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While measuring, SIGTERM raises ``Interrupted`` (a KeyboardInterrupt) as SIGINT
    does, so that the ``finally`` blocks putting a sandbox back on its base configuration
    run before the process exits (exit code 143, or 130 for SIGINT)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, _frame: FrameType | None) -> None:
        raise Interrupted(signum)

    old = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM while a sandbox is put back on its base configuration (a
    second Ctrl-C must not leave it half restarted); a held signal is raised afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def _hold(signum: int, _frame: FrameType | None) -> None:
        pending.append(signum)

    old = {sig: signal.signal(sig, _hold) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    if pending:
        raise Interrupted(pending[0])


def restore_base_config(sb: Sandbox) -> None:
    """Put the sandbox back on its own (base) configuration, signals held meanwhile."""
    with interrupts_deferred():
        sb.stop()
        sb.start(progress=note)


def require_valid_arms(records: list[RunRecord], out: Path) -> None:
    """An A/B with an arm that has no valid run measured nothing: fail with exit 7."""
    for arm in ("baseline", "candidate"):
        runs = [r for r in records if r.arm == arm]
        if runs and not any(r.summary is not None and r.validity.valid for r in runs):
            require_valid_runs(runs, out, what=f"{arm} run")


def _arm(name: str, config: str | None, sets: tuple[str, ...], basedir: str | None) -> Arm:
    cfg = None if config in (None, "default") else Path(str(config))
    arm = Arm(
        name=name,
        config=cfg,
        sets=parse_sets(list(sets)),
        basedir=Path(basedir) if basedir else None,
    )
    check_arm(arm)
    return arm


@click.command()
@click.option(
    "--sandbox",
    "sandbox_name",
    default="default",
    show_default=True,
    help="Sandbox to use ('default' is created with the distribution's defaults if missing; "
    "another name needs --create).",
)
@click.option(
    "--baseline",
    metavar="CONFIG",
    help="Baseline option file ('default' or omitted: the sandbox's own configuration).",
)
@click.option("--candidate", metavar="CONFIG", help="Candidate option file.")
@click.option(
    "--baseline-set",
    multiple=True,
    metavar="K=V",
    help="Extra setting for the baseline (repeatable).",
)
@click.option(
    "--candidate-set",
    multiple=True,
    metavar="K=V",
    help="Extra setting for the candidate (repeatable).",
)
@click.option("--baseline-basedir", metavar="DIR", help="Server build for the baseline.")
@click.option("--candidate-basedir", metavar="DIR", help="Server build for the candidate.")
@click.option("--profile", default="quick", show_default=True)
@click.option("--workload", "-w", multiple=True)
@click.option("--threads", "-t")
@click.option("--time", type=ranges.RUN_SECONDS)
@click.option("--warmup", type=ranges.WARMUP_SECONDS)
@click.option("--tables", type=ranges.TABLES)
@click.option("--table-size", type=ranges.TABLE_ROWS)
@click.option("--dataset", type=click.Choice(["cpu-bound", "io-bound"]))
@click.option(
    "--runs", type=ranges.RUNS, help="Runs per arm and cell (default: the profile's, 5 for quick)."
)
@click.option("--scale", type=ranges.SCALE)
@click.option(
    "--ps-mode", type=click.Choice(["auto", "disable"]), default="auto", show_default=True
)
@click.option("--report-interval", type=ranges.REPORT_INTERVAL_S)
@click.option(
    "--pin-client",
    metavar="CPUS",
    help="Pin sysbench to these CPUs (taskset list, e.g. 1 or 2-3); recorded. Default: unpinned.",
)
@click.option("--out", "out_dir", type=click.Path(file_okay=False))
@click.option("--cleanup", is_flag=True, help="Drop a dataset of another size and prepare anew.")
@click.option(
    "--create",
    is_flag=True,
    help="Create the sandbox given by --sandbox if it does not exist (never done silently).",
)
@click.option("--candidate-label", default="candidate", hidden=True)
def ab(**kwargs: Any) -> None:
    """Compare two configurations (or builds) on a sandbox with interleaved runs.

    Arms alternate A B B A ..., both arms of a round share the random seed, the dataset is
    restored from a snapshot before each write-workload run, and the server is prewarmed
    after each restart. The verdict per cell comes with a 95% CI and a Holm-corrected p.
    """
    with terminate_as_interrupt():
        run_ab(kwargs)


def run_ab(kwargs: dict[str, Any]) -> None:
    t0 = time.monotonic()
    prof = build_profile(kwargs)
    pin = check_pin_client(kwargs["pin_client"])
    check_results_dir(kwargs["out_dir"], kind="ab", prof=prof)
    proc.require("sysbench")
    name = kwargs["sandbox_name"]
    create = sandbox_needs_creation(
        name, create=kwargs["create"], explicit=given_on_command_line("sandbox_name")
    )
    if prof.runs_per_arm < 3:
        note(f"warning: {prof.runs_per_arm} run(s) per arm cannot give a verdict; 5 is the default")
    arms = {
        "baseline": _arm(
            "baseline", kwargs["baseline"], kwargs["baseline_set"], kwargs["baseline_basedir"]
        ),
        "candidate": _arm(
            "candidate", kwargs["candidate"], kwargs["candidate_set"], kwargs["candidate_basedir"]
        ),
    }
    if arms["baseline"].key() == arms["candidate"].key():
        note("note: both arms have the same configuration (an A/A comparison)")
    if create:
        note(f"creating sandbox '{name}' with the distribution's default configuration")
        sb = Sandbox.init(name, basedir=arms["baseline"].basedir, progress=note)
    else:
        sb = Sandbox.load(name)
    try:
        records, ctx = _measure(sb, prof, arms, pin, kwargs)
    finally:
        # Leave the sandbox on its own configuration, whatever happened (an error, Ctrl-C,
        # SIGTERM): never on a candidate's.
        restore_base_config(sb)
    out = ctx.out_dir
    assert ctx.index is not None
    ctx.index = ctx.index.model_copy(update={"finished": True})
    ctx.save_index()
    cmp = compare_runs(
        [r for r in records if r.arm == "baseline"],
        [r for r in records if r.arm == "candidate"],
        allow_server_difference=arms["baseline"].basedir != arms["candidate"].basedir,
        candidate_label=kwargs["candidate_label"],
    )
    write_outputs(cmp, out)
    click.echo(format_markdown(cmp), nl=False)
    require_valid_arms(records, out)
    harness = sum(r.harness_cpu_s or 0 for r in records)
    run_wall = sum(r.wall_s for r in records) or 1
    click.echo(f"results: {out}")
    from myaccel.cli.report import report_after_run

    # builds of `myaccel build` keep their manifest next to the install tree (OUT/install,
    # OUT/manifest.json): the report then shows each arm's flags and checks beside the gain
    manifests = list(
        dict.fromkeys(
            m
            for a in arms.values()
            if a.basedir is not None
            and (m := a.basedir.resolve().parent / "manifest.json").is_file()
        )
    )
    report_after_run([out, *manifests], out)
    click.echo(
        f"duration: {time.monotonic() - t0:.0f} s; harness CPU {100 * harness / run_wall:.2f}% of one CPU during the runs"
    )


def _measure(
    sb: Sandbox, prof: Profile, arms: dict[str, Arm], pin: str | None, kwargs: dict[str, Any]
) -> tuple[list[RunRecord], BenchContext]:
    """Dataset, snapshot and the interleaved runs; the caller restores the sandbox."""
    sb.stop()
    b = arms["baseline"]
    sb.start(config=b.config, sets=b.sets, basedir=b.basedir, progress=note)
    admin, bench_p = sb.connect_params(), sb.bench_params(tcp=False)
    sinfo, _ = server_info(admin)
    prof = size_dataset(prof, kwargs["dataset"], int(sinfo.get("buffer_pool_bytes") or 0))
    biggest = max(prof.threads)
    preflight(
        admin,
        RunSpec(
            workload=prof.workloads[0],
            threads=biggest,
            duration_s=1,
            warmup_s=0,
            tables=prof.tables,
            table_size=prof.table_size,
            ps_mode=kwargs["ps_mode"],
        ),
    )
    ensure_dataset(admin, bench_p, prof, cleanup=kwargs["cleanup"])
    sb.stop()
    if any(s.name == SNAPSHOT for s in sb.snapshot_list()):
        sb.snapshot_delete(SNAPSHOT)
    sb.snapshot_save(SNAPSHOT)
    note("dataset snapshot saved; write workloads start from it in every run")

    ctx = open_campaign(
        "ab",
        kwargs["out_dir"],
        bench_p=bench_p,
        admin=admin,
        sinfo=sinfo,
        prof=prof,
        expect=kwargs["dataset"],
        arms={k: a.describe() for k, a in arms.items()},
    )
    plan = AbPlan(
        sandbox=sb,
        profile=prof,
        arms=arms,
        ps_mode=kwargs["ps_mode"],
        client_cpus=pin,
        on_event=note,
    )
    progress: dict[str, RunProgress] = {}

    def before(n: int, total: int, spec: RunSpec, arm: str) -> None:
        pg = RunProgress()
        progress["cur"] = pg
        ctx.on_report = pg.report
        pg.start(f"[{n}/{total}] {arm:9s} {spec.workload} {spec.threads} thr", spec.total_s)

    def after(rec: RunRecord) -> None:
        progress["cur"].stop(_result_line(rec))

    return run_campaign(plan, ctx, before_run=before, after_run=after), ctx


def write_outputs(cmp: Comparison, out: Path) -> None:
    save(out / "comparison.json", cmp, private=True)
    write_output(out / "comparison.md", format_markdown(cmp))


@click.command()
@click.argument("baseline", type=click.Path())
@click.argument("candidate", type=click.Path(), required=False)
@click.option(
    "--force", is_flag=True, help="Compare runs of different hosts, versions or datasets anyway."
)
@click.option("--json", "as_json", is_flag=True, help="Print the comparison JSON.")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    help="Write comparison.json and comparison.md here.",
)
def compare(
    baseline: str, candidate: str | None, force: bool, as_json: bool, out_dir: str | None
) -> None:
    """Compare runs: two result directories (A then B), or one `ab` campaign's two arms."""
    a = load_runs(Path(baseline))
    if candidate is None:
        base = [r for r in a if r.arm == "baseline"]
        cand = [r for r in a if r.arm == "candidate"]
        if not base or not cand:
            raise UsageError(
                f"'{baseline}' is not an A/B campaign with two arms",
                hint="pass two result directories: myaccel compare BASELINE_DIR CANDIDATE_DIR",
            )
        labels = ("baseline", "candidate")
    else:
        base, cand = a, load_runs(Path(candidate))
        labels = (Path(baseline).name or "A", Path(candidate).name or "B")
    cmp = compare_runs(base, cand, baseline_label=labels[0], candidate_label=labels[1], force=force)
    if candidate is not None and Path(baseline).resolve() == Path(candidate).resolve():
        note(f"warning: '{baseline}' is compared with itself: the result says nothing")
    elif any(w.startswith("both sides hold the same") for w in cmp.warnings):
        note("warning: " + next(w for w in cmp.warnings if w.startswith("both sides hold")))
    if out_dir:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        write_outputs(cmp, Path(out_dir))
    click.echo(cmp.model_dump_json(indent=2) if as_json else format_markdown(cmp), nl=not as_json)
