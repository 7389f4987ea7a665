"""``myaccel clone`` on real servers (MariaDB and MySQL 9.7): a "production" sandbox with a
schema of its own and a load driver writing to it throughout the clone.

Checked: the quiesced table's rows and CHECKSUM TABLE match in the clone, the loaded
table holds every row committed before the clone began, every variable that differs is
explained in the clone's record, the production server's schemas (and, on MySQL, its
plugins) are unchanged, the clone works as a sandbox and ``sandbox destroy`` removes it.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from click.testing import CliRunner

from myaccel.cli.main import cli
from myaccel.clone import load_record
from myaccel.server.connection import connect
from myaccel.server.sandbox import Sandbox

pytestmark = pytest.mark.integration

SCHEMA = "shop"
SETUP = [
    f"CREATE DATABASE {SCHEMA}",
    f"CREATE TABLE {SCHEMA}.customers (id INT PRIMARY KEY, name VARCHAR(40), "
    "city VARCHAR(40), KEY (city)) ENGINE=InnoDB",
    f"CREATE TABLE {SCHEMA}.orders (id INT AUTO_INCREMENT PRIMARY KEY, customer INT, "
    "amount DECIMAL(10,2), state VARCHAR(12), KEY (customer)) ENGINE=InnoDB",
    f"CREATE VIEW {SCHEMA}.big_orders AS SELECT * FROM {SCHEMA}.orders WHERE amount > 100",
]


def _populate(sb: Sandbox) -> None:
    conn = connect(sb.connect_params())
    try:
        with conn.cursor() as cur:
            for sql in SETUP:
                cur.execute(sql)
            cur.executemany(
                f"INSERT INTO {SCHEMA}.customers VALUES (%s, %s, %s)",
                [(i, f"customer {i}", f"city {i % 17}") for i in range(2000)],
            )
            cur.executemany(
                f"INSERT INTO {SCHEMA}.orders (customer, amount, state) VALUES (%s, %s, %s)",
                [(i % 2000, i * 0.37, "new") for i in range(3000)],
            )
            cur.execute("SET GLOBAL max_connections = 321")  # a runtime change to carry over
    finally:
        conn.close()


class LoadDriver:
    """Inserts and updates on ``orders`` until stopped."""

    def __init__(self, sb: Sandbox) -> None:
        self.conn = connect(sb.connect_params())
        self.stop = threading.Event()
        self.writes = 0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            with self.conn.cursor() as cur:
                while not self.stop.is_set():
                    cur.execute(
                        f"INSERT INTO {SCHEMA}.orders (customer, amount, state) "
                        "VALUES (%s, %s, 'new')",
                        (self.writes % 2000, self.writes % 500),
                    )
                    cur.execute(
                        f"UPDATE {SCHEMA}.orders SET state = 'paid' WHERE id = %s",
                        (1 + self.writes % 3000,),
                    )
                    self.writes += 1
        except BaseException as exc:  # reported by the test
            self.error = exc

    def __enter__(self) -> LoadDriver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=30)
        self.conn.close()


def _one(sb: Sandbox, sql: str) -> Any:
    return sb.query(sql)[0]


def _schemas(sb: Sandbox) -> list[tuple[Any, ...]]:
    rows = sb.query(
        "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES WHERE "
        "TABLE_SCHEMA NOT IN ('information_schema', 'performance_schema') ORDER BY 1, 2"
    )
    creates = [
        re.sub(r" AUTO_INCREMENT=\d+", "", _one(sb, f"SHOW CREATE TABLE {SCHEMA}.{t}")[1])
        for t in ("customers", "orders")
    ]
    users = sb.query("SELECT user, host FROM mysql.user ORDER BY 1, 2")
    return [*rows, *[(c,) for c in creates], *users]


def _variables(sb: Sandbox) -> dict[str, str]:
    return {str(k): str(v) for k, v in sb.query("SHOW GLOBAL VARIABLES")}


def _check_clone(home: Path, prod: Sandbox) -> None:
    _populate(prod)
    before = _schemas(prod)
    checksum = _one(prod, f"CHECKSUM TABLE {SCHEMA}.customers")[1]
    with LoadDriver(prod) as load:
        time.sleep(0.3)
        committed = int(_one(prod, f"SELECT MAX(id) FROM {SCHEMA}.orders")[0])
        r = CliRunner().invoke(
            cli,
            ["clone", "--sandbox", "prod", "--name", "prodclone", "--json"],
            env={"MYACCEL_HOME": str(home)},
        )
        time.sleep(0.3)
    assert r.exit_code == 0, r.output
    assert load.error is None and load.writes > 0
    record = json.loads(r.stdout)
    clone = Sandbox.load("prodclone", home=home)
    try:
        # data: the quiesced table is identical, the loaded one has every committed row
        assert _one(clone, f"SELECT COUNT(*) FROM {SCHEMA}.customers")[0] == 2000
        assert _one(clone, f"CHECKSUM TABLE {SCHEMA}.customers")[1] == checksum
        assert (
            int(_one(clone, f"SELECT COUNT(*) FROM {SCHEMA}.orders WHERE id <= {committed}")[0])
            == committed
        )
        assert _one(clone, f"SELECT COUNT(*) FROM {SCHEMA}.big_orders")[0] > 0
        # configuration: every difference is a rewrite explained in the record
        src_vars, clone_vars = _variables(prod), _variables(clone)
        assert clone_vars["max_connections"] == "321"
        differ = {
            k for k in set(src_vars) | set(clone_vars) if src_vars.get(k) != clone_vars.get(k)
        } - {"gtid_executed", "gtid_binlog_pos", "gtid_binlog_state", "gtid_current_pos"}
        explained = {d["variable"]: d["reason"] for d in record["variable_diff"]}
        assert differ <= set(explained), sorted(differ - set(explained))
        assert all(explained[k] != "unexplained" for k in differ), explained
        assert {"port", "socket", "datadir", "server_id"} <= differ
        assert load_record(clone.dir).name == "prodclone"
        # usable as a sandbox: its admin and benchmark accounts and database exist
        bench = clone.state.bench_user
        assert clone.query(f"SELECT COUNT(*) FROM mysql.user WHERE user = '{bench}'") == [(2,)]
        assert clone.query("SHOW DATABASES LIKE 'sbtest'") == [("sbtest",)]
    finally:
        # the production server: schemas, users and (MySQL) plugins as before
        assert _schemas(prod) == before
        assert prod.query(
            "SELECT COUNT(*) FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'clone'"
        ) == [(0,)]
        r = CliRunner().invoke(
            cli, ["sandbox", "destroy", "prodclone", "-y"], env={"MYACCEL_HOME": str(home)}
        )
        assert r.exit_code == 0, r.output
    assert not clone.dir.exists()


KINDS = (
    f"CREATE TABLE {SCHEMA}.kinds (id BIGINT UNSIGNED PRIMARY KEY, code CHAR(8) UNIQUE, "
    "qty SMALLINT, price DECIMAL(8,2), ratio DOUBLE, state ENUM('new','paid','sent'), "
    "born DATE, seen DATETIME, at TIME, note VARCHAR(200), body TEXT, flags BIT(4), "
    "doc JSON, twice INT AS (qty * 2) VIRTUAL)"
)


def _check_schema_only(home: Path, prod: Sandbox) -> None:
    """Schema only (what a disk too small for the data gets, forced here): the tables
    filled with generated rows of the source's shape, within a tolerance of its counts."""
    prod.query(KINDS)
    conn = connect(prod.connect_params())
    try:
        with conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {SCHEMA}.kinds (id, code, qty, price, ratio, state, born, seen, "
                "at, note, body, flags, doc) VALUES (%s, %s, %s, %s, %s, 'paid', '2024-01-02', "
                "'2024-01-02 03:04:05', '01:02:03', %s, %s, b'1010', '{\"a\": 1}')",
                [
                    (i, f"k{i}", i % 100, i * 1.5, i / 7, "x" * (i % 150), "y" * 300)
                    for i in range(800)
                ],
            )
            for t in ("customers", "orders", "kinds"):
                cur.execute(f"ANALYZE TABLE {SCHEMA}.{t}")
                cur.fetchall()
    finally:
        conn.close()
    counts = {
        t: int(_one(prod, f"SELECT COUNT(*) FROM {SCHEMA}.{t}")[0])
        for t in ("customers", "orders", "kinds")
    }
    r = CliRunner().invoke(
        cli,
        ["clone", "--sandbox", "prod", "--name", "shape", "--schema-only", "--json"],
        env={"MYACCEL_HOME": str(home)},
    )
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)["data"]
    assert data["schema_only"] and "of the same shape generated" in data["note"]
    gen = data["generated"]
    assert gen["factor"] == 1.0 and gen["max_rows"] > 0 and gen["max_bytes"] > 0
    shape = Sandbox.load("shape", home=home)
    try:
        for t, n in counts.items():
            got = int(_one(shape, f"SELECT COUNT(*) FROM {SCHEMA}.{t}")[0])
            assert abs(got - n) <= 0.25 * n, (t, got, n)  # TABLE_ROWS is an estimate
        assert _one(shape, f"SELECT COUNT(DISTINCT state) FROM {SCHEMA}.kinds")[0] == 3
        assert _one(shape, f"SELECT MAX(LENGTH(code)) FROM {SCHEMA}.kinds")[0] <= 8
        assert shape.query(f"SHOW FULL TABLES FROM {SCHEMA} LIKE 'big_orders'") == [
            ("big_orders", "VIEW")
        ]
    finally:
        shape.destroy()


def test_clone_mariadb(myaccel_home: Path) -> None:
    home = myaccel_home
    prod = Sandbox.init("prod", home=home, timeout_s=120, flavor="mariadb")
    try:
        _check_clone(home, prod)
        _check_schema_only(home, prod)
    finally:
        prod.destroy()


def _check_daemonized_source(home: Path, prod: Sandbox) -> None:
    """A MySQL started as ``mysqld --daemonize`` (issue 33, item 6): the clone copied the
    option, its server forked away from the sandbox's watch, and the clone failed with
    "server exited with code 0" while its log said "ready for connections"."""
    server = psutil.Process(prod.status().pid)
    argv, env = server.cmdline(), server.environ()
    prod.stop()
    started = subprocess.run(
        [*argv, "--daemonize"], check=False, env=env, capture_output=True, text=True, timeout=180
    )
    assert started.returncode == 0, started.stderr
    daemon = int(Path(str(prod.query("SELECT @@pid_file")[0][0])).read_text())
    try:
        assert "--daemonize" in psutil.Process(daemon).cmdline()
        r = CliRunner().invoke(
            cli,
            ["clone", "-S", str(prod.socket), "-u", "root", "--name", "dclone", "--json"],
            env={"MYACCEL_HOME": str(home)},
        )
        assert r.exit_code == 0, r.output
        left_out = {d["variable"]: d["reason"] for d in json.loads(r.stdout)["rewritten"]}
        assert "how the source's process was started" in left_out["daemonize"]
        assert Sandbox.load("dclone", home=home).query("SELECT 1") == [(1,)]
        Sandbox.destroy_named("dclone", home=home)
    finally:
        psutil.Process(daemon).terminate()
        psutil.Process(daemon).wait(timeout=120)


def test_clone_mysql(myaccel_home: Path, mysql_basedir: Path | None) -> None:
    home = myaccel_home
    prod = Sandbox.init("prod", basedir=mysql_basedir, home=home, timeout_s=180, flavor="mysql")
    try:
        _check_clone(home, prod)
        _check_daemonized_source(home, prod)
    finally:
        prod.destroy()
