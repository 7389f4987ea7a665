"""`myaccel apply`, `rollback` and `verify`."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from myaccel.actions import apply_changes, rollback, verify_journal
from myaccel.actions.applier import finish_journal, finish_rollback, restore_recorded_files
from myaccel.actions.crashpoint import crash_point
from myaccel.actions.errors import ApplyError, UnfinishedJournal
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
from myaccel.actions.server_files import server_option_files
from myaccel.artifacts import load
from myaccel.cli.common import connection_options, resolve, server_options
from myaccel.cli.progress import note
from myaccel.errors import UsageError
from myaccel.facts.collect import collect_facts
from myaccel.model import Facts
from myaccel.rules.engine import facts_digest
from myaccel.rules.model import Plan
from myaccel.server.connection import ConnectionOptions, ConnectParams


def load_plan(path: str) -> Plan:
    """The plan in ``path``, or a ``UsageError`` naming the first field that is wrong
    (checked before anything is read from the machine or changed)."""
    return load(
        path,
        Plan,
        what="plan",
        hint="make the plan (again, with this version of myaccel): myaccel plan --out plan.json",
        error=UsageError,
    )


def _handle(kwargs: dict[str, Any]) -> ServerHandle:
    conn = connection_options(kwargs)
    if conn.sandbox is not None:
        return sandbox_handle(conn.sandbox)
    params = (
        resolve(conn) if conn.given or kwargs.get("conf_dir") or kwargs.get("server_unit") else None
    )
    conf = Path(kwargs["conf_dir"]) if kwargs.get("conf_dir") else None
    return ServerHandle(
        kind="systemd" if kwargs.get("server_unit") else "none",
        params=params,
        conf_dir=conf,
        unit=kwargs.get("server_unit"),
    )


def _derive_conf_dir(handle: ServerHandle, facts: Facts) -> None:
    """Without --conf-dir: the directory the running server itself reads (from its
    process), or none, with the reason (restart-only knobs are then skipped)."""
    if handle.kind == "sandbox" or handle.conf_dir is not None or handle.params is None:
        return
    srv = facts.server
    pid = srv.pid.value if srv is not None and srv.pid.known else None
    if pid is None:
        why = srv.pid.unknown if srv is not None else "no server facts"
        handle.conf_dir_reason = f"the server's option files cannot be determined ({why})"
        return
    binary = srv.binary_path.value if srv is not None and srv.binary_path.known else None
    found = server_option_files(pid, binary)
    if found is None:
        handle.conf_dir_reason = f"the command line of server pid {pid} is not readable"
    elif found.conf_dir is None:
        handle.conf_dir_reason = found.why_no_dir()
    else:
        handle.conf_dir = Path(found.conf_dir)
        note(f"option files: {handle.conf_dir} (read by server pid {pid}: {found.source})")


def _split_ids(value: str | None) -> list[str] | None:
    return [x.strip() for x in value.split(",") if x.strip()] if value else None


def _check_only(plan: Plan, only: list[str] | None) -> None:
    if not only:
        return
    valid = [r.id for r in plan.recommendations]
    unknown = [x for x in only if x not in valid]
    if unknown:
        raise UsageError(
            f"--only names no recommendation of this plan: {', '.join(unknown)}",
            hint="the plan's ids are: " + (", ".join(valid) if valid else "(none)"),
        )


def _refuse_early(jdir: Path, yes: bool) -> None:
    """The checks that refuse an apply, before anything is printed or created."""
    unfinished = Journal.find_unfinished(jdir)
    if unfinished:
        raise UnfinishedJournal(
            f"an earlier apply or rollback did not finish: {unfinished[-1]}",
            hint="run `myaccel rollback` to finish it (it restores the recorded old values), "
            "then apply again",
            context={"journal": str(unfinished[-1])},
        )
    if not yes and not sys.stdin.isatty():
        raise UsageError(
            "apply needs confirmation",
            hint="pass --yes (or run on a terminal); try --dry-run first",
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
    help="Directory for the managed 99-myaccel.cnf (default: the !includedir the running "
    "server reads, found from its command line).",
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
    dry_run = bool(kwargs["dry_run"])
    only = _split_ids(kwargs["only"])
    _check_only(plan, only)
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
    _derive_conf_dir(handle, facts)
    layers = _split_ids(kwargs["layers"])
    check_apply(plan, facts, layers=layers, only=only)  # durability and ranges, before any change
    pc = build_changes(
        plan,
        handle,
        layers=layers,
        only=only,
        partial=kwargs["partial"],
        persist_server_variables=kwargs["persist_vars"],
    )
    jdir = journals_dir()
    if not dry_run:
        _refuse_early(jdir, kwargs["yes"])
    for r, why in pc.skipped:
        note(f"skip {r.id}: {why}")
    new_dirs = (handle.conf_dir,) if handle.kind == "sandbox" and handle.conf_dir else ()
    if not dry_run and handle.kind == "sandbox" and handle.conf_dir is not None:
        handle.conf_dir.mkdir(exist_ok=True)  # the sandbox's own option directory
    planned, unchanged = preview_changes(pc.changes, new_dirs)
    for s, desired, ch in planned:
        click.echo(
            f"{'would change' if dry_run else 'change'} {s.target}: {ch.current} -> {desired} ({ch.takes_effect})"
        )
    for t in unchanged:
        click.echo(f"unchanged {t}")
    if dry_run:
        _print_dry_run_paths(planned, new_dirs, jdir)
    if dry_run or not planned:
        if not planned:
            click.echo("nothing to change")
        return
    if not kwargs["yes"]:
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
        _restart_and_check(handle, pc.server_values, jpath)
        finish_journal(jpath)
    else:
        problems = health_check(handle, {k: v for k, v in pc.server_values.items()})
        if problems:
            note("warning: " + "; ".join(problems))
    click.echo(
        f"applied {len(res.changes)} change(s); undo with: myaccel rollback --journal {jpath}"
    )


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


def _restart_and_check(handle: ServerHandle, expected: dict[str, str], jpath: Path) -> None:
    try:
        handle.restart(note)
        crash_point("health-check")
        problems = health_check(handle, expected)
    except Exception as exc:
        problems = [getattr(exc, "message", str(exc))]
    if not problems:
        return
    errs = handle.error_log_errors()
    note("health check failed: " + "; ".join(problems) + (" | " + errs[-1] if errs else ""))
    rollback(jpath, connect=handle.connector() if handle.params else None, finish=False)
    handle.restart(note)
    finish_rollback(jpath)
    raise ApplyError(
        "the server did not come back healthy with the new configuration ("
        + "; ".join(problems)[:300]
        + "): rolled back, it runs on the old configuration again",
        hint=f"see the error log; the journal {jpath} records what was tried",
    )


def _rollback_handle(path: Path, journal: Journal, conn_kw: dict[str, Any]) -> ServerHandle | None:
    """The server to roll back on: the one recorded at apply, with what the command line
    gives overriding it; the password comes from the usual places (-p, MYSQL_PWD,
    ~/.my.cnf), never from the journal."""
    conn = connection_options(conn_kw)
    if conn.sandbox is not None:
        return sandbox_handle(conn.sandbox)
    handle = load_handle(path, journal)
    if handle is None:
        return (
            _handle({**_as_kwargs(conn), "conf_dir": None, "server_unit": None})
            if conn.given
            else None
        )
    if handle.kind == "sandbox":
        if conn.user is not None and handle.params is not None:
            handle.params = replace(handle.params, user=conn.user, password=conn.password)
        return handle
    handle.params = _merge_params(handle.params, conn)
    return handle


def _as_kwargs(conn: ConnectionOptions) -> dict[str, Any]:
    return {
        "host": conn.host,
        "port": conn.port,
        "socket": conn.socket,
        "user": conn.user,
        "password": conn.password,
        "defaults_file": conn.defaults_file,
        "sandbox_name": conn.sandbox,
    }


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


def _server_entries_pending(journal: Journal) -> bool:
    return any(e.kind in ("mysql", "mycnf") and e.state != "reverted" for e in journal.entries)


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
def rollback_cmd(
    journal_file: str | None, list_: bool, force: bool, ignore_checksum: bool, **conn_kw: Any
) -> None:
    """Undo an apply, newest change first, byte for byte; completes an unfinished one
    (after a crash it starts a stopped server it knows how to start).

    The server recorded in the journal at apply is the default; server options (or
    --sandbox) override how it is reached (the journal never stores a password)."""
    jdir = journals_dir()
    if list_:
        for p in Journal.list_paths(jdir):
            click.echo(f"{p.name}  {Journal.checked_status(p)}")
        return
    path = Path(journal_file) if journal_file else _journal_in_effect(jdir)
    journal = Journal.load(path, verify_checksum=not ignore_checksum)
    handle = _rollback_handle(path, journal, conn_kw)
    started: list[bool] = []

    def bring_up(j: Journal) -> None:
        """Under the journal lock: a server that a crash left down (or half way up) is
        waited for, or started on its restored option files, before reverting."""
        if handle is None or handle.params is None or not _server_entries_pending(j):
            return
        if handle.wait_reachable(timeout_s=60.0) or not handle.startable():
            return
        note("the server is not running: restoring its option files, then starting it")
        errors = restore_recorded_files(j, kinds=("mycnf",))
        if errors:
            raise ApplyError(
                "cannot restore the option files before starting the server: " + "; ".join(errors),
                hint="fix the cause, then run `myaccel rollback` again",
            )
        handle.start(note)
        started.append(True)

    connect_fn = handle.connector() if handle is not None and handle.params is not None else None
    # Option files changed since the server started: it must restart on the restored
    # ones. The journal stays in effect until then (a crash before it: rollback again).
    mycnf = journal.status != "rolled-back" and any(e.kind == "mycnf" for e in journal.entries)
    restart = mycnf and handle is not None and handle.startable()
    res = rollback(
        path,
        connect=connect_fn,
        force=force,
        ignore_checksum=ignore_checksum,
        before_revert=bring_up,
        finish=not restart,
    )
    for w in res.warnings:
        note(w)
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
        _check_after_rollback(handle, journal)
    click.echo(f"rolled back {path.name}")


def _journal_in_effect(jdir: Path) -> Path:
    """The unfinished journal, else the newest one in effect."""
    active = Journal.find_unfinished(jdir) or Journal.find_active(jdir)
    if not active:
        raise UsageError("no journal in effect to roll back", hint="see: myaccel rollback --list")
    return active[-1]


def _check_after_rollback(handle: ServerHandle, journal: Journal) -> None:
    """The server is healthy; a server value that differs from the journal's old one is
    a warning."""
    problems = health_check(handle, {})
    if problems:
        raise ApplyError(
            "server unhealthy after rollback: " + "; ".join(problems), hint="see its error log"
        )
    old = {
        e.target.removeprefix("mysql:"): e.old.value
        for e in journal.entries
        if e.kind == "mysql" and e.old.value is not None
    }
    for problem in health_check(handle, old):
        note(f"warning: after rollback {problem}")


@click.command()
@server_options
@click.option(
    "--journal",
    "journal_file",
    metavar="FILE",
    help="Journal to check (default: the newest applied).",
)
def verify(journal_file: str | None, **conn_kw: Any) -> None:
    """What has drifted since apply (a reboot, a restart, a hand edit).

    The server recorded in the journal is the default; server options override it."""
    path = Path(journal_file) if journal_file else None
    if path is None:
        applied = [
            p for p in Journal.list_paths(journals_dir()) if Journal.peek_status(p) == "applied"
        ]
        if not applied:
            raise UsageError("no applied journal to verify", hint="see: myaccel rollback --list")
        path = applied[-1]
    handle = _rollback_handle(path, Journal.load(path), conn_kw)
    drift = verify_journal(path, connect=handle.connector() if handle and handle.params else None)
    if not drift:
        click.echo("no drift: every applied setting is in place")
        return
    for d in drift:
        click.echo(f"drift {d.target}: expected {d.expected}, found {d.actual}")
    sys.exit(1)
