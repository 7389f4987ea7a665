"""What a clone costs: clone time and disk per GiB of data, and the overhead on the
production server's throughput while the clone is made and while a benchmark runs on the
clone beside it. Figures printed, not asserted.

Usage:
  .venv/bin/python scripts/clone_bench.py [--flavor mariadb|mysql|both] [--rows N]
                                          [--window S] [--home DIR]

For each flavor: a "production" sandbox with a table of --rows rows (schema ``shop``), a
load driver (one connection, an INSERT and an UPDATE per operation, autocommit) running
throughout; its throughput is measured over --window seconds before the clone and again after the
clone is destroyed (the reference is their mean, so a drift of the load itself shows as
the gap between the two), during ``myaccel clone`` (the clone's own duration), and during
a sysbench oltp_read_write run of --window seconds on the clone (2 threads, 1 table of
10,000 rows in the clone's sbtest). Everything lives in a temporary MYACCEL_HOME (or --home) and is
destroyed at the end.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from myaccel.clone import CloneRequest, make_clone
from myaccel.server.connection import connect
from myaccel.server.sandbox import Sandbox
from myaccel.server.sandbox.snapshots import dir_size_bytes

GIB = 1024**3


class Load:
    """One connection writing to shop.orders until stopped; counts operations."""

    def __init__(self, sb: Sandbox) -> None:
        self.conn = connect(sb.connect_params())
        self.ops = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        with self.conn.cursor() as cur:
            while not self.stop.is_set():
                cur.execute(
                    "INSERT INTO shop.orders (customer, amount, note) VALUES (%s, %s, 'load')",
                    (self.ops % 1000, self.ops % 997),
                )
                cur.execute(
                    "UPDATE shop.orders SET amount = amount + 1 WHERE id = %s",
                    (1 + self.ops % 1000,),
                )
                self.ops += 1

    def rate_during(self, work: object) -> tuple[float, float]:
        """(operations per second, seconds) while ``work`` (a callable or seconds) runs."""
        n0, t0 = self.ops, time.monotonic()
        if callable(work):
            work()
        else:
            time.sleep(float(str(work)))
        dt = time.monotonic() - t0
        return (self.ops - n0) / dt, dt


def populate(sb: Sandbox, rows: int) -> None:
    conn = connect(sb.connect_params())
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE shop")
        cur.execute(
            "CREATE TABLE shop.orders (id INT AUTO_INCREMENT PRIMARY KEY, customer INT, "
            "amount DECIMAL(12,2), note VARCHAR(100), KEY (customer)) ENGINE=InnoDB"
        )
        batch = 5000
        for start in range(0, rows, batch):
            cur.executemany(
                "INSERT INTO shop.orders (customer, amount, note) VALUES (%s, %s, %s)",
                [
                    (i % 1000, i * 0.5, f"row {i:>12} " + "x" * 60)
                    for i in range(start, min(rows, start + batch))
                ],
            )
    conn.close()


def sysbench_on(clone: Sandbox, seconds: float) -> None:
    p = clone.bench_params(tcp=False)
    common = [
        "sysbench",
        "oltp_read_write",
        f"--mysql-socket={p.socket}",
        f"--mysql-user={p.user}",
        f"--mysql-password={p.password}",
        f"--mysql-db={p.database}",
        "--tables=1",
        "--table-size=10000",
    ]
    subprocess.run([*common, "prepare"], check=True, capture_output=True)
    subprocess.run(
        [*common, "--threads=2", f"--time={int(seconds)}", "run"], check=True, capture_output=True
    )


def one(flavor: str, rows: int, window: float, home: Path) -> dict[str, float]:
    os.environ["MYACCEL_HOME"] = str(home)
    prod = Sandbox.init("prod", home=home, timeout_s=180, flavor=flavor)  # type: ignore[arg-type]
    try:
        populate(prod, rows)
        data = dir_size_bytes(prod.datadir)
        load = Load(prod)
        load.thread.start()
        try:
            time.sleep(window)  # the population's background flushing settles
            before, _ = load.rate_during(window)
            holder: dict[str, object] = {}

            def clone() -> None:
                holder["r"] = make_clone(
                    CloneRequest(
                        source=prod.connect_params(), name="clone", source_sandbox="prod", home=home
                    ),
                    lambda m: print(f"  [{flavor}] {m}", file=sys.stderr),
                )

            during, clone_s = load.rate_during(clone)
            cl = Sandbox.load("clone", home=home)
            clone_disk = dir_size_bytes(cl.datadir)
            beside, _ = load.rate_during(lambda: sysbench_on(cl, window))
            Sandbox.destroy_named("clone", home=home)
            after, _ = load.rate_during(window)
        finally:
            load.stop.set()
            load.thread.join(30)
    finally:
        prod.destroy()
    return {
        "data_gib": data / GIB,
        "clone_s": clone_s,
        "s_per_gib": clone_s / (data / GIB),
        "disk_per_gib": clone_disk / data,
        "base_ops": (before + after) / 2,  # the reference: before the clone and after it
        "before_ops": before,
        "after_ops": after,
        "during_ops": during,
        "beside_ops": beside,
    }


def _pct(x: float, base: float) -> str:
    return f"{x:.0f} ({100 * (x / base - 1):+.1f}%)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flavor", choices=["mariadb", "mysql", "both"], default="both")
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--window", type=float, default=8.0)
    ap.add_argument("--home")
    a = ap.parse_args()
    flavors = ["mariadb", "mysql"] if a.flavor == "both" else [a.flavor]
    print(f"clone cost, {a.rows} rows, {os.cpu_count()} CPUs, windows of {a.window:.0f} s")
    print(
        "| flavor | data | clone time | s per GiB | clone disk per GiB of data "
        "| production ops/s: before, after (reference: their mean) | while cloning "
        "| while sysbench runs on the clone |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for flavor in flavors:
        with tempfile.TemporaryDirectory(prefix="clone-bench-", dir=a.home) as tmp:
            r = one(flavor, a.rows, a.window, Path(tmp))
        print(
            f"| {flavor} | {r['data_gib'] * 1024:.0f} MiB | {r['clone_s']:.1f} s "
            f"| {r['s_per_gib']:.0f} s | {r['disk_per_gib']:.2f} GiB "
            f"| {r['before_ops']:.0f}, {r['after_ops']:.0f} ({r['base_ops']:.0f}) "
            f"| {_pct(r['during_ops'], r['base_ops'])} | {_pct(r['beside_ops'], r['base_ops'])} |"
        )


if __name__ == "__main__":
    main()
