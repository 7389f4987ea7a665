"""Disk an ``accelerate`` on an existing server really uses under ``$MYACCEL_HOME``
against what its preflight estimated (``clone.preflight.disk_for_ab``). Figures printed,
not asserted.

Usage:
  .venv/bin/python scripts/accelerate_disk.py [--rows N] [--scale F] [--home DIR]

A "production" MariaDB sandbox holds ``--rows`` rows of about 1 kB (schema ``shop``);
``myaccel accelerate -S SOCKET -u root --restart-command ... --force --yes`` runs on it
with the ``quick`` profile at ``--scale`` (the A/B on a clone, then the guarded apply);
a thread samples the bytes under ``$MYACCEL_HOME`` other than the production sandbox's
own directory every 0.2 s. Printed: the datadir, the estimate (parsed from the
preflight's numbers, recomputed here with the same function and the plan's redo size),
the peak, and the peak over the estimate. Everything lives in a temporary
``MYACCEL_HOME`` (or --home) and is destroyed at the end.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from myaccel.server.sandbox import Sandbox
from myaccel.server.sandbox.snapshots import dir_size_bytes

MIB = 1024 * 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=128_000)
    ap.add_argument("--scale", type=float, default=0.05)
    ap.add_argument("--home", type=Path)
    args = ap.parse_args()
    home = args.home or Path(tempfile.mkdtemp(prefix="accel-disk-"))
    os.environ["MYACCEL_HOME"] = str(home)
    prod = Sandbox.init("prod", home=home, timeout_s=180, flavor="mariadb")
    try:
        prod.query("CREATE DATABASE shop")
        prod.query("CREATE TABLE shop.t (id INT AUTO_INCREMENT PRIMARY KEY, pad VARBINARY(1000))")
        prod.query("INSERT INTO shop.t (pad) SELECT RANDOM_BYTES(1000) FROM shop.seq_1_to_1000")
        while int(prod.query("SELECT COUNT(*) FROM shop.t")[0][0]) < args.rows:
            prod.query("INSERT INTO shop.t (pad) SELECT RANDOM_BYTES(1000) FROM shop.t")
        datadir = dir_size_bytes(prod.dir / "data")
        me = f"{shlex.quote(sys.executable)} -m myaccel sandbox restart prod"
        peak = [0]
        at_peak: dict[str, int] = {}
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                total = 0
                parts: dict[str, int] = {}
                for root, dirs, files in os.walk(home):  # errors (removed meanwhile) skipped
                    if Path(root) == prod.dir:
                        dirs[:] = []
                        continue
                    where = "/".join(Path(root).relative_to(home).parts[:4])
                    for f in files:
                        try:
                            st = os.lstat(os.path.join(root, f))
                        except OSError:
                            continue
                        total += st.st_blocks * 512
                        parts[where] = parts.get(where, 0) + st.st_blocks * 512
                if total > peak[0]:
                    peak[0] = total
                    at_peak.clear()
                    at_peak.update(parts)
                time.sleep(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        t0 = time.monotonic()
        cmd = [
            sys.executable,
            "-m",
            "myaccel",
            "accelerate",
            "-S",
            str(prod.socket),
            "-u",
            "root",
            "--restart-command",
            me,
            "--profile",
            "quick",
            "--scale",
            str(args.scale),
            "--runs",
            "1",
            "--force",
            "--yes",
            "--durability",
            "relaxed",
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        stop.set()
        sampler.join()
        needs = [ln for ln in done.stderr.splitlines() if "needs about" in ln and "disk:" in ln]
        print(f"accelerate exit {done.returncode} in {time.monotonic() - t0:.0f} s")
        if done.returncode != 0:
            print(done.stderr[-2000:])
        print(f"datadir: {datadir / MIB:.0f} MiB")
        for ln in needs:
            print(ln.strip())
        print(f"peak under MYACCEL_HOME (production sandbox left out): {peak[0] / MIB:.0f} MiB")
        for where, size in sorted(at_peak.items(), key=lambda kv: -kv[1])[:8]:
            print(f"  at the peak: {size / MIB:7.0f} MiB  {where}")
        return done.returncode
    finally:
        for sb in Sandbox.list_all(home=home):
            Sandbox.destroy_named(sb.name, home=home)


if __name__ == "__main__":
    raise SystemExit(main())
