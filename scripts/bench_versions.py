#!/usr/bin/env python3
"""The version headroom on a "user's server" with a schema of its own (issue 37,
acceptance 2): MariaDB 10.11 against the next release line installed here (11.8), on a
clone of that server, read-only and read-write, each an interleaved four-arm campaign with
confidence intervals and verdicts; prints the time it took. Figures only: nothing asserted.

1. a MariaDB 10.11 sandbox ``user`` (the system's server, its defaults) holding
   ``shop.customers`` and ``shop.orders`` (--customers, --orders rows; not sysbench's sbtest);
2. its application, a sysbench Lua script on ``shop`` (read-only: a customer, their last
   orders, a day's revenue; read-write: the same, then an order shipped and one placed),
   captured for --capture seconds each with ``myaccel capture`` (the general log);
3. ``myaccel clone`` of the running server (a sandbox of its own: the user's server is
   only read);
4. ``myaccel accelerate --sandbox CLONE --versions --workload-file W.json`` for each capture:
   10.11 as is, 10.11 + plan, 11.8 as is, 11.8 + plan (11.8 on a copy of the clone's data
   upgraded with mariadb-upgrade), interleaved.

    PYTHONPATH=src .venv/bin/python scripts/bench_versions.py [--runs 3] [--time 8]

Needs the system's MariaDB 10.11, MariaDB 11.8 (scripts/ensure-mariadb.sh) and sysbench.
Everything lives in a fresh MYACCEL_HOME (--home, default a temporary directory), removed
at the end unless --keep.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

USER, CLONE = "user", "userclone"

LUA = """-- the shop's application: {kind}
local CUSTOMERS, ORDERS, WRITES = {customers}, {orders}, {writes}

function thread_init()
  drv = sysbench.sql.driver()
  con = drv:connect()
end

function thread_done()
  con:disconnect()
end

function event()
  local c = math.random(1, CUSTOMERS)
  con:query("SELECT name, email, country FROM customers WHERE id = " .. c)
  con:query("SELECT id, status, total, created FROM orders WHERE customer_id = " .. c ..
            " ORDER BY created DESC LIMIT 10")
  local d = math.random(0, 360)
  con:query("SELECT COUNT(*), SUM(total) FROM orders WHERE created >= '2025-01-01' + INTERVAL " ..
            d .. " DAY AND created < '2025-01-01' + INTERVAL " .. (d + 1) .. " DAY")
  if WRITES then
    con:query("UPDATE orders SET status = 'shipped' WHERE id = " .. math.random(1, ORDERS))
    con:query("INSERT INTO orders (customer_id, status, total, created) VALUES (" .. c ..
              ", 'new', " .. math.random(100, 99999) / 100 .. ", NOW())")
  end
end
"""

SCHEMA = [
    "CREATE DATABASE shop",
    "CREATE TABLE shop.customers (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL, "
    "email VARCHAR(128) NOT NULL, country CHAR(2) NOT NULL, created DATETIME NOT NULL, "
    "KEY (country))",
    "CREATE TABLE shop.orders (id INT AUTO_INCREMENT PRIMARY KEY, customer_id INT NOT NULL, "
    "status VARCHAR(16) NOT NULL, total DECIMAL(10,2) NOT NULL, created DATETIME NOT NULL, "
    "KEY (customer_id, created), KEY (created))",
]


def fill(customers: int, orders: int) -> list[str]:
    """Rows from MariaDB's sequence engine, deterministic."""
    return [
        "INSERT INTO shop.customers SELECT seq, CONCAT('customer ', seq), "
        "CONCAT('c', seq, '@example.com'), ELT(1 + seq % 5, 'DE', 'FR', 'US', 'JP', 'BR'), "
        f"'2024-01-01' + INTERVAL (seq % 365) DAY FROM shop.seq_1_to_{customers}",
        f"INSERT INTO shop.orders SELECT seq, 1 + (seq * 7919) % {customers}, "
        "ELT(1 + seq % 3, 'new', 'paid', 'shipped'), (seq * 37) % 100000 / 100, "
        f"'2025-01-01' + INTERVAL (seq % 366) DAY + INTERVAL (seq % 86400) SECOND "
        f"FROM shop.seq_1_to_{orders}",
        "ANALYZE TABLE shop.customers, shop.orders",
    ]


class Runner:
    def __init__(self, home: Path) -> None:
        self.env = {**os.environ, "MYACCEL_HOME": str(home), "MYACCEL_QUIET_WAIT": "30"}
        self.home = home

    def myaccel(self, *args: str, show: bool = True) -> str:
        argv = [sys.executable, "-m", "myaccel", *args]
        print(f"$ myaccel {' '.join(args)}", flush=True)
        p = subprocess.run(argv, check=False, env=self.env, text=True, capture_output=True)
        out = p.stdout + p.stderr
        if show:
            print(out, end="", flush=True)
        if p.returncode:
            if not show:
                print(out, end="")
            raise SystemExit(f"myaccel {args[0]} failed with exit {p.returncode}")
        return out

    def sql(self, statement: str) -> None:
        sock = self.home / "sandboxes" / USER / "my.cnf"
        subprocess.run(
            ["mariadb", f"--defaults-file={sock}", "-e", statement], check=True, env=self.env
        )


def capture(r: Runner, kind: str, lua: Path, seconds: float, threads: int) -> Path:
    """The application on the user's server while ``myaccel capture`` records it."""
    out = r.home / f"{kind}.json"
    sock = r.home / "sandboxes" / USER / "mysqld.sock"
    app = subprocess.Popen(
        [
            "sysbench",
            str(lua),
            "--db-driver=mysql",
            f"--mysql-socket={sock}",
            "--mysql-user=root",
            "--mysql-db=shop",
            f"--threads={threads}",
            f"--time={int(seconds + 30)}",
            "run",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(2)
        r.myaccel("capture", "--sandbox", USER, "--duration", str(seconds), "--out", str(out))
    finally:
        app.terminate()
        app.wait(timeout=30)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--customers", type=int, default=50_000)
    ap.add_argument("--orders", type=int, default=300_000)
    ap.add_argument("--capture", type=float, default=10.0, help="seconds per capture")
    ap.add_argument("--threads", type=int, default=4, help="the application's connections")
    ap.add_argument("--runs", type=int, default=3, help="runs per arm")
    ap.add_argument("--time", type=int, default=8, help="seconds per run")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--home", type=Path, help="MYACCEL_HOME (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the sandboxes and results")
    a = ap.parse_args()
    t0 = time.monotonic()
    home = a.home or Path(tempfile.mkdtemp(prefix="bench-versions-"))
    home.mkdir(parents=True, exist_ok=True)
    r = Runner(home)
    summary: list[str] = []
    try:
        r.myaccel("sandbox", "init", USER)
        for stmt in SCHEMA + fill(a.customers, a.orders):
            r.sql(stmt)
        print(f"shop: {a.customers:,} customers, {a.orders:,} orders", flush=True)
        captures = {}
        for kind, writes in (("read-only", "false"), ("read-write", "true")):
            lua = home / f"shop_{kind}.lua"
            lua.write_text(
                LUA.format(kind=kind, customers=a.customers, orders=a.orders, writes=writes)
            )
            captures[kind] = capture(r, kind, lua, a.capture, a.threads)
        r.myaccel("clone", "--sandbox", USER, "--name", CLONE)
        for kind, w in captures.items():
            t1 = time.monotonic()
            out = r.myaccel(
                "accelerate",
                "--sandbox",
                CLONE,
                "--versions",
                "--workload-file",
                str(w),
                "--runs",
                str(a.runs),
                "--time",
                str(a.time),
                "--warmup",
                str(a.warmup),
                "--no-measure-storage",
            )
            took = (time.monotonic() - t1) / 60
            lines = out.splitlines()
            start = next(
                (i for i, ln in enumerate(lines) if ln.startswith("version headroom")), None
            )
            summary.append(f"{kind} ({took:.1f} min):")
            summary += lines[start : start + 4] if start is not None else ["  (no headroom line)"]
    finally:
        if not a.keep:
            for name in (CLONE, USER):
                subprocess.run(
                    [sys.executable, "-m", "myaccel", "sandbox", "destroy", name],
                    check=False,
                    env=r.env,
                    capture_output=True,
                )
            if a.home is None:
                shutil.rmtree(home, ignore_errors=True)
    print("\n".join(["", "== version headroom on the clone", *summary]))
    print(f"total: {(time.monotonic() - t0) / 60:.1f} min")


if __name__ == "__main__":
    main()
