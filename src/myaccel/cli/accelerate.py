"""`myaccel accelerate`: one command from a bare machine to a before/after report."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

import click

from myaccel import accelerate as pipeline
from myaccel.bench.ab import AbResult
from myaccel.bench.profiles import build_profile
from myaccel.bench.session import BenchResult
from myaccel.cli import ranges
from myaccel.cli.ab import render_ab, terminate_as_interrupt
from myaccel.cli.bench import ProfileFlags, render_bench
from myaccel.cli.common import ServerOptions, command_line, options_into, resolve, server_options
from myaccel.cli.progress import TerminalProgress, note
from myaccel.cli.report import report_after_run
from myaccel.errors import UsageError


@dataclass(frozen=True, kw_only=True)
class AccelerateOptions(ServerOptions, ProfileFlags):
    durability: str = "strict"
    out_dir: str | None = None
    server_unit: str | None = None
    conf_dir: str | None = None
    yes: bool = False
    create: bool = False
    measure_storage: bool | None = None  # default: on a sandbox yes, on a live server no
    restart_command: str | None = None
    force: bool = False
    keep_clone: bool = False
    window: float = 30.0
    settle: float = 30.0


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
    "--restart-command",
    metavar="CMD",
    help="Existing server: a command that restarts (and starts) it, for restart-only knobs.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Existing server: apply even when the clone's A/B shows no improvement (still guarded).",
)
@click.option("--keep-clone", is_flag=True, help="Existing server: keep the clone sandbox.")
@click.option(
    "--window",
    type=click.FloatRange(2, 3600),
    default=30.0,
    show_default=True,
    help="Existing server: seconds of each guard window (its counters before and after).",
)
@click.option(
    "--settle",
    type=click.FloatRange(0, 3600),
    default=30.0,
    show_default=True,
    help="Existing server: seconds to wait after a restart before the after window.",
)
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
@options_into(AccelerateOptions)
def accelerate(opts: AccelerateOptions) -> None:
    """Probe, benchmark the defaults, plan, apply the plan's server layer, benchmark again
    (interleaved), compare, and write report.md with the article-style table.

    Without server options: a sandbox named 'accelerate' (created from the distribution's
    binaries with their defaults when missing; a --sandbox NAME that does not exist needs
    --create) and an interleaved A/B; an interrupt puts the sandbox back on its base
    configuration. With server options: an existing server, never benchmarked itself:
    preflight, a clone of it for an interleaved A/B (its configuration vs the plan), then,
    if the plan improves, a journaled apply verified with the server's own counters over
    a window before and after; a guardrail breach rolls back (docs/existing-server.md)."""
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
                restart_command=opts.restart_command,
                force=opts.force,
                keep_clone=opts.keep_clone,
                window_s=opts.window,
                settle_s=opts.settle,
            )
        else:
            target = pipeline.SandboxTarget(
                name=conn.sandbox or "accelerate",
                explicit=conn.sandbox is not None,
                create=opts.create,
            )
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
            ),
            AccelerateProgress(),
        )
        out = result.out_dir
        if isinstance(target, pipeline.SandboxTarget):  # its A/B was shown as it ended
            report_after_run([out], out)
            click.echo(f"total: {(time.monotonic() - t0) / 60:.1f} min")
            return
        for line in result.figures:
            click.echo(f"figures {line}")
        if result.live is not None:
            _echo_live(result.live)
        if result.journal:
            click.echo(f"applied with journal {result.journal}; undo with: myaccel rollback")
        else:
            click.echo("nothing applied to the server")
        report_after_run([out, *([result.journal] if result.journal else [])], out)
        click.echo(f"results: {out}; total {(time.monotonic() - t0) / 60:.1f} min")


def _echo_live(live: dict[str, object]) -> None:
    """The guard's two windows, one line each."""
    for key in ("before", "after"):
        w = live.get(key)
        if not isinstance(w, dict):
            continue
        parts = [f"live {key}: {w.get('seconds')} s"]
        for name, unit in (("qps", "statements/s"), ("latency_ms", "ms"), ("error_rate", "")):
            st = w.get(name)
            if isinstance(st, dict):
                parts.append(f"{name} {st['mean']} +/- {st['sd']} {unit}".rstrip())
        click.echo(", ".join(parts))
