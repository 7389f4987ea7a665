"""`myaccel apply`, `rollback` and `verify`."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import click

from myaccel.actions import apply_changes, preview, rollback, verify_journal
from myaccel.actions.applier import finish_journal, finish_rollback
from myaccel.actions.crashpoint import crash_point
from myaccel.actions.guard import check_apply
from myaccel.actions.journal import Journal, journals_dir
from myaccel.actions.plan_apply import (
    ServerHandle,
    build_changes,
    health_check,
    load_handle,
    preview_changes,
    sandbox_handle,
)
from myaccel.actions.session import (
    bring_up,
    check_after_rollback,
    check_only,
    derive_conf_dir,
    journal_in_effect,
    load_plan,
    refuse_unfinished,
    restart_and_check,
)
from myaccel.cli import options
from myaccel.cli.common import ServerOptions, options_into, resolve, server_options
from myaccel.cli.progress import note
from myaccel.errors import UsageError
from myaccel.facts.collect import collect_facts
from myaccel.rules.engine import facts_digest
from myaccel.server.connection import ConnectionOptions, ConnectParams


def _handle(conn: ConnectionOptions, conf_dir: str | None, server_unit: str | None) -> ServerHandle:
    if conn.sandbox is not None:
        return sandbox_handle(conn.sandbox)
    params = resolve(conn) if conn.given or conf_dir or server_unit else None
    return ServerHandle(
        kind="systemd" if server_unit else "none",
        params=params,
        conf_dir=Path(conf_dir) if conf_dir else None,
        unit=server_unit,
    )


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
    plan = load_plan(opts.plan_file)
    dry_run = opts.dry_run
    only = _split_ids(opts.only)
    check_only(plan, only)
    handle = _handle(opts.conn, opts.conf_dir, opts.server_unit)
    facts = collect_facts(
        "/", server=handle.params, server_required=handle.params is not None, perf_live_test=False
    )
    digest = facts_digest(facts)
    if digest != plan.facts_digest and not opts.force:
        raise UsageError(
            f"this plan was made for other facts (digest {plan.facts_digest}, here {digest}): another host, server or datadir",
            hint="make a plan here (myaccel plan --out plan.json), or pass --force",
        )
    derive_conf_dir(handle, facts, note)
    layers = _split_ids(opts.layers)
    check_apply(plan, facts, layers=layers, only=only)  # durability and ranges, before any change
    pc = build_changes(
        plan,
        handle,
        layers=layers,
        only=only,
        partial=opts.partial,
        persist_server_variables=opts.persist_vars,
    )
    jdir = journals_dir()
    if not dry_run:
        # the checks that refuse an apply, before anything is printed or created
        refuse_unfinished(jdir)
        if not opts.yes and not sys.stdin.isatty():
            raise UsageError(
                "apply needs confirmation",
                hint="pass --yes (or run on a terminal); try --dry-run first",
            )
    for r, why in pc.skipped:
        note(f"skip {r.id}: {why}")
    new_dirs = (handle.conf_dir,) if handle.kind == "sandbox" and handle.conf_dir else ()
    if not dry_run and handle.kind == "sandbox" and handle.conf_dir is not None:
        handle.conf_dir.mkdir(exist_ok=True)  # the sandbox's own option directory
    planned, unchanged = preview_changes(pc.changes, new_dirs)
    doc: dict[str, Any] = {
        "dry_run": dry_run,
        "changed": bool(planned),
        "changes": [
            {
                "target": s.target,
                "current": ch.current,
                "desired": d,
                "takes_effect": ch.takes_effect,
            }
            for s, d, ch in planned
        ],
        "unchanged": unchanged,
        "skipped": [{"id": r.id, "why": why} for r, why in pc.skipped],
        "files": [],
        "journal": None,
    }
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
    res = apply_changes(
        pc.changes,
        plan_id=plan.created_at,
        facts_digest=plan.facts_digest,
        server=handle.describe(),
        keep_open=pc.restart_needed,  # done only once the server is back and healthy
    )
    jpath = Path(res.journal_path or "")
    note(f"journal: {jpath}")
    if pc.restart_needed:
        restart_and_check(handle, pc.server_values, jpath, note)
        finish_journal(jpath)
    else:
        problems = health_check(handle, {k: v for k, v in pc.server_values.items()})
        if problems:
            note("warning: " + "; ".join(problems))
    if opts.as_json:
        doc["journal"] = str(jpath)
        doc["files"] = preview.file_diffs(before, preview.read_texts(map(Path, before)))
        _echo_json(doc)
        return
    click.echo(
        f"applied {len(res.changes)} change(s); undo with: myaccel rollback --journal {jpath}"
    )


def _print_preview(
    planned: list[Any], unchanged: list[str], new_dirs: tuple[Path, ...], jdir: Path, dry_run: bool
) -> None:
    for s, desired, ch in planned:
        click.echo(
            f"{'would change' if dry_run else 'change'} {s.target}: {ch.current} -> {desired} ({ch.takes_effect})"
        )
    for t in unchanged:
        click.echo(f"unchanged {t}")
    if dry_run:
        _print_dry_run_paths(planned, new_dirs, jdir)
    if not planned:
        click.echo("nothing to change")


def _print_dry_run_paths(planned: list[Any], new_dirs: tuple[Path, ...], jdir: Path) -> None:
    for d in new_dirs:
        if not d.is_dir():
            click.echo(f"would create directory {d}")
    seen: list[str] = []
    for _s, _d, ch in planned:
        for w in ch.writes:
            if w.startswith("/") and w not in seen:
                seen.append(w)
    for w in seen:
        click.echo(f"would write {w}")
    if planned:
        click.echo(f"would write a journal in {jdir}")
    unfinished = Journal.find_unfinished(jdir)
    if unfinished:
        note(
            f"warning: an unfinished journal exists ({unfinished[-1]}): apply will refuse "
            "until `myaccel rollback` finishes it"
        )


def _rollback_handle(path: Path, journal: Journal, conn: ConnectionOptions) -> ServerHandle | None:
    """The server to roll back on: the one recorded at apply, with what the command line
    gives overriding it; the password comes from the usual places (-p, MYSQL_PWD,
    ~/.my.cnf), never from the journal."""
    if conn.sandbox is not None:
        return sandbox_handle(conn.sandbox)
    handle = load_handle(path, journal)
    if handle is None:
        return _handle(conn, None, None) if conn.given else None
    if handle.kind == "sandbox":
        if conn.user is not None and handle.params is not None:
            handle.params = replace(handle.params, user=conn.user, password=conn.password)
        return handle
    handle.params = _merge_params(handle.params, conn)
    return handle


def _merge_params(recorded: ConnectParams | None, conn: ConnectionOptions) -> ConnectParams | None:
    where_given = any(
        v is not None for v in (conn.host, conn.port, conn.socket, conn.defaults_file)
    )
    if recorded is None or where_given:
        return resolve(conn) if conn.given else recorded
    return resolve(
        ConnectionOptions(
            host=recorded.host,
            port=recorded.port if recorded.host else None,
            socket=recorded.socket,
            user=conn.user or recorded.user,
            password=conn.password,
        )
    )


@dataclass(frozen=True, kw_only=True)
class RollbackOptions(ServerOptions):
    journal_file: str | None = None
    list_: bool = False
    force: bool = False
    ignore_checksum: bool = False
    as_json: bool = False


@click.command(name="rollback")
@server_options
@click.option(
    "--journal",
    "journal_file",
    metavar="FILE",
    help="Journal to undo (default: the newest in effect).",
)
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
    handle = _rollback_handle(path, journal, opts.conn)
    started: list[bool] = []

    def before_revert(j: Journal) -> None:
        if bring_up(handle, j, note):
            started.append(True)

    connect_fn = handle.connector() if handle is not None and handle.params is not None else None
    # Option files (or the unit's server binary) changed since the server started: it must
    # restart on the restored ones. The journal stays in effect until then (a crash before
    # it: rollback again).
    mycnf = journal.status != "rolled-back" and any(
        e.kind in ("mycnf", "systemd-binary") for e in journal.entries
    )
    restart = mycnf and handle is not None and handle.startable()
    res = rollback(
        path,
        connect=connect_fn,
        force=opts.force,
        ignore_checksum=opts.ignore_checksum,
        before_revert=before_revert,
        finish=not restart,
    )
    for w in res.warnings:
        note(w)
    if not opts.as_json:
        for t in res.reverted:
            click.echo(f"reverted {t}")
    if restart and handle is not None:
        if not started:
            handle.restart(note)
        crash_point("rollback-finish")
        finish_rollback(path)
    elif mycnf:
        note("warning: restart the server yourself: its option files were restored")
    if handle is not None and handle.params is not None:
        check_after_rollback(handle, journal, note)
    if opts.as_json:
        _echo_json({"journal": str(path), "reverted": res.reverted, "warnings": res.warnings})
        return
    click.echo(f"rolled back {path.name}")


def _list_journals(jdir: Path, as_json: bool) -> None:
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
    path = Path(opts.journal_file) if opts.journal_file else None
    if path is None:
        applied = [
            p for p in Journal.list_paths(journals_dir()) if Journal.peek_status(p) == "applied"
        ]
        if not applied and opts.as_json:
            _echo_json({"journal": None, "drift": []})
            return
        if not applied:
            raise UsageError("no applied journal to verify", hint="see: myaccel rollback --list")
        path = applied[-1]
    handle = _rollback_handle(path, Journal.load(path), opts.conn)
    drift = verify_journal(path, connect=handle.connector() if handle and handle.params else None)
    if opts.as_json:
        _echo_json({"journal": str(path), "drift": [d.model_dump(mode="json") for d in drift]})
        sys.exit(1 if drift else 0)
    if not drift:
        click.echo("no drift: every applied setting is in place")
        return
    for d in drift:
        click.echo(f"drift {d.target}: expected {d.expected}, found {d.actual}")
    sys.exit(1)
