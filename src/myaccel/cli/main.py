"""The ``myaccel`` command: subcommands and the single error boundary."""

from __future__ import annotations

import errno
import json
import logging
import signal
import sys
from collections.abc import Sequence
from typing import Any

import click

from myaccel import __version__, signals
from myaccel.errors import ExitCode, Interrupted, MyaccelError, validation_summary

# Subcommands are imported only when used: `myaccel probe` must not pay for scipy (used
# by compare) or the sandbox machinery. name -> "module:attribute".
COMMANDS = {
    "probe": "myaccel.cli.probe:probe",
    "sandbox": "myaccel.cli.sandbox:sandbox",
    "bench": "myaccel.cli.bench:bench",
    "ab": "myaccel.cli.ab:ab",
    "compare": "myaccel.cli.ab:compare",
    "plan": "myaccel.cli.plan:plan",
    "explain": "myaccel.cli.plan:explain",
    "accelerate": "myaccel.cli.accelerate:accelerate",
    "apply": "myaccel.cli.apply:apply",
    "rollback": "myaccel.cli.apply:rollback_cmd",
    "verify": "myaccel.cli.apply:verify",
    "build": "myaccel.cli.build:build",
    "verify-build": "myaccel.cli.build:verify_build",
    "report": "myaccel.cli.report:report",
    "profile": "myaccel.cli.profile:profile",
    "diagnose": "myaccel.cli.profile:diagnose",
    "clone": "myaccel.cli.clone:clone",
    "capture": "myaccel.cli.capture:capture",
    "tune": "myaccel.cli.tune:tune",
    "fleet-report": "myaccel.cli.fleet:fleet_report",
    "doctor": "myaccel.cli.doctor:doctor",
}

# `myaccel --help` lists the commands from this table without importing them: each is the
# first line of the command's own docstring (tests/unit/test_cli_help.py keeps them equal).
SUMMARIES = {
    "probe": "Collect facts about the machine, the server and its binary.",
    "sandbox": "Private MariaDB/MySQL servers for benchmarks and experiments.",
    "bench": "Run sysbench workloads and record one JSON document per run.",
    "ab": "Compare two configurations (or builds) on a sandbox with interleaved runs.",
    "compare": "Compare runs: two result directories (A then B), or one `ab` campaign's two arms.",
    "plan": "Turn facts into a layered plan: what to change, why, how sure, how to verify.",
    "explain": "Explain a rule: what it does, why, and its source.",
    "accelerate": "Probe, benchmark the defaults, plan, apply the plan's server layer, "
    "benchmark again",
    "apply": "Apply a plan with a journal written before every change; restart and health-check",
    "rollback": "Undo an apply, newest change first, byte for byte; completes an unfinished one",
    "verify": "What has drifted since apply (a reboot, a restart, a hand edit).",
    "build": "Build a server from source with verified optimizations.",
    "verify-build": "Check a built server binary: profile use, no instrumentation left, LTO, "
    "atomics class,",
    "report": "Build one self-contained report.html (plots, styles, script inside) and a",
    "profile": "Sample a running server with perf: flame graph, top-N tables, per-CPU load, "
    "findings.",
    "diagnose": "Findings from a profile: evidence -> likely cause -> plan rules raised or "
    "lowered.",
    "clone": "Make a sandbox that reproduces a running server, without stopping it.",
    "capture": "Record the server's statements for a bounded window into a workload file.",
    "tune": "Search server knobs past the rules' plan on a sandbox (Bayesian optimization).",
    "fleet-report": "Write fleet-report.md and fleet-report.html from the per-host artifacts the",
    "doctor": "What this host has and lacks for each command, and the line that installs it.",
}


class ErrorBoundaryGroup(click.Group):
    """Render every failure as one ``error:`` line and one ``hint:`` line with an exit
    code from ``ExitCode``; load subcommands lazily.

    This is the one error boundary: domain errors (``MyaccelError``), click's usage errors,
    interrupts, OS errors (a full disk), damaged input files (JSON, pydantic) and bugs all
    end here. Tracebacks are shown only with ``--debug``.
    """

    debug = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *super().list_commands(ctx)})

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands with their summaries from ``SUMMARIES``: none is imported. A
        summary is shortened by click's own rule (``get_short_help_str``), so the listing
        reads as if every command had been loaded (at click's widths, up to 80 columns);
        a command missing from the table (added with ``add_command``) is loaded."""
        rows: list[tuple[str, str]] = []
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names), default=0)
        for name in names:
            summary = SUMMARIES.get(name)
            cmd = click.Command(name, help=summary) if summary else self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        rest = super().parse_args(ctx, args)
        if not ctx.resilient_parsing:
            _help_before_callback(self, ctx, [*ctx._protected_args, *ctx.args])
        return rest

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return super().get_command(ctx, cmd_name)
        import importlib

        mod, _, attr = target.partition(":")
        cmd = getattr(importlib.import_module(mod), attr)
        assert isinstance(cmd, click.Command)
        return cmd

    def invoke(self, ctx: click.Context) -> Any:
        self.debug = bool(ctx.params.get("debug"))
        return super().invoke(ctx)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        self.debug = False
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:  # `myaccel sandbox`: its help
            exc.show()
            sys.exit(exc.exit_code)
        except Exception as exc:  # the boundary: everything is rendered below
            if self.debug and not isinstance(exc, click.ClickException | click.Abort):
                raise
            sys.exit(render_error(exc))
        except KeyboardInterrupt as exc:  # click re-raises it as Abort; kept for safety
            if self.debug:
                raise
            sys.exit(render_error(exc))
        # click returns the code of ctx.exit(n), or the command's return value (None)
        sys.exit(rv if isinstance(rv, int) and not isinstance(rv, bool) else ExitCode.OK)


def _help_before_callback(group: click.Group, ctx: click.Context, args: list[str]) -> None:
    """``myaccel CMD [SUB] ... --help``: print the command's help and exit before the group's
    callback runs. Help changes nothing and reaches no server, so it skips the repair of
    orphaned journals (``cli``) and answers in a fraction of a second. The command's own
    parser decides, as it would have afterwards: when ``--help`` turns out to be the value
    of an option, or a nested group's subcommand is named, the normal path follows."""
    tokens = args[: args.index("--")] if "--" in args else args
    if "--help" not in tokens[1:]:
        return
    parent, rest = ctx, list(args)
    while True:
        name, cmd, rest = group.resolve_command(parent, rest)
        if name is None or cmd is None:
            return
        sub_ctx = cmd.make_context(name, rest, parent=parent)  # --help: prints, raises Exit
        if not isinstance(cmd, click.Group):
            return
        group, parent, rest = cmd, sub_ctx, [*sub_ctx._protected_args, *sub_ctx.args]
        if not rest:
            return


def _say(kind: str, text: str) -> None:
    line = " ".join(str(text).split()) if text else ""
    click.echo(f"{kind}: {line}", err=True)


def render_error(exc: BaseException) -> int:
    """Print ``error:`` and ``hint:`` for ``exc``; return the exit code."""
    message, hint, code = describe_error(exc)
    _say("error", message)
    _say("hint", hint)
    return int(code)


def describe_error(exc: BaseException) -> tuple[str, str, ExitCode]:
    """(one-line message, hint, exit code) for any exception that reaches the boundary."""
    if isinstance(exc, MyaccelError):
        return (
            exc.message,
            exc.hint or "rerun with --debug for details",
            ExitCode(int(exc.exit_code)),
        )
    if isinstance(exc, click.Abort):
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, KeyboardInterrupt):
            return describe_error(cause)
        return (
            "aborted",
            "nothing more was done; run the command again to proceed",
            ExitCode.FAILURE,
        )
    if isinstance(exc, Interrupted):
        code = _SIGNAL_EXIT.get(exc.signum, ExitCode.INTERRUPTED)
        return f"interrupted by {signal.Signals(exc.signum).name}", _INTERRUPT_HINT, code
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", _INTERRUPT_HINT, ExitCode.INTERRUPTED
    if isinstance(exc, click.ClickException):
        return _click_error(exc)
    if isinstance(exc, OSError):
        return _os_error(exc)
    if "pydantic" in sys.modules:  # else no pydantic error can have been raised
        from pydantic import ValidationError  # imported here: `myaccel --help` does without

        if isinstance(exc, ValidationError):
            return (
                f"invalid {exc.title} document: {validation_summary(exc)}",
                "the file was edited, damaged or written by another version of myaccel; "
                "write it again with this version (--debug shows which file)",
                ExitCode.DATA_ERROR,
            )
    if isinstance(exc, json.JSONDecodeError):
        return (
            f"a file is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
            "the file was edited or damaged (a crash, a full disk); --debug shows which file",
            ExitCode.DATA_ERROR,
        )
    first = str(exc).splitlines()[0] if str(exc) else ""
    return (
        f"internal error: {type(exc).__name__}{': ' + first if first else ''}",
        "this is a bug in myaccel: rerun with --debug for the traceback and report it",
        ExitCode.INTERNAL,
    )


_SIGNAL_EXIT: dict[int, ExitCode] = {
    signal.SIGINT: ExitCode.INTERRUPTED,
    signal.SIGTERM: ExitCode.TERMINATED,
    signal.SIGHUP: ExitCode.HANGUP,
}
_INTERRUPT_HINT = (
    "what the command had switched on or started was undone (server switches put back, "
    "sysbench stopped, a sandbox back on its base configuration, a half-made clone "
    "removed); an interrupted apply is finished or undone by: myaccel rollback"
)


def _click_error(exc: click.ClickException) -> tuple[str, str, ExitCode]:
    ctx = getattr(exc, "ctx", None)
    # the program is `myaccel` whatever name it was run under (python -m, a test runner)
    path = " ".join(["myaccel", *(ctx.command_path.split()[1:] if ctx is not None else [])])
    if isinstance(exc, click.UsageError):
        return exc.format_message(), f"see: {path} --help", ExitCode.USAGE
    try:
        code = ExitCode(exc.exit_code)
    except ValueError:
        code = ExitCode.FAILURE
    return exc.format_message(), f"see: {path} --help", code


def _os_error(exc: OSError) -> tuple[str, str, ExitCode]:
    from myaccel.paths import myaccel_home

    what = (exc.strerror or type(exc).__name__).lower()
    where = f"'{exc.filename}'" if exc.filename else f"a file (MYACCEL_HOME is '{myaccel_home()}')"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return (
            f"{what}: cannot write {where}",
            "free space on that file system (or point MYACCEL_HOME / --out elsewhere) "
            "and run the command again; `myaccel rollback --list` shows any unfinished journal",
            ExitCode.IO_ERROR,
        )
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return (
            f"{what}: {where}",
            "run as a user who may write there (root for /etc), or choose another "
            "path (MYACCEL_HOME, --out)",
            ExitCode.IO_ERROR,
        )
    return (
        f"{what}: {where}",
        "check the path and its file system; rerun with --debug for details",
        ExitCode.IO_ERROR,
    )


@click.group(cls=ErrorBoundaryGroup, context_settings={"help_option_names": ["--help"]})
@click.version_option(__version__, prog_name="myaccel")
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logging.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Full-stack performance acceleration for MySQL-family servers."""
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    if ctx.invoked_subcommand not in (None, "rollback"):  # rollback does it in its own way
        from myaccel.cli.repair import repair_orphans

        repair_orphans(lambda line: click.echo(line, err=True))


def main() -> None:
    signals.install()
    try:
        cli(prog_name="myaccel")
    finally:
        from myaccel.cli.repair import warn_unrepaired

        warn_unrepaired()
        signals.quiet()
