"""Options shared by subcommands, and typed options for the commands that take many."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

import click

from myaccel.cli.ranges import TCP_PORT
from myaccel.server import connection
from myaccel.server.connection import ConnectionOptions, ConnectParams

if TYPE_CHECKING:
    from myaccel.server.sandbox import Sandbox

F = TypeVar("F", bound=Callable[..., Any])
OptionsT = TypeVar("OptionsT")  # an options dataclass


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


measure_storage = click.option(
    "--measure-storage",
    is_flag=True,
    help="Measure the datadir's device with fio (I/O rules then follow what it sustains; "
    "about 15 s, cached per device for 30 days).",
)


@dataclass(frozen=True, kw_only=True)
class ServerOptions:
    """The values of ``server_options``; a command's options class extends it."""

    conn: ConnectionOptions = field(default_factory=ConnectionOptions)


def connection_options(params: dict[str, Any]) -> ConnectionOptions:
    """Pop the server options from a command's parameters."""
    return ConnectionOptions(
        host=params.pop("host", None),
        port=params.pop("port", None),
        socket=params.pop("socket", None),
        user=params.pop("user", None),
        password=params.pop("password", None),
        defaults_file=params.pop("defaults_file", None),
        sandbox=params.pop("sandbox_name", None),
    )


def options_into(
    cls: type[OptionsT],
) -> Callable[[Callable[[OptionsT], None]], Callable[..., None]]:
    """Hand a command its parsed options as one typed ``cls``: a dataclass whose fields
    are the command's parameter names (``cls(**params)`` fails on a name that differs),
    the server options gathered in ``conn`` for a ``ServerOptions``."""
    server = issubclass(cls, ServerOptions)

    def wrap(f: Callable[[OptionsT], None]) -> Callable[..., None]:
        @functools.wraps(f)
        def command(**params: Any) -> None:
            if server:
                params["conn"] = connection_options(params)
            f(cls(**params))

        return command

    return wrap


def command_line() -> list[str]:
    """This myaccel command line, as campaigns record it (redacted when stored)."""
    return ["myaccel", *sys.argv[1:]]


def resolve(conn: ConnectionOptions, *, sandbox: Sandbox | None = None) -> ConnectParams:
    """The server the options name: ``--sandbox NAME`` takes everything from the sandbox
    (a ``--user`` given with it, and its password, replace the sandbox's); otherwise
    option files, ``MYSQL_PWD`` and the options (``server.connection.resolve``).
    ``sandbox``: the sandbox ``--sandbox`` names, when the caller has loaded it already
    (it is then not loaded again)."""
    if conn.sandbox is None:
        params = connection.resolve(conn)
    else:
        if sandbox is None:
            from myaccel.server.sandbox import Sandbox

            sandbox = Sandbox.load(conn.sandbox)
        elif sandbox.name != conn.sandbox:
            raise ValueError(f"sandbox {sandbox.name!r} is not --sandbox {conn.sandbox!r}")
        params = sandbox.connect_params()
        if conn.user is not None:
            params = replace(params, user=conn.user, password=conn.password)
    # switches a killed command left on this server (myaccel.cli.repair, step 2)
    from myaccel.cli.repair import repair_with

    repair_with(params)
    return params
