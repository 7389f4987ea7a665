"""`myaccel accelerate`: one command from a bare machine to a before/after report."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from myaccel.cli import options
from myaccel.cli.ab import render_ab, terminate_as_interrupt
from myaccel.cli.bench import AdaptiveFlags, InstructionFlags, ProfileFlags, ReplayFlags
from myaccel.cli.common import ServerOptions, command_line, options_into, resolve, server_options
from myaccel.cli.progress import TerminalProgress, note
from myaccel.errors import UsageError

if TYPE_CHECKING:  # the pipeline (with numpy, scipy) is imported where used, not by `--help`
    from myaccel import accelerate as pipeline
    from myaccel.bench.ab import AbResult
    from myaccel.bench.adaptive import AdaptiveOptions
    from myaccel.bench.profiles import Profile
    from myaccel.bench.workload import Workload


@dataclass(frozen=True, kw_only=True)
class AccelerateOptions(ServerOptions, ProfileFlags, ReplayFlags, AdaptiveFlags, InstructionFlags):
    durability: str = "strict"
    out_dir: str | None = None
    server_unit: str | None = None
    conf_dir: str | None = None
    yes: bool = False
    create: bool = False
    measure_storage: bool | None = None  # default: on a sandbox yes, on a live server no
    basedir: str | None = None
    build: bool = False
    source: str | None = None
    build_dir: str | None = None
    train: str = "quick"
    jobs: int | None = None
    swap_binary: bool = False
    allow_ddl: bool = False
    quiet_wait: float = 60.0
    versions: bool = False

    def build_spec(self) -> pipeline.BuildSpec | None:
        """``--build`` and its options, checked (the training profile must exist)."""
        given = [n for n, v in self._build_flags().items() if v]
        if not self.build:
            if given:
                raise UsageError(
                    f"{', '.join(given)} go(es) with --build", hint="add --build, or leave them out"
                )
            return None
        from myaccel import accelerate as pipeline
        from myaccel.bench.profiles import get_profile

        get_profile(self.train)  # an unknown training profile fails before anything runs
        return pipeline.BuildSpec(
            source=self.source,
            build_dir=Path(self.build_dir).absolute() if self.build_dir else None,
            train_profile=self.train,
            jobs=self.jobs,
            swap_binary=self.swap_binary,
        )

    def _build_flags(self) -> dict[str, object]:
        return {
            "--source": self.source,
            "--build-dir": self.build_dir,
            "--jobs": self.jobs,
            "--swap-binary": self.swap_binary,
            "--train": self.train != "quick",
        }

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

    def ab_done(self, result: AbResult) -> None:
        from myaccel.bench.compare import format_markdown

        render_ab(result, result.started_s)
        for cmp in result.more.values():
            click.echo(format_markdown(cmp), nl=False)


def _replay(
    opts: AccelerateOptions,
    prof: Profile,
    target: pipeline.SandboxTarget | pipeline.ExistingServer,
) -> tuple[Profile, Workload | None]:
    """With --workload-file: the replay of the captured workload (sandbox mode only: its
    writes would change an existing server's data)."""
    from myaccel import accelerate as pipeline

    if opts.workload_file is not None and isinstance(target, pipeline.ExistingServer):
        raise UsageError(
            "--workload-file replays captured statements, writes included: accelerate "
            "replays them on a sandbox only",
            hint="drop the server options (a sandbox named 'accelerate') or pass --sandbox NAME",
        )
    if opts.allow_ddl and opts.workload_file is None:
        raise UsageError(
            "--allow-ddl lets the capture's DDL create the schemas of --workload-file on the "
            "sandbox",
            hint="add --workload-file W.json, or drop --allow-ddl",
        )
    return opts.replay(prof, threads_given=False, workloads_given=bool(opts.workload))


@click.command()
@server_options
@options.profile
@options.workload
@options.durability()
@options.runs
@options.adaptive
@options.instructions
@options.time
@options.warmup
@options.scale
@options.out_dir
@options.quiet_wait
@options.server_unit(
    "Existing server: systemd unit to restart for restart-only knobs (and whose "
    "binary --swap-binary swaps)."
)
@options.conf_dir("Existing server: directory for the managed 99-myaccel.cnf.")
@click.option("--yes", is_flag=True, help="Existing server: apply without asking.")
@click.option(
    "--restart-command",
    metavar="CMD",
    help="Existing server: a command that restarts (and starts) it, for restart-only knobs.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Existing server: apply (and with --swap-binary swap) even when the clone's A/B "
    "shows no improvement (still guarded).",
)
@click.option("--keep-clone", is_flag=True, help="Existing server: keep the clone sandbox.")
@options.seconds(
    "--window",
    2,
    3600,
    30.0,
    "Existing server: seconds of each guard window (its counters before and after).",
)
@options.seconds(
    "--settle",
    0,
    3600,
    30.0,
    "Existing server: seconds to wait after a restart before the after window.",
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
@options.workload_file
@options.replay
@click.option(
    "--allow-ddl",
    is_flag=True,
    help="With --workload-file: create the schemas the sandbox lacks from the capture's DDL "
    "(its CREATE DATABASE and CREATE TABLE statements, checked; empty tables). Without it a "
    "missing schema is an error.",
)
@options.directory(
    "--basedir",
    help="Sandbox: the install tree a new sandbox runs (default: the system's server), e.g. "
    "the distribution's binaries of the version to build.",
)
@click.option(
    "--build",
    is_flag=True,
    help="Also build the server's exact version with PGO+LTO (its Debian source "
    "package, or --source) and measure three arms in one interleaved campaign (on the "
    "sandbox, or on an existing server's clone): distro defaults, distro + plan, build + "
    "plan. Resumable; takes over an hour on 2 cores.",
)
@options.directory(
    "--source",
    help="With --build: the source tree of the server's version (checked against it).",
)
@options.directory(
    "--build-dir",
    help="With --build: the build directory (a complete build there is reused, an "
    "unfinished one resumed; default $MYACCEL_HOME/builds/...).",
)
@click.option(
    "--train",
    default="quick",
    show_default=True,
    metavar="PROFILE",
    help="With --build: the bench profile PGO trains on.",
)
@click.option("--jobs", "-j", type=click.IntRange(1, 256), help="With --build: compile jobs.")
@click.option(
    "--swap-binary",
    is_flag=True,
    help="With --build: afterwards the sandbox runs the build; an existing server's systemd "
    "unit (--server-unit, or found) too, after the plan and only if build + plan beat "
    "distro + plan on the clone, guarded like the plan. Journaled (`myaccel rollback`).",
)
@click.option(
    "--versions",
    is_flag=True,
    help="Also measure the next release line of the server's flavor installed here "
    "(e.g. MariaDB 11.8 for 10.11) on a copy of the same data upgraded with the flavor's "
    "tool, as it is and with the plan: two more arms of the same interleaved campaign, on "
    "the sandbox or the existing server's clone. Advice only: nothing is upgraded.",
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
    a window before and after; a guardrail breach rolls back (docs/existing-server.md).
    --workload-file W.json: the A/B replays a workload of `myaccel capture` (sandbox mode;
    with --allow-ddl, missing schemas are created from the DDL in the capture)."""
    from myaccel import accelerate as pipeline
    from myaccel.bench.profiles import build_profile
    from myaccel.bench.replay import replay_scripts
    from myaccel.cli.report import report_after_run

    t0 = time.monotonic()
    with terminate_as_interrupt(), replay_scripts():
        # every check before anything is written, started or created
        prof = build_profile(opts.profile_options())
        build_spec = opts.build_spec()
        prof, adaptive = opts.adaptive(prof, runs_given=opts.runs is not None)
        counting = opts.counting()
        _refuse_combinations(opts, build_spec, adaptive)
        conn = opts.conn
        target: pipeline.SandboxTarget | pipeline.ExistingServer
        if conn.given and conn.sandbox is None:
            if opts.basedir:
                raise UsageError(
                    "--basedir chooses a sandbox's server, not an existing server's",
                    hint="drop --basedir: the clone runs the server's own binary",
                )
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
                basedir=Path(opts.basedir).absolute() if opts.basedir else None,
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
                allow_ddl=opts.allow_ddl,
                build=build_spec,
                adaptive=adaptive,
                instructions=counting,
                quiet_wait_s=opts.quiet_wait,
                versions=opts.versions,
            ),
            AccelerateProgress(),
        )
        out = result.out_dir
        if result.versions is not None:
            _echo_versions(result)
        if result.build is not None:
            b = result.build
            how = "reused" if b.reused else f"built in {b.wall_s / 60:.1f} min"
            click.echo(f"build: {b.install} ({how}; manifest {b.manifest})")
        if isinstance(target, pipeline.SandboxTarget):  # its A/B was shown as it ended
            if result.journal is not None:
                click.echo(f"binary swapped with journal {result.journal}; undo: myaccel rollback")
            extra = [result.build.manifest] if result.build is not None else []
            report_after_run([out, *extra], out)
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
        if result.swap_live is not None:
            _echo_live(result.swap_live, "swap ")
        if result.swap_journal:
            click.echo(f"binary swapped with journal {result.swap_journal}; undo: myaccel rollback")
        extra = [p for p in (result.journal, result.swap_journal) if p]
        if result.build is not None:
            extra.append(result.build.manifest)
        report_after_run([out, *extra], out)
        click.echo(f"results: {out}; total {(time.monotonic() - t0) / 60:.1f} min")


def _echo_versions(result: pipeline.AccelerateResult) -> None:
    """The version headroom in a few lines: each version arm's geometric-mean gain, and
    what the upgrade changes (advice only)."""
    head = result.versions
    assert head is not None
    click.echo(
        f"version headroom ({head.current.label} -> {head.newer.version.label}, "
        "on a copy of the data; nothing upgraded):"
    )
    for key in ("version", "version-plan", "version-plan-vs-plan"):
        cmp = result.more.get(key)
        if cmp is None:
            continue
        gain = "n/a" if cmp.geomean_delta_pct is None else f"{cmp.geomean_delta_pct:+.1f}%"
        ci = (
            f" [95% CI {cmp.geomean_ci_low_pct:+.1f}%, {cmp.geomean_ci_high_pct:+.1f}%]"
            if cmp.geomean_ci_low_pct is not None and cmp.geomean_ci_high_pct is not None
            else ""
        )
        verdicts = ", ".join(f"{c.workload} {c.verdict}" for c in cmp.cells)
        click.echo(
            f"  {cmp.candidate_label} vs {cmp.baseline_label}: geomean {gain}{ci} ({verdicts})"
        )
    for line in head.advice():
        click.echo(f"  {line}")


def _refuse_combinations(
    opts: AccelerateOptions,
    build_spec: pipeline.BuildSpec | None,
    adaptive: AdaptiveOptions | None,
) -> None:
    """The options that cannot go together, refused before anything runs."""
    if adaptive is not None and build_spec is not None:
        raise UsageError(
            "--target decides between two arms; --build measures three",
            hint="drop --target (--runs sets the runs per arm), or measure the build "
            "with `myaccel ab --candidate-basedir DIR --target PCT`",
        )
    if opts.versions and (build_spec is not None or adaptive is not None):
        raise UsageError(
            f"--versions adds two arms to the campaign; {'--build' if build_spec else '--target'} "
            "cannot go with it",
            hint="measure the versions and the build (or a --target) in two runs",
        )
    if opts.versions and opts.instructions:
        raise UsageError(
            "--instructions counts every arm on the sandbox's own data; the newer "
            "version's arms run on an upgraded copy of it",
            hint="measure the versions and the instruction count in two runs",
        )


def _echo_live(live: dict[str, object], what: str = "") -> None:
    """The guard's two windows, one line each."""
    for key in ("before", "after"):
        w = live.get(key)
        if not isinstance(w, dict):
            continue
        parts = [f"live {what}{key}: {w.get('seconds')} s"]
        for name, unit in (("qps", "statements/s"), ("latency_ms", "ms"), ("error_rate", "")):
            st = w.get(name)
            if isinstance(st, dict):
                parts.append(f"{name} {st['mean']} +/- {st['sd']} {unit}".rstrip())
        sampler = w.get("sampler")
        late = sampler.get("late_start_s") if isinstance(sampler, dict) else None
        if isinstance(late, (int, float)) and late > 1:
            parts.append(f"began {late} s late")
        click.echo(", ".join(parts))
    if isinstance(live.get("verdict"), str):
        click.echo(f"live {what}verdict: {live['verdict']}")
