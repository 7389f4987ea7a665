"""``myaccel doctor``: what this host has and lacks for each command."""

from __future__ import annotations

import json

import click

from myaccel.cli.output import print_table
from myaccel.doctor.checks import Finding, check_commands, fixes, package_manager
from myaccel.doctor.needs import COMMANDS
from myaccel.errors import ToolMissing, UsageError


def _status(f: Finding) -> str:
    if f.ok:
        return "ok"
    return "MISSING" if f.need.required else "missing (optional)"


@click.command()
@click.argument("commands", nargs=-1, metavar="[COMMAND]...")
@click.option("--json", "as_json", is_flag=True, help="One JSON document.")
def doctor(commands: tuple[str, ...], as_json: bool) -> None:
    """What this host has and lacks for each command, and the line that installs it.

    Tools and their versions, root, kernel features and disk, per command (all of them
    without arguments). Exits 4 when a named command lacks something it needs; works as
    any user and says what needs root."""
    unknown = [c for c in commands if c not in COMMANDS]
    if unknown:
        raise UsageError(
            f"doctor knows no command {unknown[0]!r}",
            hint="commands: " + ", ".join(COMMANDS),
        )
    names = list(commands) or list(COMMANDS)
    found = check_commands(names)
    manager = package_manager()
    every = [f for fs in found.values() for f in fs]
    blocking = {n: [f for f in fs if f.blocking] for n, fs in found.items() if commands}
    if as_json:
        doc = {
            "package_manager": manager,
            "commands": {
                n: [
                    {
                        "need": f.need.name,
                        "kind": f.need.kind,
                        "required": f.need.required,
                        "ok": f.ok,
                        "found": f.found,
                        "why": f.need.why,
                    }
                    for f in fs
                ]
                for n, fs in found.items()
            },
            "fix": fixes(every, manager),
        }
        click.echo(json.dumps(doc, indent=2))
    else:
        rows = [
            [name, f.need.name, _status(f), f.found, f.need.why]
            for name, fs in found.items()
            for f in fs
        ]
        rows += [
            [name, "-", "ok", "nothing beyond Python", ""] for name, fs in found.items() if not fs
        ]
        print_table(["command", "needs", "status", "found", "what for"], rows)
        for line in fixes(every, manager):
            click.echo(f"to fix: {line}")
    missing = [f"{f.need.name} ({n})" for n, fs in blocking.items() for f in fs]
    if missing:
        how = fixes([f for fs in blocking.values() for f in fs], manager)
        raise ToolMissing(
            f"missing for {', '.join(commands)}: {', '.join(missing)}",
            hint=how[0] if how else "see the table above",
        )
