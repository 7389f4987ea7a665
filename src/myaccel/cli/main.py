"""The ``myaccel`` command: subcommands and the single error boundary."""

from __future__ import annotations

import logging
import sys
from typing import Any

import click

from myaccel import __version__
from myaccel.errors import MyaccelError


class ErrorBoundaryGroup(click.Group):
    """Render domain errors as ``error:`` / ``hint:`` lines with their exit code."""

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


def _register() -> None:
    from myaccel.cli import ab, accelerate, bench, plan, probe, sandbox

    cli.add_command(probe.probe)
    cli.add_command(sandbox.sandbox)
    cli.add_command(bench.bench)
    cli.add_command(ab.ab)
    cli.add_command(ab.compare)
    cli.add_command(plan.plan)
    cli.add_command(plan.explain)
    cli.add_command(accelerate.accelerate)


_register()


def main() -> None:
    cli(prog_name="myaccel")
