"""`myaccel ab` (interleaved A/B on a sandbox) and `myaccel compare` (statistics)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from myaccel import signals
from myaccel.cli import options
from myaccel.cli.bench import (
    AdaptiveFlags,
    InstructionFlags,
    SweepFlags,
    sweep_options,
    sweep_profile,
)
from myaccel.cli.common import command_line, options_into
from myaccel.cli.progress import note

if TYPE_CHECKING:  # the domain (with numpy, scipy) is imported where used, not by `--help`
    from myaccel.bench.ab import AbResult
    from myaccel.bench.compare import Comparison
    from myaccel.bench.run_record import RunRecord


def given_on_command_line(param: str) -> bool:
    """True when the current command's ``param`` came from the command line."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return False
    return ctx.get_parameter_source(param) in (
        click.core.ParameterSource.COMMANDLINE,
        click.core.ParameterSource.ENVIRONMENT,
    )


# SIGTERM and SIGHUP raise ``Interrupted`` as SIGINT does, so that the ``finally`` blocks
# putting a sandbox back on its base configuration run before the process exits (143/130).
terminate_as_interrupt = signals.raising


@dataclass(frozen=True, kw_only=True)
class AbOptions(SweepFlags, AdaptiveFlags, InstructionFlags):
    sandbox_name: str = "default"
    baseline: str | None = None
    candidate: str | None = None
    baseline_set: tuple[str, ...] = ()
    candidate_set: tuple[str, ...] = ()
    baseline_basedir: str | None = None
    candidate_basedir: str | None = None
    create: bool = False
    candidate_label: str = "candidate"


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
@sweep_options
@click.option(
    "--create",
    is_flag=True,
    help="Create the sandbox given by --sandbox if it does not exist (never done silently).",
)
@options.adaptive
@options.instructions
@click.option("--candidate-label", default="candidate", hidden=True)
@options_into(AbOptions)
def ab(opts: AbOptions) -> None:
    """Compare two configurations (or builds) on a sandbox with interleaved runs.

    Arms alternate A B B A ..., both arms of a round share the random seed, the dataset is
    restored from a snapshot before each write-workload run, and the server is prewarmed
    after each restart. The verdict per cell comes with a 95% CI and a Holm-corrected p.
    """
    from myaccel import proc
    from myaccel.bench import ab as ab_domain
    from myaccel.bench.replay import replay_scripts
    from myaccel.bench.session import check_results_dir
    from myaccel.cli.progress import TerminalProgress

    t0 = time.monotonic()
    with terminate_as_interrupt(), replay_scripts():
        prof, workload = sweep_profile(opts)
        prof, adaptive = opts.adaptive(prof, runs_given=opts.runs is not None)
        counting = opts.counting()
        harness = opts.harness_options()
        out = Path(opts.out_dir) if opts.out_dir else None
        check_results_dir(out, kind="ab", prof=prof)
        proc.require("sysbench")
        name = opts.sandbox_name
        create = ab_domain.sandbox_needs_creation(
            name, create=opts.create, explicit=given_on_command_line("sandbox_name")
        )
        baseline = ab_domain.make_arm(
            "baseline", opts.baseline, opts.baseline_set, opts.baseline_basedir
        )
        candidate = ab_domain.make_arm(
            "candidate", opts.candidate, opts.candidate_set, opts.candidate_basedir
        )
        for arm in (baseline, candidate):
            warning = ab_domain.durability_warning(arm.name, ab_domain.durability_trades(arm))
            if warning is not None:
                note(f"warning: {warning}")
        result = ab_domain.run(
            ab_domain.AbRequest(
                sandbox=name,
                profile=prof,
                baseline=baseline,
                candidate=candidate,
                command=command_line(),
                create=create,
                harness=harness,
                out_dir=out,
                candidate_label=opts.candidate_label,
                workload=workload,
                replay=opts.replay_record(workload),
                adaptive=adaptive,
                instructions=counting,
            ),
            TerminalProgress(),
        )
        render_ab(result, t0)


def render_ab(result: AbResult, t0: float) -> None:
    """The comparison (comparison.md, and on stdout); exit 7 when an arm has no valid
    run; where the results are; the report; how long it took (since ``t0``)."""
    from myaccel.bench.ab import require_valid_arms
    from myaccel.bench.compare import format_markdown
    from myaccel.cli.output import write_output
    from myaccel.cli.report import report_after_run

    out, records = result.out_dir, result.records
    write_output(out / "comparison.md", format_markdown(result.comparison))
    click.echo(format_markdown(result.comparison), nl=False)
    for line in format_replay_arms(records):
        click.echo(line)
    require_valid_arms(records, out)
    harness = sum(r.harness_cpu_s or 0 for r in records)
    run_wall = sum(r.wall_s for r in records) or 1
    click.echo(f"results: {out}")
    report_after_run([out, *result.manifests], out)
    click.echo(
        f"duration: {time.monotonic() - t0:.0f} s; harness CPU {100 * harness / run_wall:.2f}% of one CPU during the runs"
    )


def format_replay_arms(records: list[RunRecord]) -> list[str]:
    """A replay's statements per arm, summed over its runs: successes and errors apart
    (the arms replay the same workload from the same snapshot: their errors compare)."""
    arms: dict[str, dict[str, int]] = {}
    for r in records:
        rep = r.replay
        if rep is None or "statements" not in rep:
            continue
        a = arms.setdefault(r.arm or "-", {"statements": 0, "failed": 0, "dup": 0})
        a["statements"] += int(rep["statements"])
        a["failed"] += int(rep["failed"])
        a["dup"] += int(rep["duplicate_key_errors"])
    return [
        f"replay, {arm}: {a['statements']:,} statements, {a['failed']:,} failed "
        f"({a['dup']:,} on a duplicate key), counted apart"
        for arm, a in arms.items()
    ]


def write_outputs(cmp: Comparison, out: Path) -> None:
    from myaccel.artifacts import save
    from myaccel.bench.compare import format_markdown
    from myaccel.cli.output import write_output

    save(out / "comparison.json", cmp, private=True)
    write_output(out / "comparison.md", format_markdown(cmp))


@click.command()
@click.argument("baseline", type=click.Path())
@click.argument("candidate", type=click.Path(), required=False)
@click.option(
    "--force", is_flag=True, help="Compare runs of different hosts, versions or datasets anyway."
)
@options.json("Print the comparison JSON.")
@options.directory(
    "--out",
    "out_dir",
    help="Write comparison.json and comparison.md here.",
)
def compare(
    baseline: str, candidate: str | None, force: bool, as_json: bool, out_dir: str | None
) -> None:
    """Compare runs: two result directories (A then B), or one `ab` campaign's two arms."""
    from myaccel.bench.compare import compare_paths, format_markdown

    cmp = compare_paths(
        Path(baseline), Path(candidate) if candidate is not None else None, force=force
    )
    if candidate is not None and Path(baseline).resolve() == Path(candidate).resolve():
        note(f"warning: '{baseline}' is compared with itself: the result says nothing")
    elif any(w.startswith("both sides hold the same") for w in cmp.warnings):
        note("warning: " + next(w for w in cmp.warnings if w.startswith("both sides hold")))
    if out_dir:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        write_outputs(cmp, Path(out_dir))
    click.echo(cmp.model_dump_json(indent=2) if as_json else format_markdown(cmp), nl=not as_json)
