"""`myaccel profile` (sample a running server, optionally under a sysbench workload) and
`myaccel diagnose` (findings with evidence, likely cause and the plan rules they touch)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from myaccel.cli import options, ranges
from myaccel.cli.common import ServerOptions, command_line, options_into, resolve, server_options
from myaccel.cli.progress import note
from myaccel.errors import UsageError

if TYPE_CHECKING:  # the domain is imported where used: `--help` loads none of it
    from myaccel.profile.records import Finding, Profile
    from myaccel.profile.workload import Target
    from myaccel.server.connection import ConnectionOptions


def resolve_target(pid: int | None, conn: ConnectionOptions) -> Target:
    """The process to sample and the connections to read it through."""
    from myaccel.profile.record import check_server_pid
    from myaccel.profile.workload import Target

    if pid is not None and conn.sandbox is not None:
        raise UsageError(
            "--pid and --sandbox both name a server", hint="pass one of them (--sandbox NAME)"
        )
    if conn.sandbox is not None:
        from myaccel.server.sandbox import Sandbox

        sb = Sandbox.load(conn.sandbox)
        spid = sb.pid
        if spid is None:
            raise UsageError(
                f"sandbox '{sb.name}' is not running",
                hint=f"start it: myaccel sandbox start {sb.name}",
            )
        check_server_pid(spid)
        return Target(
            pid=spid,
            label=f"sandbox {sb.name}",
            admin=sb.connect_params(),
            bench=sb.bench_params(tcp=False),
            sandbox=sb.name,
        )
    if pid is not None:
        check_server_pid(pid)
        params = None
        if conn.given:
            params = resolve(conn)
        return Target(pid=pid, label=f"pid {pid}", admin=params, bench=params)
    if conn.given:
        from myaccel.bench.session import local_server_pid

        params = resolve(conn)
        found = local_server_pid(params)
        if found is None:
            raise UsageError(
                f"cannot find the process of the server at {params.describe()} on this machine",
                hint="perf samples local processes: run myaccel on the server's host, or "
                "pass --pid PID",
            )
        check_server_pid(found)
        return Target(pid=found, label=params.describe(), admin=params, bench=params)
    raise UsageError(
        "no server to profile",
        hint="pass --sandbox NAME, --pid PID, or connection options (--socket/--host/--port)",
    )


# ---------------------------------------------------------------- output


def format_profile(profile: Profile, *, top: int = 20) -> str:
    """The plain-text report: where it is, the top-N tables, CPU, findings."""
    from myaccel.profile.diagnose import format_findings
    from myaccel.profile.folded import format_top

    r = profile.recording
    lines = [
        f"target: {r.target} pid {r.pid}; {r.event} at {r.frequency_hz} Hz, "
        f"{r.call_graph} call graphs, {r.duration_s:g} s"
    ]
    st = profile.stacks
    if st is not None:
        lines.append(
            f"samples: {st.total_samples} ({st.distinct_stacks} distinct stacks); "
            f"kernel {st.kernel_pct:.1f}%, user {st.user_pct:.1f}%"
        )
        lines += ["", f"top {top} symbols by self time:", format_top(st, by="self", n=top)]
        lines += [
            "",
            f"top {top} symbols by inclusive time:",
            format_top(st, by="inclusive", n=top),
        ]
        lines += ["", f"{'self%':>7} {'incl%':>7}  DSO"]
        incl = {d.dso: d.inclusive_pct for d in st.top_dso_inclusive}
        for d in st.top_dso_self[:10]:
            lines.append(f"{d.self_pct:7.2f} {incl.get(d.dso, d.inclusive_pct):7.2f}  {d.dso}")
    c = profile.cpu
    if c is not None:
        m = c.mean
        lines += [
            "",
            f"CPU ({c.cpu_count} CPUs, {c.intervals} x 1 s from /proc/stat): busy "
            f"{m.busy_pct:.1f}%: user {m.user_pct:.1f}%, system {m.system_pct:.1f}%, "
            f"softirq {m.softirq_pct:.1f}%, iowait {m.iowait_pct:.1f}%, steal {m.steal_pct:.1f}%",
        ]
        for cpu, t in c.per_cpu.items():
            lines.append(
                f"  cpu{cpu}: busy {t.busy_pct:5.1f}% (user {t.user_pct:.1f}, system "
                f"{t.system_pct:.1f}, softirq {t.softirq_pct:.1f})"
            )
        for n in c.nodes:
            lines.append(f"  node{n.node}: busy {n.busy_pct:.1f}% over {n.cpu_count} CPUs")
    cs = profile.context_switches
    if cs is not None:
        lines.append(
            f"context switches: {cs.per_s:,.0f}/s ({cs.per_cpu_per_s:,.0f}/s per CPU, {cs.source})"
        )
    if profile.microarch:
        lines.append(
            "micro-architecture: "
            + ", ".join(f"{k} {v:g}" for k, v in sorted(profile.microarch.items()))
        )
    else:
        lines.append("micro-architecture: none (see warnings)")
    for w in profile.warnings:
        lines.append(f"warning: {w}")
    lines += ["", "findings:", format_findings(profile.findings)]
    return "\n".join(lines)


@dataclass(frozen=True, kw_only=True)
class ProfileCommandOptions(ServerOptions):
    pid: int | None = None
    duration: float = 10.0
    workload: str = "none"
    threads: int | None = None
    tables: int | None = None
    table_size: int | None = None
    cleanup: bool = False
    frequency: int = 99
    call_graph: str = "fp"
    top: int = 20
    simulate: bool = False
    out_dir: str | None = None
    as_json: bool = False


# ---------------------------------------------------------------- commands


@click.command()
@server_options
@click.option("--pid", type=ranges.PID, metavar="PID", help="Profile this server process.")
@click.option(
    "--duration",
    type=float,
    default=10.0,
    show_default=True,
    metavar="S",
    help="Seconds to record.",
)
@click.option(
    "--workload",
    default="none",
    show_default=True,
    metavar="PROFILE|none",
    help="Drive a bench profile (quick, standard, ...) on the server while recording "
    "(loopback only); none: record whatever load it has.",
)
@click.option(
    "--threads", type=ranges.THREADS, help="Workload threads (overrides the bench profile)."
)
@click.option("--tables", type=ranges.TABLES, help="Workload tables (overrides the bench profile).")
@click.option("--table-size", type=ranges.TABLE_ROWS, help="Workload rows per table.")
@click.option(
    "--cleanup", is_flag=True, help="Drop an existing dataset of another size for the workload."
)
@click.option(
    "--frequency",
    type=int,
    default=99,
    show_default=True,
    metavar="HZ",
    help="Samples per second (perf record -F).",
)
@click.option(
    "--call-graph",
    type=click.Choice(["fp", "dwarf"]),
    default="fp",
    show_default=True,
    help="Stack unwinding: fp (frame pointers, kept by MariaDB builds) or dwarf (for "
    "binaries built without them; deep stacks lose their root).",
)
@click.option("--top", type=click.IntRange(1, 200), default=20, show_default=True)
@click.option(
    "--simulate",
    is_flag=True,
    help="After recording, also run the valgrind simulation fallback (instruction counts, "
    "simulated cache and branch misses; for machines without a PMU). Sandboxes only: the "
    "server restarts under valgrind and back.",
)
@options.directory(
    "--out",
    "out_dir",
    help="Directory for profile.json, profile.folded, flamegraph.svg "
    "(default $MYACCEL_HOME/profiles/STAMP).",
)
@options.json("Print the profile JSON.")
@options_into(ProfileCommandOptions)
def profile(opts: ProfileCommandOptions) -> None:
    """Sample a running server with perf: flame graph, top-N tables, per-CPU load, findings."""
    from myaccel.profile.record import validate_options
    from myaccel.profile.session import ProfileRequest, run_profile
    from myaccel.profile.workload import WorkloadChoice

    validate_options(float(opts.duration), int(opts.frequency))
    target = resolve_target(opts.pid, opts.conn)
    run = run_profile(
        ProfileRequest(
            target=target,
            duration_s=float(opts.duration),
            frequency_hz=int(opts.frequency),
            call_graph=opts.call_graph,
            top_n=opts.top,
            workload=WorkloadChoice(
                str(opts.workload or "none"),
                opts.threads,
                opts.tables,
                opts.table_size,
                opts.cleanup,
            ),
            simulate=opts.simulate,
            out_dir=Path(opts.out_dir) if opts.out_dir else None,
            command=command_line(),
        ),
        note,
    )
    result = run.record
    if opts.as_json:
        click.echo(result.profile.model_dump_json(indent=2))
        return
    click.echo(format_profile(result.profile, top=opts.top))
    from myaccel.cli.report import report_after_run

    # the profile with its flame graph, plus the runs of the driving workload (OUT/bench)
    report_after_run(
        [result.profile_path, *([run.bench_dir] if run.bench_dir else [])], run.out_dir
    )
    if result.profile.simulation is not None:
        from myaccel.profile.simulate import format_simulation

        click.echo("")
        click.echo(format_simulation(result.profile.simulation))
    click.echo("")
    click.echo(f"profile: {result.profile_path}")
    click.echo(f"folded stacks: {result.folded_path}")
    click.echo(f"flame graph: {result.flamegraph_path} (open it in a browser)")


@click.command()
@click.argument("profile_path", metavar="[PROFILE_JSON_OR_DIR]", required=False)
@click.option(
    "--facts",
    "facts_file",
    metavar="FILE",
    help="The machine's facts (myaccel probe --out): flavor, NUMA, binary refine the findings.",
)
@options.json("Print the findings as JSON.")
def diagnose(profile_path: str | None, facts_file: str | None, as_json: bool) -> None:
    """Findings from a profile: evidence -> likely cause -> plan rules raised or lowered."""
    from myaccel.profile.diagnose import diagnose as run_diagnose
    from myaccel.profile.diagnose import format_findings
    from myaccel.profile.hints import find_profile
    from myaccel.profile.records import load_profile

    path = find_profile(profile_path)
    prof = load_profile(path)
    facts = None
    if facts_file:
        from myaccel.facts.load import load_facts

        facts = load_facts(facts_file)
    found: list[Finding] = run_diagnose(prof, facts)
    if as_json:
        doc = {
            "profile": str(path),
            "findings": [f.model_dump(mode="json") for f in found],
        }
        click.echo(json.dumps(doc, indent=2))
        return
    r = prof.recording
    n = prof.stacks.total_samples if prof.stacks else 0
    click.echo(
        f"profile {path}: {r.target or '?'} pid {r.pid}, {r.event}, {r.duration_s:g} s, "
        f"{n} samples{', with facts' if facts else ''}"
    )
    click.echo(format_findings(found))
