"""The ``myaccel`` command: subcommands and the single error boundary."""

from __future__ import annotations

import logging
import sys
from typing import Any

import click

from myaccel import __version__
from myaccel.errors import MyaccelError

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
}


class ErrorBoundaryGroup(click.Group):
    """Render domain errors as ``error:`` / ``hint:`` lines with their exit code; load
    subcommands lazily."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *super().list_commands(ctx)})

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
        debug = bool(ctx.params.get("debug"))
        try:
            return super().invoke(ctx)
        except MyaccelError as exc:
            if debug:
                raise
            click.echo(f"error: {exc.message}", err=True)
            if exc.hint:
                click.echo(f"hint: {exc.hint}", err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("error: interrupted", err=True)
            ctx.exit(130)


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


def main() -> None:
    cli(prog_name="myaccel")
