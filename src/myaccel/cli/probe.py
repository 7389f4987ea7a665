"""`myaccel probe`: facts about the machine, the server and its binary.

The collectors and the facts model are imported where used, not by ``--help``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from myaccel.cli import options
from myaccel.cli.common import ServerOptions, measure_storage, options_into, resolve, server_options
from myaccel.cli.output import write_output
from myaccel.cli.progress import note
from myaccel.errors import UsageError

if TYPE_CHECKING:
    from myaccel.facts.sysroot import Sysroot


@dataclass(frozen=True, kw_only=True)
class ProbeOptions(ServerOptions):
    sysroot: str = "/"
    no_server: bool = False
    binary: str | None = None
    no_binary: bool = False
    datadir: str | None = None
    as_json: bool = False
    as_md: bool = False
    out_file: str | None = None
    capture_dir: str | None = None
    schema: bool = False
    measure_storage: bool = False


@click.command()
@click.option(
    "--sysroot",
    default="/",
    show_default=True,
    metavar="DIR",
    help="Read proc/ and sys/ under DIR (a captured tree).",
)
@server_options
@click.option("--no-server", is_flag=True, help="Do not try to reach a server.")
@click.option("--binary", metavar="PATH", help="Analyze this mysqld/mariadbd binary.")
@click.option("--no-binary", is_flag=True, help="Skip analysis of the running server's binary.")
@click.option(
    "--datadir", metavar="DIR", help="Report storage for DIR (default: the server's datadir)."
)
@options.json("Print the versioned JSON document.")
@click.option("--md", "as_md", is_flag=True, help="Print Markdown.")
@click.option("--out", "out_file", metavar="FILE", help="Also write the JSON document to FILE.")
@click.option(
    "--capture",
    "capture_dir",
    metavar="DIR",
    help="Copy every proc/sys file the probe reads into DIR (a sysroot for bug reports).",
)
@click.option(
    "--schema", is_flag=True, help="Print the JSON Schema of the facts document and exit."
)
@measure_storage
@options_into(ProbeOptions)
def probe(opts: ProbeOptions) -> None:
    """Collect facts about the machine, the server and its binary.

    Host facts are read from proc/ and sys/ files, never from localized command output.
    A server is probed when server options are given (or ~/.my.cnf / the default socket
    answers); each fact records its source, and what cannot be read is "unknown" with a
    reason.
    """
    from myaccel.facts.capture import capture_sysroot, tracing_sysroot
    from myaccel.facts.collect import collect_facts
    from myaccel.facts.iomeasure import facts_with_measured_storage
    from myaccel.facts.render import format_markdown, format_text
    from myaccel.facts.sysroot import Sysroot
    from myaccel.model import Facts

    if opts.schema:
        click.echo(json.dumps(Facts.model_json_schema(), indent=2))
        return
    conn = opts.conn
    params = None
    explicit = conn.given
    if not opts.no_server and (explicit or opts.sysroot == "/"):
        params = resolve(conn)
    sysroot: str | Sysroot = opts.sysroot
    if opts.capture_dir:
        if opts.sysroot != "/":
            raise UsageError("--capture reads the live machine", hint="drop --sysroot")
        sysroot = tracing_sysroot()
    facts = collect_facts(
        sysroot,
        server=params,
        server_required=explicit,
        binary=opts.binary,
        analyze_server_binary=not opts.no_binary,
        storage_path=opts.datadir,
    )
    if opts.measure_storage:
        facts = facts_with_measured_storage(facts, refresh=True, say=note)
    if opts.capture_dir and isinstance(sysroot, Sysroot):
        n = capture_sysroot(sysroot.trace or [], opts.capture_dir)
        click.echo(f"captured {n} files into {opts.capture_dir}", err=True)
    doc = facts.model_dump_json(indent=2)
    if opts.out_file:
        write_output(opts.out_file, doc + "\n")
    if opts.as_json:
        click.echo(doc)
    elif opts.as_md:
        click.echo(format_markdown(facts), nl=False)
    else:
        click.echo(format_text(facts), nl=False)
