"""Crash injection on a real sandbox: `myaccel apply` killed with SIGKILL at every journal
step and at each phase of the restart, then `myaccel rollback` (no options) must exit 0 with
the option files byte-identical, the server running and its variables at the old values.

The same kill points run through both callers of ``actions.protocol.apply_with_restart``
(``entry``): ``myaccel apply`` and the existing-server rollout of ``accelerate``
(``rollout.guarded_apply`` on the sandbox as the existing server, in a process of its own:
``rollout_driver.py``; the clone and its A/B, which change nothing on the server, are left
out).

The kill points come from ``MYACCEL_CRASH_AT`` (myaccel.actions.crashpoint): the apply
subprocess sends itself SIGKILL at exactly that point, so every run is deterministic.
One sandbox serves every point; each test puts it back on its base configuration first.
The measured outcomes are in docs/safety.md ("Crash matrix").
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from myaccel import proc
from myaccel.actions.journal import Journal
from myaccel.server.connection import connect, query_value
from myaccel.server.sandbox import Sandbox

pytestmark = pytest.mark.integration

NAME = "crashinj"
ONLINE = ("innodb_io_capacity", "1000")  # dynamic: mysql: + mycnf: entries
RESTART = ("innodb_log_buffer_size", "32M")  # restart-only: a mycnf: entry and a restart
# Entries: 0 mysql:innodb_io_capacity, 1 mycnf:mysqld/innodb_io_capacity,
# 2 mycnf:mysqld/innodb_log_buffer_size; then the restart.
ENTRY_POINTS = [f"{p}:{i}" for i in range(3) for p in ("journaled", "changed", "applied")]
RESTART_POINTS = ["restart-stop", "restart-down", "restart-start", "health-check"]
OTHER_POINTS = ["journal-write:1"]  # the journal exists (with its server record), no entry yet
POINTS = ENTRY_POINTS + RESTART_POINTS + OTHER_POINTS
ENTRIES = ("apply", "rollout")
DRIVER = Path(__file__).with_name("rollout_driver.py")


class Env:
    def __init__(self, home: Path, sb: Sandbox, plan: Path) -> None:
        self.home = home
        self.sb = sb
        self.plan = plan

    def run(
        self, args: list[str], crash_at: str | None = None, timeout_s: float = 180
    ) -> subprocess.CompletedProcess[str]:
        return self._run(["-m", "myaccel", *args], crash_at, timeout_s)

    def apply(self, entry: str, crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
        """The plan applied by ``entry``: `myaccel apply`, or accelerate's rollout."""
        if entry == "apply":
            return self.run(["apply", str(self.plan), "--sandbox", NAME, "--yes"], crash_at)
        return self._run([str(DRIVER), str(self.plan), NAME], crash_at, 180)

    def _run(
        self, args: list[str], crash_at: str | None, timeout_s: float
    ) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "MYACCEL_CRASH_AT"}
        env["MYACCEL_HOME"] = str(self.home)
        if crash_at is not None:
            env["MYACCEL_CRASH_AT"] = crash_at
        return subprocess.run(
            [sys.executable, *args],
            check=False,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )

    def var(self, name: str) -> str:
        conn = connect(self.sb.connect_params())
        try:
            return str(query_value(conn, f"SELECT @@GLOBAL.{name}"))
        finally:
            conn.close()

    def option_files(self) -> dict[str, str]:
        """sha256 of every option file of the sandbox: its conf.d (the managed file) and the
        option file the server is started with."""
        out: dict[str, str] = {}
        conf = self.sb.dir / "conf.d"
        files = sorted(conf.iterdir()) if conf.is_dir() else []
        for p in [*files, self.sb.option_file]:
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
        return out


def _make_plan(env: Env, tmp: Path) -> Path:
    p = tmp / "plan.json"
    r = env.run(["plan", "--sandbox", NAME, "--layers", "server", "--out", str(p)])
    assert r.returncode == 0, r.stderr
    doc = json.loads(p.read_text())
    template = doc["recommendations"][0]
    recs = []
    for (name, value), risk in ((ONLINE, "online"), (RESTART, "restart")):
        rec = dict(template)
        rec.update(
            id=f"test-{name}", target=f"mysql:{name}", current=None, proposed=value, risk=risk
        )
        rec["action"] = "apply"
        recs.append(rec)
    doc["recommendations"] = recs
    p.write_text(json.dumps(doc))
    return p


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    if proc.which("mariadbd") is None and proc.which("mysqld") is None:
        pytest.skip("no mariadbd/mysqld installed")
    tmp = tmp_path_factory.mktemp("crash")
    home = tmp / "home"
    home.mkdir()
    sb = Sandbox.init(NAME, home=home, timeout_s=120)
    (sb.dir / "conf.d").mkdir()  # the sandbox's option directory (apply creates it once)
    try:
        e = Env(home, sb, Path())
        e.plan = _make_plan(e, tmp)
        yield e
    finally:
        sb.destroy()


def _reset(env: Env) -> None:
    """Base configuration, no journal in effect (also after a failed test)."""
    jdir = env.home / "journals"
    if jdir.is_dir() and Journal.find_active(jdir):
        shutil.rmtree(jdir)
    managed = env.sb.dir / "conf.d" / "99-myaccel.cnf"
    managed.unlink(missing_ok=True)
    if env.sb.is_running() and env.sb.status().active_config.is_base:
        return
    env.sb.stop()
    env.sb.start(timeout_s=120)


@pytest.fixture
def base(env: Env) -> Env:
    _reset(env)
    return env


def _before(env: Env) -> tuple[dict[str, str], dict[str, str]]:
    return env.option_files(), {n: env.var(n) for n in (ONLINE[0], RESTART[0])}


def _assert_restored(env: Env, before: tuple[dict[str, str], dict[str, str]]) -> None:
    files, values = before
    assert env.option_files() == files, "option files differ after rollback"
    assert env.sb.is_running(), "the sandbox is not running after rollback"
    assert {n: env.var(n) for n in values} == values
    assert Journal.find_unfinished(env.home / "journals") == []
    assert Journal.find_active(env.home / "journals") == []


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("point", POINTS)
def test_kill_apply_then_rollback(base: Env, point: str, entry: str) -> None:
    env = base
    before = _before(env)
    t0 = time.monotonic()
    r = env.apply(entry, crash_at=point)
    t_apply = time.monotonic() - t0
    assert r.returncode == -signal.SIGKILL, (r.returncode, r.stderr)
    assert Journal.find_unfinished(env.home / "journals"), "the crash left no open journal"
    t0 = time.monotonic()
    rb = env.run(["rollback"])
    t_rollback = time.monotonic() - t0
    assert rb.returncode == 0, rb.stderr
    assert "Traceback" not in rb.stderr
    _assert_restored(env, before)
    print(
        f"CRASH-MATRIX {entry} {point} apply_rc={r.returncode} rollback_rc={rb.returncode} "
        f"apply_s={t_apply:.2f} rollback_s={t_rollback:.2f} identical=yes"
    )


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize(
    ("apply_point", "rb_point"),
    [
        ("restart-down", "reverted:2"),  # server down: rollback starts it, killed reverting
        ("restart-down", "reverted:0"),
        ("health-check", "restart-down"),  # rollback killed in its own restart
        ("health-check", "rollback-finish"),  # restarted, journal not yet marked
    ],
)
def test_kill_rollback_too(base: Env, apply_point: str, rb_point: str, entry: str) -> None:
    """Apply killed, then the rollback killed as well: a second rollback finishes."""
    env = base
    before = _before(env)
    r = env.apply(entry, crash_at=apply_point)
    assert r.returncode == -signal.SIGKILL
    t0 = time.monotonic()
    rb1 = env.run(["rollback"], crash_at=rb_point)
    assert rb1.returncode == -signal.SIGKILL, rb1.stderr
    assert Journal.find_active(env.home / "journals"), "a killed rollback left nothing to redo"
    rb2 = env.run(["rollback"])
    assert rb2.returncode == 0, rb2.stderr
    _assert_restored(env, before)
    print(
        f"CRASH-MATRIX {entry} apply@{apply_point}+rollback@{rb_point} rollback_rc={rb2.returncode} "
        f"both_rollbacks_s={time.monotonic() - t0:.2f} identical=yes"
    )


@pytest.mark.parametrize("entry", ENTRIES)
def test_full_apply_and_rollback(base: Env, entry: str) -> None:
    env = base
    before = _before(env)
    r = env.apply(entry)
    assert r.returncode == 0, r.stderr
    assert env.var(ONLINE[0]) == ONLINE[1]
    assert env.var(RESTART[0]) == str(32 * 1024**2)
    doc: dict[str, Any] = json.loads(next((env.home / "journals").glob("*.json")).read_text())
    server = doc["server"]
    assert server["kind"] == "sandbox" and server["sandbox"] == NAME
    assert "password" not in json.dumps(server)
    rb = env.run(["rollback"])
    assert rb.returncode == 0, rb.stderr
    _assert_restored(env, before)


def test_dry_run_creates_nothing_and_warns(base: Env) -> None:
    env = base
    journals = _journals(env)
    shutil.rmtree(env.sb.dir / "conf.d")
    try:
        r = env.run(["apply", str(env.plan), "--sandbox", NAME, "--dry-run"])
        assert r.returncode == 0, r.stderr
        assert f"would write {env.sb.dir}/conf.d/99-myaccel.cnf" in r.stdout
        assert f"would create directory {env.sb.dir}/conf.d" in r.stdout
        assert not (env.sb.dir / "conf.d").exists()
        assert _journals(env) == journals
    finally:
        (env.sb.dir / "conf.d").mkdir(exist_ok=True)
    # an unfinished journal: dry-run warns, a real apply refuses before printing changes
    r = env.run(["apply", str(env.plan), "--sandbox", NAME, "--yes"], crash_at="journaled:0")
    assert r.returncode == -signal.SIGKILL
    r = env.run(["apply", str(env.plan), "--sandbox", NAME, "--dry-run"])
    assert r.returncode == 0 and "unfinished journal" in r.stderr
    r = env.run(["apply", str(env.plan), "--sandbox", NAME, "--yes"])
    assert r.returncode != 0 and "did not finish" in r.stderr
    assert "change " not in r.stdout
    assert env.run(["rollback"]).returncode == 0


def test_refused_without_yes_prints_no_changes(base: Env) -> None:
    r = base.run(["apply", str(base.plan), "--sandbox", NAME])
    assert r.returncode == 2 and "needs confirmation" in r.stderr
    assert r.stdout == ""


def _journals(env: Env) -> list[Path]:
    return Journal.list_paths(env.home / "journals")


def test_only_unknown_id(base: Env) -> None:
    journals = _journals(base)
    r = base.run(["apply", str(base.plan), "--sandbox", NAME, "--only", "nosuch-id", "--yes"])
    assert r.returncode == 2
    assert "nosuch-id" in r.stderr and "test-innodb_io_capacity" in r.stderr
    assert _journals(base) == journals


def test_rollback_list_shows_corrupt_and_bad_handle_is_clean(base: Env) -> None:
    env = base
    r = env.run(["apply", str(env.plan), "--sandbox", NAME, "--yes"], crash_at="applied:0")
    assert r.returncode == -signal.SIGKILL
    path = Journal.find_unfinished(env.home / "journals")[-1]
    good = path.read_bytes()
    doc = json.loads(good)
    doc["status"] = "applied"  # edited: the checksum no longer matches
    path.write_text(json.dumps(doc))
    r = env.run(["rollback", "--list"])
    assert f"{path.name}  corrupt" in r.stdout
    doc["server"] = {"kind": "sandbox", "sandbox": 42}
    path.write_text(json.dumps(doc))
    r = env.run(["rollback", "--ignore-checksum"])
    assert r.returncode != 0 and r.stderr.startswith("error: ") and "Traceback" not in r.stderr
    path.write_bytes(good)
    r = env.run(["rollback"])
    assert r.returncode == 0, r.stderr


def test_socket_without_conf_dir_writes_no_option_file(base: Env) -> None:
    """-S to a server that reads only its --defaults-file (no !includedir): the restart-only
    knob is skipped, the online one is set with SET GLOBAL only, no option file is written."""
    env = base
    sock = str(env.sb.socket)
    before = env.option_files()
    r = env.run(["apply", str(env.plan), "-S", sock, "-u", "root", "--dry-run", "--force"])
    assert r.returncode == 0, r.stderr
    assert "skip test-innodb_log_buffer_size" in r.stderr and "!includedir" in r.stderr
    assert "would write /" not in r.stdout and "mycnf:" not in r.stdout
    r = env.run(["apply", str(env.plan), "-S", sock, "-u", "root", "--yes", "--force"])
    assert r.returncode == 0, r.stderr
    assert env.var(ONLINE[0]) == ONLINE[1]
    assert env.option_files() == before
    assert not Path("/etc/mysql/mariadb.conf.d/99-myaccel.cnf").exists()
    rb = env.run(["rollback"])
    assert rb.returncode == 0, rb.stderr
    assert env.var(ONLINE[0]) != ONLINE[1]
