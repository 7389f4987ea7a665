"""`myaccel rollback` and `verify`: the server target a journal records (the command line's
server options over it), then ``myaccel.actions.protocol.rollback_with_restart`` or the
journal's drift.

The rollback machinery (``myaccel.actions``) is imported where used, not by ``--help``."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from myaccel.cli import options
from myaccel.cli.common import ServerOptions, options_into, resolve, server_options
from myaccel.cli.progress import note
from myaccel.errors import UsageError

if TYPE_CHECKING:
    from myaccel.actions import RollbackResult


def _echo_json(doc: dict[str, Any]) -> None:
    click.echo(json.dumps(doc, indent=2))


_json_option = options.json(
    "Print one JSON document (for automation: the Ansible collection) instead of lines."
)


@dataclass(frozen=True, kw_only=True)
class RollbackOptions(ServerOptions):
    journal_file: str | None = None
    list_: bool = False
    force: bool = False
    ignore_checksum: bool = False
    as_json: bool = False


_journal_option = click.option(
    "--journal",
    "journal_file",
    metavar="FILE",
    help="Journal to undo (default: the newest in effect).",
)


@click.command(name="rollback")
@server_options
@_journal_option
@click.option("--list", "list_", is_flag=True, help="List journals.")
@click.option("--force", is_flag=True, help="Undo a journal of another host or out of order.")
@click.option(
    "--ignore-checksum",
    is_flag=True,
    help="Undo a journal whose checksum does not match (after review).",
)
@_json_option
@options_into(RollbackOptions)
def rollback_cmd(opts: RollbackOptions) -> None:
    """Undo an apply, newest change first, byte for byte; completes an unfinished one
    (after a crash it starts a stopped server it knows how to start).

    The server recorded in the journal at apply is the default; server options (or
    --sandbox) override how it is reached (the journal never stores a password).

    With --json: one document (the journal and what was reverted; with --list, the
    journals and their status); no journal in effect is then not an error but
    ``"journal": null`` (nothing to undo)."""
    from myaccel.actions.journal import Journal, journals_dir
    from myaccel.actions.protocol import rollback_with_restart
    from myaccel.actions.session import journal_in_effect
    from myaccel.actions.target import rollback_target

    jdir = journals_dir()
    if opts.list_:
        _list_journals(jdir, opts.as_json)
        return
    in_effect = opts.journal_file or Journal.find_unfinished(jdir) or Journal.find_active(jdir)
    if opts.as_json and not in_effect:
        _echo_json({"journal": None, "reverted": [], "warnings": []})
        return
    path = Path(opts.journal_file) if opts.journal_file else journal_in_effect(jdir)
    journal = Journal.load(path, verify_checksum=not opts.ignore_checksum)
    target = rollback_target(path, journal, opts.conn, resolve=resolve)

    def reverted(res: RollbackResult) -> None:  # before the server restarts
        for w in res.warnings:
            note(w)
        if not opts.as_json:
            for t in res.reverted:
                click.echo(f"reverted {t}")

    res = rollback_with_restart(
        target,
        journal,
        note=note,
        force=opts.force,
        ignore_checksum=opts.ignore_checksum,
        reverted=reverted,
    )
    from myaccel.capture.logdir import remove_left

    remove_left(((e.target, e.new_value) for e in journal.entries), note)
    if opts.as_json:
        _echo_json({"journal": str(path), "reverted": res.reverted, "warnings": res.warnings})
        return
    click.echo(f"rolled back {path.name}")


def _list_journals(jdir: Path, as_json: bool) -> None:
    from myaccel.actions.journal import Journal

    listed = [(p, Journal.checked_status(p)) for p in Journal.list_paths(jdir)]
    if as_json:
        _echo_json({"journals": [{"path": str(p), "status": st} for p, st in listed]})
        return
    for p, st in listed:
        click.echo(f"{p.name}  {st}")


@dataclass(frozen=True, kw_only=True)
class VerifyOptions(ServerOptions):
    journal_file: str | None = None
    as_json: bool = False


@click.command()
@server_options
@click.option(
    "--journal",
    "journal_file",
    metavar="FILE",
    help="Journal to check (default: the newest applied).",
)
@_json_option
@options_into(VerifyOptions)
def verify(opts: VerifyOptions) -> None:
    """What has drifted since apply (a reboot, a restart, a hand edit).

    The server recorded in the journal is the default; server options override it.
    With --json: ``{"journal", "drift": [{target, expected, actual}]}`` (exit 1 on drift;
    no applied journal is ``"journal": null``, exit 0)."""
    from myaccel.actions import verify_journal
    from myaccel.actions.journal import Journal, journals_dir
    from myaccel.actions.target import rollback_target

    path = Path(opts.journal_file) if opts.journal_file else None
    if path is None:
        jdir = journals_dir()
        applied = [p for p in Journal.list_paths(jdir) if Journal.peek_status(p) == "applied"]
        if not applied and opts.as_json:
            _echo_json({"journal": None, "drift": []})
            return
        if not applied:
            raise UsageError("no applied journal to verify", hint="see: myaccel rollback --list")
        path = applied[-1]
    target = rollback_target(path, Journal.load(path), opts.conn, resolve=resolve)
    drift = verify_journal(path, connect=target.connector() if target and target.params else None)
    if opts.as_json:
        _echo_json({"journal": str(path), "drift": [d.model_dump(mode="json") for d in drift]})
        sys.exit(1 if drift else 0)
    if not drift:
        click.echo("no drift: every applied setting is in place")
        return
    for d in drift:
        why = (
            " (runtime only: a reboot or a server restart drops it; apply again to put it back)"
            if d.runtime_only
            else ""
        )
        click.echo(f"drift {d.target}: expected {d.expected}, found {d.actual}{why}")
    sys.exit(1)
