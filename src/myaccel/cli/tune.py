"""`myaccel tune`: search server knobs past the rules' plan on a sandbox, and say honestly
when nothing beats it (docs/tuning.md)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from myaccel.cli import options, ranges
from myaccel.cli.ab import given_on_command_line, terminate_as_interrupt
from myaccel.cli.bench import SweepFlags, check_pin_client
from myaccel.cli.common import F, command_line, measure_storage, options_into
from myaccel.cli.output import write_output
from myaccel.cli.progress import TerminalProgress, note

if TYPE_CHECKING:
    from myaccel.tune.result import TrialRow


@dataclass(frozen=True, kw_only=True)
class TuneOptions(SweepFlags):
    sandbox_name: str = "tune"
    create: bool = False
    basedir: str | None = None
    trials: int | None = None
    minutes: float | None = None
    durability: str = "strict"
    resume: bool = False
    layers: str = "server"
    knob: tuple[str, ...] = ()
    seed: int = 0
    screen_runs: int = 1
    aa_runs: int = 3
    final_runs: int = 5
    ablation: bool = True
    measure_storage: bool = False


def _changes(c: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(c.items())) or "the plan"


class TuneTerminalProgress(TerminalProgress):
    """``tune.TuneProgress`` on stderr: runs as `ab` shows them, a line per trial with
    the incumbent (the best configuration so far)."""

    def phase(self, title: str) -> None:
        note(f"== {title}")

    def trial_done(self, row: TrialRow, incumbent: TrialRow | None) -> None:
        d = "n/a" if row.delta_pct is None else f"{row.delta_pct:+.1f}%"
        best = (
            f"{incumbent.delta_pct:+.1f}% over {incumbent.runs_per_arm} run(s)/arm: "
            f"{_changes(incumbent.changes)}"
            if incumbent is not None and incumbent.delta_pct is not None
            else "the plan"
        )
        note(
            f"trial {row.number} [{row.stage}] {d} vs plan ({row.runs_per_arm} run(s)/arm): "
            f"{_changes(row.changes)}"
        )
        note(f"  incumbent: {best}")


def _runs_per_arm(name: str, least: int, most: int, of: str) -> Callable[[F], F]:
    """A number of runs per arm, at least (and by default) ``least``."""
    return click.option(
        name,
        type=click.IntRange(least, most),
        default=least,
        show_default=True,
        help=f"Runs per arm of {of}.",
    )


@click.command()
@click.option(
    "--sandbox",
    "sandbox_name",
    default="tune",
    show_default=True,
    help="Sandbox the trials run on ('tune' is created if missing; another name needs --create).",
)
@click.option("--create", is_flag=True, help="Create the sandbox if it does not exist.")
@click.option(
    "--basedir",
    metavar="DIR",
    type=click.Path(file_okay=False, exists=True),
    help="Server build (install tree) for the sandbox and every trial; implies --create.",
)
@options.profile
@options.workload
@options.threads
@options.time
@options.warmup
@options.tables
@options.table_size
@options.scale
@options.dataset
@options.cleanup
@click.option("--trials", type=click.IntRange(1, 100_000), help="Screening trials (default 20).")
@click.option(
    "--minutes",
    type=click.FloatRange(0, 7 * 24 * 60, min_open=True),
    help="Time budget: screening stops at 60%, confirmation at 85%; the final A/B always runs.",
)
@options.durability("strict: durability knobs are never searched.")
@click.option("--resume", is_flag=True, help="Continue the study in --out.")
@click.option(
    "--layers",
    default="server",
    show_default=True,
    help="Layers searched: server, or server,process (CPU affinity of the server, NUMA "
    "policy on hosts with several nodes, the thread pool where the server has one).",
)
@click.option("--knob", multiple=True, metavar="NAME", help="Search only this knob (repeatable).")
@click.option("--seed", type=ranges.SEED, default=0, show_default=True, help="TPE sampler seed.")
@_runs_per_arm("--screen-runs", 1, 20, "a screening trial")
@_runs_per_arm("--aa-runs", 3, 20, "the A/A noise-floor trial")
@_runs_per_arm("--final-runs", 5, 100, "the final A/B")
@click.option("--ablation/--no-ablation", default=True, show_default=True)
@measure_storage
@options.ps_mode
@options.pin_client
@options.out_dir
@options_into(TuneOptions)
def tune(opts: TuneOptions) -> None:
    """Search server knobs past the rules' plan on a sandbox (Bayesian optimization).

    The plan is trial 0 and is measured against itself first (the noise floor); TPE
    proposes configurations inside the memory budget (durability knobs only with
    --durability relaxed), each screened in a short interleaved A/B against the plan;
    successive halving confirms the best; the winner must beat the plan in a final
    interleaved A/B (at least 5 runs per arm, 95% CI above zero). OUT/plan.json is what
    `myaccel apply --plan` takes; OUT/study.db resumes with --resume.
    """
    from myaccel import proc, tune
    from myaccel.bench.profiles import build_profile
    from myaccel.tune.request import TuneRequest
    from myaccel.tune.search import Budget

    t0 = time.monotonic()
    with terminate_as_interrupt():
        prof = build_profile(opts.profile_options())
        proc.require("sysbench")
        budget = Budget(
            trials=opts.trials if opts.trials or opts.minutes else 20,
            minutes=opts.minutes,
            screen_pairs=opts.screen_runs,
            aa_pairs=opts.aa_runs,
            final_runs=opts.final_runs,
            ablation=opts.ablation,
        )
        create = opts.create or opts.basedir is not None
        if not create:
            from myaccel.bench.ab import sandbox_needs_creation

            create = sandbox_needs_creation(
                opts.sandbox_name, create=False, explicit=given_on_command_line("sandbox_name")
            )
        req = TuneRequest(
            sandbox=opts.sandbox_name,
            profile=prof,
            command=command_line(),
            budget=budget,
            durability=opts.durability,
            out_dir=Path(opts.out_dir) if opts.out_dir else None,
            resume=opts.resume,
            create=create,
            basedir=Path(opts.basedir) if opts.basedir else None,
            knobs=opts.knob,
            layers=tuple(x.strip() for x in opts.layers.split(",") if x.strip()),
            seed=opts.seed,
            measure_storage=opts.measure_storage,
            dataset=opts.dataset,
            ps_mode=opts.ps_mode,
            pin_client=check_pin_client(opts.pin_client),
            cleanup=opts.cleanup,
        )
        result = tune.run(req, TuneTerminalProgress())
    from myaccel.tune.summary import format_markdown

    text = format_markdown(result)
    write_output(Path(result.plan).parent / "tune.md", text)
    click.echo(text, nl=False)
    out = Path(result.plan).parent
    click.echo(f"results: {out}")
    from myaccel.cli.report import report_after_run

    report_after_run([out], out)
    click.echo(f"duration: {time.monotonic() - t0:.0f} s")
