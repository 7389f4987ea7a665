"""`myaccel apply`, `rollback` and `verify`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from myaccel.actions import apply_changes, plan_changes, rollback, verify_journal
from myaccel.actions.errors import ApplyError
from myaccel.actions.guard import check_apply
from myaccel.actions.journal import Journal, journals_dir
from myaccel.actions.plan_apply import (
    ServerHandle,
    build_changes,
    health_check,
    load_handle,
    sandbox_handle,
    save_handle,
)
from myaccel.cli.common import connection_options, server_options
from myaccel.cli.progress import note
from myaccel.errors import UsageError, read_json_file, validation_summary
from myaccel.facts.collect import collect_facts
from myaccel.rules.engine import facts_digest
from myaccel.rules.model import PLAN_SCHEMA, Plan
from myaccel.server.connection import resolve


def load_plan(path: str) -> Plan:
    """The plan in ``path``, or a ``UsageError`` naming the first field that is wrong
    (checked before anything is read from the machine or changed)."""
    hint = "write one with: myaccel plan --out plan.json"
    doc = read_json_file(path, what="plan", hint=hint)
    schema = doc.get("schema_version") if isinstance(doc, dict) else None
    if schema != PLAN_SCHEMA:
        raise UsageError(
            f"plan '{path}' has schema {schema!r}, expected {PLAN_SCHEMA}",
            hint="make the plan with this version of myaccel: myaccel plan --out plan.json",
        )
    try:
        return Plan.model_validate(doc)
    except ValidationError as exc:
        raise UsageError(
            f"plan '{path}' is not a valid plan: {validation_summary(exc)}",
            hint="the plan was edited or damaged; " + hint,
        ) from None


def _handle(kwargs: dict[str, Any]) -> ServerHandle:
    conn = connection_options(kwargs)
    if conn.sandbox is not None:
        return sandbox_handle(conn.sandbox)
    params = (
        resolve(conn) if conn.given or kwargs.get("conf_dir") or kwargs.get("server_unit") else None
    )
    conf = Path(kwargs["conf_dir"]) if kwargs.get("conf_dir") else None
    if conf is None and params is not None:
        from myaccel.actions import find_conf_dir

        found = find_conf_dir()
        conf = Path(found) if found else None
    return ServerHandle(
        kind="systemd" if kwargs.get("server_unit") else "none",
        params=params,
        conf_dir=conf,
        unit=kwargs.get("server_unit"),
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
@click.option(
    "--conf-dir",
    metavar="DIR",
    help="Directory for the managed 99-myaccel.cnf (default: the server's conf.d).",
)
@click.option(
    "--server-unit", metavar="UNIT", help="systemd unit to restart (e.g. mariadb.service)."
)
@click.option(
    "--persist",
    "persist_vars",
    is_flag=True,
    help="MySQL 8: SET PERSIST instead of SET GLOBAL (refused on MariaDB).",
)
def apply(**kwargs: Any) -> None:
    """Apply a plan with a journal written before every change; restart and health-check
    the server when needed, rolling back automatically if it does not come back healthy."""
    plan = load_plan(kwargs.pop("plan_file"))
    handle = _handle(kwargs)
    facts = collect_facts(
        "/", server=handle.params, server_required=handle.params is not None, perf_live_test=False
    )
    digest = facts_digest(facts)
    if digest != plan.facts_digest and not kwargs["force"]:
        raise UsageError(
            f"this plan was made for other facts (digest {plan.facts_digest}, here {digest}): another host, server or datadir",
            hint="make a plan here (myaccel plan --out plan.json), or pass --force",
        )
    layers = [x.strip() for x in kwargs["layers"].split(",")] if kwargs["layers"] else None
    only = [x.strip() for x in kwargs["only"].split(",")] if kwargs["only"] else None
    check_apply(plan, facts, layers=layers, only=only)  # durability and ranges, before any change
    pc = build_changes(
        plan,
        handle,
        layers=layers,
        only=only,
        partial=kwargs["partial"],
        persist_server_variables=kwargs["persist_vars"],
    )
    for r, why in pc.skipped:
        note(f"skip {r.id}: {why}")
    planned, unchanged = plan_changes(pc.changes)
    for s, desired, ch in planned:
        click.echo(
            f"{'would change' if kwargs['dry_run'] else 'change'} {s.target}: {ch.current} -> {desired} ({ch.takes_effect})"
        )
    for t in unchanged:
        click.echo(f"unchanged {t}")
    if kwargs["dry_run"] or not planned:
        if not planned:
            click.echo("nothing to change")
        return
    if not kwargs["yes"]:
        if not sys.stdin.isatty():
            raise UsageError(
                "apply needs confirmation",
                hint="pass --yes (or run on a terminal); try --dry-run first",
            )
        click.confirm(f"apply {len(planned)} change(s)?", abort=True)
    res = apply_changes(pc.changes, plan_id=plan.created_at, facts_digest=plan.facts_digest)
    jpath = Path(res.journal_path or "")
    save_handle(jpath, handle)
    note(f"journal: {jpath}")
    if pc.restart_needed:
        try:
            handle.restart(note)
            problems = health_check(handle, pc.server_values)
        except Exception as exc:
            problems = [getattr(exc, "message", str(exc))]
        if problems:
            errs = handle.error_log_errors()
            note("health check failed: " + "; ".join(problems) + (" | " + errs[-1] if errs else ""))
            rollback(jpath, connect=handle.connector() if handle.params else None)
            handle.restart(note)
            raise ApplyError(
                "the server did not come back healthy with the new configuration ("
                + "; ".join(problems)[:300]
                + "): rolled back, it runs on the old configuration again",
                hint=f"see the error log; the journal {jpath} records what was tried",
            )
    else:
        problems = health_check(handle, {k: v for k, v in pc.server_values.items()})
        if problems:
            note("warning: " + "; ".join(problems))
    click.echo(
        f"applied {len(res.changes)} change(s); undo with: myaccel rollback --journal {jpath}"
    )


@click.command(name="rollback")
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
def rollback_cmd(
    journal_file: str | None, list_: bool, force: bool, ignore_checksum: bool, **conn_kw: Any
) -> None:
    """Undo an apply, newest change first, byte for byte; completes an unfinished one.

    Server options (or --sandbox) override how the server recorded at apply is reached
    (the journal never stores a password)."""
    jdir = journals_dir()
    if list_:
        for p in Journal.list_paths(jdir):
            click.echo(f"{p.name}  {Journal.peek_status(p)}")
        return
    path = Path(journal_file) if journal_file else None
    if path is None:
        active = Journal.find_unfinished(jdir) or Journal.find_active(jdir)
        if not active:
            raise UsageError(
                "no journal in effect to roll back", hint="see: myaccel rollback --list"
            )
        path = active[-1]
    handle = load_handle(path)
    conn = connection_options(conn_kw)
    if conn.given:
        given = _handle({**conn_kw, "conf_dir": None, "server_unit": None})
        if handle is None:
            handle = given
        else:
            handle.params = given.params
    elif handle is not None and handle.params is not None and handle.kind != "sandbox":
        # fill the password the usual way (MYSQL_PWD, ~/.my.cnf) for the recorded server
        from dataclasses import replace as _replace

        from myaccel.server.connection import ConnectionOptions

        rp = handle.params
        found = resolve(
            ConnectionOptions(
                host=rp.host, port=rp.port if rp.host else None, socket=rp.socket, user=rp.user
            )
        )
        handle.params = _replace(rp, password=found.password)
    connect_fn = handle.connector() if handle is not None and handle.params is not None else None
    res = rollback(path, connect=connect_fn, force=force, ignore_checksum=ignore_checksum)
    for t in res.reverted:
        click.echo(f"reverted {t}")
    if handle is not None and any(t.startswith("mycnf:") for t in res.reverted):
        handle.restart(note)
        problems = health_check(handle, {})
        if problems:
            raise ApplyError(
                "server unhealthy after rollback: " + "; ".join(problems), hint="see its error log"
            )
    click.echo(f"rolled back {path.name}")


@click.command()
@click.option(
    "--journal",
    "journal_file",
    metavar="FILE",
    help="Journal to check (default: the newest applied).",
)
def verify(journal_file: str | None) -> None:
    """What has drifted since apply (a reboot, a restart, a hand edit)."""
    path = Path(journal_file) if journal_file else None
    if path is None:
        applied = [
            p for p in Journal.list_paths(journals_dir()) if Journal.peek_status(p) == "applied"
        ]
        if not applied:
            raise UsageError("no applied journal to verify", hint="see: myaccel rollback --list")
        path = applied[-1]
    handle = load_handle(path)
    drift = verify_journal(path, connect=handle.connector() if handle and handle.params else None)
    if not drift:
        click.echo("no drift: every applied setting is in place")
        return
    for d in drift:
        click.echo(f"drift {d.target}: expected {d.expected}, found {d.actual}")
    sys.exit(1)
