"""A workload file is code from wherever it came from: what a replay may issue of it
(``capture.sqlguard``), the file's strict schema and bounds (``bench.workload``), the
guarded JSON reader (``artifacts.read_json``), the DDL gate (``bench.replay``) and what a
capture marks as not replayed. No server: the live checks are in
tests/integration/test_workload_guard_live.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from workload_files import (
    SHOP_DDL,
    first_replayed,
    legit_doc,
    legit_workload,
    with_example,
    write,
)

from myaccel.artifacts import JsonLimitError, decode_json, load, read_json
from myaccel.bench import replay
from myaccel.bench.replay import check_schemas, create_schemas, replay_lua
from myaccel.bench.workload import Workload, check_replayable, load_replayable, load_workload
from myaccel.capture import sqlguard
from myaccel.capture.assemble import Event, build_classes
from myaccel.capture.sqlguard import Refused, check_schema_ddl, check_statement
from myaccel.errors import DataError, UsageError
from myaccel.report.load import load_artifacts

# ------------------------------------------------------------------ single statements

ALLOWED = [
    "SELECT 1",
    "select c from sbtest1 where id=?",  # a captured placeholder: the server rejects it
    "SELECT 'a;b'",  # ; inside a string
    "SELECT 'it''s; fine', \"x;y\"",
    "SELECT 'O\\'Brien'",  # a backslash-escaped quote (a string's end without escapes)
    "SELECT `a;b` FROM t",  # ; inside an identifier
    "SELECT 1 /*; DROP TABLE t */",  # a comment hides nothing: the server skips it
    "SELECT 1 -- ; DROP TABLE t",
    "SELECT 1 # ; DROP TABLE t",
    "SELECT /*+ MAX_EXECUTION_TIME(1000) */ 1",  # an optimizer hint is not code
    "SELECT 1;",  # one trailing ;
    "SELECT 1;  \n",
    "(SELECT 1) UNION (SELECT 2)",
    "WITH x AS (SELECT 1 AS a) SELECT a FROM x",
    "INSERT INTO orders (item_id, qty) VALUES (7, 1)",
    "INSERT INTO t SET a = 1 ON DUPLICATE KEY UPDATE a = a + 1",
    "UPDATE items SET stock = stock - 1 WHERE id = 7",
    "DELETE FROM orders WHERE id = 3",
    "REPLACE INTO t VALUES (1)",
    "SELECT c FROM sbtest1 WHERE id = 1 FOR UPDATE",
    "SELECT @@global.read_only, @x.y",
    "SELECT o.id FROM orders o JOIN shop.items i ON i.id = o.item_id",
    "SELECT 'café', '价格' FROM t",
    "SELECT 价格 FROM 商品",  # letters outside ASCII may name things
    "BEGIN",
    "BEGIN WORK",
    "START TRANSACTION READ ONLY, WITH CONSISTENT SNAPSHOT",
    "COMMIT",
    "COMMIT AND NO CHAIN NO RELEASE",
    "ROLLBACK",
    "ROLLBACK WORK TO SAVEPOINT s1",
    "SAVEPOINT s1",
    "RELEASE SAVEPOINT s1",
]


@pytest.mark.parametrize("sql", ALLOWED)
def test_single_dml_statements_pass(sql: str) -> None:
    check_statement(sql)


REFUSED = [
    # (id, statement, what the reason says)
    ("drop", "DROP TABLE sbtest1", "DROP is not replayed"),
    ("drop-lower", "drop table sbtest1", "DROP is not replayed"),
    ("truncate", "TRUNCATE sbtest1", "TRUNCATE"),
    ("multi", "SELECT 1; DROP TABLE sbtest1", "more than one statement"),
    ("multi-newline", "SELECT 1\n;\nDROP TABLE t", "more than one statement"),
    ("two-trailing", "SELECT 1;;", "more than one statement"),
    ("after-line-comment", "SELECT 1 # x\n; DROP TABLE t", "more than one statement"),
    # MySQL reads --1 as two minus signs, not a comment (a lexer that says comment is wrong)
    ("double-dash-no-space", "SELECT 1 --1; DROP TABLE t", "more than one statement"),
    # with NO_BACKSLASH_ESCAPES the quote after \ closes the string
    ("backslash-quote", "SELECT 'a\\'; DROP TABLE t; -- '", "more than one statement"),
    ("backslash-quote-semicolon", "SELECT 'a\\';b'", "more than one statement"),
    # with ANSI_QUOTES "..." is an identifier, where \ escapes nothing
    ("ansi-quotes", 'SELECT "a\\"; DROP TABLE t; -- "', "more than one statement"),
    ("exec-comment", "/*! DROP TABLE t */", "executable comment"),
    ("exec-comment-in-select", "SELECT 1 /*! ; DROP TABLE t */", "executable comment"),
    ("exec-comment-versioned", "SELECT 1 /*!50000 INTO OUTFILE '/tmp/x' */", "executable"),
    ("exec-comment-mariadb", "SELECT 1 /*M!100100 ; DROP TABLE t */", "executable comment"),
    ("exec-comment-lower-m", "SELECT 1 /*m! ; DROP TABLE t */", "executable comment"),
    # MySQL 9 reads $$ as a quote: here the ' would be inside it and the ; outside
    ("dollar-quote", "SELECT $$ '$$; DROP TABLE t; -- '", "MySQL 9"),
    (
        "recursive",
        "WITH RECURSIVE r (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT n FROM r",
        "RECURSIVE",
    ),
    ("outfile", "SELECT * FROM t INTO OUTFILE '/tmp/x'", "OUTFILE"),
    ("dumpfile", "SELECT c FROM t LIMIT 1 INTO DUMPFILE '/tmp/x'", "DUMPFILE"),
    ("load-data", "LOAD DATA INFILE '/etc/passwd' INTO TABLE t", "LOAD"),
    ("load-file", "SELECT LOAD_FILE('/etc/passwd')", "LOAD_FILE()"),
    ("sleep", "SELECT SLEEP(100000)", "SLEEP()"),
    ("sleep-spaced", "SELECT sleep /* x */ (100000)", "SLEEP()"),
    ("sleep-quoted", "SELECT `sleep`(100000)", "SLEEP()"),
    ("sleep-in-where", "SELECT c FROM t WHERE id = 1 AND SLEEP(5) = 0", "SLEEP()"),
    ("benchmark", "SELECT BENCHMARK(1e12, MD5('x'))", "BENCHMARK()"),
    ("get-lock", "SELECT GET_LOCK('x', 100000)", "GET_LOCK()"),
    ("sys-exec", "SELECT sys_exec('rm -rf /')", "SYS_EXEC()"),
    ("lock-tables", "LOCK TABLES t WRITE", "LOCK"),
    ("flush", "FLUSH TABLES WITH READ LOCK", "FLUSH"),
    ("grant", "GRANT ALL ON *.* TO 'x'@'%'", "GRANT"),
    ("create-user", "CREATE USER 'x'@'%'", "CREATE"),
    ("set-global", "SET GLOBAL read_only = 1", "SET"),
    ("set-session", "SET SESSION sql_mode = ''", "SET"),
    ("shutdown", "SHUTDOWN", "SHUTDOWN"),
    ("kill", "KILL 12", "KILL"),
    ("install-plugin", "INSTALL PLUGIN x SONAME 'x.so'", "INSTALL"),
    ("call", "CALL p()", "CALL"),
    ("handler", "HANDLER t OPEN", "HANDLER"),
    ("do", "DO SLEEP(5)", "DO"),
    ("prepare", "PREPARE s FROM 'DROP TABLE t'", "PREPARE"),
    ("execute", "EXECUTE s", "EXECUTE"),
    ("show", "SHOW TABLES", "SHOW"),
    ("xa", "XA START 'x'", "XA"),
    ("use", "USE mysql", "USE"),
    ("begin-not-atomic", "BEGIN NOT ATOMIC SELECT 1 END", "transaction control"),
    ("commit-release", "COMMIT RELEASE", "RELEASE"),
    ("rollback-release", "ROLLBACK AND NO CHAIN RELEASE", "RELEASE"),
    ("start-slave", "START SLAVE", "transaction control"),
    ("mysql-user", "DELETE FROM mysql.user", "system schema 'mysql'"),
    ("mysql-user-quoted", "UPDATE `mysql`.`user` SET x = 1", "system schema 'mysql'"),
    ("mysql-user-spaced", "SELECT * FROM mysql . user", "system schema 'mysql'"),
    ("mysql-user-ansi", 'SELECT * FROM "mysql"."user"', "system schema 'mysql'"),
    ("mysql-user-upper", "SELECT * FROM MYSQL.user", "system schema"),
    ("mysql-fullwidth", "SELECT * FROM ｍｙｓｑｌ.user", "system schema"),
    ("pfs", "UPDATE performance_schema.setup_consumers SET enabled = 'NO'", "performance_schema"),
    ("subquery-mysql", "SELECT 1 FROM t WHERE x IN (SELECT user FROM mysql.user)", "mysql"),
    ("fullwidth-semicolon", "SELECT 1\uff1bDROP TABLE t", "U+FF1B"),
    ("zero-width-space", "SELECT\u200b1", "U+200B"),
    ("nbsp", "SELECT\u00a01", "U+00A0"),
    ("bidi-override", "SELECT 1 /* \u202e; DROP */", "bidirectional"),
    ("bidi-in-string", "SELECT '\u2066x'", "bidirectional"),
    ("nul", "SELECT 1\x00; DROP TABLE t", "NUL"),
    ("control", "SELECT 1\x01", "control character"),
    ("surrogate", "SELECT '\ud800'", "surrogate"),
    ("empty", "   ", "empty"),
    ("oversize", "SELECT '" + "x" * sqlguard.MAX_STATEMENT_CHARS + "'", "longer than"),
    ("not-a-keyword", "'x'", "statement keyword"),
    ("with-alone", "WITH x AS (SELECT 1)", "WITH"),
]


@pytest.mark.parametrize(("sql", "needle"), [pytest.param(s, n, id=i) for i, s, n in REFUSED])
def test_refused_statements_say_why(sql: str, needle: str) -> None:
    with pytest.raises(Refused, match=None) as exc:
        check_statement(sql)
    assert needle in str(exc.value)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("value", [5, None, ["SELECT 1"], b"SELECT 1"])
def test_a_statement_must_be_text(value: object) -> None:
    with pytest.raises(Refused, match="not text"):
        sqlguard.check_text(value)


def test_the_verdict_says_what_a_statement_writes_and_qualifies() -> None:
    v = check_statement(
        "WITH x AS (SELECT 1) DELETE FROM shop.orders WHERE id IN (SELECT * FROM x)"
    )
    assert v.verb == "delete" and v.writes and v.qualifiers == {"shop"}
    v = check_statement("SELECT o.id FROM orders o WHERE o.qty > 1.5")
    assert not v.writes and v.qualifiers == {"o"}  # a number is no qualifier


def test_a_class_writing_without_a_schema_or_in_a_system_schema_is_refused() -> None:
    assert sqlguard.class_refusal("", ["SELECT 1"]) is None
    assert "without a default schema" in str(sqlguard.class_refusal("", ["DELETE FROM t"]))
    assert "system schema" in str(sqlguard.class_refusal("mysql", ["SELECT * FROM user"]))
    assert "not one a replay may use" in str(sqlguard.class_refusal("a`b", ["SELECT 1"]))


# ------------------------------------------------------------------ DDL


def test_captured_ddl_passes() -> None:
    check_schema_ddl("shop", ["items", "orders"], SHOP_DDL)
    mysql8 = [
        "CREATE DATABASE `shop` /*!40100 DEFAULT CHARACTER SET utf8mb4 COLLATE "
        "utf8mb4_0900_ai_ci */ /*!80016 DEFAULT ENCRYPTION='N' */",
        "CREATE TABLE `t` (\n  `id` int NOT NULL,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB "
        "DEFAULT CHARSET=utf8mb4\n/*!50100 PARTITION BY RANGE (`id`)\n(PARTITION p0 VALUES "
        "LESS THAN (10) ENGINE = InnoDB) */",
    ]
    check_schema_ddl("shop", ["t"], mysql8)


BAD_DDL = [
    ("drop", ["DROP TABLE sbtest.sbtest1"], "CREATE DATABASE"),
    ("second-drop", [SHOP_DDL[0], "DROP TABLE sbtest.sbtest1"], "not a CREATE TABLE"),
    ("multi", [SHOP_DDL[0] + "; DROP DATABASE sbtest"], "more than one statement"),
    ("other-database", ["CREATE DATABASE `sbtest`"], "does not create schema 'shop'"),
    ("other-table", [SHOP_DDL[0], "CREATE TABLE `x` (a int)"], "not a table of 'shop'"),
    ("other-schema", [SHOP_DDL[0], "CREATE TABLE sbtest.items (a int)"], "in schema 'sbtest'"),
    (
        "references-other",
        [SHOP_DDL[0], "CREATE TABLE items (a int, FOREIGN KEY (a) REFERENCES sbtest.t (id))"],
        "schema 'sbtest'",
    ),
    ("connect", [SHOP_DDL[0], "CREATE TABLE items (a int) ENGINE=CONNECT"], "ENGINE=CONNECT"),
    ("federated", [SHOP_DDL[0], "CREATE TABLE items (a int) ENGINE = FEDERATED"], "FEDERATED"),
    (
        "data-directory",
        [SHOP_DDL[0], "CREATE TABLE items (a int) ENGINE=InnoDB DATA DIRECTORY='/etc'"],
        "DIRECTORY",
    ),
    (
        "exec-data-directory",
        [SHOP_DDL[0], "CREATE TABLE items (a int) /*!50100 DATA DIRECTORY='/etc' */"],
        "DIRECTORY",
    ),
    ("exec-drop", ["CREATE DATABASE shop /*! ; DROP DATABASE sbtest */"], "more than one"),
    ("ctas", [SHOP_DDL[0], "CREATE TABLE items SELECT * FROM mysql.user"], "define its columns"),
    ("like", [SHOP_DDL[0], "CREATE TABLE items LIKE mysql.user"], "define its columns"),
    ("view", [SHOP_DDL[0], "CREATE DEFINER=`root`@`%` VIEW items AS SELECT 1"], "CREATE TABLE"),
    ("or-replace", [SHOP_DDL[0], "CREATE OR REPLACE TABLE items (a int)"], "CREATE TABLE"),
    ("sleep", [SHOP_DDL[0], "CREATE TABLE items (a int DEFAULT (SLEEP(100)))"], "SLEEP()"),
    ("db-option", ["CREATE DATABASE shop DEFAULT CHARSET latin1 DROP"], "no database option"),
]


@pytest.mark.parametrize(("ddl", "needle"), [pytest.param(d, n, id=i) for i, d, n in BAD_DDL])
def test_ddl_beyond_the_schemas_own_create_statements_is_refused(
    ddl: list[str], needle: str
) -> None:
    with pytest.raises(Refused) as exc:
        check_schema_ddl("shop", ["items", "orders"], ddl)
    assert needle in str(exc.value)


# ------------------------------------------------------------------ the file


def test_a_capture_round_trips_and_replays(tmp_path: Path) -> None:
    w = load_replayable(write(tmp_path / "w.json", legit_doc()))
    check_replayable(w)
    assert "INSERT INTO orders" in replay_lua(w, "sequence")


def _trace_sql(d: dict[str, Any], sql: str) -> dict[str, Any]:
    st = d["connections"][0]["statements"][0]
    assert st["class_id"] in {c["id"] for c in d["classes"] if c["replayable"]}
    st["sql"] = sql
    return d


def _unmark_set(d: dict[str, Any]) -> dict[str, Any]:
    c = next(c for c in d["classes"] if not c["replayable"])
    c["replayable"], c["not_replayed_because"] = True, None
    return d


def _schema_of_class(d: dict[str, Any], schema: str) -> dict[str, Any]:
    first_replayed(d)["schema_name"] = schema
    return d


def _write_without_schema(d: dict[str, Any]) -> dict[str, Any]:
    c = next(c for c in d["classes"] if c["kind"] == "write")
    c["schema_name"] = ""
    return d


def _ddl(d: dict[str, Any], ddl: list[str]) -> dict[str, Any]:
    d["schemas"][0]["ddl"] = ddl
    return d


def _schemas(d: dict[str, Any], name: str) -> dict[str, Any]:
    d["schemas"].append({"name": name, "tables": ["user"], "ddl": []})
    return d


HOSTILE_FILES = [
    # (id, change to the legit document, text in the error)
    ("drop-example", lambda d: with_example("DROP TABLE items", d), "DROP is not replayed"),
    ("multi-example", lambda d: with_example("SELECT 1; DROP TABLE items", d), "more than one"),
    ("exec-example", lambda d: with_example("SELECT 1 /*! ; DROP TABLE t */", d), "executable"),
    ("outfile", lambda d: with_example("SELECT 1 INTO OUTFILE '/tmp/x'", d), "OUTFILE"),
    ("drop-in-trace", lambda d: _trace_sql(d, "DROP TABLE items"), "statement 1 of connection"),
    ("class-marked-replayable", _unmark_set, "SET is not replayed"),
    ("system-default-schema", lambda d: _schema_of_class(d, "mysql"), "system schema"),
    ("backquote-schema", lambda d: _schema_of_class(d, "a`; DROP"), "not one a replay"),
    ("write-without-schema", _write_without_schema, "without a default schema"),
    ("ddl-drop", lambda d: _ddl(d, [*SHOP_DDL, "DROP TABLE sbtest.sbtest1"]), "schema 'shop'"),
    ("system-schema-listed", lambda d: _schemas(d, "mysql"), "system schema"),
]


@pytest.mark.parametrize(
    ("change", "needle"), [pytest.param(c, n, id=i) for i, c, n in HOSTILE_FILES]
)
def test_a_hostile_file_is_refused_before_anything_runs(
    tmp_path: Path, change: Any, needle: str
) -> None:
    path = write(tmp_path / "w.json", change(legit_doc()))
    with pytest.raises(UsageError) as exc:
        load_replayable(path)
    assert needle in exc.value.message and "\n" not in exc.value.message
    assert "is refused" in exc.value.message and exc.value.hint


def test_statements_that_are_never_issued_are_not_judged(tmp_path: Path) -> None:
    d = legit_doc()
    c = next(c for c in d["classes"] if not c["replayable"])
    c["examples"] = ["DROP TABLE items"]  # a DDL class of a capture: never replayed
    load_replayable(write(tmp_path / "w.json", d))


BAD_SHAPES = [
    # (id, change, text in the error)
    ("extra-field", lambda d: {**d, "run_this": "DROP TABLE t"}, "Extra inputs"),
    ("count-as-text", lambda d: _class_field(d, "count", "12"), "valid integer"),
    ("count-negative", lambda d: _class_field(d, "count", -1), "greater than or equal"),
    ("count-huge", lambda d: _class_field(d, "count", 10**300), "less than or equal"),
    ("count-float", lambda d: _class_field(d, "count", 1.5), "valid integer"),
    ("replayable-text", lambda d: _class_field(d, "replayable", "yes"), "valid boolean"),
    ("examples-object", lambda d: _class_field(d, "examples", {"sql": "x"}), "valid list"),
    ("example-number", lambda d: _class_field(d, "examples", [1]), "valid string"),
    ("too-many-examples", lambda d: _class_field(d, "examples", ["SELECT 1"] * 1001), "at most"),
    ("threads", lambda d: {**d, "concurrency": {**d["concurrency"], "connections": 10**6}}, "less"),
    ("classes-object", lambda d: {**d, "classes": {"a": 1}}, "valid list"),
    ("no-classes", lambda d: {k: v for k, v in d.items() if k != "classes"}, "Field required"),
    ("source", lambda d: {**d, "source": "slow_log"}, "source"),
    ("long-schema", lambda d: _class_field(d, "schema_name", "s" * 65), "at most 64"),
]


def _class_field(d: dict[str, Any], key: str, value: object) -> dict[str, Any]:
    first_replayed(d)[key] = value
    return d


@pytest.mark.parametrize(("change", "needle"), [pytest.param(c, n, id=i) for i, c, n in BAD_SHAPES])
def test_the_schema_is_strict(tmp_path: Path, change: Any, needle: str) -> None:
    path = write(tmp_path / "w.json", change(legit_doc()))
    with pytest.raises(UsageError) as exc:
        load_workload(path)
    assert needle in exc.value.message and "\n" not in exc.value.message


def test_not_a_number_is_refused(tmp_path: Path) -> None:
    text = json.dumps(legit_doc()).replace('"window_s": 1.0', '"window_s": NaN')
    (tmp_path / "w.json").write_text(text)
    with pytest.raises(UsageError, match="finite number"):
        load_workload(tmp_path / "w.json")


def test_an_oversized_file_is_refused_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from myaccel.bench import workload

    monkeypatch.setattr(workload, "MAX_FILE_BYTES", 1000)
    path = write(tmp_path / "w.json", legit_doc())
    with pytest.raises(UsageError, match="is larger than 1,000 bytes"):
        load_workload(path)


# ------------------------------------------------------------------ JSON readers


@pytest.mark.parametrize(
    "raw",
    [
        "[" * 200_000,
        "[" * 200_000 + "]" * 200_000,
        '{"a":' * 100 + "1" + "}" * 100,
        "[" * 65 + "]" * 65,
    ],
    ids=["200k-open", "200k-closed", "100-objects", "65-lists"],
)
def test_nesting_is_bounded(raw: str) -> None:
    with pytest.raises(JsonLimitError, match="nested deeper than 64"):
        decode_json(raw)


def test_nesting_within_the_bound_decodes() -> None:
    assert decode_json("[" * 64 + "]" * 64) is not None
    assert decode_json("5") == 5


def test_read_json_bounds_the_size(tmp_path: Path) -> None:
    (tmp_path / "big.json").write_text("[" + "1," * 1000 + "1]")
    with pytest.raises(JsonLimitError, match="larger than"):
        read_json(tmp_path / "big.json", max_bytes=100)
    assert len(read_json(tmp_path / "big.json")) == 1001


def test_artifact_loaders_turn_deep_nesting_into_one_line(tmp_path: Path) -> None:
    (tmp_path / "n.json").write_text("[" * 200_000)
    with pytest.raises(DataError, match="nested deeper"):
        load(tmp_path / "n.json", Workload)
    with pytest.raises(UsageError, match="nested deeper than 16"):
        load_workload(tmp_path / "n.json")
    with pytest.raises(UsageError, match="nested deeper"):
        load_artifacts([tmp_path / "n.json"])
    d = tmp_path / "results"
    d.mkdir()
    (d / "n.json").write_text("[" * 200_000)
    with pytest.raises(UsageError, match="no myaccel artifacts"):  # a note, not a crash
        load_artifacts([d])


# ------------------------------------------------------------------ the replay


def test_the_script_says_set_names_only_for_text_outside_ascii(tmp_path: Path) -> None:
    w = legit_workload()
    assert "names = " not in replay_lua(w)
    d = with_example("SELECT name FROM items WHERE name = 'café'")
    w2 = load_replayable(write(tmp_path / "w.json", d))
    assert "names = [[utf8mb4]]," in replay_lua(w2)
    engine = replay.engine_script().read_text()
    assert 'con:query("SET NAMES " .. R.names)' in engine
    assert '(name:gsub("`", "``"))' in engine  # USE quotes the schema name


def test_the_script_refuses_a_workload_built_in_memory() -> None:
    w = legit_workload()
    c = next(c for c in w.classes if c.replayable)
    bad = w.model_copy(
        update={"classes": [c.model_copy(update={"examples": ["DROP TABLE items"]})]}
    )
    with pytest.raises(UsageError, match="DROP is not replayed"):
        replay_lua(bad)


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


def test_ddl_runs_only_when_allowed_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[str] = []
    monkeypatch.setattr(replay, "connect", lambda p: _Conn(log))
    monkeypatch.setattr(replay, "_tables", lambda p: {"sbtest": {"sbtest1"}})
    w = legit_workload()
    with pytest.raises(UsageError, match="lacks schema") as exc:
        create_schemas(None, w, allow_ddl=False)  # type: ignore[arg-type]
    assert "--allow-ddl" in exc.value.hint and log == []
    # a workload changed in memory after its file was checked: the DDL is checked again
    s = w.schemas[0].model_copy(update={"ddl": [*SHOP_DDL, "DROP TABLE sbtest.sbtest1"]})
    bad = w.model_copy(update={"schemas": [s]})
    with pytest.raises(UsageError, match="DDL of schema 'shop'"):
        create_schemas(None, bad, allow_ddl=True)  # type: ignore[arg-type]
    assert log == []
    assert create_schemas(None, w, allow_ddl=True) == ["shop"]  # type: ignore[arg-type]
    assert log[1].startswith("CREATE DATABASE IF NOT EXISTS `shop` /*!40100")
    assert all(not x.upper().startswith("DROP") for x in log)
    log.clear()
    s = w.schemas[0].model_copy(
        update={"ddl": ["CREATE DATABASE IF NOT EXISTS `shop`", *SHOP_DDL[1:]]}
    )
    create_schemas(None, w.model_copy(update={"schemas": [s]}))  # type: ignore[arg-type]
    assert log[1] == "CREATE DATABASE IF NOT EXISTS `shop`"  # not IF NOT EXISTS twice


def test_a_statement_naming_another_schema_of_the_server_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    server = {"shop": {"items", "orders"}, "sbtest": {"sbtest1"}}
    monkeypatch.setattr(replay, "_tables", lambda p: server)
    check_schemas(None, legit_workload())  # type: ignore[arg-type]
    d = with_example("DELETE FROM sbtest.sbtest1 WHERE id > 0")
    w = load_replayable(write(tmp_path / "w.json", d))  # nothing in the file says sbtest
    with pytest.raises(UsageError, match="names schema 'sbtest' of this server"):
        check_schemas(None, w)  # type: ignore[arg-type]
    d = with_example("SELECT * FROM `SBTEST`.sbtest1")
    w = load_replayable(write(tmp_path / "w.json", d))
    with pytest.raises(UsageError, match="sbtest"):
        check_schemas(None, w)  # type: ignore[arg-type]


# ------------------------------------------------------------------ the capture


def test_a_capture_marks_what_a_replay_may_not_issue() -> None:
    sqls = {
        "SHOW WARNINGS": "SHOW is not replayed",
        "DO 1": "DO is not replayed",
        "SELECT SLEEP(1)": "SLEEP()",
        "SELECT * FROM information_schema.tables": "system schema",
        "SELECT 1 INTO OUTFILE '/tmp/x'": "OUTFILE",
        "CALL p(1)": "CALL",
        "SELECT name FROM items WHERE id = 1": None,
    }
    events = [Event(conn_id=1, t_s=0.0, sql=s, schema="shop") for s in sqls]
    events.append(Event(conn_id=2, t_s=0.0, sql="DELETE FROM orders WHERE id = 1"))
    classes, _, _ = build_classes(events)
    why = {c.examples[0]: c.not_replayed_because for c in classes}
    for sql, needle in sqls.items():
        assert (why[sql] is None) if needle is None else (needle in str(why[sql])), sql
    assert "without a default schema" in str(why["DELETE FROM orders WHERE id = 1"])
