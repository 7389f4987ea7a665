"""`myaccel capture`: record a server's real statements for a window into a workload file
(and, with --check, replay one and print how faithful the replay is)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from myaccel import markdown
from myaccel.bench.choices import REPLAY_MODES
from myaccel.cli import options
from myaccel.cli.common import ServerOptions, options_into, resolve, server_options
from myaccel.cli.progress import note
from myaccel.paths import myaccel_home

if TYPE_CHECKING:  # the capture machinery is imported where used, not by `--help`
    from myaccel.actions.target import ServerTarget
    from myaccel.bench.workload import Workload
    from myaccel.server.connection import ConnectionOptions, ConnectParams


LITERALS_LINE = (
    "the workload file holds the statements' literal values (your customers' data): keep it "
    "private; --redact replaces them by typed placeholders (a redacted capture still replays)"
)


@dataclass(frozen=True, kw_only=True)
class CaptureOptions(ServerOptions):
    duration: float = 20.0
    out: str | None = None
    redact: bool = False
    source: str = "auto"
    baseline: float = 3.0
    check: str | None = None
    threads: int | None = None
    paced: bool = False
    replay_mode: str = "mix"


@click.command()
@server_options
@options.seconds("--duration", 1, 3600, 20.0, "Seconds to capture.")
@click.option(
    "--out",
    metavar="W.json",
    type=click.Path(dir_okay=False),
    help="Workload file to write (default under $MYACCEL_HOME/workloads).",
)
@click.option(
    "--redact",
    is_flag=True,
    help="Replace every literal by ? (to share it; a redacted capture cannot be replayed).",
)
@click.option(
    "--source",
    type=click.Choice(["auto", "performance_schema", "general_log"]),
    default="auto",
    show_default=True,
    help="auto: performance_schema when it is on, else the general log (to a private file).",
)
@options.seconds(
    "--baseline",
    0,
    600,
    3.0,
    "Seconds of throughput measured before capturing (the capture's cost); 0: none.",
)
@click.option(
    "--check",
    metavar="W.json",
    type=click.Path(dir_okay=False, exists=True),
    help="Replay this captured workload here while capturing, then print the fidelity table.",
)
@click.option(
    "--threads",
    type=click.IntRange(1, 100_000),
    help="With --check: replay at this concurrency (default: the captured one).",
)
@click.option(
    "--paced",
    is_flag=True,
    help="With --check: replay at the captured statements per second (sysbench --rate) "
    "instead of as fast as the server answers.",
)
@click.option(
    "--replay-mode",
    type=click.Choice(REPLAY_MODES),
    default="mix",
    help="With --check: how the workload is replayed, as `bench --replay-mode` (default mix).",
)
@options_into(CaptureOptions)
def capture(opts: CaptureOptions) -> None:
    """Record the server's statements for a bounded window into a workload file.

    What the capture switches on (performance_schema consumers, or the general log to a
    private file) is journaled first and switched back after, also on errors; after a
    crash, `myaccel rollback` does it. The server's throughput before and during the
    capture is printed (its cost). Replay the file with `myaccel bench --workload-file`.
    """
    from myaccel.artifacts import save
    from myaccel.bench.workload import load_replayable
    from myaccel.capture.session import CaptureRequest
    from myaccel.capture.session import capture as run_capture

    # --check: the workload file is checked first (capture.sqlguard: a replay issues its
    # single DML statements and nothing else), before a server or a file is touched
    original = load_replayable(Path(opts.check)) if opts.check else None
    params, server = _servers(opts.conn)
    req = CaptureRequest(
        target=params,
        duration_s=opts.duration,
        redact=opts.redact,
        source=opts.source,  # type: ignore[arg-type]
        baseline_s=opts.baseline,
        server=server,
    )
    out = Path(opts.out) if opts.out else _default_out()
    if opts.out:  # its directory exists and is writable: checked before anything is captured
        from myaccel.outdir import check_output_file

        check_output_file(out, "--out")
    if original is not None:
        from typing import cast

        from myaccel.bench.replay import replay_scripts
        from myaccel.bench.workload import ReplayMode
        from myaccel.capture.check import check_replay
        from myaccel.capture.fidelity import format_fidelity

        with replay_scripts():  # the replay's script is removed with its run
            result = check_replay(
                original,
                req,
                note,
                threads=opts.threads,
                paced=opts.paced,
                mode=cast(ReplayMode, opts.replay_mode),
            )
        save(out, result.replayed, private=True)
        click.echo(format_workload(result.replayed))
        click.echo("")
        click.echo(format_fidelity(result.fidelity))
        if result.bench is not None:
            click.echo(f"replay results: {result.bench.out_dir}")
    else:
        w = run_capture(req, note)
        save(out, w, private=True)
        click.echo(format_workload(w))
        if w.redacted:
            note("redacted: literals removed for sharing; replays need a capture without --redact")
    click.echo(f"workload: {out}")
    if not opts.redact:
        click.echo(LITERALS_LINE)


def _servers(conn: ConnectionOptions) -> tuple[ConnectParams, ServerTarget]:
    """The server to capture from (``resolve``: a ``--user`` given with ``--sandbox``
    replaces the sandbox's) and the one the journal records (how `myaccel rollback` reaches
    it after a crash: a sandbox through its own account). The options are resolved, and a
    sandbox loaded, once for both."""
    from myaccel.actions.target import sandbox_target, server_target

    if conn.sandbox is None:
        params = resolve(conn)
        return params, server_target(params)  # one myaccel does not restart
    from myaccel.server.sandbox import Sandbox

    sb = Sandbox.load(conn.sandbox)
    return resolve(conn, sandbox=sb), sandbox_target(sb.name, sandbox=sb)


def _default_out() -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    d = myaccel_home() / "workloads"
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    return d / f"capture-{stamp}.json"


def format_workload(w: Workload, top: int = 12) -> str:
    """A capture in a few lines: source, window, throughput, concurrency, cost, classes."""
    c = w.concurrency
    tr = "-" if c.threads_running_mean is None else f"{c.threads_running_mean:.2f}"
    lines = [
        f"captured {w.statements_total:,} statements in {w.window_s:.1f} s from "
        f"{w.source.replace('_', ' ')} ({w.statements_per_s:,.1f}/s), {len(w.classes)} classes, "
        f"{c.connections} connection(s), Threads_running mean {tr}",
        f"schemas: {', '.join(s.name for s in w.schemas) or '-'}",
    ]
    seen = w.observed()
    lines.append(f"observed concurrency {seen.concurrency} ({seen.basis}): a replay's threads")
    o = w.overhead
    if o is not None and o.qps_before is not None:
        cost = "-" if o.overhead_pct is None else f"{o.overhead_pct:+.1f}%"
        after = "" if o.qps_after is None else f", {o.qps_after:,.1f} after"
        lines.append(
            f"capture cost: {o.qps_before:,.1f} statements/s before, {o.qps_during or 0:,.1f} "
            f"during{after} ({cost} fewer than around it; the server's Questions counter, "
            "ours excluded)"
        )
    if w.settings_changed:
        lines.append(f"switched on and back: {', '.join(w.settings_changed)}")
    rows = []
    for k in w.classes[:top]:
        lat = k.latency
        p50 = "-" if lat is None else f"{lat.p50_us / 1000:.2f}"
        p95 = "-" if lat is None else f"{lat.p95_us / 1000:.2f}"
        text = k.text if len(k.text) <= 70 else k.text[:67] + "..."
        flag = "" if k.replayable else " (not replayed)"
        statement = f"`{text}`{flag}"
        rows.append([k.id[:8], k.kind, f"{k.count:,}", f"{k.share_pct:.1f}", p50, p95, statement])
    header = ["class", "kind", "count", "share %", "p50 ms", "p95 ms", "statement"]
    lines += ["", *markdown.table(header, rows, "llrrrrl")]
    if len(w.classes) > top:
        lines.append(f"... and {len(w.classes) - top} more classes")
    lines += [f"note: {n}" for n in w.notes]
    return "\n".join(lines)
