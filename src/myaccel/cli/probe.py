"""`myaccel probe`: facts about the machine, the server and its binary."""

from __future__ import annotations

import json
from typing import Any

import click

from myaccel.cli.common import connection_options, server_options
from myaccel.cli.output import write_output
from myaccel.errors import UsageError
from myaccel.facts.capture import capture_sysroot, tracing_sysroot
from myaccel.facts.collect import collect_facts
from myaccel.facts.render import format_markdown, format_text
from myaccel.facts.sysroot import Sysroot
from myaccel.model import Facts
from myaccel.server.connection import resolve


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
@click.option("--json", "as_json", is_flag=True, help="Print the versioned JSON document.")
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
def probe(**kwargs: Any) -> None:
    """Collect facts about the machine, the server and its binary.

    Host facts are read from proc/ and sys/ files, never from localized command output.
    A server is probed when server options are given (or ~/.my.cnf / the default socket
    answers); each fact records its source, and what cannot be read is "unknown" with a
    reason.
    """
    if kwargs.pop("schema"):
        click.echo(json.dumps(Facts.model_json_schema(), indent=2))
        return
    conn = connection_options(kwargs)
    no_server = kwargs["no_server"]
    params = None
    explicit = conn.given
    if not no_server and (explicit or kwargs["sysroot"] == "/"):
        params = resolve(conn)
    capture_dir = kwargs["capture_dir"]
    sysroot: str | Sysroot = kwargs["sysroot"]
    if capture_dir:
        if kwargs["sysroot"] != "/":
            raise UsageError("--capture reads the live machine", hint="drop --sysroot")
        sysroot = tracing_sysroot()
    facts = collect_facts(
        sysroot,
        server=params,
        server_required=explicit,
        binary=kwargs["binary"],
        analyze_server_binary=not kwargs["no_binary"],
        storage_path=kwargs["datadir"],
    )
    if capture_dir and isinstance(sysroot, Sysroot):
        n = capture_sysroot(sysroot.trace or [], capture_dir)
        click.echo(f"captured {n} files into {capture_dir}", err=True)
    doc = facts.model_dump_json(indent=2)
    if kwargs["out_file"]:
        write_output(kwargs["out_file"], doc + "\n")
    if kwargs["as_json"]:
        click.echo(doc)
    elif kwargs["as_md"]:
        click.echo(format_markdown(facts), nl=False)
    else:
        click.echo(format_text(facts), nl=False)
