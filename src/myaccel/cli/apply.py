"""`myaccel apply`: the plan and the server target the options name, checked and
previewed (``actions.session``), then ``myaccel.actions.protocol.apply_with_restart``.

The apply machinery (``myaccel.actions``, with the settings, the journal, pydantic models
and the server clients) is imported where used, not by ``myaccel apply --help``."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from myaccel.cli import options
from myaccel.cli.common import ServerOptions, options_into, resolve, server_options
from myaccel.cli.progress import note
from myaccel.cli.rollback import rollback_cmd, verify
from myaccel.errors import UsageError

# `myaccel rollback` and `verify` live in cli/rollback.py; the command table names them here
__all__ = ["apply", "rollback_cmd", "verify"]


def _split_ids(value: str | None) -> list[str] | None:
    return [x.strip() for x in value.split(",") if x.strip()] if value else None


@dataclass(frozen=True, kw_only=True)
class ApplyOptions(ServerOptions):
    plan_file: str
    only: str | None = None
    layers: str | None = None
    dry_run: bool = False
    yes: bool = False
    force: bool = False
    partial: bool = False
    conf_dir: str | None = None
    server_unit: str | None = None
    persist_vars: bool = False
    as_json: bool = False


def _echo_json(doc: dict[str, Any]) -> None:
    click.echo(json.dumps(doc, indent=2))


_json_option = options.json(
    "Print one JSON document (for automation: the Ansible collection) instead of lines."
)


@click.command()
@click.argument("plan_file", metavar="PLAN")
@server_options
@click.option("--only", help="Comma-separated recommendation ids.")
@click.option("--layers", help="Comma-separated layers (server,os,numa,nic).")
@click.option("--dry-run", is_flag=True, help="Show what would change; change nothing.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--force", is_flag=True, help="Apply a plan made for other facts (another host or server)."
)
@click.option("--partial", is_flag=True, help="Skip layers this user lacks the privileges for.")
@options.conf_dir(
    "Directory for the managed 99-myaccel.cnf (default: the !includedir the running "
    "server reads, found from its command line)."
)
@options.server_unit("systemd unit to restart (e.g. mariadb.service).")
@click.option(
    "--persist",
    "persist_vars",
    is_flag=True,
    help="MySQL 8: SET PERSIST instead of SET GLOBAL (refused on MariaDB).",
)
@_json_option
@options_into(ApplyOptions)
def apply(opts: ApplyOptions) -> None:
    """Apply a plan with a journal written before every change; restart and health-check
    the server when needed, rolling back automatically if it does not come back healthy.

    With --json: one document with the changes, the skipped recommendations, the files
    written (before and after; predicted by --dry-run) and the journal."""
    from myaccel.actions import preview
    from myaccel.actions.journal import journals_dir
    from myaccel.actions.plan_apply import health_check
    from myaccel.actions.protocol import apply_with_restart
    from myaccel.actions.session import (
        check_only,
        load_plan,
        prepare_apply,
        preview_apply,
        refuse_unfinished,
    )
    from myaccel.actions.target import target_from_options

    plan = load_plan(opts.plan_file)
    dry_run, only = opts.dry_run, _split_ids(opts.only)
    check_only(plan, only)
    # a plan made with a server's facts reaches it the way `myaccel plan` did: with no
    # server option, through the defaults (option files, the default socket)
    target = target_from_options(
        opts.conn,
        conf_dir=opts.conf_dir,
        unit=opts.server_unit,
        resolve=resolve,
        default_server=bool(plan.server),
    )
    target, pc = prepare_apply(
        plan,
        target,
        note,
        layers=_split_ids(opts.layers),
        only=only,
        force=opts.force,
        partial=opts.partial,
        persist_server_variables=opts.persist_vars,
    )
    jdir = journals_dir()
    if not dry_run:  # the checks that refuse an apply, before anything is printed or created
        refuse_unfinished(jdir)
        if not opts.yes and not sys.stdin.isatty():
            raise UsageError(
                "apply needs confirmation",
                hint="pass --yes (or run on a terminal); try --dry-run first",
            )
    for r, why in pc.skipped:
        note(f"skip {r.id}: {why}")
    planned, unchanged, new_dirs = preview_apply(target, pc, create=not dry_run)
    doc = preview.apply_document(planned, unchanged, pc.skipped, dry_run=dry_run)
    before = preview.read_texts(preview.written_paths(planned))
    if dry_run or not planned:
        if opts.as_json:
            doc["files"] = preview.file_diffs(before, preview.predict_texts(planned))
            _echo_json(doc)
        else:
            _print_preview(planned, unchanged, new_dirs, jdir, dry_run)
        return
    if not opts.as_json:
        _print_preview(planned, unchanged, new_dirs, jdir, dry_run)
    if not opts.yes:
        click.confirm(f"apply {len(planned)} change(s)?", abort=True)
    res = apply_with_restart(
        target,
        pc.changes,
        restart=pc.restart_needed,
        expected=pc.server_values,
        note=note,
        plan_id=plan.created_at,
        facts_digest=plan.facts_digest,
        applied=lambda r: note(f"journal: {r.journal_path}"),
    )
    if not pc.restart_needed and (problems := health_check(target, pc.server_values)):
        note("warning: " + "; ".join(problems))
    if opts.as_json:
        doc["journal"] = res.journal_path
        doc["files"] = preview.file_diffs(before, preview.read_texts(map(Path, before)))
        _echo_json(doc)
        return
    click.echo(
        f"applied {len(res.changes)} change(s); undo with: myaccel rollback --journal {res.journal_path}"
    )


def _print_preview(
    planned: list[Any], unchanged: list[str], new_dirs: tuple[Path, ...], jdir: Path, dry_run: bool
) -> None:
    from myaccel.actions.journal import Journal

    for s, desired, ch in planned:
        verb = "would change" if dry_run else "change"
        click.echo(f"{verb} {s.target}: {ch.current} -> {desired} ({ch.takes_effect})")
    for t in unchanged:
        click.echo(f"unchanged {t}")
    if dry_run:
        for d in new_dirs:
            if not d.is_dir():
                click.echo(f"would create directory {d}")
        writes = dict.fromkeys(w for _s, _d, ch in planned for w in ch.writes if w.startswith("/"))
        for w in writes:
            click.echo(f"would write {w}")
        if planned:
            click.echo(f"would write a journal in {jdir}")
        if unfinished := Journal.find_unfinished(jdir):
            note(
                f"warning: an unfinished journal exists ({unfinished[-1]}): apply will refuse "
                "until `myaccel rollback` finishes it"
            )
    if not planned:
        click.echo("nothing to change")
