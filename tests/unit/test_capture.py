"""capture/ without a server: statement classes, the general log parser, the workload's
assembly and redaction, fidelity, the replay script, the consumer setting."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from myaccel.actions.settings import setting_for, setting_from_spec
from myaccel.actions.settings.pfs import ConsumerSetting
from myaccel.artifacts import save
from myaccel.bench.replay import captured_rate, lua_string, replay_lua, write_replay_script
from myaccel.bench.workload import Concurrency, Workload, load_replayable
from myaccel.capture import assemble
from myaccel.capture.assemble import Event, build_classes, percentile
from myaccel.capture.fidelity import compare, format_fidelity
from myaccel.capture.general_log import log_output_with_file, parse_general_log
from myaccel.capture.normalize import kind_of, normalize, not_replayed_because
from myaccel.capture.redaction import redact_workload
from myaccel.cli.main import cli
from myaccel.errors import UsageError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.parametrize(
    ("sql", "text"),
    [
        ("SELECT c FROM sbtest1 WHERE id=5", "select c from sbtest1 where id=?"),
        ("INSERT INTO t (a,b) VALUES (1,'x''y'),(2,'z')", "insert into t (a,b) values (...)"),
        (
            "select * from t where id in (1, 2,3) and x > -1.5e3",
            "select * from t where id in (...) and x > ?",
        ),
        (
            "UPDATE `T1` SET n = n + 1 WHERE k = 0x1F /* c */;",
            "update `T1` set n = n + ? where k = ?",
        ),
        ('SELECT a FROM t WHERE b = "q\\"s" -- tail', "select a from t where b = ?"),
        ("SELECT\n  a\tFROM t2", "select a from t2"),
    ],
)
def test_normalize(sql: str, text: str) -> None:
    assert normalize(sql) == text


def test_kinds_and_what_is_not_replayed() -> None:
    assert kind_of("select 1") == "read"
    assert kind_of("insert into t values (?)") == "write"
    assert kind_of("commit") == "transaction"
    assert kind_of("call p()") == "other"
    assert not_replayed_because("set autocommit = ?")
    assert not_replayed_because("drop table t")
    assert not_replayed_because("select 1") is None


GENERAL_LOG = """\
/usr/sbin/mariadbd, Version: 10.11.19-MariaDB-0+deb12u1 (Debian 12). started with:
Tcp port: 14203  Unix socket: /tmp/x/mysqld.sock
Time\t\t    Id Command\tArgument
261125  4:49:09\t     6 Query\tSELECT 1
\t\t     7 Connect\tapp@localhost on shop using Socket
\t\t     7 Query\tselect 1,
'two
lines'
261125  4:49:11\t     7 Init DB\tother
\t\t     7 Query\tUPDATE t SET a = 2
\t\t     8 Query\tSELECT @@version
\t\t     9 Query\tuse third
\t\t     9 Execute\tSELECT 3
\t\t     7 Quit\t
"""


def test_general_log_parser() -> None:
    events = parse_general_log(GENERAL_LOG.splitlines(True), exclude={8}, schemas={6: "shop"})
    by_conn = [(e.conn_id, e.sql, e.schema, e.t_s) for e in events]
    assert by_conn == [
        (6, "SELECT 1", "shop", 0.0),
        (7, "select 1,\n'two\nlines'", "shop", 0.0),
        (7, "UPDATE t SET a = 2", "other", 2.0),
        (9, "use third", "", 2.0),
        (9, "SELECT 3", "third", 2.0),
    ]
    assert events[1].user == "app"


MYSQL_GENERAL_LOG = """\
/opt/myaccel/mysql-9.7/bin/mysqld, Version: 9.7.0 (MySQL Community Server - GPL). started with:
Tcp port: 3306  Unix socket: /tmp/mysql.sock
Time                 Id Command    Argument
2026-11-28T04:07:51.100000Z\t   10 Connect\tapp@localhost on shop using Socket
2026-11-28T04:07:51.250000Z\t   10 Query\tSELECT 1
2026-11-28T04:07:51.500000Z\t   11 Query\tUPDATE t
SET a = 2
2026-11-28T04:07:52.100000+01:00\t   11 Query\tSELECT 2
"""


def test_general_log_parser_mysql_format() -> None:
    """MySQL stamps every entry (ISO 8601, microseconds): found on MySQL 9.7, whose log
    the MariaDB-only pattern read as empty."""
    events = parse_general_log(MYSQL_GENERAL_LOG.splitlines(True), exclude=set())
    by_conn = [(e.conn_id, e.sql, e.schema, round(e.t_s, 2)) for e in events]
    assert by_conn == [
        (10, "SELECT 1", "shop", 0.15),
        (11, "UPDATE t\nSET a = 2", "", 0.4),
        (11, "SELECT 2", "", round(1.0 - 3600, 2)),
    ]
    assert events[0].user == "app"


def test_log_output_keeps_table() -> None:
    assert log_output_with_file("FILE") == "FILE"
    assert log_output_with_file("TABLE") == "TABLE,FILE"
    assert log_output_with_file("NONE") == "FILE"


def _events(n: int, conns: int = 2) -> list[Event]:
    return [
        Event(
            conn_id=i % conns,
            t_s=i / 100,
            sql=f"SELECT v FROM t WHERE id = {i}",
            schema="s",
            latency_us=float(i),
        )
        for i in range(n)
    ] + [Event(conn_id=0, t_s=1.0, sql="SET autocommit = 1", schema="s")]


def test_build_classes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(assemble, "MAX_TRACE_STATEMENTS", 10)
    classes, traces, truncated = build_classes(_events(200))
    top, other = classes
    assert (top.text, top.count, top.kind, top.replayable) == (
        "select v from t where id = ?",
        200,
        "read",
        True,
    )
    assert len(top.examples) == assemble.MAX_EXAMPLES and all(
        e.startswith("SELECT v FROM t WHERE id = ") for e in top.examples
    )
    assert top.latency is not None and top.latency.p50_us == 99.0 and top.latency.max_us == 199.0
    assert not other.replayable and other.not_replayed_because
    assert truncated and sum(len(t.statements) for t in traces) == 10
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0


def _workload(counts: dict[str, int], window_s: float = 10.0, connections: int = 4) -> Workload:
    events = [
        Event(conn_id=i % connections, t_s=0, sql=sql.replace("?", str(i)), schema="shop")
        for sql, n in counts.items()
        for i in range(n)
    ]
    classes, traces, _ = build_classes(events)
    return Workload(
        created_at="2026-01-01T00:00:00+00:00",
        myaccel_version="test",
        server={"flavor": "mariadb", "host": "h"},
        source="general_log",
        window_s=window_s,
        statements_total=len(events),
        statements_per_s=len(events) / window_s,
        classes=classes,
        connections=traces,
        concurrency=Concurrency(connections=connections, sample_interval_s=0.25),
    )


def test_fidelity_compares_the_replayed_classes() -> None:
    a = _workload(
        {"SELECT a FROM t WHERE id = ?": 600, "UPDATE t SET b = ?": 400, "SET x = ?": 500}
    )
    b = _workload(
        {"SELECT a FROM t WHERE id = ?": 580, "UPDATE t SET b = ?": 420, "USE `shop` -- ?": 4}
    )
    f = compare(a, b)
    assert [round(r.captured_pct) for r in f.rows] == [60, 40]
    assert f.max_diff_pts == pytest.approx(2.0) and f.mix_matches
    assert f.captured_qps == pytest.approx(100.0)
    table = format_fidelity(f)
    assert "| 60.0 | 58.0 | -2.0 |" in table and "matches" in table
    c = _workload({"SELECT a FROM t WHERE id = ?": 500, "DELETE FROM t WHERE id = ?": 500})
    g = compare(a, c)
    assert not g.mix_matches and len(g.rows) == 3 and g.rows[-1].captured_pct == 0.0


def test_redaction_and_replay_refusal(tmp_path: Path) -> None:
    w = _workload({"SELECT secret FROM t WHERE name = 'alice?'": 3})
    r = redact_workload(w)
    assert r.redacted and r.placeholders
    assert [c.examples for c in r.classes] == [["SELECT secret FROM t WHERE name = {str:6}"]]
    dumped = r.model_dump_json()
    assert "alice" not in dumped and r.server["host"] is None
    save(tmp_path / "r.json", r)
    assert load_replayable(tmp_path / "r.json").redacted  # typed placeholders: replayable
    # a redaction of an older myaccel (literals as ?, no examples) is refused
    old = r.model_copy(
        update={
            "placeholders": False,
            "classes": [c.model_copy(update={"examples": []}) for c in r.classes],
        }
    )
    save(tmp_path / "old.json", old)
    with pytest.raises(UsageError, match="redacted without typed placeholders"):
        load_replayable(tmp_path / "old.json")


def test_replay_script(tmp_path: Path) -> None:
    assert lua_string("a]]b") == "[=[a]]b]=]"
    assert lua_string("\nx") == "[[\n\nx]]"
    w = _workload({"SELECT a FROM t WHERE id = ?": 6, "SET x = ?": 3})
    lua = replay_lua(w)
    assert "w = 6" in lua and "SET x" not in lua and "schema = [[shop]]" in lua
    assert lua.rstrip().endswith("myaccel_replay.lua]])")
    p1, p2 = write_replay_script(w, tmp_path), write_replay_script(w, tmp_path)
    assert p1 == p2 and p1.stat().st_mode & 0o777 == 0o600
    assert captured_rate(w) == pytest.approx(0.6)


def test_consumer_setting_round_trip() -> None:
    s = setting_for("pfs-consumer:events_statements_history_long", connect=lambda: None)  # type: ignore[arg-type,return-value]
    assert isinstance(s, ConsumerSetting) and s.spec() == {"name": "events_statements_history_long"}
    again = setting_from_spec("pfs-consumer", s.spec(), connect=lambda: None)  # type: ignore[arg-type,return-value]
    assert isinstance(again, ConsumerSetting) and again.target == s.target
    with pytest.raises(UsageError):
        setting_for("pfs-consumer:events_statements_history_long")
    with pytest.raises(UsageError):
        setting_for("pfs-consumer:bad name", connect=lambda: None)  # type: ignore[arg-type,return-value]


def test_cli_workload_file_refuses_workload_too(tmp_path: Path, myaccel_home: Path) -> None:
    w = tmp_path / "w.json"
    save(w, _workload({"SELECT a FROM t WHERE id = ?": 5}))
    r = CliRunner().invoke(cli, ["bench", "--workload-file", str(w), "-w", "ro", "--sandbox", "x"])
    assert r.exit_code == 2 and "--workload-file" in r.stderr
    r = CliRunner().invoke(cli, ["capture", "--help"])
    assert r.exit_code == 0 and "--redact" in r.stdout


def test_split_examples_keeps_the_mix() -> None:
    w = _workload({"SELECT a FROM t WHERE id = ?": 6, "UPDATE t SET b = 1": 2})
    train, held = w.split_examples()
    by_id = {c.id: c for c in w.classes}
    for t, h in zip(train.classes, held.classes, strict=True):
        full = by_id[t.id]
        assert t.count == h.count == full.count  # the same mix on both sides
        if len(full.examples) > 1:
            assert set(t.examples).isdisjoint(h.examples)
            assert sorted(t.examples + h.examples) == sorted(full.examples)
        else:  # one example: in both
            assert t.examples == h.examples == full.examples
    assert not train.connections and "held out" in held.notes[-1]
    assert "1 class(es) with one example in both" in held.notes[-1]


def test_holdout_verdict() -> None:
    from myaccel.builder.holdout import holdout_verdict

    assert holdout_verdict(900.0, 1000.0) == {"delta_pct": -10.0, "regressed": True}
    assert holdout_verdict(990.0, 1000.0) == {"delta_pct": -1.0, "regressed": False}
    assert holdout_verdict(990.0, None) == {"delta_pct": None, "regressed": None}


class _Cursor:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def __enter__(self) -> _Cursor:
        return self

    def __exit__(self, *a: object) -> None:
        return None

    def execute(self, sql: str) -> None:
        self.log.append(sql)


class _Conn:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def cursor(self) -> _Cursor:
        return _Cursor(self.log)

    def close(self) -> None:
        return None


def test_create_schemas_from_the_ddl(monkeypatch: pytest.MonkeyPatch) -> None:
    from myaccel.bench import replay
    from myaccel.bench.workload import SchemaInfo

    w = _workload({"SELECT a FROM t WHERE id = ?": 3})
    ddl = ["CREATE DATABASE `shop` /* x */", "CREATE TABLE `t` (`a` int)"]
    w = w.model_copy(update={"schemas": [SchemaInfo(name="shop", tables=["t"], ddl=ddl)]})
    log: list[str] = []
    monkeypatch.setattr(replay, "connect", lambda p: _Conn(log))
    monkeypatch.setattr(replay, "_tables", lambda p: {"mysql": {"user"}})
    assert replay.create_schemas(None, w) == ["shop"]  # type: ignore[arg-type]
    assert log == [
        "SET SESSION foreign_key_checks = 0",
        "CREATE DATABASE IF NOT EXISTS `shop` /* x */",
        "USE `shop`",
        "CREATE TABLE `t` (`a` int)",
    ]
    monkeypatch.setattr(replay, "_tables", lambda p: {"shop": {"t"}})
    assert replay.create_schemas(None, w) == []  # type: ignore[arg-type]
    old = w.model_copy(update={"schemas": [SchemaInfo(name="shop", tables=["t"])]})
    monkeypatch.setattr(replay, "_tables", lambda p: {})
    with pytest.raises(UsageError, match="no DDL"):
        replay.create_schemas(None, old)  # type: ignore[arg-type]
    # an older capture (no ddl field) still loads
    data = w.model_dump(mode="json")
    for s in data["schemas"]:
        del s["ddl"]
    assert Workload.model_validate(data).schemas[0].ddl == []


def test_training_replays_the_training_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from myaccel.bench import replay, runner
    from myaccel.builder.train import ReplayWorkload, replay_runs, training_workload
    from myaccel.server.connection import ConnectParams

    path = tmp_path / "w.json"
    save(path, _workload({"SELECT a FROM t WHERE id = ?": 4, "UPDATE t SET b = ?": 2}))
    output = (FIXTURES / "sysbench" / "run_oltp_insert_t2.txt").read_text()
    seen: dict[str, object] = {}

    def execute(argv: list[str], env: dict[str, str], **kw: object) -> runner.RawRun:
        seen["argv"] = argv
        script = env["MYACCEL_WORKLOAD"]
        seen["lua"] = Path(script).read_text()
        return runner.RawRun(argv, output, 0, 0.0, 5.0, 0.1)

    class FakeSandbox:
        dir = tmp_path / "sb"
        error_log = tmp_path / "err.log"

        def connect_params(self) -> ConnectParams:
            return ConnectParams(
                host=None, port=3306, user="root", password=None, socket=str(tmp_path / "s")
            )

    monkeypatch.setattr(replay, "create_schemas", lambda p, w: ["shop"])
    monkeypatch.setattr(replay, "check_schemas", lambda p, w: None)
    monkeypatch.setattr(runner, "execute", execute)
    notes: list[str] = []
    wl = training_workload("quick", str(path), holdout=True)
    assert isinstance(wl, ReplayWorkload) and wl.part == "train"
    res = replay_runs(FakeSandbox(), wl, (tmp_path / "log").open("w"), notes.append)  # type: ignore[arg-type]
    assert res[0]["threads"] == 4 and res[0]["statements_per_s"]
    assert "--mysql-user=root" in seen["argv"] and "--mysql-ignore-errors=all" in seen["argv"]  # type: ignore[operator]
    full = load_replayable(path)
    train, held = full.split_examples()
    lua = str(seen["lua"])
    trained = {e for c in train.classes for e in c.examples}
    assert trained and all(lua_string(e) in lua for e in trained)
    held_only = {e for c in held.classes for e in c.examples} - trained
    assert held_only and not any(lua_string(e) in lua for e in held_only)
    assert any("created from the capture's DDL" in n for n in notes)


def test_build_train_workload_refusals(tmp_path: Path, myaccel_home: Path) -> None:
    w = tmp_path / "w.json"
    save(w, _workload({"SELECT a FROM t WHERE id = ?": 5}))
    fixture = FIXTURES / "buildproj"
    base = ["build", "--source", str(fixture), "--out", str(tmp_path / "o"), "--dry-run"]
    r = CliRunner().invoke(cli, [*base, "--opt", "pgo", "--train", str(w)])
    assert r.exit_code != 0 and "trains with its own driver" in r.stderr, r.output
    r = CliRunner().invoke(cli, [*base, "--holdout"])
    assert r.exit_code != 0 and "--holdout" in r.stderr
    r = CliRunner().invoke(cli, [*base, "--train", str(tmp_path / "missing.json")])
    assert r.exit_code != 0 and "missing.json" in r.stderr
    assert not (tmp_path / "o").exists()


def test_accelerate_workload_file_on_a_sandbox_only(tmp_path: Path, myaccel_home: Path) -> None:
    w = tmp_path / "w.json"
    save(w, _workload({"SELECT a FROM t WHERE id = ?": 5}))
    r = CliRunner().invoke(
        cli, ["accelerate", "--socket", str(tmp_path / "no.sock"), "--workload-file", str(w)]
    )
    assert r.exit_code != 0 and "on a sandbox only" in r.stderr, r.output


def test_report_shows_workloads_and_fidelity(tmp_path: Path) -> None:
    from myaccel.report import write_report

    w = _workload({"SELECT a FROM t WHERE id = ?": 60, "UPDATE t SET b = ?": 40})
    r = _workload({"SELECT a FROM t WHERE id = ?": 58, "UPDATE t SET b = ?": 42})
    r = r.model_copy(update={"created_at": "2026-01-01T00:01:00+00:00", "replay_of": w.created_at})
    d = tmp_path / "caps"
    d.mkdir()
    save(d / "w.json", w)
    save(d / "r.json", r)
    out = tmp_path / "out"
    write_report([d], out, html=True, md=True)
    md = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    assert "## Workloads" in md and "### w.json" in md
    assert "`select a from t where id = ?`" in md and "| 60.0 |" in md
    assert "### r.json: the capture of a replay of" in md
    assert "| 60.0 | 58.0 | -2.0 |" in md and "the mix matches" in md
    assert 'id="workloads"' in html and "Fidelity (captured vs replayed)" in html


def test_sequence_mode_script_and_replay_flags(tmp_path: Path, myaccel_home: Path) -> None:
    w = _workload({"SELECT a FROM t WHERE id = ?": 4, "SET x = ?": 2, "UPDATE t SET b = ?": 2})
    lua = replay_lua(w, "sequence")
    body = lua.split("traces = {", 1)[1]
    assert body.count("  {\n") == 4  # one trace per connection
    assert "SET x" not in body and "[[SELECT a FROM t WHERE id = 0]]" in body
    assert replay_lua(w) != lua and "traces" not in replay_lua(w)
    with pytest.raises(UsageError, match="no connection traces"):
        replay_lua(w.model_copy(update={"connections": []}), "sequence")
    r = CliRunner().invoke(cli, ["bench", "--paced", "--sandbox", "x"])
    assert r.exit_code == 2 and "--workload-file" in r.stderr
    r = CliRunner().invoke(cli, ["ab", "--help"])
    assert "--replay-mode" in r.stdout and "--paced" in r.stdout


def test_holdout_stage_records_both_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from myaccel.builder import holdout
    from myaccel.builder.flags import BuildRequest
    from myaccel.builder.manifest import Measurements

    calls: list[tuple[Path, str, str]] = []

    def fake_train(basedir: Path, home: Path, wl: object, log: object, **kw: object) -> dict:  # type: ignore[type-arg]
        calls.append((basedir, getattr(wl, "part", ""), str(kw["name"])))
        return {"runs": [{"statements_per_s": 900.0 if "this" in str(kw["name"]) else 1000.0}]}

    monkeypatch.setattr(holdout, "train_sandbox", fake_train)
    req = BuildRequest(train_workload=str(tmp_path / "w.json"), holdout=True, compare_with="/base")
    ctx = SimpleNamespace(
        request=req,
        layout=SimpleNamespace(install=tmp_path / "install", work=tmp_path / "work"),
        progress=SimpleNamespace(note=lambda m: None),
        manifest=SimpleNamespace(measurements=Measurements()),
        toolchain=SimpleNamespace(cross=None),
    )
    stage = holdout.HoldoutStage()
    assert stage.skip_reason(ctx) is None  # type: ignore[arg-type]
    res = stage.run(ctx, (tmp_path / "log").open("w"))  # type: ignore[arg-type]
    assert [(c[1]) for c in calls] == ["holdout", "holdout"]
    assert calls[1][0] == Path("/base")
    m = ctx.manifest.measurements.holdout
    assert m is not None and m["delta_pct"] == -10.0 and m["regressed"] is True
    assert "slower by more than 5%" in res["summary"]


def test_capture_on_a_sandbox_loads_it_once(
    myaccel_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`capture --sandbox NAME` loads the sandbox once: the connection it captures through
    (with a --user given) and the server its journal records come from the same load."""
    from test_bad_input_clone_tune import fake_sandbox

    from myaccel.actions.target import SandboxServer
    from myaccel.capture import session
    from myaccel.capture.session import CaptureRequest
    from myaccel.server.sandbox import Sandbox

    fake_sandbox(myaccel_home, "prod")
    loaded: list[Sandbox] = []
    real_load = Sandbox.load.__func__  # type: ignore[attr-defined]

    def counting_load(cls: type[Sandbox], name: str, *, home: Path | None = None) -> Sandbox:
        sb: Sandbox = real_load(cls, name, home=home)
        loaded.append(sb)
        return sb

    asked: list[CaptureRequest] = []

    def fake_capture(req: CaptureRequest, note: object) -> Workload:
        asked.append(req)
        raise UsageError("stopped by the test", hint="-")

    monkeypatch.setattr(Sandbox, "load", classmethod(counting_load))
    monkeypatch.setattr(session, "capture", fake_capture)
    argv = ["capture", "--sandbox", "prod", "--user", "alice", "--out", str(myaccel_home / "w")]
    r = CliRunner().invoke(cli, argv)
    assert r.exit_code == 2 and "stopped by the test" in r.stderr, r.output
    assert [sb.name for sb in loaded] == ["prod"]
    (req,) = asked
    assert isinstance(req.server, SandboxServer) and req.server.sandbox is loaded[0]
    assert req.target.user == "alice" and req.target.port == 19999  # --user over the sandbox's
    assert req.server.params == loaded[0].connect_params()  # the journal: its own account
