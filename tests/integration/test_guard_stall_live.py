"""The live guard sees an application's collapse (issue 33 item 3), on a real MariaDB
sandbox (performance_schema off, MariaDB's default: throughput and the clients' counters
are all the guard judges).

A steady application: four client threads, each paced at 8 small transactions per second
(``BEGIN``, an ``UPDATE``, an ``INSERT``, ``COMMIT``) on a schedule of its own; a thread
that falls behind its schedule runs unpaced until it has caught up, as an application's
queue of requests does. A harmless online plan (``innodb_io_capacity``) is applied
through ``rollout.guarded_apply`` on the sandbox's target (as ``rollout_driver.py`` does).

- The stall: 5 s into the after window, a root connection takes ``FLUSH TABLES WITH READ
  LOCK`` and holds it 60 s; the application's transactions wait on it, then catch up in a
  burst. The after window (80 s: the test passes ``window_s`` as ``--window 80`` would,
  the default 30 s window would see the stall's first 25 s) is judged a breach, a stall
  with its burst, and rolled back: the sandbox's files byte for byte and its variables as
  they were, the journal rolled-back.
- The control: the same application, no stall, 20 s windows: no breach."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from myaccel.accelerate.existing import _server_target
from myaccel.accelerate.live import Verdict
from myaccel.accelerate.request import ExistingServer
from myaccel.accelerate.rollout import GuardrailBreach, guarded_apply
from myaccel.actions import Journal, journals_dir
from myaccel.actions.plan_apply import build_changes
from myaccel.actions.protocol import rollback_with_restart
from myaccel.actions.target import SandboxServer, ServerTarget
from myaccel.clone.preflight import RestartMethod
from myaccel.server.sandbox import Sandbox
from plans import make_plan

pytestmark = pytest.mark.integration

NAME = "stall"
VOLATILE = ("data", "tmp", "mysqld.err")
THREADS = 4
TX_PER_S = 8.0  # per thread
STALL_AT_S = 5.0  # into the after window
STALL_S = 60.0
WINDOW_S = 80.0
BEFORE_S = 20.0


class App:
    """``THREADS`` clients on a schedule of ``TX_PER_S`` transactions per second each."""

    def __init__(self, sb: Sandbox) -> None:
        self.socket = str(sb.socket)
        self.stop = threading.Event()
        self.done = [0] * THREADS
        self.errors: list[str] = []
        self.threads = [
            threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(THREADS)
        ]

    def _run(self, i: int) -> None:
        conn = pymysql.connect(unix_socket=self.socket, user="root", autocommit=False)
        t0 = time.monotonic()
        k = 0
        try:
            while not self.stop.is_set():
                slot = t0 + k / TX_PER_S
                wait = slot - time.monotonic()
                if wait > 0:  # on schedule; behind it, no pause: the catch-up
                    self.stop.wait(wait)
                    continue
                with conn.cursor() as cur:
                    conn.begin()
                    cur.execute("UPDATE app.acct SET n = n + 1 WHERE id = %s", (1 + (k + i) % 100,))
                    cur.execute("INSERT INTO app.log (thread, k) VALUES (%s, %s)", (i, k))
                    conn.commit()
                k += 1
                self.done[i] = k
        except pymysql.MySQLError as exc:
            self.errors.append(f"thread {i}: {exc}")
        finally:
            conn.close()

    def __enter__(self) -> App:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=30)


class Stall:
    """``FLUSH TABLES WITH READ LOCK`` held ``STALL_S`` from ``STALL_AT_S`` after
    ``start()``: the application's writes wait on it."""

    def __init__(self, sb: Sandbox) -> None:
        self.socket = str(sb.socket)
        self.held: tuple[float, float] | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        conn = pymysql.connect(unix_socket=self.socket, user="root", autocommit=True)
        try:
            time.sleep(STALL_AT_S)
            with conn.cursor() as cur:
                cur.execute("FLUSH TABLES WITH READ LOCK")
                t = time.monotonic()
                time.sleep(STALL_S)
                cur.execute("UNLOCK TABLES")
                self.held = (t, time.monotonic())
        finally:
            conn.close()


@pytest.fixture(scope="module")
def sb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    home = tmp_path_factory.mktemp("stall-home")
    mp = pytest.MonkeyPatch()
    mp.setenv("MYACCEL_HOME", str(home))
    s = Sandbox.init(NAME, home=home, timeout_s=120)
    try:
        for sql in (
            "CREATE DATABASE app",
            "CREATE TABLE app.acct (id INT PRIMARY KEY, n INT NOT NULL)",
            "CREATE TABLE app.log (id INT AUTO_INCREMENT PRIMARY KEY, thread INT, k INT)",
            "INSERT INTO app.acct SELECT seq, 0 FROM app.seq_1_to_100",
        ):
            s.query(sql)
        yield s
    finally:
        s.destroy()
        mp.undo()


def target(sb: Sandbox) -> ServerTarget:
    existing = ExistingServer(params=sb.connect_params(), yes=True)
    return _server_target(existing, RestartMethod(SandboxServer, NAME, "a myaccel sandbox"))


def variables(sb: Sandbox) -> dict[str, str]:
    # gtid_* move with the application's writes, not with the configuration
    rows = sb.query("SHOW GLOBAL VARIABLES")
    return {str(n): str(v) for n, v in rows if not str(n).startswith("gtid_")}


def files(sb: Sandbox) -> dict[str, str]:
    out: dict[str, str] = {}
    for f in sorted(sb.dir.rglob("*")):
        rel = f.relative_to(sb.dir)
        if rel.parts[0] not in VOLATILE and f.is_file():
            out[str(rel)] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def guarded(sb: Sandbox, window_s: float, seen: list[Verdict], on_after: Any = None) -> Any:
    plan = make_plan(("mysql:innodb_io_capacity", "400", "online"), rationale="harmless")
    server = target(sb)
    pc = build_changes(plan, server, layers=["server"])

    def say(msg: str) -> None:
        print(time.strftime("%H:%M:%S"), msg, flush=True)
        if on_after is not None and msg.startswith("live server: the after window"):
            on_after()

    def record(v: Verdict, j: Path) -> None:
        seen.append(v)

    return guarded_apply(
        plan,
        pc,
        server,
        window_s=window_s,
        settle_s=0,
        say=say,
        record=record,
        before_s=BEFORE_S,  # 20 s of a steady 128 statements/s: its noise is well known
    )


def show(v: Verdict) -> None:
    print("verdict:", v.line(), v.notes)
    for w in (v.before, v.after):
        s = w.summary()
        print(w.label, {k: s[k] for k in ("seconds", "rate", "threads_connected", "sampler")})
        print(w.label, "qps per interval:", s["qps_series"])


def test_a_quiet_steady_application_is_no_breach(sb: Sandbox) -> None:
    with App(sb) as app:
        time.sleep(2.0)
        seen: list[Verdict] = []
        rollout = guarded(sb, 20.0, seen)
    assert not app.errors
    (verdict,) = seen
    show(verdict)
    assert verdict.ok and verdict.line() == "no breach"
    assert sb.query("SELECT @@GLOBAL.innodb_io_capacity")[0][0] == 400
    rollback_with_restart(target(sb), rollout.journal, restart=False, note=print)
    assert sb.query("SELECT @@GLOBAL.innodb_io_capacity")[0][0] == 200


@pytest.mark.system  # a 60 s stall, 100 s in all: `make system-test`
def test_a_60s_stall_then_catch_up_is_a_breach_and_rolled_back(sb: Sandbox) -> None:
    vars_before, files_before = variables(sb), files(sb)
    stall = Stall(sb)
    t0 = time.monotonic()
    seen: list[Verdict] = []
    with App(sb) as app, pytest.raises(GuardrailBreach) as err:
        time.sleep(2.0)
        guarded(sb, WINDOW_S, seen, on_after=stall.start)
    (verdict,) = seen
    show(verdict)
    print(f"wall time {time.monotonic() - t0:.0f} s; error: {err.value.message}")
    assert not app.errors and stall.held is not None
    assert stall.held[1] - stall.held[0] >= STALL_S
    journals = sorted(journals_dir().glob("*.json"))
    assert Journal.load(journals[-1]).data.status == "rolled-back"
    assert files(sb) == files_before  # byte for byte
    after = variables(sb)
    assert {
        k for k in after.keys() | vars_before.keys() if after.get(k) != vars_before.get(k)
    } == set()
    assert "guardrail breach on the live server (stall: " in err.value.message
    assert ", then a burst at " in err.value.message
