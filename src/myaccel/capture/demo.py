"""A known workload to capture: a small shop schema of its own (not sbtest) and a fixed
statement mix on it, run by one of two drivers: ``Driver``, a thread loop of PyMySQL
clients, or ``SysbenchDriver``, sysbench running ``lua/myaccel_demo_mix.lua`` (the same
statements, weights and parameter ranges; a C client like the replay's, so that a closed
loop replay at the same concurrency is compared with a capture whose client cost the same
per statement). The capture tests, the fidelity benchmark (``scripts/capture_fidelity.py``)
and ``docs/workloads.md`` use it."""

from __future__ import annotations

import contextlib
import random
import tempfile
import threading
import time
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import IO, Literal, Protocol

from myaccel import proc
from myaccel.bench.runner import NO_PASSWORD_ENV, connection_args, password_file, with_args
from myaccel.errors import MyaccelError
from myaccel.server.connection import ConnectParams, connect

SCHEMA = "shop"
ITEMS = 2000
# (share of the statements, normalized text as capture classes it, how to issue it)
MIX: tuple[tuple[float, str], ...] = (
    (0.50, "select name, price from items where id = ?"),
    (0.15, "select id, name from items where price between ? and ? limit ?"),
    (0.15, "update items set stock = stock - ? where id = ?"),
    (0.10, "insert into orders (item_id, qty) values (...)"),
    (0.10, "select count(*), sum(qty) from orders where item_id = ?"),
)


def create_schema(target: ConnectParams) -> None:
    """(Re)create the shop schema: ``items`` (2,000 rows) and ``orders`` (empty)."""
    conn = connect(target)
    try:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{SCHEMA}`")
            cur.execute(f"CREATE DATABASE `{SCHEMA}`")
            cur.execute(
                f"CREATE TABLE `{SCHEMA}`.items (id INT PRIMARY KEY, name VARCHAR(40), "
                "price DECIMAL(8,2), stock INT, KEY (price))"
            )
            cur.execute(
                f"CREATE TABLE `{SCHEMA}`.orders (id INT AUTO_INCREMENT PRIMARY KEY, "
                "item_id INT, qty INT, KEY (item_id))"
            )
            cur.executemany(
                f"INSERT INTO `{SCHEMA}`.items VALUES (%s, %s, %s, %s)",
                [(i, f"item {i}", i % 97 + 0.5, 1000) for i in range(1, ITEMS + 1)],
            )
    finally:
        conn.close()


def _client(target: ConnectParams, seed: int, stop: threading.Event) -> None:
    rng = random.Random(seed)
    conn = connect(replace(target, database=SCHEMA))
    try:
        with conn.cursor() as cur:
            while not stop.is_set():
                x, i = rng.random(), rng.randint(1, ITEMS)
                if x < 0.50:
                    cur.execute("SELECT name, price FROM items WHERE id = %s", (i,))
                elif x < 0.65:
                    p = i % 90
                    cur.execute(
                        "SELECT id, name FROM items WHERE price BETWEEN %s AND %s LIMIT 10",
                        (p, p + 2),
                    )
                elif x < 0.80:
                    cur.execute("UPDATE items SET stock = stock - 1 WHERE id = %s", (i,))
                elif x < 0.90:
                    cur.execute(
                        "INSERT INTO orders (item_id, qty) VALUES (%s, %s)", (i, rng.randint(1, 5))
                    )
                else:
                    cur.execute("SELECT COUNT(*), SUM(qty) FROM orders WHERE item_id = %s", (i,))
                cur.fetchall()
    finally:
        conn.close()


class Driver:
    """``threads`` clients running the mix until ``stop()`` (each its own connection)."""

    def __init__(self, target: ConnectParams, threads: int = 4, seed: int = 1) -> None:
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(
                target=_client, args=(target, seed + n, self._stop), daemon=True, name=f"demo-{n}"
            )
            for n in range(threads)
        ]

    def start(self, settle_s: float = 0.5) -> Driver:
        for t in self._threads:
            t.start()
        time.sleep(settle_s)
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)


# ------------------------------------------------------------------ through sysbench

DriverKind = Literal["python", "sysbench"]
DRIVERS: tuple[DriverKind, ...] = ("python", "sysbench")


class Running(Protocol):
    """A started driver: runs the mix until ``stop()``."""

    def stop(self) -> None: ...


def mix_script() -> Path:
    return Path(str(resources.files("myaccel.bench") / "lua" / "myaccel_demo_mix.lua"))


def mix_weights() -> str:
    """``MIX``'s shares as the script's ``--mix`` (per mille, in ``MIX``'s order)."""
    return ",".join(str(round(1000 * share)) for share, _ in MIX)


def sysbench_argv(target: ConnectParams, threads: int, time_s: int, seed: int) -> list[str]:
    """The sysbench command running the mix on ``target`` (without its password: see
    ``runner.password_file``) for at most ``time_s`` seconds."""
    return [
        proc.require("sysbench"),
        str(mix_script()),
        *connection_args(target),
        f"--mysql-db={SCHEMA}",
        f"--items={ITEMS}",
        f"--mix={mix_weights()}",
        f"--threads={threads}",
        f"--time={time_s}",
        f"--rand-seed={seed}",
        "--histogram=off",
        "run",
    ]


class SysbenchDriver:
    """``threads`` sysbench threads (each its own connection) running the mix until
    ``stop()``, or for ``time_s`` at most (a bound should this process die first)."""

    def __init__(
        self, target: ConnectParams, threads: int = 4, seed: int = 1, time_s: int = 600
    ) -> None:
        self._target = target
        self._argv = sysbench_argv(target, threads, time_s, seed)
        self._stack = contextlib.ExitStack()
        self._child: proc.Child | None = None
        self._log: IO[bytes] | None = None  # sysbench's output, for errors

    def start(self, settle_s: float = 0.5) -> SysbenchDriver:
        try:
            # closed with the password file when the driver stops
            self._log = self._stack.enter_context(tempfile.TemporaryFile("w+b"))  # noqa: SIM115
            secret = self._stack.enter_context(password_file(self._target.password))
            self._child = proc.spawn(
                with_args(self._argv, secret.args),
                output=self._log,
                env=NO_PASSWORD_ENV,
                pass_fds=secret.pass_fds,
                die_with_parent=True,
            )
            time.sleep(settle_s)
            rc = self._child.poll()
        except BaseException:
            self.stop()
            raise
        if rc is not None:
            said = self.output()[-500:]
            self.stop()
            raise MyaccelError(
                f"the sysbench demo driver ended at once (exit code {rc}): {said}",
                hint="check that the shop schema exists (demo.create_schema) and the server "
                "accepts the connections",
            )
        return self

    def output(self) -> str:
        """What sysbench printed so far (until ``stop()``)."""
        if self._log is None or self._log.closed:
            return ""
        self._log.seek(0)
        return self._log.read().decode(errors="replace").strip()

    def stop(self) -> None:
        if self._child is not None:
            self._child.stop(grace_s=10)
            self._child = None
        self._stack.close()


def start_driver(
    kind: DriverKind,
    target: ConnectParams,
    threads: int = 4,
    settle_s: float = 0.5,
    time_s: int = 600,
) -> Running:
    """Start the mix on ``target`` with ``threads`` connections through the ``kind`` driver
    (``python``: PyMySQL threads in this process until ``stop()``; ``sysbench``: a sysbench
    child until ``stop()`` or for ``time_s`` at most)."""
    if kind == "sysbench":
        return SysbenchDriver(target, threads=threads, time_s=time_s).start(settle_s)
    return Driver(target, threads=threads).start(settle_s)
