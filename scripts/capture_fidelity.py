"""Capture fidelity, measured: the demo workload (myaccel.capture.demo: a shop schema and
a known mix run by PyMySQL clients or by sysbench) captured on one sandbox, replayed on a
second one holding the same schema while that replay is captured, and the two compared
(statement mix per class, latency, throughput), for MariaDB 10.11 (general log) and MySQL
9.7 (performance_schema). Prints the tables; asserts nothing (times depend on the machine).

Usage:
  .venv/bin/python scripts/capture_fidelity.py [--duration 20] [--threads 4]
      [--flavor mariadb,mysql] [--modes closed,timed] [--paced] [--split-cpus] [--keep]
      [--driver python|sysbench] [--out DIR]

--driver picks what runs the demo's mix during the capture: `python` (the default: PyMySQL
threads in this process, the figures of docs/workloads.md) or `sysbench` (the same
statements, weights and parameter ranges through lua/myaccel_demo_mix.lua: a C client, as
the replay's, so that the closed-loop replay at the same concurrency faces a capture whose
client cost the same CPU per statement).

Sandboxes `fid-<flavor>-a` and `fid-<flavor>-b` are made in a private $MYACCEL_HOME (under
--out, default a temporary directory) and destroyed at the end unless --keep. The replay
modes (--modes, default closed,timed; --paced adds paced):
  closed    the captured mix as fast as the server answers at the captured concurrency
  paced     the captured mix at the captured statements per second (sysbench --rate)
  timed     each connection's statements in order with their captured gaps
            (--replay-mode timed: the clients' think time)
  sequence  each connection's statements in order, as fast as the server answers
Per mode: the fidelity table; at the end, one line per flavor and mode (largest mix
difference, statements/s captured and replayed, the mean gap between a connection's
statements captured and replayed).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from myaccel.artifacts import save
from myaccel.bench.trace_gaps import timed_traces
from myaccel.bench.workload import ReplayMode, Workload
from myaccel.capture import demo
from myaccel.capture.check import check_replay
from myaccel.capture.fidelity import Fidelity, format_fidelity
from myaccel.capture.session import CaptureRequest, capture
from myaccel.cli.capture import format_workload
from myaccel.server.sandbox import Sandbox


def _note(msg: str) -> None:
    print(f"  . {msg}", flush=True)


def _capture(sb: Sandbox, duration: float, threads: int, kind: demo.DriverKind) -> Workload:
    # sysbench's own bound: the settle, the capture's baseline and window, its start and end
    bound = int(duration) + 120
    driver = demo.start_driver(kind, sb.connect_params(), threads, settle_s=1.0, time_s=bound)
    try:
        return capture(CaptureRequest(target=sb.connect_params(), duration_s=duration), _note)
    finally:
        driver.stop()


# mode -> (replay mode, paced, what the tables call it)
MODES: dict[str, tuple[ReplayMode, bool, str]] = {
    "closed": ("mix", False, "closed loop (mix)"),
    "paced": ("mix", True, "paced at the captured rate (mix)"),
    "timed": ("timed", False, "timed (each connection's captured gaps)"),
    "sequence": ("sequence", False, "sequence (closed loop, no gaps)"),
}
Summary = list[tuple[str, str, str, Fidelity, str]]
# what --driver captures, as the tables say it
DRIVER_TITLES: dict[str, str] = {
    "python": "the demo's PyMySQL clients",
    "sysbench": "the demo's mix through sysbench (lua/myaccel_demo_mix.lua)",
}


def mean_gap(w: Workload) -> str:
    """The mean gap between a connection's statements (µs) and what it measures."""
    traces, kind = timed_traces(w)
    gaps = [s.gap_us for t in traces for s in t.statements if s.gap_us is not None]
    return f"{statistics.fmean(gaps):,.0f} µs {kind}" if gaps else "-"


ALL_CPUS = frozenset(os.sched_getaffinity(0))


def _split_cpus(servers: list[Sandbox]) -> None:
    """The servers (every thread) on the first CPU, this process and what it starts (the
    demo's clients, sysbench) on the others: the server's speed then does not depend on how
    much CPU the load generator takes, which differs between the demo's Python clients
    and sysbench (in production the clients run on other hosts)."""
    cpus = sorted(ALL_CPUS)
    for sb in servers:
        assert sb.pid is not None
        subprocess.run(
            ["taskset", "-a", "-p", "-c", str(cpus[0]), str(sb.pid)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    os.sched_setaffinity(0, set(cpus[1:]))
    _note(f"servers on CPU {cpus[0]}, clients on CPUs {','.join(map(str, cpus[1:]))}")


def run_flavor(flavor: str, args: argparse.Namespace, out: Path, summary: Summary) -> None:
    made: list[Sandbox] = []
    try:
        for side in ("a", "b"):
            sb = Sandbox.init(f"fid-{flavor}-{side}", flavor=flavor, timeout_s=180)
            made.append(sb)
            demo.create_schema(sb.connect_params())
        a, b = made
        if args.split_cpus:
            _split_cpus(made)
        t0 = time.monotonic()
        w = _capture(a, args.duration, args.threads, args.driver)
        save(out / f"{flavor}-captured.json", w, private=True)
        print(format_workload(w))
        o = w.overhead
        print(f"\n## {flavor}: captured {w.statements_total:,} statements from {w.source}")
        print(f"captured: {DRIVER_TITLES[args.driver]}, {args.threads} connections")
        if o is not None:
            print(
                f"capture cost: {o.qps_before} statements/s before, {o.qps_during} during, "
                f"{o.qps_after} after ({o.overhead_pct}% fewer than around it)"
            )
        print(f"mean gap between a connection's statements: {mean_gap(w)}")
        for name in args.modes:
            mode, paced, title = MODES[name]
            # each replay on the data the demo left: the capture's own starting point
            demo.create_schema(b.connect_params())
            req = CaptureRequest(target=b.connect_params(), duration_s=args.duration, baseline_s=0)
            res = check_replay(w, req, _note, paced=paced, mode=mode)
            save(out / f"{flavor}-replayed-{name}.json", res.replayed, private=True)
            print(f"\n### replay {title}\n")
            print(f"captured ({args.driver} driver) vs replayed (sysbench replay, {name})\n")
            print(format_fidelity(res.fidelity))
            gap = mean_gap(res.replayed)
            print(
                f"mean gap between a connection's statements: {mean_gap(w)} captured, {gap} replayed"
            )
            summary.append((flavor, args.driver, name, res.fidelity, f"{mean_gap(w)} → {gap}"))
        print(f"\n({flavor}: {time.monotonic() - t0:.0f} s)")
    finally:
        if args.split_cpus:
            os.sched_setaffinity(0, ALL_CPUS)
        if not args.keep:
            for sb in made:
                sb.destroy()


def format_summary(summary: Summary) -> str:
    lines = [
        "| flavor | captured driver | replay | largest mix difference "
        "| statements/s captured → replayed | mean gap captured → replayed |",
        "|---|---|---|---:|---|---|",
    ]
    for flavor, driver, name, f, gap in summary:
        ratio = f.throughput_ratio
        pct = f" ({100 * (ratio - 1):+.1f}%)" if ratio is not None else ""
        lines.append(
            f"| {flavor} | {driver} | {name} | {f.max_diff_pts:.1f} pts | "
            f"{f.captured_qps:,.0f} → {f.replayed_qps:,.0f}{pct} | {gap} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--flavor", default="mariadb,mysql")
    ap.add_argument("--modes", default="closed,timed", help="closed,paced,timed,sequence")
    ap.add_argument("--paced", action="store_true", help="add the paced mode")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument(
        "--driver",
        choices=demo.DRIVERS,
        default="python",
        help="what runs the demo's mix during the capture: python (PyMySQL threads) or "
        "sysbench (the same mix through lua/myaccel_demo_mix.lua, a C client as the replay's)",
    )
    ap.add_argument(
        "--split-cpus",
        action="store_true",
        help="servers on the first CPU, the load generators on the others",
    )
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="capture-fidelity-"))
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("MYACCEL_HOME", str(out / "home"))
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if args.paced and "paced" not in args.modes:
        args.modes.append("paced")
    unknown = [m for m in args.modes if m not in MODES]
    if unknown:
        ap.error(f"unknown mode(s) {', '.join(unknown)}: choose among {', '.join(MODES)}")
    summary: Summary = []
    for flavor in args.flavor.split(","):
        run_flavor(flavor.strip(), args, out, summary)
    print("\n## Summary\n")
    print(format_summary(summary))
    print(f"\nworkloads: {out}")


if __name__ == "__main__":
    main()
