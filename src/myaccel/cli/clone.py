"""`myaccel clone`: a sandbox that reproduces a running server (binary, configuration,
data), fenced beside it and usable wherever a sandbox is (``--sandbox NAME``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from myaccel.cli import ranges
from myaccel.cli.common import ServerOptions, options_into, resolve, server_options
from myaccel.cli.progress import note
from myaccel.errors import UsageError
from myaccel.units import SizeSyntaxError, format_bytes, parse_size

if TYPE_CHECKING:  # the clone machinery is imported where used: `--help` loads none of it
    from myaccel.clone import CloneResult
    from myaccel.clone.generate import Cap


@dataclass(frozen=True, kw_only=True)
class CloneOptions(ServerOptions):
    name: str
    clone_port: int | None = None
    cpus: str | None = None
    nice: int | None = None
    schema_only: bool = False
    generate_max: str | None = None
    timeout_s: float = 180.0
    as_json: bool = False


def _cap(text: str | None) -> Cap:
    from myaccel.clone.generate import Cap

    if text is None:
        return Cap()
    try:
        size = parse_size(text)
    except SizeSyntaxError as exc:
        raise UsageError(f"--generate-max {text!r}: {exc}", hint="for example 64M or 2G") from exc
    if size < 0:
        raise UsageError(f"--generate-max {text!r} is negative", hint="for example 64M or 2G")
    return Cap(max_bytes=size, max_rows=Cap().max_rows if size else 0)


def _cpus(text: str | None, allowed: set[int] | None = None) -> list[int] | None:
    """``--cpus``: a CPU list, every CPU one this process may run on (``allowed``: its
    affinity), so the fence's ``taskset`` cannot fail later."""
    if text is None:
        return None
    from myaccel.cpulist import parse_cpu_list

    mine = sorted(allowed if allowed is not None else os.sched_getaffinity(0))
    upper = mine[len(mine) // 2]
    example = f"for example --cpus {mine[-1]}" + (
        f" or --cpus {upper}-{mine[-1]}" if upper != mine[-1] else ""
    )
    try:
        cpus = parse_cpu_list(text)
    except ValueError as exc:
        raise UsageError(f"--cpus {text!r}: {exc}", hint=example) from exc
    if not cpus:
        raise UsageError(f"--cpus {text!r} names no CPU", hint=example)
    outside = [c for c in cpus if c not in mine]
    if outside:
        have = ",".join(str(c) for c in mine)
        raise UsageError(
            f"--cpus {text!r}: CPU {', '.join(str(c) for c in outside[:8])} is not one this "
            f"process may run on ({have})",
            hint=f"{example} (the CPUs of `taskset -pc $$`)",
        )
    return cpus


def render(result: CloneResult) -> None:
    rec = result.record
    data = rec.data
    click.echo(f"clone:      {rec.name} (sandbox; use --sandbox {rec.name})")
    click.echo(f"source:     {rec.source.connection}, {rec.source.flavor} {rec.source.version}")
    click.echo(f"server:     {rec.server.binary} ({rec.server.note})")
    if data is not None:
        if data.schema_only:
            click.echo(f"data:       {data.note}")
        else:
            click.echo(
                f"data:       {data.method}, {format_bytes(data.bytes_copied)} in "
                f"{data.duration_s:.1f} s"
            )
    click.echo(
        f"config:     {rec.config_file} ({len(rec.options)} lines, {len(rec.rewritten)} rewritten)"
    )
    if rec.fence is not None:
        click.echo(f"fence:      {' '.join(rec.fence.argv_prefix)} ({rec.fence.reason})")
    click.echo(f"record:     {result.record_path}")
    click.echo(f"took:       {result.duration_s:.1f} s")
    if result.unexplained:
        note("warning: variables differ without a known reason: " + ", ".join(result.unexplained))


@click.command()
@server_options
@click.option("--name", required=True, metavar="CLONE", help="The clone's sandbox name.")
@click.option(
    "--clone-port", type=ranges.TCP_PORT, metavar="N", help="The clone's port (default: free)."
)
@click.option("--cpus", metavar="LIST", help="CPUs for the clone (default: the upper half).")
@click.option(
    "--nice", type=click.IntRange(0, 19), metavar="N", help="The clone's nice level (10)."
)
@click.option(
    "--schema-only",
    is_flag=True,
    help="Copy the schema, not the rows, and fill the tables with generated rows of the "
    "source's shape (row counts and sizes).",
)
@click.option(
    "--generate-max",
    metavar="SIZE",
    help="Schema only: the cap on the generated rows, as bytes of the source's tables "
    "(default 256M; 0 generates none).",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=ranges.TIMEOUT_S,
    default=180.0,
    show_default=True,
    metavar="SECONDS",
    help="How long to wait for the clone's server to start.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the clone's record (JSON).")
@options_into(CloneOptions)
def clone(opts: CloneOptions) -> None:
    """Make a sandbox that reproduces a running server, without stopping it.

    Same binary, its effective configuration (option files, SET PERSIST, runtime changes)
    with paths, port, socket and server id rewritten, and a consistent copy of its data
    (MariaDB: mariadb-backup; MySQL: the clone plugin, which needs BACKUP_ADMIN). The
    source is never written to, except the clone plugin installed for the copy and
    uninstalled after it when it was not loaded. Remove with `myaccel sandbox destroy`.
    """
    from myaccel.clone import CloneRequest, make_clone
    from myaccel.server.sandbox.layout import validate_name

    validate_name(opts.name)
    cpus = _cpus(opts.cpus)
    if opts.generate_max is not None and not opts.schema_only:
        raise UsageError(
            "--generate-max caps the rows a schema-only clone generates",
            hint="add --schema-only, or leave --generate-max out (a full copy has all rows)",
        )
    cap = _cap(opts.generate_max)
    params = resolve(opts.conn)
    request = CloneRequest(
        source=params,
        name=opts.name,
        source_sandbox=opts.conn.sandbox,
        port=opts.clone_port,
        cpus=cpus,
        nice=opts.nice,
        schema_only=opts.schema_only,
        generate_cap=cap,
        timeout_s=opts.timeout_s,
    )
    result = make_clone(request, note)
    if opts.as_json:
        click.echo(result.record.model_dump_json(indent=2))
    else:
        render(result)
