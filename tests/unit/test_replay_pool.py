"""Issue 33 (items 4 and 5), without a server: the observed concurrency and the pool's
mapping of sessions (``bench.pool``), typed placeholders (``bench.placeholders``), shifted
primary keys (``bench.keys``), the script's data and counts (``bench.replay``), the
replay script's lifetime and ``bench --workload-file --out NEWDIR``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from myaccel.artifacts import save
from myaccel.bench import placeholders, pool
from myaccel.bench.keys import key_span, table_keys
from myaccel.bench.replay import (
    plan,
    replay_counts,
    replay_lua,
    replay_mix,
    replay_scripts,
    write_replay_script,
)
from myaccel.bench.workload import (
    Concurrency,
    SchemaInfo,
    Workload,
    load_replayable,
)
from myaccel.capture.assemble import Event, build_classes
from myaccel.capture.redaction import redact_workload

DDL = [
    "CREATE DATABASE `app` /*!40100 DEFAULT CHARACTER SET utf8mb4 */",
    "CREATE TABLE `orders` (\n  `id` bigint(20) NOT NULL,\n  `user_id` int(11) DEFAULT NULL,\n"
    "  `note` varchar(40) DEFAULT NULL,\n  PRIMARY KEY (`id`),\n  KEY `user_id` (`user_id`)\n"
    ") ENGINE=InnoDB",
    "CREATE TABLE `users` (\n  `id` int(11) NOT NULL,\n  `name` varchar(40) DEFAULT NULL,\n"
    "  PRIMARY KEY (`id`)\n) ENGINE=InnoDB",
    "CREATE TABLE `tags` (\n  `name` varchar(20) NOT NULL,\n  PRIMARY KEY (`name`)\n) ENGINE=InnoDB",
]
SCHEMAS = [SchemaInfo(name="app", tables=["orders", "tags", "users"], ddl=DDL)]


# --- the observed concurrency and the pool ---------------------------------------------


def test_open_sessions_are_counted_along_the_window() -> None:
    # three sessions: two overlap for 1 s of the 3 s covered
    spans = [(0.0, 2.0), (1.0, 1.5), (2.5, 3.0)]
    peak, p95 = pool.open_counts(spans)
    assert peak == 2 and p95 == 2
    # 100 back-to-back short sessions on one client: one open at a time
    serial = [(i * 0.01, i * 0.01 + 0.009) for i in range(100)]
    assert pool.open_counts(serial) == (1, 1)
    assert pool.open_counts([]) == (0, 0)


def test_observed_concurrency_is_not_the_connections() -> None:
    # 771 short connections from 4 clients (the user's PHP application), timed statements
    spans = [
        (k * 0.0155 + c * 0.004, k * 0.0155 + c * 0.004 + 0.003)
        for k in range(193)
        for c in range(4)
    ][:771]
    seen = pool.observe(spans, 771, 3.0)
    assert seen.sessions == 771 and seen.concurrency <= 4 and seen.open_max <= 4
    # the general log: sessions within one second tell nothing, Threads_running does
    logged = pool.spans([(i, float(i // 64), None) for i in range(771)], whole_seconds=True)
    assert logged == []
    assert pool.observe(logged, 771, 3.4).concurrency == 4
    # long-lived connections spanning seconds (the demo's 4 clients) count as open
    long = pool.spans(
        [(c, float(t), None) for c in range(4) for t in range(10)], whole_seconds=True
    )
    assert pool.observe(long, 4, 2.0).concurrency == 4
    # never more threads than sessions; nothing known: one thread per session, as before
    assert pool.observe([], 3, 9.0).concurrency == 3
    assert pool.observe([], 5, None).concurrency == 5


def test_sessions_assigned_in_order_to_the_thread_free_first() -> None:
    spans = [(0.0, 1.0), (0.1, 0.2), (0.3, 0.4), (1.5, 2.0), (0.5, 0.6)]
    lanes = pool.assign(spans, 2)
    assert lanes == [[0], [1, 2, 4, 3]]  # at 1.5 s thread 1 (free at 0.6) came free first
    assert sorted(i for lane in lanes for i in lane) == list(range(5))
    assert pool.assign(spans, 1) == [[0, 1, 2, 4, 3]]
    assert pool.assign([], 3) == [[]]


def _per_request_workload(sessions: int = 60, clients: int = 3) -> Workload:
    """Short sessions of 1-3 statements from ``clients`` back-to-back clients (timed)."""
    events: list[Event] = []
    cid = 100
    for k in range(sessions // clients):
        for c in range(clients):
            t = k * 0.01 + c * 0.0002
            cid += 1
            u = (k * clients + c) % 50 + 1
            events.append(Event(cid, t, f"SELECT name FROM users WHERE id = {u}", "app", 300.0))
            second = (
                f"INSERT INTO orders (id, user_id, note) VALUES ({5000 + cid}, {u}, 'n{cid:05d}')"
                if (k + c) % 2 == 0
                else f"UPDATE users SET name = 'x{u}' WHERE id = {u}"
            )
            events.append(Event(cid, t + 0.006, second, "app", 400.0))
    classes, traces, _ = build_classes(sorted(events, key=lambda e: e.conn_id))
    sp = pool.spans(((e.conn_id, e.t_s, e.latency_us) for e in events), whole_seconds=False)
    seen = pool.observe(sp, sessions, 1.0)
    return Workload(
        created_at="2026-11-28T04:00:00+00:00",
        myaccel_version="test",
        server={"flavor": "mariadb"},
        source="performance_schema",
        window_s=1.0,
        statements_total=len(events),
        statements_per_s=float(len(events)),
        classes=classes,
        connections=traces,
        trace_gaps="end-to-start",
        concurrency=Concurrency(
            connections=sessions,
            sample_interval_s=0.25,
            threads_running_p95=1.0,
            sessions_open_max=seen.open_max,
            sessions_open_p95=seen.open_p95,
            observed=seen.concurrency,
        ),
        schemas=SCHEMAS,
    )


def test_a_per_request_capture_replays_on_a_pool() -> None:
    w = _per_request_workload()
    assert w.concurrency.observed == 3 and w.replay_threads == 3
    p = plan(w, "sequence")
    assert p.threads == 3 and p.sessions == 60 and p.reconnect
    assert sorted(i for lane in p.pool for i in lane) == list(range(60))
    assert [len(lane) for lane in p.pool] == [20, 20, 20]
    lua = replay_lua(w, "sequence")
    assert "reconnect = true," in lua and lua.count("pool = {") == 1
    assert "observed concurrency 3" in lua
    mix = replay_lua(w)  # mix: a reconnect after a session's mean statements
    assert "session_len = 2.0," in mix and "traces" not in mix
    timed = replay_lua(w, "timed")
    assert "gap_from = [[end]], timed = true," in timed
    # an older file without the observed figure: derived from its traces
    old = w.model_copy(update={"concurrency": w.concurrency.model_copy(update={"observed": None})})
    assert old.replay_threads == 3


# --- typed placeholders --------------------------------------------------------------


def test_literals_become_typed_placeholders() -> None:
    r = placeholders.redact_typed
    assert (
        r("INSERT INTO t (id, a, b, d) VALUES (123, 'hello', 4.50, '2024-05-01') -- who")
        == "INSERT INTO t (id, a, b, d) VALUES ({int:3}, {str:5}, {dec:1.2}, {date})"
    )
    assert r("SELECT * FROM t WHERE x IN (1, -22) AND y = 'it''s'") == (
        "SELECT * FROM t WHERE x IN ({int:1}, {int:-2}) AND y = {str:4}"
    )
    assert r("SELECT 1e5, 0x1F, b'101', '12:30:00', '2024-01-02 03:04:05', '0612'") == (
        "SELECT {float}, {hex:2}, {bits:3}, {time}, {datetime}, {digits:4}"
    )
    assert r("SELECT /*+ MAX_EXECUTION_TIME(5) */ c1 FROM t2 /* secret */") == (
        "SELECT /*+ MAX_EXECUTION_TIME(5) */ c1 FROM t2"
    )
    assert r("SELECT `a1`, col_2 FROM `t 3`") == "SELECT `a1`, col_2 FROM `t 3`"
    assert r("SELECT NULL, 'x'") == "SELECT NULL, {str:1}"


def test_placeholders_are_parsed_and_sampled() -> None:
    parts = placeholders.parse("a = {int:-3} AND b = {dec:2.1} AND c = {str:4}")
    holes = [p for p in parts if not isinstance(p, str)]
    assert [(h.kind, h.size, h.frac, h.negative) for h in holes] == [
        ("int", 3, 0, True),
        ("dec", 2, 1, False),
        ("str", 4, 0, False),
    ]
    assert placeholders.sample("a = {int:-3} AND c = {str:4}") == "a = -111 AND c = 'aaaa'"


def test_a_redacted_capture_is_replayed(tmp_path: Path) -> None:
    w = _per_request_workload()
    r = redact_workload(w)
    dumped = r.model_dump_json()
    assert r.placeholders and "'n0" not in dumped and "5101" not in dumped
    save(tmp_path / "r.json", r)
    loaded = load_replayable(tmp_path / "r.json")
    lua = replay_lua(loaded)
    # the insert's key is shifted, its other values filled to their shape
    assert "{ k = [[key]], t = 1 }" in lua and "{ k = [[str]], n = 6, f = 0 }" in lua
    assert "{ k = [[int]], n = 2, f = 0 }" in lua or "{ k = [[int]], n = 1, f = 0 }" in lua
    assert "keys = {" in lua and "col = [[id]]" in lua


# --- shifted primary keys ------------------------------------------------------------


def test_the_primary_key_of_an_insert_is_found() -> None:
    keys = table_keys(SCHEMAS)
    assert set(keys) == {("app", "orders"), ("app", "users")}  # tags: a string key
    sql = "INSERT INTO orders (user_id, id, note) VALUES (7, 123456, 'a,b')"
    found = key_span(sql, "app", keys)
    assert found is not None and sql[found[1] : found[2]] == "123456"
    no_list = "insert into `app`.`users` values (42, 'x')"
    found = key_span(no_list, "", keys)
    assert found is not None and no_list[found[1] : found[2]] == "42"
    templ = "INSERT INTO orders (id, note) VALUES ({int:7}, {str:3})"
    found = key_span(templ, "app", keys)
    assert found is not None and templ[found[1] : found[2]] == "{int:7}"
    for other in (
        "INSERT INTO orders (id) VALUES (1), (2)",  # several rows
        "INSERT INTO orders (note) VALUES ('x')",  # no key given: auto-increment
        "INSERT INTO orders (id) VALUES (1 + 2)",
        "INSERT INTO tags VALUES ('a')",
        "UPDATE orders SET id = 3 WHERE id = 2",
    ):
        assert key_span(other, "app", keys) is None, other


def test_keys_shift_only_when_asked() -> None:
    w = _per_request_workload()
    assert "[[key]]" in replay_lua(w)
    assert "[[key]]" not in replay_lua(w, shift_keys=False) and "keys = {" not in replay_lua(
        w, shift_keys=False
    )


# --- what a run counts ---------------------------------------------------------------


def test_replay_counts_sum_the_threads() -> None:
    out = "\n".join(
        [
            "Threads started!",
            'MYACCEL_REPLAY {"v":1,"ok":{"a":10,"b":5},"err":{"b":5},"errno":{"1062":5},"sessions":7}',
            'MYACCEL_REPLAY {"v":1,"ok":{"a":20},"err":{"c":1},"errno":{"1213":1},"sessions":3}',
            "MYACCEL_REPLAY {not json",
        ]
    )
    c = replay_counts(out)
    assert c is not None
    assert c["statements"] == 41 and c["succeeded"] == 35 and c["failed"] == 6
    assert c["duplicate_key_errors"] == 5 and c["errors_by_errno"] == {"1062": 5, "1213": 1}
    assert c["sessions_opened"] == 10
    mix = replay_mix(c)
    assert mix["a"] == pytest.approx(100 * 30 / 41) and mix["b"] == pytest.approx(100 * 10 / 41)
    assert replay_counts("no replay here") is None


# --- the script's lifetime and --out -------------------------------------------------


def test_scripts_are_removed_with_their_command(myaccel_home: Path) -> None:
    w = _per_request_workload()
    with replay_scripts():
        assert not (myaccel_home / "replay").exists()  # nothing until a script is written
        p = write_replay_script(w)
        assert p.is_file() and p.parent.parent == myaccel_home / "replay"
        assert p.stat().st_mode & 0o777 == 0o600
    assert not p.exists() and not p.parent.exists()
    # a killed command's directory is removed by the next one
    dead = myaccel_home / "replay" / "run-dead"
    dead.mkdir()
    (dead / "owner").write_text("999999999 1 not-this-boot\n")
    (dead / "replay-x.lua").write_text("secret literals")
    with replay_scripts():
        write_replay_script(w)
        assert not dead.exists()


def test_bench_out_newdir_with_a_workload_file(
    myaccel_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`bench --workload-file W --out NEWDIR`: the script is not written into NEWDIR, and
    NEWDIR passes the results check (it was refused as "not empty")."""
    from myaccel.bench import session
    from myaccel.cli import bench as bench_cli
    from myaccel.cli.main import cli
    from myaccel.server.connection import ConnectParams

    w_path = tmp_path / "w.json"
    save(w_path, _per_request_workload())
    new = tmp_path / "new"
    seen: dict[str, Any] = {}

    def run_bench(req: session.BenchRequest, progress: object) -> None:
        script = Path(req.profile.workloads[0])
        seen["script"], seen["exists"] = script, script.is_file()
        seen["threads"], seen["replay"] = req.profile.threads, req.replay
        session.check_results_dir(req.out_dir, kind="bench", prof=req.profile)
        seen["checked"] = True

    nowhere = ConnectParams(
        host=None, port=1, socket=str(tmp_path / "s"), user="root", password=None
    )
    monkeypatch.setattr(session, "run_bench", run_bench)
    monkeypatch.setattr(bench_cli, "targets", lambda conn: (nowhere, nowhere, None))
    r = CliRunner().invoke(
        cli,
        ["bench", "--sandbox", "x", "--workload-file", str(w_path), "--out", str(new)],
        env={"MYACCEL_HOME": str(myaccel_home)},
    )
    assert r.exit_code == 0, r.output
    assert seen["checked"] and seen["exists"] and new not in seen["script"].parents
    assert seen["threads"] == (3,) and seen["replay"]["pool_threads"] == 3
    assert seen["replay"]["captured_sessions"] == 60 and seen["replay"]["keys"] == "shift"
    assert not seen["script"].exists()  # removed with the command
    assert not new.exists() or not any(new.iterdir())


def test_bench_and_ab_print_the_replay_apart() -> None:
    from myaccel.bench.run_record import RunRecord
    from myaccel.cli.ab import format_replay_arms
    from myaccel.cli.bench import format_replay

    rep = {
        "pool_threads": 2,
        "observed": "99 session(s), at most 3 open at once (p95 2)",
        "captured_sessions": 99,
        "reconnect_per_session": True,
        "statements": 7996,
        "succeeded": 7008,
        "failed": 988,
        "error_pct": 12.356,
        "duplicate_key_errors": 988,
        "errors_by_errno": {"1062": 988},
        "sessions_opened": 5435,
    }
    runs = [
        RunRecord.model_construct(index=1, arm="baseline", threads=2, replay=rep),
        RunRecord.model_construct(index=2, arm="candidate", threads=2, replay=rep),
        RunRecord.model_construct(index=3, arm="baseline", threads=2, replay=None),
    ]
    lines = format_replay(runs)
    assert lines[0].startswith("replay: 2 thread(s) = the observed concurrency")
    assert "not the 99 captured connection(s); a new connection per session" in lines[0]
    assert lines[1] == (
        "run 001: 7,996 statements, 7,008 succeeded, 988 failed (12.36%; duplicate key 988; "
        "by error 1062: 988), 5,435 connection(s) opened"
    )
    assert format_replay_arms(runs) == [
        "replay, baseline: 7,996 statements, 988 failed (988 on a duplicate key), counted apart",
        "replay, candidate: 7,996 statements, 988 failed (988 on a duplicate key), counted apart",
    ]
    assert format_replay([RunRecord.model_construct(index=1, replay=None)]) == []
    more = format_replay([RunRecord.model_construct(index=4, threads=8, replay=rep)])
    assert more[1].startswith("run 004 at 8 thread(s) (--threads): 7,996 statements")
