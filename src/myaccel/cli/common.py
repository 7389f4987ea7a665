"""Options shared by subcommands."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from myaccel.cli.ranges import TCP_PORT
from myaccel.server.connection import ConnectionOptions

F = TypeVar("F", bound=Callable[..., Any])


def server_options(f: F) -> F:
    """--host --port --socket --user --password --defaults-file --sandbox."""
    opts = [
        click.option("--sandbox", "sandbox_name", metavar="NAME", help="Use a myaccel sandbox."),
        click.option("--defaults-file", metavar="FILE", help="Read only this option file."),
        click.option(
            "--password", "-p", metavar="PASS", help="Password (or MYSQL_PWD, or ~/.my.cnf)."
        ),
        click.option("--user", "-u", metavar="USER", help="Server user."),
        click.option("--socket", "-S", metavar="PATH", help="Unix socket."),
        click.option("--port", "-P", type=TCP_PORT, metavar="N", help="TCP port."),
        click.option("--host", "-h", "host", metavar="HOST", help="Server host."),
    ]
    for o in opts:
        f = o(f)
    return f


def connection_options(kwargs: dict[str, Any]) -> ConnectionOptions:
    """Pop the server options from a command's kwargs."""
    return ConnectionOptions(
        host=kwargs.pop("host", None),
        port=kwargs.pop("port", None),
        socket=kwargs.pop("socket", None),
        user=kwargs.pop("user", None),
        password=kwargs.pop("password", None),
        defaults_file=kwargs.pop("defaults_file", None),
        sandbox=kwargs.pop("sandbox_name", None),
    )
