"""Capture fidelity, measured: the demo workload (myaccel.capture.demo: a shop schema and
PyMySQL clients running a known mix) captured on one sandbox, replayed on a second one
holding the same schema while that replay is captured, and the two compared (statement
mix per class, latency, throughput), for MariaDB 10.11 (general log) and MySQL 9.7
(performance_schema). Prints the tables; asserts nothing (times depend on the machine).

Usage:
  .venv/bin/python scripts/capture_fidelity.py [--duration 20] [--threads 4]
      [--flavor mariadb,mysql] [--paced] [--keep] [--out DIR]

Sandboxes `fid-<flavor>-a` and `fid-<flavor>-b` are made in a private $MYACCEL_HOME (under
--out, default a temporary directory) and destroyed at the end unless --keep. Both replay
modes run: as fast as the server answers at the captured concurrency (closed loop), and
with --paced also at the captured statements per second (sysbench --rate).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from myaccel.artifacts import save
from myaccel.bench.workload import Workload
from myaccel.capture import demo
from myaccel.capture.check import check_replay
from myaccel.capture.fidelity import format_fidelity
from myaccel.capture.session import CaptureRequest, capture
from myaccel.cli.capture import format_workload
from myaccel.server.sandbox import Sandbox


def _note(msg: str) -> None:
    print(f"  . {msg}", flush=True)


def _capture(sb: Sandbox, duration: float, threads: int) -> Workload:
    driver = demo.Driver(sb.connect_params(), threads=threads).start(settle_s=1.0)
    try:
        return capture(CaptureRequest(target=sb.connect_params(), duration_s=duration), _note)
    finally:
        driver.stop()


def run_flavor(flavor: str, args: argparse.Namespace, out: Path) -> None:
    made: list[Sandbox] = []
    try:
        for side in ("a", "b"):
            sb = Sandbox.init(f"fid-{flavor}-{side}", flavor=flavor, timeout_s=180)
            made.append(sb)
            demo.create_schema(sb.connect_params())
        a, b = made
        t0 = time.monotonic()
        w = _capture(a, args.duration, args.threads)
        save(out / f"{flavor}-captured.json", w, private=True)
        print(format_workload(w))
        o = w.overhead
        print(f"\n## {flavor}: captured {w.statements_total:,} statements from {w.source}")
        if o is not None:
            print(
                f"capture cost: {o.qps_before} statements/s before, {o.qps_during} during, "
                f"{o.qps_after} after ({o.overhead_pct}% fewer than around it)"
            )
        modes = [False, True] if args.paced else [False]
        for paced in modes:
            req = CaptureRequest(target=b.connect_params(), duration_s=args.duration, baseline_s=0)
            res = check_replay(w, req, _note, paced=paced)
            name = f"{flavor}-replayed{'-paced' if paced else ''}.json"
            save(out / name, res.replayed, private=True)
            print(f"\n### replay {'paced at the captured rate' if paced else 'closed loop'}\n")
            print(format_fidelity(res.fidelity))
        print(f"\n({flavor}: {time.monotonic() - t0:.0f} s)")
    finally:
        if not args.keep:
            for sb in made:
                sb.destroy()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--flavor", default="mariadb,mysql")
    ap.add_argument("--paced", action="store_true")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="capture-fidelity-"))
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("MYACCEL_HOME", str(out / "home"))
    for flavor in args.flavor.split(","):
        run_flavor(flavor.strip(), args, out)
    print(f"\nworkloads: {out}")


if __name__ == "__main__":
    main()
