"""A connection-per-request application captured and replayed on real MariaDB 10.11
sandboxes (issue 33, items 4 and 5).

The application (``_App``): 4 client threads for ~10 s, each request on a new connection
(PHP-style) of 1 to 3 statements with 10-30 ms of the request's own work between them: a
user looked up by key; a visit (the lookup, then an UPDATE of the user's counter); an
order (an INSERT with an application-made primary key, then the user's order count,
sometimes an UPDATE of the user); a user's last orders.

`myaccel capture` records it on sandbox A from performance_schema (the sandbox started
with ``performance_schema=ON``; capture switches on the consumers, MariaDB's
``events_statements_current`` among them). Sandbox B is given A's schema and data after the capture
(``mariadb-dump``), as a clone would be. `myaccel bench --workload-file` replays it on B:

- as captured (``--replay-keys as-captured``): the captured inserts fail on their primary
  keys, counted apart from the successes (the "before");
- with the keys shifted (the default): no duplicate key; the pool's threads are the
  observed concurrency (a few), not the hundreds of captured connections; each class's
  share of the replayed statements within 1 point of its captured share; the replay
  script is gone from $MYACCEL_HOME/replay once the command ends, and a new ``--out``
  directory is accepted (it used to be refused as "not empty");
- in sequence and timed modes: each pool thread replays its sessions one after another,
  each on a new connection (timed: with the captured time between statements and
  sessions);
- a capture made with ``--redact`` (typed placeholders, no literal left in the file) is
  replayed: the placeholders filled with values of the captured shape, the mix held.

Figures are printed (docs/workloads.md quotes them), only the bounds above asserted."""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from myaccel.bench.replay import replay_mix
from myaccel.bench.workload import Workload, load_workload
from myaccel.cli.main import cli
from myaccel.server.connection import ConnectParams, connect
from myaccel.server.sandbox import Sandbox
from myaccel.server.sandbox.state import ServerOptions

pytestmark = pytest.mark.integration

SCHEMA = "app"
USERS = 500
CLIENTS = 4
NOTE_LEN = 12  # every order's note: a string of this length (its redacted shape)
ORDER_IDS = itertools.count(1_000_000)  # the application's order keys, over its runs


def create_schema(target: ConnectParams) -> None:
    conn = connect(target)
    try:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{SCHEMA}`")
            cur.execute(f"CREATE DATABASE `{SCHEMA}`")
            cur.execute(
                f"CREATE TABLE `{SCHEMA}`.users (id INT PRIMARY KEY, name VARCHAR(40), "
                "email VARCHAR(80), visits INT NOT NULL DEFAULT 0, last_order BIGINT)"
            )
            cur.execute(
                f"CREATE TABLE `{SCHEMA}`.orders (id BIGINT PRIMARY KEY, user_id INT, "
                "amount DECIMAL(10,2), note VARCHAR(40), created_at DATETIME, KEY (user_id))"
            )
            cur.executemany(
                f"INSERT INTO `{SCHEMA}`.users (id, name, email) VALUES (%s, %s, %s)",
                [(i, f"user {i}", f"u{i}@example.com") for i in range(1, USERS + 1)],
            )
    finally:
        conn.close()


class _App:
    """The connection-per-request application: ``CLIENTS`` threads, a new connection per
    request of 1-3 statements, order ids made by the application (explicit keys)."""

    def __init__(self, target: ConnectParams) -> None:
        self.target = replace(target, database=SCHEMA)
        self.stop = threading.Event()
        self.ids = ORDER_IDS
        self.lock = threading.Lock()
        self.requests = 0
        self.threads = [
            threading.Thread(target=self._client, args=(i,), daemon=True) for i in range(CLIENTS)
        ]

    def _order_id(self) -> int:
        with self.lock:
            return next(self.ids)

    def _client(self, seed: int) -> None:
        rng = random.Random(seed)
        while not self.stop.is_set():
            conn = connect(self.target)  # autocommit: one statement, one transaction
            try:
                with conn.cursor() as cur:
                    u, x = rng.randint(1, USERS), rng.random()

                    def work() -> None:  # the request's own code between its statements
                        time.sleep(rng.uniform(0.02, 0.06))

                    if x < 0.45:  # a page: the user by key
                        cur.execute("SELECT name, email FROM users WHERE id = %s", (u,))
                    elif x < 0.65:  # a visit: read, then count it
                        cur.execute("SELECT name, visits FROM users WHERE id = %s", (u,))
                        work()
                        cur.execute("UPDATE users SET visits = visits + 1 WHERE id = %s", (u,))
                    elif x < 0.90:  # an order, with the application's own key
                        oid = self._order_id()
                        note = "".join(rng.choice("abcdefghij") for _ in range(NOTE_LEN))
                        cur.execute(
                            "INSERT INTO orders (id, user_id, amount, note, created_at) "
                            "VALUES (%s, %s, %s, %s, %s)",
                            (oid, u, round(rng.uniform(5, 500), 2), note, "2026-11-28 04:00:00"),
                        )
                        work()
                        cur.execute("SELECT COUNT(*) FROM orders WHERE user_id = %s", (u,))
                        if rng.random() < 0.5:
                            work()
                            cur.execute("UPDATE users SET last_order = %s WHERE id = %s", (oid, u))
                    else:  # the user's last orders
                        cur.execute(
                            "SELECT id, amount FROM orders WHERE user_id = %s "
                            "ORDER BY id DESC LIMIT 5",
                            (u,),
                        )
            finally:
                conn.close()
            with self.lock:
                self.requests += 1

    def __enter__(self) -> _App:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)


class Env:
    def __init__(self, home: Path, a: Sandbox, b: Sandbox) -> None:
        self.home, self.a, self.b = home, a, b

    def run(self, *args: str) -> tuple[int, str, str]:
        r = CliRunner().invoke(cli, list(args), env={"MYACCEL_HOME": str(self.home)})
        return r.exit_code, r.stdout, r.stderr

    def capture(self, out: Path, seconds: int, *extra: str) -> tuple[Workload, str, int]:
        with _App(self.a.connect_params()) as app:
            time.sleep(1)  # the clients run before the window opens
            code, text, err = self.run(
                "capture",
                "--sandbox",
                self.a.name,
                "--duration",
                str(seconds),
                "--baseline",
                "0",
                "--out",
                str(out),
                *extra,
            )
        assert code == 0, err
        return load_workload(out), text, app.requests

    def bench(self, w: Path, out: Path, *extra: str) -> tuple[dict[str, Any], str]:
        code, text, err = self.run(
            "bench",
            "--sandbox",
            self.b.name,
            "--workload-file",
            str(w),
            *("--warmup", "0", "--runs", "1", "--out", str(out)),
            *extra,
        )
        assert code == 0, (code, text, err)
        return json.loads((out / "run-001.json").read_text()), text


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    home = tmp_path_factory.mktemp("per-request")
    mp = pytest.MonkeyPatch()
    mp.setenv("MYACCEL_HOME", str(home))
    made: list[Sandbox] = []
    try:
        for name in ("pr-a", "pr-b"):
            sb = Sandbox.init(name, home=home, timeout_s=180, flavor="mariadb")
            made.append(sb)
        a = made[0]
        # the capture's source: performance_schema, timed to the microsecond (the general
        # log's one-second stamps cannot tell which short connections overlapped); capture
        # switches on the consumers it needs (events_statements_current on MariaDB too)
        a.restart(ServerOptions(sets={"performance_schema": "ON"}), timeout_s=180)
        create_schema(a.connect_params())
        yield Env(home, made[0], made[1])
    finally:
        for sb in made:
            sb.destroy()
        mp.undo()


def _clone_data(src: Sandbox, dst: Sandbox) -> None:
    """B gets A's schema and rows (the captured orders included), as a clone would."""
    dump = subprocess.run(
        ["mariadb-dump", "-S", str(src.connect_params().socket), "-uroot", "--databases", SCHEMA],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(
        ["mariadb", "-S", str(dst.connect_params().socket), "-uroot"], input=dump, check=True
    )


def _captured_mix(w: Workload) -> dict[str, float]:
    classes = w.replay_classes()
    total = sum(c.count for c in classes)
    return {c.id: 100 * c.count / total for c in classes}


def _mix_table(w: Workload, replayed: dict[str, float]) -> tuple[str, float]:
    cap = _captured_mix(w)
    text = {c.id: c.text for c in w.replay_classes()}
    rows, worst = [], 0.0
    for cid, pct in sorted(cap.items(), key=lambda kv: -kv[1]):
        got = replayed.get(cid, 0.0)
        worst = max(worst, abs(got - pct))
        rows.append(
            f"| {cid[:8]} | `{text[cid][:60]}` | {pct:.1f} | {got:.1f} | {got - pct:+.1f} |"
        )
    extra = set(replayed) - set(cap)
    assert not extra, extra
    head = "| class | statement | captured % | replayed % | diff pts |\n|---|---|---:|---:|---:|"
    return head + "\n" + "\n".join(rows), worst


def test_per_request_app_captured_and_replayed(env: Env, tmp_path: Path) -> None:
    t0 = time.monotonic()
    w_path = tmp_path / "w.json"
    w, text, requests = env.capture(w_path, 10)
    print(text)
    c = w.concurrency
    print(
        f"app: {requests} requests; capture: {c.connections} connections, observed "
        f"concurrency {c.observed} (sessions open max {c.sessions_open_max}, p95 "
        f"{c.sessions_open_p95}, Threads_running p95 {c.threads_running_p95})"
    )
    assert w.source == "performance_schema"
    assert c.observed is not None and 1 <= c.observed <= CLIENTS
    assert c.connections > 10 * c.observed  # hundreds of short connections
    kinds = {k.text.split()[0] for k in w.replay_classes()}
    assert kinds == {"select", "insert", "update"}, kinds

    _clone_data(env.a, env.b)

    # before: the captured inserts as written, on a server holding their rows
    before, out1 = env.bench(
        w_path, tmp_path / "asis", "--time", "4", "--replay-keys", "as-captured"
    )
    print(out1)
    rb = before["replay"]
    assert rb["duplicate_key_errors"] > 0 and rb["failed"] == sum(rb["failed_by_class"].values())

    # after: keys shifted; a NEW --out directory (refused as "not empty" before the fix)
    new_out = tmp_path / "new" / "campaign"
    run, out2 = env.bench(w_path, new_out, "--time", "8")
    print(out2)
    rep = run["replay"]
    table, worst = _mix_table(w, replay_mix(rep))
    print(table)
    print(
        f"replay: {run['threads']} threads (observed concurrency {rep['observed_concurrency']}, "
        f"captured connections {rep['captured_sessions']}); {rep['statements']:,} statements, "
        f"{rep['failed']:,} failed, duplicate keys {rep['duplicate_key_errors']} (as captured: "
        f"{rb['duplicate_key_errors']:,} of {rb['statements']:,}); largest mix difference "
        f"{worst:.2f} pts"
    )
    assert run["threads"] == c.observed == rep["pool_threads"]
    assert run["threads"] < c.connections
    assert rep["duplicate_key_errors"] == 0
    assert worst <= 1.0, table
    assert rep["sessions_opened"] > run["threads"]  # a new connection per captured session
    assert not list(new_out.glob("*.lua")) and not list((env.home / "replay").rglob("*.lua"))

    # sequence: each pool thread replays its captured sessions one after another
    seq, _ = env.bench(w_path, tmp_path / "seq", "--time", "4", "--replay-mode", "sequence")
    rs = seq["replay"]
    _, worst_seq = _mix_table(w, replay_mix(rs))
    print(
        f"sequence: {seq['threads']} threads, {rs['statements']:,} statements in "
        f"{rs['sessions_opened']:,} sessions, failed {rs['failed']}, largest mix difference "
        f"{worst_seq:.2f} pts"
    )
    assert seq["threads"] == c.observed and rs["sessions_opened"] > seq["threads"]
    assert rs["duplicate_key_errors"] == 0

    # timed: the sessions with their captured think time, and the time between them
    timed, _ = env.bench(w_path, tmp_path / "timed", "--time", "4", "--replay-mode", "timed")
    rt = timed["replay"]
    print(
        f"timed: {timed['threads']} threads, {rt['statements']:,} statements in "
        f"{rt['sessions_opened']:,} sessions ({rt['statements'] / 4:,.1f}/s; captured "
        f"{sum(k.count for k in w.replay_classes()) / w.window_s:,.1f}/s), failed {rt['failed']}"
    )
    assert timed["threads"] == c.observed and rt["statements"] > 0 and rt["failed"] == 0
    print(f"{time.monotonic() - t0:.1f} s")


def test_redacted_capture_replayed(env: Env, tmp_path: Path) -> None:
    t0 = time.monotonic()
    w_path = tmp_path / "redacted.json"
    w, text, _ = env.capture(w_path, 6, "--redact")
    print(text)
    raw = w_path.read_text()
    assert w.redacted and w.placeholders
    assert "@example.com" not in raw and "2026-11-28 04:00:00" not in raw
    insert = next(k for k in w.replay_classes() if k.text.startswith("insert"))
    print("a redacted insert:", insert.examples[0])
    assert f"{{str:{NOTE_LEN}}}" in insert.examples[0] and "{datetime}" in insert.examples[0]

    _clone_data(env.a, env.b)
    b = env.b.connect_params()
    conn = connect(b)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT MAX(id) FROM `{SCHEMA}`.orders")
            top = int(cur.fetchone()[0])  # type: ignore[index]
    finally:
        conn.close()
    run, out = env.bench(w_path, tmp_path / "red", "--time", "8")
    print(out)
    rep = run["replay"]
    table, worst = _mix_table(w, replay_mix(rep))
    print(table)
    conn = connect(b)
    try:
        with conn.cursor() as cur:
            cur.execute(
                f"SELECT note, amount, created_at FROM `{SCHEMA}`.orders WHERE id > %s LIMIT 200",
                (top,),
            )
            rows = cur.fetchall()
    finally:
        conn.close()
    print(
        f"redacted replay: {rep['statements']:,} statements, failed {rep['failed']} "
        f"({rep['errors_by_errno']}), {len(rows)}+ new orders, e.g. {rows[:2]}; largest mix "
        f"difference {worst:.2f} pts; {time.monotonic() - t0:.1f} s"
    )
    assert rows and all(len(str(n)) == NOTE_LEN for n, _, _ in rows)  # the shape kept
    assert rep["duplicate_key_errors"] == 0
    assert worst <= 1.0, table
