"""`myaccel accelerate`: one command from a bare machine to a before/after report."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from myaccel import proc
from myaccel.accelerate import report_markdown, write_candidate
from myaccel.bench.campaign import new_campaign_id
from myaccel.bench.profiles import get_profile
from myaccel.bench.run_record import private_dir
from myaccel.cli import ranges
from myaccel.cli.ab import (
    restore_base_config,
    sandbox_needs_creation,
    terminate_as_interrupt,
)
from myaccel.cli.bench import build_profile
from myaccel.cli.common import connection_options, server_options
from myaccel.cli.output import write_output
from myaccel.cli.progress import note
from myaccel.errors import UsageError
from myaccel.facts.collect import collect_facts
from myaccel.paths import myaccel_home
from myaccel.rules.engine import Hints, make_plan
from myaccel.rules.knobview import knob_view_for
from myaccel.server.connection import ConnectionOptions
from myaccel.server.sandbox import Sandbox


@click.command()
@server_options
@click.option("--profile", default="quick", show_default=True)
@click.option(
    "--durability", type=click.Choice(["strict", "relaxed"]), default="strict", show_default=True
)
@click.option("--runs", type=ranges.RUNS, help="Runs per arm and cell (default: the profile's).")
@click.option("--time", type=ranges.RUN_SECONDS, help="Measured seconds per run.")
@click.option("--scale", type=ranges.SCALE)
@click.option("--out", "out_dir", type=click.Path(file_okay=False))
@click.option(
    "--server-unit",
    metavar="UNIT",
    help="Existing server: systemd unit to restart for restart-only knobs.",
)
@click.option(
    "--conf-dir", metavar="DIR", help="Existing server: directory for the managed 99-myaccel.cnf."
)
@click.option("--yes", is_flag=True, help="Existing server: apply without asking.")
@click.option(
    "--create",
    is_flag=True,
    help="Create the sandbox named by --sandbox if it does not exist (never done silently).",
)
def accelerate(**kwargs: Any) -> None:
    """Probe, benchmark the defaults, plan, apply the plan's server layer, benchmark again
    (interleaved), compare, and write report.md with the article-style table.

    Without server options: a sandbox named 'accelerate' (created from the distribution's
    binaries with their defaults when missing; a --sandbox NAME that does not exist needs
    --create) and an interleaved A/B; an interrupt puts the sandbox back on its base
    configuration. With server options: an existing
    server, measured before and after a journaled apply (not interleaved: said so)."""
    with terminate_as_interrupt():
        run_accelerate(kwargs)


def check_new_out_dir(out_dir: str | None) -> None:
    """``--out`` must be new or empty: accelerate writes facts, plan, runs and a report
    there, and never mixes them with another run's files."""
    if out_dir and Path(out_dir).is_dir() and any(Path(out_dir).iterdir()):
        raise UsageError(
            f"--out '{out_dir}' is not empty",
            hint="choose a new directory, or omit --out (results go under $MYACCEL_HOME/results)",
        )


def run_accelerate(kwargs: dict[str, Any]) -> None:
    from myaccel.cli.ab import ab as ab_cmd

    t0 = time.monotonic()
    # every check before anything is written, started or created
    prof = get_profile(kwargs["profile"])
    build_profile({"profile": prof.name, **{k: kwargs[k] for k in ("runs", "time", "scale")}})
    check_new_out_dir(kwargs["out_dir"])
    proc.require("sysbench")
    conn = connection_options(kwargs)
    if conn.given and conn.sandbox is None:
        existing_server(conn, prof.name, kwargs, t0)
        return
    name = conn.sandbox or "accelerate"
    if sandbox_needs_creation(name, create=kwargs["create"], explicit=conn.sandbox is not None):
        note(f"creating sandbox '{name}' with the distribution's default configuration")
        sb = Sandbox.init(name, progress=note)
    else:
        sb = Sandbox.load(name)
        restore_base_config(sb)  # its own (base) configuration
    note("probing the machine, the server and its binary")
    facts = collect_facts("/", server=sb.connect_params(), server_required=True)
    plan = make_plan(
        facts,
        durability=kwargs["durability"],
        hints=Hints(threads=max(prof.threads)),
        knobs=knob_view_for(facts),
    )
    cid = new_campaign_id("accelerate")
    out = Path(kwargs["out_dir"]) if kwargs["out_dir"] else myaccel_home() / "results" / cid
    private_dir(out)
    write_output(out / "facts.json", facts.model_dump_json(indent=2) + "\n")
    write_output(out / "plan.json", plan.model_dump_json(indent=2) + "\n")
    cand = write_candidate(plan, facts, out / "tuned.cnf")
    if not cand.applied:
        raise UsageError(
            "the plan has no server change to measure on this sandbox",
            hint=f"see {out / 'plan.json'} (everything may already be tuned)",
        )
    note(
        f"plan: {len(cand.applied)} server change(s) to measure, {len(cand.not_applied)} not applied here (see report)"
    )
    for r in cand.applied:
        note(f"  {r.id}: {r.target} {r.current} -> {r.proposed}")
    args = [
        "--sandbox",
        name,
        "--candidate",
        str(cand.path),
        "--profile",
        prof.name,
        "--out",
        str(out / "ab"),
        "--candidate-label",
        "tuned",
    ]
    for opt in ("runs", "time", "scale"):
        if kwargs[opt] is not None:
            args += [f"--{opt}", str(kwargs[opt])]
    ctx = click.get_current_context()
    ctx.invoke(ab_cmd, **_parse_params(ab_cmd, args))
    from myaccel.bench.compare import Comparison

    cmp = Comparison.model_validate_json((out / "ab" / "comparison.json").read_text())
    command = "myaccel " + " ".join(sys.argv[1:])
    md = report_markdown(
        facts,
        plan,
        cand,
        cmp,
        command=command,
        duration_s=time.monotonic() - t0,
        profile_name=prof.name,
    )
    write_output(out / "report.md", md)
    click.echo(f"report: {out / 'report.md'}")
    # HTML report with plots; its report.md (a superset of the one above) replaces it.
    from myaccel.cli.report import report_after_run

    report_after_run([out], out)
    click.echo(f"total: {(time.monotonic() - t0) / 60:.1f} min")


def _parse_params(cmd: click.Command, args: list[str]) -> dict[str, Any]:
    """Parse ``args`` with ab's own option definitions (defaults included)."""
    ctx = cmd.make_context("ab", list(args), resilient_parsing=False)
    return dict(ctx.params)


def existing_server(
    conn: ConnectionOptions, profile: str, kwargs: dict[str, Any], t0: float
) -> None:
    """Before/after on a live server: baseline runs, journaled apply, tuned runs."""
    import sys as _sys

    from myaccel.actions import apply_changes, plan_changes
    from myaccel.actions.plan_apply import ServerHandle, build_changes, health_check, save_handle
    from myaccel.bench.campaign import load_runs
    from myaccel.bench.compare import compare_runs, format_markdown
    from myaccel.cli.bench import bench as bench_cmd
    from myaccel.server.connection import resolve

    params = resolve(conn)
    facts = collect_facts("/", server=params, server_required=True)
    plan = make_plan(
        facts,
        durability=kwargs["durability"],
        hints=Hints(threads=max(get_profile(profile).threads)),
        knobs=knob_view_for(facts),
    )
    cid = new_campaign_id("accelerate")
    out = Path(kwargs["out_dir"]) if kwargs["out_dir"] else myaccel_home() / "results" / cid
    private_dir(out)
    write_output(out / "facts.json", facts.model_dump_json(indent=2) + "\n")
    write_output(out / "plan.json", plan.model_dump_json(indent=2) + "\n")
    conf = Path(kwargs["conf_dir"]) if kwargs["conf_dir"] else None
    handle = ServerHandle(
        kind="systemd" if kwargs["server_unit"] else "none",
        params=params,
        conf_dir=conf,
        unit=kwargs["server_unit"],
    )
    pc = build_changes(plan, handle, layers=["server"])
    planned, _ = plan_changes(pc.changes)
    if not planned:
        raise UsageError(
            "the plan has nothing to apply on this server", hint=f"see {out / 'plan.json'}"
        )
    for s_, desired, ch in planned:
        note(f"will change {s_.target}: {ch.current} -> {desired}")
    for r, why in pc.skipped:
        note(f"not applied {r.id}: {why}")
    conn_args = _conn_args(conn)
    bench_args = [*conn_args, "--profile", profile]
    for opt in ("runs", "time", "scale"):
        if kwargs[opt] is not None:
            bench_args += [f"--{opt}", str(kwargs[opt])]
    ctx = click.get_current_context()
    note("== baseline runs")
    ctx.invoke(bench_cmd, **_parse_params(bench_cmd, [*bench_args, "--out", str(out / "before")]))
    if not kwargs["yes"]:
        if not _sys.stdin.isatty():
            raise UsageError("applying to an existing server needs confirmation", hint="pass --yes")
        click.confirm(f"apply {len(planned)} change(s) to the server?", abort=True)
    res = apply_changes(
        pc.changes,
        plan_id=plan.created_at,
        facts_digest=plan.facts_digest,
        server=handle.describe(),
    )
    save_handle(Path(res.journal_path or ""), handle)
    if pc.restart_needed:
        handle.restart(note)
    problems = health_check(handle, pc.server_values)
    if problems:
        note("warning: " + "; ".join(problems))
    note("== tuned runs")
    ctx.invoke(bench_cmd, **_parse_params(bench_cmd, [*bench_args, "--out", str(out / "after")]))
    cmp = compare_runs(load_runs(out / "before"), load_runs(out / "after"), candidate_label="tuned")
    cmp = cmp.model_copy(
        update={
            "warnings": [
                *cmp.warnings,
                "arms were not interleaved: before/after on a live server, drift between the phases is not controlled",
            ]
        }
    )
    write_output(out / "comparison.json", cmp.model_dump_json(indent=2))
    write_output(out / "comparison.md", format_markdown(cmp))
    click.echo(format_markdown(cmp), nl=False)
    click.echo(f"applied with journal {res.journal_path}; undo with: myaccel rollback")
    from myaccel.cli.report import report_after_run

    journal = [Path(res.journal_path)] if res.journal_path else []
    report_after_run([out, *journal], out)
    click.echo(f"results: {out}; total {(time.monotonic() - t0) / 60:.1f} min")


def _conn_args(conn: ConnectionOptions) -> list[str]:
    args: list[str] = []
    for flag, val in (
        ("--host", conn.host),
        ("--port", conn.port),
        ("--socket", conn.socket),
        ("--user", conn.user),
        ("--password", conn.password),
        ("--defaults-file", conn.defaults_file),
    ):
        if val is not None:
            args += [flag, str(val)]
    return args
