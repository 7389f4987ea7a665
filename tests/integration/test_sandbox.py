"""The sandbox against a real server (the installed mariadbd/mysqld), through the CLI
in-process (CliRunner) and the Python API. Everything lives under a temporary
MYACCEL_HOME; the sandboxes are destroyed at the end of the module."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from myaccel import proc
from myaccel.cli.main import cli
from myaccel.errors import SandboxError
from myaccel.server.connection import connect, query_rows
from myaccel.server.sandbox import SANDBOX_SCHEMA, Sandbox, ServerOptions
from myaccel.server.sandbox.process import pid_alive

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        proc.which("mariadbd") is None and proc.which("mysqld") is None,
        reason="no mariadbd/mysqld installed",
    ),
]

NAME = "lab"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    h = tmp_path_factory.mktemp("sbx")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MYACCEL_HOME", str(h))
        try:
            yield h
        finally:
            for sb in Sandbox.list_all(home=h):
                sb.destroy()


@pytest.fixture(scope="module")
def lab_module(home: Path) -> Sandbox:
    return Sandbox.init(NAME, home=home, timeout_s=120)


@pytest.fixture
def lab(lab_module: Sandbox) -> Sandbox:
    """The module's sandbox, running with the base config at the start of each test."""
    lab_module._reload()
    if not lab_module.is_running():
        lab_module.start(timeout_s=120)
    elif not lab_module.state.active_config.is_base:
        lab_module.restart(reset=True, timeout_s=120)
    return lab_module


def run(*args: str | Path | int) -> Result:
    return CliRunner().invoke(cli, ["sandbox", *[str(a) for a in args]])


def assert_error(res: Result, code: int, needle: str) -> None:
    """A one-line error with a hint, on stderr, and the right exit code."""
    assert res.exit_code == code, (res.exit_code, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    errors = [ln for ln in lines if ln.startswith("error: ")]
    assert len(errors) == 1, res.stderr
    assert needle in errors[0], res.stderr
    assert lines[lines.index(errors[0]) + 1].startswith("hint: "), res.stderr
    assert res.stdout == ""


def fingerprint(sb: Sandbox) -> tuple[Any, ...]:
    """What must not change when a command is refused."""
    return (
        sb.state_file.read_bytes(),
        sb.option_file.read_bytes(),
        sb.pid,
        sorted(p.name for p in sb.dir.parent.iterdir()),
    )


def one(sb: Sandbox, sql: str) -> Any:
    return sb.query(sql)[0][0]


# ------------------------------------------------------------------ init and users


def test_init_layout_state_and_users(lab: Sandbox, home: Path) -> None:
    state = json.loads(lab.state_file.read_text())
    assert state["schema_version"] == SANDBOX_SCHEMA
    for key in ("flavor", "version", "binary", "basedir", "port", "socket", "datadir"):
        assert state[key], key
    assert state["created_at"] and state["bench_password"]
    assert stat.S_IMODE(lab.state_file.stat().st_mode) == 0o600
    assert lab.port != 3306
    assert lab.socket.is_socket()
    assert lab.datadir == home / "sandboxes" / NAME / "data"
    assert lab.error_log.is_file() and lab.option_file.is_file()
    assert lab.binary_path.is_file()
    assert "/var/lib/mysql" not in lab.option_file.read_text()

    # admin: root over the socket, nowhere else; no anonymous users
    assert one(lab, "SELECT CURRENT_USER()") == "root@localhost"
    users = set(lab.query("SELECT user, host FROM mysql.user"))
    assert ("root", "127.0.0.1") not in users
    assert not any(u == "" for u, _ in users)
    assert ("sbtest", "localhost") in users and ("sbtest", "127.0.0.1") in users
    assert one(lab, "SELECT @@port") == lab.port
    assert str(one(lab, "SELECT @@datadir")).rstrip("/") == str(lab.datadir)
    assert one(lab, "SELECT @@bind_address") == "127.0.0.1"

    # the benchmark user, over TCP and over the socket
    for params in (lab.bench_params(), lab.bench_params(tcp=False)):
        conn = connect(params)
        try:
            assert query_rows(conn, "SELECT DATABASE()")[0][0] == "sbtest"
            query_rows(conn, "CREATE TABLE probe_t (id INT PRIMARY KEY)")
            query_rows(conn, "DROP TABLE probe_t")
            assert query_rows(conn, "SHOW GLOBAL STATUS LIKE 'Uptime'")
            query_rows(conn, "SHOW ENGINE INNODB STATUS")  # needs PROCESS
            query_rows(conn, "SELECT COUNT(*) FROM performance_schema.global_status")
        finally:
            conn.close()


def test_session_fixture_sandbox(sandbox_env: Sandbox) -> None:
    res = run("status", "pytest")
    assert res.exit_code == 0, res.stderr
    assert "running" in res.stdout
    conn = connect(sandbox_env.bench_params())
    conn.close()


# ------------------------------------------------------------------ lifecycle


def test_cli_lifecycle(lab: Sandbox) -> None:
    res = run("stop", NAME)
    assert res.exit_code == 0 and res.stdout == ""
    assert f"stopped sandbox '{NAME}'" in res.stderr
    assert not lab.socket.exists() and lab.pid is None

    res = run("status", NAME)
    assert res.exit_code == 0
    assert "state:" in res.stdout and "stopped" in res.stdout

    res = run("stop", NAME)
    assert res.exit_code == 0 and "not running" in res.stderr

    res = run("start", NAME)
    assert res.exit_code == 0, res.stderr
    assert "started sandbox" in res.stderr and res.stdout == ""
    pid = lab.pid
    assert pid is not None

    res = run("start", NAME)  # idempotent
    assert res.exit_code == 0
    assert "already running" in res.stderr
    assert lab.pid == pid

    res = run("restart", NAME)
    assert res.exit_code == 0, res.stderr
    assert lab.pid not in (None, pid)

    data = json.loads(run("status", NAME, "--json").stdout)
    assert data["state"] == "running" and data["pid"] == lab.pid
    assert data["port"] == lab.port and data["socket"] == str(lab.socket)

    res = run("list")
    assert res.exit_code == 0
    assert NAME in res.stdout and "running" in res.stdout
    listed = json.loads(run("list", "--json").stdout)
    assert NAME in [d["name"] for d in listed]


def test_api_start_idempotent_and_unknown(lab: Sandbox, home: Path) -> None:
    res = lab.start()
    assert res.already_running and res.pid == lab.pid
    with pytest.raises(SandboxError) as exc:
        Sandbox.load("nosuch")
    assert "myaccel sandbox init nosuch" in exc.value.hint
    st = lab.status()
    assert (st.name, st.state, st.port, st.socket) == (NAME, "running", lab.port, str(lab.socket))
    assert st.active_config.is_base


def test_config_file_and_set_change_variables(lab: Sandbox, tmp_path: Path) -> None:
    default_conns = one(lab, "SELECT @@max_connections")
    default_bp = one(lab, "SELECT @@innodb_buffer_pool_size")
    cfg = tmp_path / "tuned.cnf"
    cfg.write_text(
        "[client]\nport=3306\n"
        "[mysqld]\ninnodb_buffer_pool_size=64M\nmax_connections=123\n"
        "datadir=/var/lib/mysql\nport=3306\n"
    )
    res = run("restart", NAME, "--config", cfg, "--set", "max_connections=77", "--set",
              "table_open_cache=333")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    assert "ignored from the config: datadir=/var/lib/mysql (managed by the sandbox)" in res.stderr
    assert "port=3306" in res.stderr
    row = lab.query(
        "SELECT @@max_connections, @@innodb_buffer_pool_size, @@table_open_cache, @@port"
    )[0]
    assert row == (77, 64 * 1024 * 1024, 333, lab.port)
    assert str(one(lab, "SELECT @@datadir")).rstrip("/") == str(lab.datadir)
    status = run("status", NAME).stdout
    assert str(cfg) in status and "max_connections=77" in status
    assert lab.status().active_config.overridden == ["datadir", "port"]

    # restart keeps the active config
    assert run("restart", NAME).exit_code == 0
    assert one(lab, "SELECT @@max_connections") == 77
    # a new --set replaces the --set values, the config file stays
    assert run("restart", NAME, "--set", "max_connections=88").exit_code == 0
    assert one(lab, "SELECT @@max_connections") == 88
    assert one(lab, "SELECT @@innodb_buffer_pool_size") == 64 * 1024 * 1024

    # start without --config is the base config again
    assert run("stop", NAME).exit_code == 0
    assert run("start", NAME).exit_code == 0
    assert one(lab, "SELECT @@max_connections") == default_conns
    assert one(lab, "SELECT @@innodb_buffer_pool_size") == default_bp
    assert lab.status().active_config.is_base

    # the Python API
    lab.restart(ServerOptions(sets={"max_connections": "66"}))
    assert one(lab, "SELECT @@max_connections") == 66
    lab.restart(reset=True)
    assert one(lab, "SELECT @@max_connections") == default_conns


def test_start_with_basedir_of_the_installed_tree(lab: Sandbox) -> None:
    binary = Path(lab.state.binary).resolve()
    prefix = binary.parent.parent
    res = run("restart", NAME, "--basedir", prefix)
    assert res.exit_code == 0, res.stderr
    st = lab.status()
    assert st.active_config.basedir == str(prefix)
    assert Path(st.binary).resolve() == binary
    assert one(lab, "SELECT 1") == 1
    res = run("restart", NAME, "--base-config")
    assert res.exit_code == 0, res.stderr
    assert lab.status().active_config.is_base


# ------------------------------------------------------------------ snapshots


def test_snapshot_save_restore_roundtrip(lab: Sandbox) -> None:
    lab.query("CREATE TABLE sbtest.keepme (id INT PRIMARY KEY)")
    lab.query("INSERT INTO sbtest.keepme VALUES (1), (2)")

    assert_error(run("snapshot", "save", NAME, "s1"), 5, "while sandbox 'lab' is running")
    res = run("snapshot", "save", NAME, "s1", "--stop")
    assert res.exit_code == 0, res.stderr
    assert "saved snapshot 's1'" in res.stderr
    assert lab.is_running()  # --stop starts it again
    assert_error(run("snapshot", "save", NAME, "s1", "--stop"), 5, "already exists")

    lab.query("DROP TABLE sbtest.keepme")
    res = run("snapshot", "list", NAME)
    assert res.exit_code == 0 and "s1" in res.stdout and "MiB" in res.stdout
    (snap,) = json.loads(run("snapshot", "list", NAME, "--json").stdout)
    assert snap["name"] == "s1" and snap["size_bytes"] > 1_000_000 and snap["created_at"]

    assert_error(run("snapshot", "restore", NAME, "s1"), 5, "is running")
    assert run("stop", NAME).exit_code == 0
    res = run("snapshot", "restore", NAME, "s1")
    assert res.exit_code == 0, res.stderr
    assert not (lab.dir / ".data.old").exists()
    assert run("start", NAME).exit_code == 0
    assert lab.query("SELECT id FROM sbtest.keepme ORDER BY id") == [(1,), (2,)]

    # with --stop, through the API
    lab.query("DROP TABLE sbtest.keepme")
    lab.snapshot_restore("s1", stop=True)
    assert lab.is_running()
    assert lab.query("SELECT COUNT(*) FROM sbtest.keepme") == [(2,)]

    assert_error(run("snapshot", "restore", NAME, "nosuch", "--stop"), 5, "no snapshot named")
    assert run("snapshot", "delete", NAME, "s1").exit_code == 0
    assert lab.snapshot_list() == []
    lab.query("DROP TABLE sbtest.keepme")


# ------------------------------------------------------------------ several sandboxes


def test_two_sandboxes_side_by_side(lab: Sandbox) -> None:
    res = run("init", "lab2", "--no-start")
    assert res.exit_code == 0, res.stderr
    lab2 = Sandbox.load("lab2")
    assert lab2.status().state == "stopped"
    assert run("start", "lab2").exit_code == 0
    try:
        assert lab2.port != lab.port and lab2.socket != lab.socket
        assert one(lab, "SELECT @@port") == lab.port
        assert one(lab2, "SELECT @@port") == lab2.port
        assert one(lab, "SELECT @@datadir") != one(lab2, "SELECT @@datadir")
        listed = run("list").stdout
        assert "lab2" in listed and NAME in listed
    finally:
        res = run("destroy", "lab2", "--yes")
    assert res.exit_code == 0, res.stderr
    assert "destroyed sandbox 'lab2'" in res.stderr
    assert not lab2.dir.exists()
    assert one(lab, "SELECT 1") == 1


def test_long_home_falls_back_to_short_socket(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    sb = Sandbox.init("deep", home=deep, timeout_s=120)
    try:
        assert sb.state.socket_fallback
        assert str(sb.socket).startswith(f"/tmp/myaccel-{os.getuid()}/")
        assert len(str(sb.socket)) <= 107
        assert one(sb, "SELECT @@socket") == str(sb.socket)
    finally:
        sb.destroy()
    assert not sb.socket.exists() and not sb.dir.exists()


# ------------------------------------------------------------------ crashes and kills


def _wait_dead(pid: int) -> None:
    deadline = time.monotonic() + 10
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(pid)


def test_crashed_server_is_detected_and_cleaned(lab: Sandbox) -> None:
    lab.query("CREATE TABLE IF NOT EXISTS sbtest.crash_t (id INT PRIMARY KEY)")
    lab.query("REPLACE INTO sbtest.crash_t VALUES (7)")
    pid = lab.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    _wait_dead(pid)

    res = run("status", NAME)
    assert res.exit_code == 0
    assert "crashed" in res.stdout
    assert lab.status().state == "crashed"

    res = run("start", NAME)
    assert res.exit_code == 0, res.stderr
    assert "crashed server" in res.stderr
    assert lab.status().state == "running"
    assert lab.query("SELECT id FROM sbtest.crash_t") == [(7,)]
    lab.query("DROP TABLE sbtest.crash_t")


def test_stop_escalates_to_kill_and_says_so(lab: Sandbox) -> None:
    pid = lab.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # a server that ignores SIGTERM
    res = run("stop", NAME, "--timeout", "1")
    assert res.exit_code == 0, res.stderr
    assert "SIGKILL" in res.stderr and "kill -9" in res.stderr
    assert not pid_alive(pid)
    assert run("start", NAME).exit_code == 0
    assert one(lab, "SELECT 1") == 1


# ------------------------------------------------------------------ bad input


def test_bad_port_inputs(lab: Sandbox, home: Path) -> None:
    before = sorted(p.name for p in (home / "sandboxes").iterdir())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        assert_error(run("init", "other", "--port", busy), 2, f"port {busy} on 127.0.0.1 is in use")
    assert_error(run("init", "other", "--port", 3306), 2, "port 3306 is reserved")
    assert_error(run("init", "other", "--port", lab.port), 2, "belongs to sandbox 'lab'")
    assert sorted(p.name for p in (home / "sandboxes").iterdir()) == before


def test_port_taken_at_start(lab: Sandbox) -> None:
    assert run("stop", NAME).exit_code == 0
    before = fingerprint(lab)
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", lab.port))
        s.listen()
        assert_error(run("start", NAME), 5, f"port {lab.port} on 127.0.0.1 is in use")
    assert fingerprint(lab) == before


def test_unknown_sandbox(home: Path) -> None:
    before = sorted(p.name for p in (home / "sandboxes").iterdir())
    for args in (
        ["start", "nosuch"],
        ["stop", "nosuch"],
        ["restart", "nosuch"],
        ["status", "nosuch"],
        ["snapshot", "save", "nosuch", "s"],
    ):
        assert_error(run(*args), 5, "no sandbox named 'nosuch'")
    assert sorted(p.name for p in (home / "sandboxes").iterdir()) == before


def test_bad_set_and_config_change_nothing(lab: Sandbox, tmp_path: Path) -> None:
    before = fingerprint(lab)
    assert_error(run("start", NAME, "--set", "oops"), 2, "malformed --set 'oops'")
    assert_error(run("restart", NAME, "--set", "a b=1"), 2, "malformed --set")
    assert_error(run("restart", NAME, "--set", "port=1"), 2, "managed by the sandbox")
    assert_error(run("restart", NAME, "--set", "datadir=/var/lib/mysql"), 2, "managed by")
    missing = tmp_path / "missing.cnf"
    assert_error(run("restart", NAME, "--config", missing), 2, "does not exist")
    assert_error(run("restart", NAME, "--config", tmp_path), 2, "not a readable file")
    assert_error(run("start", NAME, "--set", "max_connections=5"), 5, "already running with config")
    assert fingerprint(lab) == before


def test_failed_start_shows_the_error_log(lab: Sandbox) -> None:
    before_cnf = lab.option_file.read_bytes()
    res = run("restart", NAME, "--set", "innodb_buffer_pool_size=banana", "--timeout", "30")
    assert res.exit_code == 5
    first = next(ln for ln in res.stderr.splitlines() if ln.startswith("error: "))
    assert first.startswith("error: sandbox 'lab' failed to start")
    assert "banana" in first
    assert "last lines of" in res.stderr and "[ERROR]" in res.stderr
    assert lab.status().state == "stopped"
    assert lab.option_file.read_bytes() == before_cnf  # previous option file back
    assert lab.status().active_config.is_base
    assert run("start", NAME).exit_code == 0


def test_datadir_of_another_version_is_refused(lab: Sandbox) -> None:
    assert run("stop", NAME).exit_code == 0
    original = lab.state_file.read_text()
    try:
        state = json.loads(original)
        label = "MariaDB" if state["flavor"] == "mariadb" else "MySQL"
        state["version"] = "10.6.16" if state["flavor"] == "mariadb" else "5.7.44"
        lab.state_file.write_text(json.dumps(state))
        before = fingerprint(lab)
        res = run("start", NAME)
        mm = ".".join(state["version"].split(".")[:2])
        assert_error(res, 5, f"holds a {label} {mm} datadir")
        assert "--basedir" in res.stderr
        assert fingerprint(lab) == before

        state["flavor"] = "mysql" if state["flavor"] == "mariadb" else "mariadb"
        lab.state_file.write_text(json.dumps(state))
        assert_error(run("start", NAME), 5, "datadir;")
        assert lab.status().state == "stopped"
    finally:
        lab.state_file.write_text(original)
    assert run("start", NAME).exit_code == 0
