"""`myaccel accelerate`: one command from a bare machine to a before/after report."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

import click

from myaccel import accelerate as pipeline
from myaccel.bench.ab import AbResult
from myaccel.bench.compare import format_markdown
from myaccel.bench.profiles import Profile, build_profile
from myaccel.bench.session import BenchResult
from myaccel.bench.workload import Workload
from myaccel.cli import ranges
from myaccel.cli.ab import render_ab, terminate_as_interrupt
from myaccel.cli.bench import (
    ProfileFlags,
    ReplayFlags,
    render_bench,
    replay_options,
    workload_file_option,
)
from myaccel.cli.common import ServerOptions, command_line, options_into, resolve, server_options
from myaccel.cli.output import write_output
from myaccel.cli.progress import TerminalProgress, note
from myaccel.cli.report import report_after_run
from myaccel.errors import UsageError


@dataclass(frozen=True, kw_only=True)
class AccelerateOptions(ServerOptions, ProfileFlags, ReplayFlags):
    durability: str = "strict"
    out_dir: str | None = None
    server_unit: str | None = None
    conf_dir: str | None = None
    yes: bool = False
    create: bool = False
    measure_storage: bool | None = None  # default: on a sandbox yes, on a live server no


class AccelerateProgress(TerminalProgress):
    """``accelerate.Progress`` on the terminal: each phase's results as its own command
    (``bench``, ``ab``) shows them."""

    def step(self, title: str) -> None:
        note(f"== {title}")

    def confirm(self, question: str) -> bool:
        if not sys.stdin.isatty():
            raise UsageError("applying to an existing server needs confirmation", hint="pass --yes")
        click.confirm(question, abort=True)
        return True

    def bench_done(self, result: BenchResult) -> None:
        render_bench(result)

    def ab_done(self, result: AbResult) -> None:
        render_ab(result, result.started_s)


def _replay(
    opts: AccelerateOptions,
    prof: Profile,
    target: pipeline.SandboxTarget | pipeline.ExistingServer,
) -> tuple[Profile, Workload | None]:
    """With --workload-file: the replay of the captured workload (sandbox mode only: its
    writes would change an existing server's data)."""
    if opts.workload_file is not None and isinstance(target, pipeline.ExistingServer):
        raise UsageError(
            "--workload-file replays captured statements, writes included: accelerate "
            "replays them on a sandbox only",
            hint="drop the server options (a sandbox named 'accelerate') or pass --sandbox NAME",
        )
    return opts.replay(prof, threads_given=False)


@click.command()
@server_options
@click.option("--profile", default="quick", show_default=True)
@click.option(
    "--durability", type=click.Choice(["strict", "relaxed"]), default="strict", show_default=True
)
@click.option("--runs", type=ranges.RUNS, help="Runs per arm and cell (default: the profile's).")
@click.option("--time", type=ranges.RUN_SECONDS, help="Measured seconds per run.")
@click.option("--scale", type=ranges.SCALE)
@click.option("--out", "out_dir", type=click.Path(file_okay=False))
@click.option(
    "--server-unit",
    metavar="UNIT",
    help="Existing server: systemd unit to restart for restart-only knobs.",
)
@click.option(
    "--conf-dir", metavar="DIR", help="Existing server: directory for the managed 99-myaccel.cnf."
)
@click.option("--yes", is_flag=True, help="Existing server: apply without asking.")
@click.option(
    "--create",
    is_flag=True,
    help="Create the sandbox named by --sandbox if it does not exist (never done silently).",
)
@click.option(
    "--measure-storage/--no-measure-storage",
    default=None,
    help="Measure the datadir's device with fio for the I/O rules (about 15 s, cached per "
    "device). Default: on for a sandbox; off for an existing server, whose disk it would load.",
)
@workload_file_option
@replay_options[0]
@replay_options[1]
@options_into(AccelerateOptions)
def accelerate(opts: AccelerateOptions) -> None:
    """Probe, benchmark the defaults, plan, apply the plan's server layer, benchmark again
    (interleaved), compare, and write report.md with the article-style table.

    Without server options: a sandbox named 'accelerate' (created from the distribution's
    binaries with their defaults when missing; a --sandbox NAME that does not exist needs
    --create) and an interleaved A/B; an interrupt puts the sandbox back on its base
    configuration. With server options: an existing
    server, measured before and after a journaled apply (not interleaved: said so).
    --workload-file W.json: the A/B replays a workload of `myaccel capture` (sandbox mode;
    missing schemas are created from the DDL in the capture)."""
    t0 = time.monotonic()
    with terminate_as_interrupt():
        # every check before anything is written, started or created
        prof = build_profile(opts.profile_options())
        conn = opts.conn
        target: pipeline.SandboxTarget | pipeline.ExistingServer
        if conn.given and conn.sandbox is None:
            target = pipeline.ExistingServer(
                params=resolve(conn),
                unit=opts.server_unit,
                conf_dir=Path(opts.conf_dir) if opts.conf_dir else None,
                yes=opts.yes,
            )
        else:
            target = pipeline.SandboxTarget(
                name=conn.sandbox or "accelerate",
                explicit=conn.sandbox is not None,
                create=opts.create,
            )
        prof, workload = _replay(opts, prof, target)
        result = pipeline.run(
            pipeline.AccelerateRequest(
                target=target,
                profile=prof,
                command=command_line(),
                durability=opts.durability,
                out_dir=Path(opts.out_dir) if opts.out_dir else None,
                measure_storage=(
                    opts.measure_storage
                    if opts.measure_storage is not None
                    else isinstance(target, pipeline.SandboxTarget)
                ),
                workload=workload,
            ),
            AccelerateProgress(),
        )
        out = result.out_dir
        if isinstance(target, pipeline.SandboxTarget):  # its A/B was shown as it ended
            report_after_run([out], out)
            click.echo(f"total: {(time.monotonic() - t0) / 60:.1f} min")
            return
        cmp = result.comparison
        write_output(out / "comparison.md", format_markdown(cmp))
        click.echo(format_markdown(cmp), nl=False)
        click.echo(f"applied with journal {result.journal}; undo with: myaccel rollback")
        report_after_run([out, *([result.journal] if result.journal else [])], out)
        click.echo(f"results: {out}; total {(time.monotonic() - t0) / 60:.1f} min")
