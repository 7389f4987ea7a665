"""`myaccel capture` on real servers of each flavor, run as an account holding exactly the
privileges docs/workloads.md ("Capture") lists, while a traffic generator (one thread,
its own connection, INSERT / SELECT / UPDATE in turn on a table) runs:

- MariaDB 10.11 sandbox with performance_schema OFF (the general log) and ON (where
  ``events_statements_current`` is off by default: it must be switched on and back);
- MySQL 9.7 sandbox with performance_schema ON, and restarted with it OFF (the general
  log);
- a stock-like MariaDB started by hand as the OS user ``mysql`` (``mariadbd
  --user=mysql``, its own datadir and socket) while the test (myaccel) runs as root: the
  general log must go to a directory the server's user owns and writes, private to it
  (0700 / 0600), and be gone after. (The sandboxes run their server as root when myaccel
  is root, which cannot show that case.)

Asserted each time: statements > 0, exactly the generator's three classes in its 1:1:1
mix, every switched setting back to its value before (consumers, general_log,
general_log_file, log_output), the journal rolled back, the log directory gone, the
literal-values line printed. Then a refusal per missing privilege (exit 3, one-line
error naming it, the GRANT in the hint, nothing switched, no journal written) and a
window without traffic (non-zero exit, the message, nothing left switched)."""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from myaccel.bench.workload import load_workload
from myaccel.cli.main import cli
from myaccel.server.connection import ConnectParams, connect, query_rows
from myaccel.server.sandbox import Sandbox
from myaccel.server.sandbox.state import ServerOptions

pytestmark = pytest.mark.integration

SCHEMA = "capapp"
USER, PASSWORD = "capper", "capper-pw-1"
WINDOW = ["--duration", "2", "--baseline", "0"]
MIX = {
    "insert into t (v) values (?)",
    "select v from t where id = ?",
    "update t set v = v + ? where id = ?",
}
# What docs/workloads.md lists, per source and flavor, written out here (not taken from
# the code): each (privilege, object) is granted on its own so that one can be left out.
DOCS: dict[tuple[str, str], list[tuple[str, str]]] = {
    ("performance_schema", "mariadb"): [
        ("SELECT", "performance_schema.setup_consumers"),
        ("UPDATE", "performance_schema.setup_consumers"),
        ("SELECT", "performance_schema.events_statements_history_long"),
        ("SELECT", "performance_schema.threads"),
    ],
    ("general_log", "mariadb"): [("SUPER", "*.*"), ("PROCESS", "*.*")],
    ("general_log", "mysql"): [("SYSTEM_VARIABLES_ADMIN", "*.*"), ("PROCESS", "*.*")],
}
DOCS[("performance_schema", "mysql")] = DOCS[("performance_schema", "mariadb")]
SCHEMA_GRANT = ("SELECT", f"{SCHEMA}.*")  # the schema's DDL in the workload file


class Server:
    """A server to capture from: the CLI options that reach it as the capture account,
    and an admin connection."""

    def __init__(self, home: Path, admin: ConnectParams, cli_target: list[str], flavor: str):
        self.home, self.admin, self.cli_target, self.flavor = home, admin, cli_target, flavor

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        conn = connect(self.admin)
        try:
            return query_rows(conn, sql)
        finally:
            conn.close()

    def run(self, *args: str) -> tuple[int, str, str]:
        r = CliRunner().invoke(cli, list(args), env={"MYACCEL_HOME": str(self.home)})
        return r.exit_code, r.stdout, r.stderr

    def capture(self, *args: str) -> tuple[int, str, str]:
        return self.run(
            "capture", *self.cli_target, "--user", USER, "--password", PASSWORD, *WINDOW, *args
        )

    def account(self, grants: list[tuple[str, str]]) -> None:
        """The capture account, holding exactly ``grants``."""
        self.query(f"DROP USER IF EXISTS '{USER}'@'localhost'")
        self.query(f"CREATE USER '{USER}'@'localhost' IDENTIFIED BY '{PASSWORD}'")
        for priv, on in grants:
            self.query(f"GRANT {priv} ON {on} TO '{USER}'@'localhost'")

    def settings(self) -> dict[str, Any]:
        """What a capture may switch."""
        row = self.query("SELECT @@general_log, @@general_log_file, @@log_output")[0]
        out: dict[str, Any] = dict(
            zip(("general_log", "general_log_file", "log_output"), row, strict=True)
        )
        out["performance_schema"] = self.query("SELECT @@performance_schema")[0][0]
        if str(out["performance_schema"]) in ("1", "ON"):
            out["consumers"] = sorted(
                self.query("SELECT NAME, ENABLED FROM performance_schema.setup_consumers")
            )
        return out

    def journals(self) -> list[Path]:
        d = self.home / "journals"
        return sorted(d.glob("*.json")) if d.is_dir() else []


def _schema(admin: ConnectParams) -> None:
    conn = connect(admin)
    try:
        for sql in (
            f"CREATE DATABASE IF NOT EXISTS {SCHEMA}",
            f"CREATE TABLE IF NOT EXISTS {SCHEMA}.t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)",
            f"INSERT INTO {SCHEMA}.t (v) VALUES (0)",
        ):
            query_rows(conn, sql)
        conn.commit()
    finally:
        conn.close()


class Traffic:
    """One thread, its own connection: INSERT, SELECT, UPDATE in turn until stopped."""

    def __init__(self, admin: ConnectParams) -> None:
        self.params = ConnectParams(
            host=admin.host,
            port=admin.port,
            socket=admin.socket,
            user=admin.user,
            password=admin.password,
            database=SCHEMA,
        )
        self.stop_flag = threading.Event()
        self.counts = {"insert": 0, "select": 0, "update": 0}
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        conn = connect(self.params)
        conn.autocommit(True)
        try:
            with conn.cursor() as cur:
                while not self.stop_flag.is_set():
                    cur.execute("INSERT INTO t (v) VALUES (1)")
                    self.counts["insert"] += 1
                    cur.execute("SELECT v FROM t WHERE id = 1")
                    cur.fetchall()
                    self.counts["select"] += 1
                    cur.execute("UPDATE t SET v = v + 1 WHERE id = 1")
                    self.counts["update"] += 1
                    time.sleep(0.002)
        finally:
            conn.close()

    def __enter__(self) -> Traffic:
        self.thread.start()
        time.sleep(0.3)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_flag.set()
        self.thread.join(10)


def _log_dirs_named(journal: Path) -> list[str]:
    return sorted(set(re.findall(r"general-log-\d+-[A-Za-z0-9_]+", journal.read_text())))


def _capture_ok(s: Server, tmp_path: Path, source: str, grants: list[tuple[str, str]]) -> Any:
    """A capture under traffic as the documented account; everything asserted."""
    s.account([*grants, SCHEMA_GRANT])
    before = s.settings()
    w_path = tmp_path / "w.json"
    t0 = time.monotonic()
    with Traffic(s.admin) as traffic:
        code, out, err = s.capture("--out", str(w_path))
    print(out, err, traffic.counts, f"{time.monotonic() - t0:.1f} s", sep="\n")
    assert code == 0, err
    w = load_workload(w_path)
    assert w.source == source
    assert w.statements_total > 0
    assert {c.text for c in w.classes} == MIX, [c.text for c in w.classes]
    for c in w.classes:
        assert abs(c.share_pct - 100 / 3) <= 2, [(c.text, c.share_pct) for c in w.classes]
    assert w.concurrency.connections == 1
    assert [sc.name for sc in w.schemas] == [SCHEMA] and w.schemas[0].ddl
    assert s.settings() == before
    assert w.journal and json.loads(Path(w.journal).read_text())["status"] == "rolled-back"
    assert "the workload file holds the statements' literal values" in out
    assert "--redact" in out.splitlines()[-1]
    if source == "general_log":
        for name in _log_dirs_named(Path(w.journal)):
            assert not (s.home / "capture" / name).exists()
            assert not (Path(tempfile.gettempdir()) / "myaccel-capture" / name).exists()
    return w


def _refusals(s: Server, source: str) -> None:
    """Each documented privilege left out in turn: refused, exit 3, nothing switched."""
    needs = DOCS[(source, s.flavor)]
    for i, (priv, on) in enumerate(needs):
        s.account([*needs[:i], *needs[i + 1 :], SCHEMA_GRANT])
        before, journals = s.settings(), s.journals()
        code, out, err = s.capture("--source", source, "--out", "/tmp/never-written.json")
        lines = err.strip().splitlines()
        print(lines)
        assert code == 3, (priv, on, code, out, err)
        errors = [ln for ln in lines if ln.startswith("error:")]
        assert len(errors) == 1 and f"{priv} on {on}" in errors[0], lines
        hints = [ln for ln in lines if ln.startswith("hint:")]
        assert len(hints) == 1 and f"GRANT {priv} ON {on} TO '{USER}'@'localhost'" in hints[0]
        assert "switched on" not in err
        assert s.settings() == before and s.journals() == journals
        assert not Path("/tmp/never-written.json").exists()


def _no_traffic(s: Server, source: str, grants: list[tuple[str, str]], tmp_path: Path) -> None:
    s.account([*grants, SCHEMA_GRANT])
    before = s.settings()
    w_path = tmp_path / "empty.json"
    code, out, err = s.capture("--out", str(w_path))
    print(err)
    assert code == 1, (code, out, err)
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "recorded no statement" in errors[0], err
    assert "is it receiving traffic?" in errors[0]
    assert any(ln.startswith("hint:") for ln in err.splitlines())
    assert "switched back" in err
    assert not w_path.exists()
    assert s.settings() == before
    assert json.loads(s.journals()[-1].read_text())["status"] == "rolled-back"


def _pfs(sb: Sandbox, on: bool) -> None:
    want = "1" if on else "0"
    if str(sb.query("SELECT @@performance_schema")[0][0]) != want:
        sb.restart(ServerOptions(sets={"performance_schema": "ON" if on else "OFF"}))


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    h = tmp_path_factory.mktemp("capture-privileges")
    mp = pytest.MonkeyPatch()
    mp.setenv("MYACCEL_HOME", str(h))
    yield h
    mp.undo()


def _sandbox(home: Path, flavor: str, basedir: Path | None) -> Iterator[tuple[Sandbox, Server]]:
    sb = Sandbox.init(f"cpriv-{flavor}", basedir=basedir, home=home, timeout_s=180, flavor=flavor)
    try:
        _schema(sb.connect_params())
        yield sb, Server(home, sb.connect_params(), ["--sandbox", sb.name], flavor)
    finally:
        sb.destroy()


@pytest.fixture(scope="module")
def maria(home: Path) -> Iterator[tuple[Sandbox, Server]]:
    yield from _sandbox(home, "mariadb", None)


@pytest.fixture(scope="module")
def mysql(home: Path, mysql_basedir: Path | None) -> Iterator[tuple[Sandbox, Server]]:
    yield from _sandbox(home, "mysql", mysql_basedir)


def _stock_server(home: Path, private_tmp: bool) -> Iterator[Server]:
    """MariaDB run by hand as the OS user mysql, as a distribution's service runs it;
    ``private_tmp``: in a mount namespace of its own with another directory on /tmp, as a
    unit's ``PrivateTmp=true`` runs it (its files then live under /var/tmp)."""
    if os.geteuid() != 0:
        pytest.skip("starting a server as another user needs root")
    try:
        mysql_user = pwd.getpwnam("mysql")
    except KeyError:
        pytest.skip("no OS user mysql")
    base = Path(
        tempfile.mkdtemp(prefix="myaccel-stock-", dir="/var/tmp" if private_tmp else "/tmp")
    )
    base.chmod(0o755)
    data, run = base / "data", base / "run"
    for d in (data, run):
        d.mkdir()
        os.chown(d, mysql_user.pw_uid, mysql_user.pw_gid)
    subprocess.run(
        [
            "mariadb-install-db",
            "--no-defaults",
            "--user=mysql",
            f"--datadir={data}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    sock = run / "mysqld.sock"
    argv = [
        "/usr/sbin/mariadbd",
        "--no-defaults",
        "--user=mysql",
        f"--datadir={data}",
        f"--socket={sock}",
        "--skip-networking",
        f"--pid-file={run / 'mysqld.pid'}",
        f"--log-error={run / 'error.log'}",
    ]
    if private_tmp:
        own = base / "tmp"
        own.mkdir()
        own.chmod(0o1777)
        script = f"mount --bind {own} /tmp && exec {' '.join(argv)}"
        argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        admin = ConnectParams(host=None, port=3306, socket=str(sock), user="root", password=None)
        for _ in range(120):
            if server.poll() is not None:
                pytest.skip(f"the server did not start: {server.stderr.read()[-300:]!r}")
            try:
                connect(admin).close()
                break
            except Exception:
                time.sleep(0.25)
        _schema(admin)
        yield Server(home, admin, ["--socket", str(sock)], "mariadb")
    finally:
        server.terminate()
        server.wait(60)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def stock(home: Path) -> Iterator[Server]:
    yield from _stock_server(home, private_tmp=False)


@pytest.fixture(scope="module")
def stock_private_tmp(home: Path) -> Iterator[Server]:
    yield from _stock_server(home, private_tmp=True)


# ---------------------------------------------------------------- tests


def test_mariadb_general_log(maria: tuple[Sandbox, Server], tmp_path: Path) -> None:
    sb, s = maria
    _pfs(sb, False)
    w = _capture_ok(s, tmp_path, "general_log", DOCS[("general_log", "mariadb")])
    assert "mysql:general_log" in w.settings_changed


def test_mariadb_general_log_refusals(maria: tuple[Sandbox, Server]) -> None:
    sb, s = maria
    _pfs(sb, False)
    _refusals(s, "general_log")


def test_mariadb_general_log_no_traffic(maria: tuple[Sandbox, Server], tmp_path: Path) -> None:
    sb, s = maria
    _pfs(sb, False)
    _no_traffic(s, "general_log", DOCS[("general_log", "mariadb")], tmp_path)


def test_mariadb_performance_schema(maria: tuple[Sandbox, Server], tmp_path: Path) -> None:
    """performance_schema ON: MariaDB ships events_statements_current (and the history
    consumer) off; the capture switches them on and back."""
    sb, s = maria
    _pfs(sb, True)
    off = {
        str(n)
        for n, e in sb.query("SELECT NAME, ENABLED FROM performance_schema.setup_consumers")
        if str(e) == "NO"
    }
    assert "events_statements_current" in off  # the stock default this capture must handle
    w = _capture_ok(s, tmp_path, "performance_schema", DOCS[("performance_schema", "mariadb")])
    assert "pfs-consumer:events_statements_current" in w.settings_changed
    assert {t.removeprefix("pfs-consumer:") for t in w.settings_changed} <= off


def test_mariadb_performance_schema_refusals(maria: tuple[Sandbox, Server]) -> None:
    sb, s = maria
    _pfs(sb, True)
    _refusals(s, "performance_schema")


def test_mariadb_performance_schema_no_traffic(
    maria: tuple[Sandbox, Server], tmp_path: Path
) -> None:
    sb, s = maria
    _pfs(sb, True)
    _no_traffic(s, "performance_schema", DOCS[("performance_schema", "mariadb")], tmp_path)


def test_mysql_performance_schema(mysql: tuple[Sandbox, Server], tmp_path: Path) -> None:
    sb, s = mysql
    _pfs(sb, True)
    _capture_ok(s, tmp_path, "performance_schema", DOCS[("performance_schema", "mysql")])


def test_mysql_performance_schema_refusals(mysql: tuple[Sandbox, Server]) -> None:
    sb, s = mysql
    _pfs(sb, True)
    _refusals(s, "performance_schema")


def test_mysql_performance_schema_no_traffic(mysql: tuple[Sandbox, Server], tmp_path: Path) -> None:
    sb, s = mysql
    _pfs(sb, True)
    _no_traffic(s, "performance_schema", DOCS[("performance_schema", "mysql")], tmp_path)


def test_mysql_general_log(mysql: tuple[Sandbox, Server], tmp_path: Path) -> None:
    sb, s = mysql
    _pfs(sb, False)
    _capture_ok(s, tmp_path, "general_log", DOCS[("general_log", "mysql")])


def test_mysql_general_log_refusals(mysql: tuple[Sandbox, Server]) -> None:
    sb, s = mysql
    _pfs(sb, False)
    _refusals(s, "general_log")


def test_stock_mariadb_as_mysql_user(stock: Server, tmp_path: Path) -> None:
    """The server runs as mysql, myaccel as root: the log goes to a directory of the
    server's user (0700, the file 0600, both its own), seen while the capture runs, and
    is gone after."""
    mysql_user = pwd.getpwnam("mysql")
    assert os.geteuid() == 0
    shared = Path(tempfile.gettempdir()) / "myaccel-capture"
    seen: dict[str, tuple[int, int, int, int]] = {}
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for d in shared.glob("general-log-*") if shared.is_dir() else []:
                f = d / "general.log"
                try:
                    ds, fs = d.stat(), f.stat()
                except OSError:
                    continue
                seen[d.name] = (
                    ds.st_uid,
                    stat.S_IMODE(ds.st_mode),
                    fs.st_uid,
                    stat.S_IMODE(fs.st_mode),
                )
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        w = _capture_ok(stock, tmp_path, "general_log", DOCS[("general_log", "mariadb")])
    finally:
        done.set()
        watcher.join(5)
    names = _log_dirs_named(Path(w.journal or ""))
    assert names and set(names) <= set(seen), (names, seen)
    for name in names:
        assert seen[name] == (mysql_user.pw_uid, 0o700, mysql_user.pw_uid, 0o600), seen[name]
        assert not (shared / name).exists()
    _refusals(stock, "general_log")


DROP_ROOT = """
import os, sys
import pwd, click, pymysql, pymysql.connections, encodings.idna
import myaccel.cli.main, myaccel.cli.capture, myaccel.capture.session, myaccel.artifacts
import myaccel.outdir, myaccel.actions.target, myaccel.bench.workload
pwd.getpwuid(os.stat(sys.argv[1]).st_uid)
os.setgroups([])
os.setgid(65534)
os.setuid(65534)  # nobody: neither root nor the server's user
sys.argv = ["myaccel", *sys.argv[2:]]
myaccel.cli.main.cli()
"""


def test_stock_mariadb_refused_to_another_user(stock: Server) -> None:
    """myaccel run as nobody (a child that drops root once its modules are loaded: the
    interpreter lives under /root), the server as mysql: no directory both may use, so the
    general log is refused before anything is switched (exit 8, one line, a hint)."""
    stock.account([*DOCS[("general_log", "mariadb")], SCHEMA_GRANT])
    home = Path(tempfile.mkdtemp(prefix="myaccel-nobody-", dir="/tmp"))
    os.chown(home, 65534, 65534)
    before = stock.settings()
    try:
        env = {**os.environ, "HOME": str(home), "MYACCEL_HOME": str(home)}
        env["PYTHONPATH"] = str(Path(__file__).parents[2] / "src")
        r = subprocess.run(
            [
                sys.executable,
                "-c",
                DROP_ROOT,
                stock.admin.socket or "",
                "capture",
                *stock.cli_target,
                *("--user", USER, "--password", PASSWORD, *WINDOW, "--out", str(home / "w.json")),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        print(r.stderr)
        assert r.returncode == 8, (r.returncode, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert lines[0].startswith("error: the server runs as mysql (uid "), lines
        assert "cannot write the general log" in lines[0]
        assert lines[1].startswith("hint: run myaccel capture as root or as mysql"), lines
        assert len(lines) == 2
        assert stock.settings() == before
        assert list(home.iterdir()) == []  # no journal, no directory, no file
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _killed_capture(sb: Sandbox, s: Server) -> Path:
    """A capture from the general log killed (SIGKILL) in its window: the log directory
    it made, still there, and its switches still on."""
    env = {**os.environ, "MYACCEL_HOME": str(s.home)}
    env["PYTHONPATH"] = str(Path(__file__).parents[2] / "src")
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "myaccel",
            "capture",
            *s.cli_target,
            *("--user", USER, "--password", PASSWORD, "--duration", "120", "--baseline", "0"),
            *("--out", str(s.home / "killed.json")),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(240):
            dirs = list((s.home / "capture").glob(f"general-log-{child.pid}-*"))
            if dirs and str(sb.query("SELECT @@general_log")[0][0]) == "1":
                break
            time.sleep(0.25)
        else:
            pytest.fail("the capture did not switch the general log on")
    finally:
        child.kill()
        child.wait(30)
    assert dirs[0].is_dir()
    return dirs[0]


def test_killed_capture_cleaned_by_rollback(maria: tuple[Sandbox, Server]) -> None:
    """SIGKILL in the window: `myaccel rollback` switches the log back and removes its
    directory; so does the next command's repair of orphaned journals."""
    sb, s = maria
    _pfs(sb, False)
    s.account([*DOCS[("general_log", "mariadb")], SCHEMA_GRANT])
    before = s.settings()
    left = _killed_capture(sb, s)
    code, out, err = s.run("rollback")
    print(out, err)
    assert code == 0, err
    assert "reverted mysql:general_log" in out
    assert f"removed the general log directory {left}" in err
    assert not left.exists() and s.settings() == before
    # the next command (any: here `sandbox list`) repairs an orphaned journal itself
    left = _killed_capture(sb, s)
    code, out, err = s.run("sandbox", "list")
    print(out, err)
    assert code == 0, err
    assert "was killed and left" in err
    assert not left.exists() and s.settings() == before


def test_stock_mariadb_with_a_private_tmp(stock_private_tmp: Server, tmp_path: Path) -> None:
    """The server sees another /tmp (a unit's PrivateTmp=true): the log goes to the
    server's own /tmp, made and read through /proc/PID/root, and is gone after; nothing
    is made in myaccel's /tmp."""
    s = stock_private_tmp
    pid = int(Path(str(s.query("SELECT @@pid_file")[0][0])).read_text())
    theirs = Path(f"/proc/{pid}/root/tmp/myaccel-capture")
    ours = Path(tempfile.gettempdir()) / "myaccel-capture"
    before = sorted(ours.iterdir()) if ours.is_dir() else []
    seen: list[str] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.extend(d.name for d in theirs.glob("general-log-*") if d.name not in seen)
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        w = _capture_ok(s, tmp_path, "general_log", DOCS[("general_log", "mariadb")])
    finally:
        done.set()
        watcher.join(5)
    names = _log_dirs_named(Path(w.journal or ""))
    assert names and set(names) <= set(seen), (names, seen)
    assert not any((theirs / n).exists() for n in names)
    assert (sorted(ours.iterdir()) if ours.is_dir() else []) == before
