"""A known workload to capture: a small shop schema of its own (not sbtest) and a thread
loop of PyMySQL clients running a fixed statement mix on it. The capture tests, the
fidelity benchmark (``scripts/capture_fidelity.py``) and ``docs/workloads.md`` use it."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import replace

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
