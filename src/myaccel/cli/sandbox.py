"""`myaccel sandbox`: private MariaDB/MySQL servers for benchmarks, A/B runs and builds.

Progress and notes go to stderr; data (status, lists) to stdout, as a rich table on a
terminal, as plain aligned text in pipes, or as JSON with ``--json``.

The sandbox machinery (``myaccel.server.sandbox``) is imported where used, not by
``--help``: the two defaults the options show are copied here (a unit test keeps them equal).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from myaccel.cli import options
from myaccel.cli.common import F
from myaccel.cli.output import print_table
from myaccel.cli.ranges import TCP_PORT, TIMEOUT_S
from myaccel.server.flavor import flavor_label
from myaccel.units import format_bytes

if TYPE_CHECKING:
    from myaccel.server.flavors import Flavor
    from myaccel.server.sandbox import Sandbox, SandboxStatus, SnapshotInfo, StartResult

# myaccel.server.sandbox's DEFAULT_NAME and DEFAULT_TIMEOUT_S (tests/unit/test_cli_help.py)
DEFAULT_NAME = "default"
DEFAULT_TIMEOUT_S = 60.0


def _say(msg: str) -> None:
    click.echo(msg, err=True)


def _stdout_is_tty() -> bool:
    return sys.stdout.isatty()


def _format_size(size_bytes: int) -> str:
    return format_bytes(size_bytes, whole_from=None)


def _print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2))


def _client_command(sb: Sandbox) -> str:
    client = "mariadb" if sb.flavor == "mariadb" else "mysql"
    return f"{client} --defaults-file={sb.option_file}"


def _report_start(sb: Sandbox, res: StartResult, config: str | None) -> None:
    _say(res.message)
    if res.overridden:
        _say(
            "note: ignored from the config: "
            + ", ".join(o.describe() for o in res.overridden)
            + " (the sandbox's own values win)"
        )
    if config is not None and not res.config_has_server_options:
        _say(f"note: {config} has no [mysqld]/[server]/[mariadb] options; running the base config")
    if not res.already_running:
        _say(f"connect: {_client_command(sb)}")


name_argument = click.argument("name", default=DEFAULT_NAME, required=False, metavar="[NAME]")
json_flag = options.json("Print JSON.")
timeout_option = click.option(
    "--timeout",
    "timeout_s",
    type=TIMEOUT_S,
    default=DEFAULT_TIMEOUT_S,
    show_default=True,
    metavar="SECONDS",
    help="How long to wait for the server.",
)
config_option = click.option(
    "--config",
    "config",
    metavar="FILE",
    help="Option file whose [mysqld]/[server]/[mariadb]/[mariadbd] groups are applied.",
)
set_option = click.option(
    "--set",
    "set_items",
    multiple=True,
    metavar="KEY=VALUE",
    help="A server option (repeatable); wins over --config.",
)
basedir_option = click.option(
    "--basedir",
    metavar="DIR",
    help="Run another build of the same version (install prefix with bin/ or sbin/).",
)


@click.group()
def sandbox() -> None:
    """Private MariaDB/MySQL servers for benchmarks and experiments.

    Each sandbox has its own datadir, socket, 127.0.0.1 port, option file and error log
    under $MYACCEL_HOME/sandboxes/NAME (NAME defaults to 'default').
    """


@sandbox.command()
@name_argument
@click.option(
    "--basedir",
    metavar="DIR",
    help="A build's install prefix (bin/ or sbin/ with mariadbd/mysqld, share/). "
    "Default: the installed mariadbd, then mysqld.",
)
@click.option(
    "--flavor",
    type=click.Choice(["mariadb", "mysql"]),
    help="Server flavor (default: the installed MariaDB, then MySQL). mysql: the mysqld on "
    "PATH, else the MySQL 9.7 of scripts/ensure-mysql.sh ($MYACCEL_MYSQL_ROOT/mysql-9.7).",
)
@click.option(
    "--version",
    "series",
    metavar="X.Y",
    help="Release line of the server (e.g. 11.8): the installed one if it is that line, else "
    "the project's install ($MYACCEL_MYSQL_ROOT/mariadb-11.8 of scripts/ensure-mariadb.sh, "
    "mysql-9.7).",
)
@click.option(
    "--port", type=TCP_PORT, metavar="N", help="TCP port on 127.0.0.1 (default: a free one)."
)
@click.option("--no-start", is_flag=True, help="Stop the server once the sandbox is ready.")
@timeout_option
def init(
    name: str,
    basedir: str | None,
    flavor: Flavor | None,
    series: str | None,
    port: int | None,
    no_start: bool,
    timeout_s: float,
) -> None:
    """Create a sandbox: datadir, sbtest database and benchmark user; leaves it running."""
    from myaccel.server.sandbox import Sandbox

    sb = Sandbox.init(
        name,
        basedir=Path(basedir) if basedir else None,
        port=port,
        start=not no_start,
        timeout_s=timeout_s,
        progress=_say,
        flavor=flavor,
        series=series,
    )
    _say(f"connect: {_client_command(sb)}")


@sandbox.command()
@name_argument
@config_option
@set_option
@basedir_option
@timeout_option
def start(
    *,
    name: str,
    config: str | None,
    set_items: tuple[str, ...],
    basedir: str | None,
    timeout_s: float,
) -> None:
    """Start a sandbox (with the base config unless --config/--set/--basedir)."""
    from myaccel.server.sandbox import Sandbox, ServerOptions, parse_sets

    sets = parse_sets(set_items)
    sb = Sandbox.load(name)
    res = sb.start(ServerOptions(config, sets, basedir), timeout_s=timeout_s, progress=_say)
    _report_start(sb, res, config)


@sandbox.command()
@name_argument
@timeout_option
def stop(name: str, timeout_s: float) -> None:
    """Shut a sandbox down cleanly (kill -9 only after --timeout, and says so)."""
    from myaccel.server.sandbox import Sandbox

    _say(Sandbox.load(name).stop(timeout_s))


@sandbox.command()
@name_argument
@config_option
@set_option
@basedir_option
@click.option("--base-config", is_flag=True, help="Drop the active --config/--set/--basedir first.")
@timeout_option
def restart(
    *,
    name: str,
    config: str | None,
    set_items: tuple[str, ...],
    basedir: str | None,
    base_config: bool,
    timeout_s: float,
) -> None:
    """Stop and start, keeping the active config unless new options are given."""
    from myaccel.server.sandbox import Sandbox, ServerOptions, parse_sets

    sets = parse_sets(set_items)
    sb = Sandbox.load(name)
    res = sb.restart(
        ServerOptions(config, sets, basedir), timeout_s=timeout_s, reset=base_config, progress=_say
    )
    _report_start(sb, res, config)


def _status_rows(sb: Sandbox, st: SandboxStatus) -> list[tuple[str, str]]:
    return [
        ("name", st.name),
        ("state", st.state),
        ("pid", str(st.pid) if st.pid is not None else "-"),
        ("server", f"{flavor_label(st.flavor)} {st.version}"),
        ("binary", st.binary),
        ("port", f"127.0.0.1:{st.port}"),
        ("socket", st.socket),
        ("datadir", st.datadir),
        ("config", st.active_config.describe()),
        *([("base config", sb.state.base_config)] if sb.state.base_config else []),
        *([("runs under", " ".join(sb.state.launch_prefix))] if sb.state.launch_prefix else []),
        ("option file", st.option_file),
        ("error log", st.error_log),
        ("bench user", f"{sb.state.bench_user} (password in {sb.state_file})"),
        ("connect", _client_command(sb)),
    ]


@sandbox.command()
@name_argument
@json_flag
def status(name: str, as_json: bool) -> None:
    """Show whether a sandbox runs (running / stopped / crashed) and where it lives."""
    from myaccel.server.sandbox import Sandbox

    sb = Sandbox.load(name)
    st = sb.status()
    if as_json:
        _print_json(st.to_dict())
        return
    # key: value lines even on a terminal, so paths and commands stay copy-pastable
    rows = _status_rows(sb, st)
    width = max(len(k) for k, _ in rows) + 1
    tty = _stdout_is_tty()
    for k, v in rows:
        key = f"{k + ':':<{width}}"
        click.echo(f"{click.style(key, bold=True) if tty else key} {v}")
    if st.state == "crashed":
        _say(f"note: the server died; `myaccel sandbox start {name}` cleans up and starts it")


@sandbox.command(name="list")
@json_flag
def list_(as_json: bool) -> None:
    """List the sandboxes."""
    from myaccel.server.sandbox import Sandbox

    statuses = [sb.status() for sb in Sandbox.list_all()]
    if as_json:
        _print_json([st.to_dict() for st in statuses])
        return
    if not statuses:
        _say("no sandboxes; create one with `myaccel sandbox init`")
        return
    rows = [
        (
            st.name,
            st.state,
            str(st.pid or "-"),
            str(st.port),
            f"{flavor_label(st.flavor)} {st.version}",
            st.active_config.describe(),
        )
        for st in statuses
    ]
    print_table(["NAME", "STATE", "PID", "PORT", "SERVER", "CONFIG"], rows)


@sandbox.command()
@name_argument
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@timeout_option
def destroy(name: str, yes: bool, timeout_s: float) -> None:
    """Stop a sandbox and delete it with its datadir and snapshots."""
    from myaccel.server.sandbox import Sandbox

    if not yes and sys.stdin.isatty():
        click.confirm(f"Delete sandbox '{name}' with its datadir and snapshots?", abort=True)
    _say(Sandbox.destroy_named(name, timeout_s=timeout_s))


@sandbox.group()
def snapshot() -> None:
    """Copies of a stopped sandbox's datadir (save, restore, list, delete)."""


stop_option = click.option(
    "--stop", "stop_server", is_flag=True, help="Stop a running server first, start it after."
)


def snapshot_arguments(f: F) -> F:
    """NAME SNAP: the sandbox and one of its snapshots."""
    return click.argument("name")(click.argument("snap")(f))


def datadir_copy_command(name: str) -> Callable[[Callable[..., None]], click.Command]:
    """``snapshot save``/``restore``: NAME SNAP and --stop (they copy the datadir)."""

    def deco(f: Callable[..., None]) -> click.Command:
        return snapshot.command(name=name)(snapshot_arguments(stop_option(f)))

    return deco


@datadir_copy_command("save")
def snapshot_save(name: str, snap: str, stop_server: bool) -> None:
    """Save the datadir of sandbox NAME as snapshot SNAP."""
    from myaccel.server.sandbox import Sandbox

    info = Sandbox.load(name).snapshot_save(snap, stop=stop_server, progress=_say)
    _say(f"saved snapshot '{snap}' of sandbox '{name}' ({_format_size(info.size_bytes)})")


@datadir_copy_command("restore")
def snapshot_restore(name: str, snap: str, stop_server: bool) -> None:
    """Replace the datadir of sandbox NAME by snapshot SNAP."""
    from myaccel.server.sandbox import Sandbox

    info = Sandbox.load(name).snapshot_restore(snap, stop=stop_server, progress=_say)
    _say(f"restored snapshot '{snap}' ({info.created_at}) into sandbox '{name}'")


@snapshot.command(name="list")
@name_argument
@json_flag
def snapshot_list(name: str, as_json: bool) -> None:
    """List the snapshots of sandbox NAME with size and date."""
    from myaccel.server.sandbox import Sandbox

    snaps: list[SnapshotInfo] = Sandbox.load(name).snapshot_list()
    if as_json:
        _print_json([s.to_dict() for s in snaps])
        return
    if not snaps:
        _say(f"sandbox '{name}' has no snapshots")
        return
    rows = [(s.name, _format_size(s.size_bytes), s.created_at, s.active_config) for s in snaps]
    print_table(["SNAPSHOT", "SIZE", "CREATED", "CONFIG"], rows)


@snapshot.command(name="delete")
@snapshot_arguments
def snapshot_delete(name: str, snap: str) -> None:
    """Delete snapshot SNAP of sandbox NAME."""
    from myaccel.server.sandbox import Sandbox

    Sandbox.load(name).snapshot_delete(snap)
    _say(f"deleted snapshot '{snap}' of sandbox '{name}'")
