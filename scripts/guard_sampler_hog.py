"""The live guard's sampler under a CPU hog (issue 33 item 3): how late its intervals are,
before and after the change, on a MariaDB sandbox.

    MYACCEL_HOME=... PYTHONPATH=src python scripts/guard_sampler_hog.py [--seconds 20]

Four runs of one window each (1 s intervals): the old sampler (the pre-change loop: the
calling thread at its own priority, ``sleep(interval)`` after each sample) and the new one
(``live.measure_window``: a thread of its own at a raised priority on a monotonic
schedule), each without and with a hog: ``2 x cores`` busy loops in subprocesses at nice 0
(``--hogs N`` for another number; the server runs at nice 0 too, as a distribution's
server does). Printed per run: the
intervals' count, their mean and largest length, how late the samples were against the
schedule (p50, p95, max) and the window's late start. The hog is stopped at once after
each run."""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import time

from myaccel.accelerate.live import _sample, digests_enabled, measure_window
from myaccel.server.connection import ConnectParams, connect
from myaccel.server.sandbox import Sandbox


def old_sampler(params: ConnectParams, seconds: float, interval_s: float = 1.0) -> list[float]:
    """The sampler as it was: sample, ``sleep(interval)``, in the caller's thread."""
    conn = connect(params)
    try:
        with_digests = digests_enabled(conn)
        samples = [_sample(conn, with_digests)]
        deadline = samples[0].t + seconds
        while time.monotonic() < deadline:
            time.sleep(max(0.0, min(interval_s, deadline - time.monotonic())))
            samples.append(_sample(conn, with_digests))
    finally:
        conn.close()
    return [s.t for s in samples]


def lateness(ts: list[float], interval_s: float = 1.0) -> str:
    dts = [b - a for a, b in itertools.pairwise(ts)]
    # against the schedule t0 + k * interval (the last, cut at the deadline, left out)
    late = sorted(max(0.0, t - (ts[0] + k * interval_s)) for k, t in enumerate(ts[:-1]))
    p95 = late[min(len(late) - 1, int(0.95 * len(late)))]
    return (
        f"{len(dts)} intervals, mean {statistics.fmean(dts):.3f} s, max {max(dts):.3f} s; "
        f"late vs schedule p50 {statistics.median(late) * 1000:.0f} ms, "
        f"p95 {p95 * 1000:.0f} ms, max {late[-1] * 1000:.0f} ms"
    )


def hog(n: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--hogs", type=int, default=0, help="busy loops (default: 2 x cores)")
    args = ap.parse_args()
    sb = Sandbox.init("hogtest", timeout_s=120)
    try:
        params = sb.connect_params()
        n = args.hogs or 2 * (os.cpu_count() or 1)
        for load in ("no hog", f"hog: {n} busy loops at nice 0"):
            for which in ("old", "new"):
                procs = hog(n) if load != "no hog" else []
                try:
                    time.sleep(1.0 if procs else 0.0)
                    asked = time.monotonic()
                    if which == "old":
                        ts = old_sampler(params, args.seconds)
                        start, prio = ts[0] - asked, "caller's thread, nice 0"
                    else:
                        w = measure_window(params, "hog", args.seconds)
                        ts = [0.0]
                        for d in w.dt:
                            ts.append(ts[-1] + d)
                        start, prio = w.late_start_s, w.priority
                finally:
                    for p in procs:
                        p.kill()
                    for p in procs:
                        p.wait()
                print(
                    f"{which} sampler ({prio}), {load}: {lateness(ts)}; "
                    f"first sample {start * 1000:.0f} ms after asked",
                    flush=True,
                )
    finally:
        sb.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
