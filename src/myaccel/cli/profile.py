"""`myaccel profile` (sample a running server, optionally under a sysbench workload) and
`myaccel diagnose` (findings with evidence, likely cause and the plan rules they touch)."""

from __future__ import annotations

import json
import math
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from myaccel.bench.runner import RunSpec
from myaccel.cli import ranges
from myaccel.cli.common import connection_options, server_options
from myaccel.cli.progress import note
from myaccel.errors import MyaccelError, UsageError
from myaccel.paths import myaccel_home
from myaccel.profile.folded import format_top
from myaccel.profile.records import Finding, Profile, load_profile
from myaccel.server.connection import ConnectParams

if TYPE_CHECKING:
    from myaccel.model import Facts
    from myaccel.profile.simulate import SimulationResult
    from myaccel.rules.engine import Hints

LOOPBACK_HOSTS = frozenset({None, "", "localhost", "127.0.0.1", "::1"})
# The workload starts this long before the recording window, so the window sees steady load
# (connections made, statements prepared), and runs this much after it.
WORKLOAD_LEAD_S = 1.0
WORKLOAD_TAIL_S = 1.0
# Longest wait for the workload's first interval report before giving up.
WORKLOAD_START_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Target:
    pid: int
    label: str
    admin: ConnectParams | None  # SHOW GLOBAL STATUS (and dataset checks)
    bench: ConnectParams | None  # the workload's user
    sandbox: str | None = None


def resolve_target(pid: int | None, kwargs: dict[str, Any]) -> Target:
    """The process to sample and the connections to read it through."""
    from myaccel.profile.record import check_server_pid

    conn = connection_options(kwargs)
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
            from myaccel.server.connection import resolve

            params = resolve(conn)
        return Target(pid=pid, label=f"pid {pid}", admin=params, bench=params)
    if conn.given:
        from myaccel.cli.bench import _local_pid
        from myaccel.server.connection import resolve

        params = resolve(conn)
        found = _local_pid(params)
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


# ---------------------------------------------------------------- workload


@dataclass
class WorkloadDriver:
    """Runs the profile's sysbench cells one after another in a thread (bench harness)."""

    target: Target
    name: str
    window_s: float
    out_dir: Path
    threads: int | None = None
    tables: int | None = None
    table_size: int | None = None
    cleanup: bool = False
    started: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    lines: list[str] = field(default_factory=list)
    specs: list[RunSpec] = field(default_factory=list)
    _thread: threading.Thread | None = None
    _budget_s: float = 0.0

    def prepare(self) -> None:
        """Everything that may fail fast: the workload name, sysbench, loopback, the
        server's limits and the dataset (prepared or verified)."""
        from dataclasses import replace

        from myaccel import proc
        from myaccel.bench.campaign import server_info
        from myaccel.bench.profiles import get_profile
        from myaccel.bench.runner import preflight
        from myaccel.cli.bench import ensure_dataset, open_campaign

        prof = get_profile(self.name)
        if self.threads is not None:
            prof = replace(prof, threads=(self.threads,))
        if self.tables is not None:
            prof = replace(prof, tables=self.tables)
        if self.table_size is not None:
            prof = replace(prof, table_size=self.table_size)
        t = self.target
        if t.admin is None or t.bench is None:
            raise UsageError(
                "a workload needs a connection to the server",
                hint="use --sandbox NAME, or give --socket/--user with --pid",
            )
        if t.bench.socket is None and t.bench.host not in LOOPBACK_HOSTS:
            raise UsageError(
                f"a workload runs only against a local server, not {t.bench.host}",
                hint="profile on the server's host over its socket or 127.0.0.1, or "
                "--workload none and drive the load yourself",
            )
        proc.require("sysbench")
        cells = prof.cells
        per_cell = max(
            1, math.ceil((self.window_s + WORKLOAD_LEAD_S + WORKLOAD_TAIL_S) / len(cells))
        )
        self.specs = [
            RunSpec(
                workload=w,
                threads=th,
                duration_s=per_cell,
                warmup_s=0,
                tables=prof.tables,
                table_size=prof.table_size,
                report_interval_s=1,
                rand_type=prof.rand_type,
                seed=1000,
            )
            for w, th in cells
        ]
        # measure_run spends ~1.5 s per cell around sysbench (quietness check, counters)
        self._budget_s = sum(s.total_s + 120 for s in self.specs)
        preflight(t.admin, max(self.specs, key=lambda s: s.threads))
        ensure_dataset(t.admin, t.bench, prof, cleanup=self.cleanup)
        sinfo, _ = server_info(t.admin)
        self._ctx = open_campaign(
            "profile",
            str(self.out_dir),
            bench_p=t.bench,
            admin=t.admin,
            sinfo=sinfo,
            prof=prof,
            expect=None,
            pid=t.pid,
        )
        self._ctx.on_report = self._report

    def _report(self, _doc: dict[str, Any]) -> None:
        self.started.set()

    def _run(self) -> None:
        from myaccel.bench.campaign import measure_run

        try:
            for i, spec in enumerate(self.specs, 1):
                rec = measure_run(self._ctx, spec, index=i)
                s = rec.summary
                self.lines.append(
                    f"{spec.workload} {spec.threads} thr {spec.duration_s} s: "
                    + (f"tps {s.tps:,.1f} qps {s.qps:,.1f}" if s else "no summary")
                    + ("" if rec.validity.valid else " INVALID: " + "; ".join(rec.validity.reasons))
                )
            # one run per cell is the whole plan of a profile's workload: the campaign is
            # complete (reports would otherwise count the profile's 5 runs per cell as missing)
            if self._ctx.index is not None:
                self._ctx.index = self._ctx.index.model_copy(update={"finished": True})
                self._ctx.save_index()
        except BaseException as exc:  # reported by wait_started/join
            self.error = exc
        finally:
            self.started.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="workload", daemon=True)
        self._thread.start()

    def wait_started(self) -> None:
        if not self.started.wait(WORKLOAD_START_TIMEOUT_S) or self.error is not None:
            self._raise("the workload did not start")
        time.sleep(WORKLOAD_LEAD_S)

    def join(self, *, quiet: bool = False) -> None:
        if self._thread is not None:
            self._thread.join(timeout=self._budget_s)
            if quiet:
                return
            if self._thread.is_alive():
                self._raise("the workload did not finish in time")
        if self.error is not None:
            self._raise("the workload failed")

    def _raise(self, what: str) -> None:
        if isinstance(self.error, MyaccelError):
            raise self.error
        detail = f": {self.error}" if self.error else ""
        raise MyaccelError(
            f"{what}{detail}",
            hint=f"see the sysbench output under {self.out_dir}",
        )


# ---------------------------------------------------------------- output


def format_profile(profile: Profile, *, top: int = 20) -> str:
    """The plain-text report: where it is, the top-N tables, CPU, findings."""
    from myaccel.profile.diagnose import format_findings

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


def collect_facts_quietly(target: Target) -> Facts | None:
    """The machine's (and server's) facts for the diagnosis: flavor, NUMA nodes, binary.
    Taken before the workload starts; a failure only costs precision."""
    from myaccel.facts.collect import collect_facts

    try:
        return collect_facts("/", server=target.admin, perf_live_test=False)
    except MyaccelError as exc:
        note(f"warning: facts not collected, findings use the profile alone: {exc.message}")
        return None


def run_simulation(
    target: Target, driver: WorkloadDriver | None, out_dir: Path
) -> SimulationResult:
    """``--simulate``: the valgrind fallback (``myaccel.profile.simulate``) on the same
    sandbox after the recording, with the workload's first sysbench workload and dataset.
    It restarts the sandbox's server under valgrind and back, so it runs last."""
    from myaccel.profile.simulate import simulate
    from myaccel.server.sandbox import Sandbox

    if target.sandbox is None:
        raise UsageError(
            "--simulate needs a sandbox: valgrind restarts the server it simulates",
            hint="profile a sandbox (--sandbox NAME), or drop --simulate",
        )
    kwargs: dict[str, Any] = {}
    if driver is not None and driver.specs:
        first = driver.specs[0]
        kwargs = {
            "workload": first.workload,
            "tables": first.tables,
            "table_size": first.table_size,
        }
    note("simulating with valgrind (the sandbox restarts under valgrind, then as before)")
    return simulate(Sandbox.load(target.sandbox), out_dir=out_dir, progress=note, **kwargs)


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
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    help="Directory for profile.json, profile.folded, flamegraph.svg "
    "(default $MYACCEL_HOME/profiles/STAMP).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the profile JSON.")
def profile(**kwargs: Any) -> None:
    """Sample a running server with perf: flame graph, top-N tables, per-CPU load, findings."""
    from myaccel.profile.record import (
        RecordOptions,
        check_perf_access,
        record_profile,
        require_tools,
        validate_options,
    )

    duration = float(kwargs.pop("duration"))
    frequency = int(kwargs.pop("frequency"))
    validate_options(duration, frequency)
    workload = str(kwargs.pop("workload") or "none")
    pid = kwargs.pop("pid")
    target = resolve_target(pid, kwargs)
    if kwargs["simulate"] and target.sandbox is None:
        raise UsageError(
            "--simulate needs a sandbox: valgrind restarts the server it simulates",
            hint="profile a sandbox (--sandbox NAME), or drop --simulate",
        )
    tools = require_tools()
    check_perf_access(target.pid)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = (
        Path(kwargs["out_dir"])
        if kwargs["out_dir"]
        else myaccel_home() / "profiles" / f"{stamp}-{target.pid}"
    )
    out.mkdir(parents=True, exist_ok=True)

    driver: WorkloadDriver | None = None
    if workload != "none":
        driver = WorkloadDriver(
            target=target,
            name=workload,
            window_s=duration,
            out_dir=out / "bench",
            threads=kwargs["threads"],
            tables=kwargs["tables"],
            table_size=kwargs["table_size"],
            cleanup=kwargs["cleanup"],
        )
        driver.prepare()
    facts = collect_facts_quietly(target)
    if driver is not None:
        driver.start()
        note(f"workload {workload} started; waiting for its first report")
        driver.wait_started()
    try:
        result = record_profile(
            RecordOptions(
                pid=target.pid,
                duration_s=duration,
                out_dir=out,
                frequency_hz=frequency,
                call_graph=kwargs["call_graph"],
                status_params=target.admin,
                top_n=max(30, kwargs["top"]),
                facts=facts,
            ),
            tools=tools,
            on_event=note,
        )
    except BaseException:
        if driver is not None:
            driver.join(quiet=True)  # the recording's error is the one to report
        raise
    if driver is not None:
        driver.join()
        for line in driver.lines:
            note(f"workload: {line}")
    if kwargs["simulate"]:
        from myaccel.profile.records import save_profile

        sim = run_simulation(target, driver, out / "simulate")
        result.profile = result.profile.model_copy(update={"simulation": sim})
        save_profile(result.profile, result.profile_path)
    if kwargs["as_json"]:
        click.echo(result.profile.model_dump_json(indent=2))
        return
    click.echo(format_profile(result.profile, top=kwargs["top"]))
    from myaccel.cli.report import report_after_run

    # the profile with its flame graph, plus the runs of the driving workload (OUT/bench)
    report_after_run([result.profile_path, *([out / "bench"] if driver else [])], out)
    if result.profile.simulation is not None:
        from myaccel.profile.simulate import format_simulation

        click.echo("")
        click.echo(format_simulation(result.profile.simulation))
    click.echo("")
    click.echo(f"profile: {result.profile_path}")
    click.echo(f"folded stacks: {result.folded_path}")
    click.echo(f"flame graph: {result.flamegraph_path} (open it in a browser)")


def find_profile(arg: str | None) -> Path:
    from myaccel.profile.record import latest_profile, resolve_profile_path

    if arg:
        return resolve_profile_path(arg)
    root = myaccel_home() / "profiles"
    found = latest_profile(root)
    if found is None:
        raise UsageError(
            f"no profile given and none under {root}",
            hint="record one with `myaccel profile --sandbox NAME --workload quick`, or pass "
            "the profile.json (or its directory)",
        )
    return found


@click.command()
@click.argument("profile_path", metavar="[PROFILE_JSON_OR_DIR]", required=False)
@click.option(
    "--facts",
    "facts_file",
    metavar="FILE",
    help="The machine's facts (myaccel probe --out): flavor, NUMA, binary refine the findings.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
def diagnose(profile_path: str | None, facts_file: str | None, as_json: bool) -> None:
    """Findings from a profile: evidence -> likely cause -> plan rules raised or lowered."""
    from myaccel.profile.diagnose import diagnose as run_diagnose
    from myaccel.profile.diagnose import format_findings

    path = find_profile(profile_path)
    prof = load_profile(path)
    facts = None
    if facts_file:
        from myaccel.cli.plan import load_facts

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


def plan_hints(profile_arg: str, facts: Facts | None, *, threads: int | None) -> Hints:
    """``myaccel plan --profile``: the profile's findings (re-derived with the facts) as
    ``Hints`` whose effects raise or lower the rules each finding names."""
    from myaccel.profile.diagnose import diagnose as run_diagnose
    from myaccel.profile.diagnose import finding_ids
    from myaccel.rules.engine import FindingEffect
    from myaccel.rules.engine import Hints as _Hints

    found = run_diagnose(load_profile(find_profile(profile_arg)), facts)
    for f in found:
        rules = ", ".join(f"{r.direction}s {r.rule}" for r in f.rules)
        note(f"profile finding {f.id} ({f.severity}): {rules}")
    if not found:
        note("profile: no findings (the plan is the same as without --profile)")
    return _Hints(
        threads=threads,
        findings=finding_ids(found),
        effects=tuple(
            FindingEffect(finding=f.id, rule=r.rule, direction=r.direction, reason=r.reason)
            for f in found
            for r in f.rules
        ),
    )
