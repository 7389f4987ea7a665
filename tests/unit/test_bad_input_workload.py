"""Hostile and broken workload files, every command that reads one (``bench``, ``ab``,
``accelerate`` with ``--workload-file``, ``capture --check``) and ``report``: one
``error:`` line, one ``hint:`` line, exit 2 (or 9), no traceback, no file changed and no
server contacted (the checks run before anything else). The same harness as
tests/unit/test_bad_input.py; the live counterpart (the sbtest tables intact after a
refused replay) is tests/integration/test_workload_guard_live.py."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
from test_bad_input import USAGE, Env, assert_clean_error, env, run_cli, snapshot
from workload_files import SHOP_DDL, legit_doc, with_example

from myaccel.errors import ExitCode

__all__ = ["env"]  # the fixture, from test_bad_input

Change = Callable[[dict[str, Any]], object]


def _trace(sql: str) -> Change:
    def change(d: dict[str, Any]) -> object:
        replayed = {c["id"] for c in d["classes"] if c["replayable"]}
        st = next(s for s in d["connections"][0]["statements"] if s["class_id"] in replayed)
        st["sql"] = sql
        return d

    return change


def _mark_replayable(d: dict[str, Any]) -> object:
    c = next(c for c in d["classes"] if not c["replayable"])
    c["examples"], c["replayable"], c["not_replayed_because"] = (
        ["SET GLOBAL read_only=1"],
        True,
        None,
    )
    return d


def _ddl(extra: str) -> Change:
    def change(d: dict[str, Any]) -> object:
        d["schemas"][0]["ddl"] = [*SHOP_DDL, extra]
        return d

    return change


def _field(key: str, value: object) -> Change:
    def change(d: dict[str, Any]) -> object:
        next(c for c in d["classes"] if c["replayable"])[key] = value
        return d

    return change


def _example(sql: str) -> Change:
    return lambda d: with_example(sql, d)


# The files the cases name as {in_}/NAME.json: a capture's document, changed.
FILES: dict[str, Change] = {
    "drop": _example("DROP TABLE sbtest.sbtest1"),
    "multi": _example("SELECT 1; DROP TABLE sbtest.sbtest1"),
    "comment-multi": _example("SELECT 1 --1; DROP TABLE sbtest.sbtest1"),
    "exec-comment": _example("SELECT 1 /*! ; DROP TABLE sbtest.sbtest1 */"),
    "outfile": _example("SELECT * FROM items INTO OUTFILE '/tmp/x'"),
    "load-file": _example("SELECT LOAD_FILE('/etc/shadow')"),
    "sleep": _example("SELECT SLEEP(86400)"),
    "mysql-user": _example("DELETE FROM mysql.user"),
    "bidi": _example("SELECT 1 /* \u202e */"),
    "fullwidth-semicolon": _example("SELECT 1\uff1b DROP TABLE t"),
    "nul": _example("SELECT 1\x00; DROP TABLE t"),
    "long-statement": _example("SELECT '" + "x" * (1024 * 1024) + "'"),
    "trace-drop": _trace("DROP TABLE sbtest.sbtest1"),
    "set-global": _mark_replayable,
    "ddl-drop": _ddl("DROP TABLE sbtest.sbtest1"),
    "ddl-connect": _ddl("CREATE TABLE `items` (a int) ENGINE=CONNECT TABLE_TYPE=DOS"),
    "count-text": _field("count", "12"),
    "extra-field": lambda d: {**d, "exec": "DROP TABLE t"},
    "count-negative": _field("count", -5),
    "threads": lambda d: {**d, "concurrency": {**d["concurrency"], "connections": 10**6}},
}


def _write_inputs(d: Path) -> None:
    for name, change in FILES.items():
        (d / f"{name}.json").write_text(json.dumps(change(legit_doc())))
    (d / "nested.json").write_text("[" * 200_000)
    (d / "nested-object.json").write_text('{"a":' * 200_000)
    (d / "nan.json").write_text(
        json.dumps(legit_doc()).replace('"window_s": 1.0', '"window_s": NaN')
    )
    (d / "nested-dir").mkdir()
    (d / "nested-dir" / "x.json").write_text("[" * 200_000)
    (d / "capture.json").write_text(json.dumps(legit_doc()))


@pytest.fixture
def wenv(env: Env, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Env, list[object]]]:
    """``env`` with the workload files, and every attempt to reach a server recorded
    (and failed): a refused file must be refused before one."""
    _write_inputs(env.inputs)
    reached: list[object] = []

    def no_server(*args: object, **kwargs: object) -> None:
        reached.append(kwargs.get("unix_socket") or kwargs.get("host"))
        raise pymysql.err.OperationalError(2002, "no server in this test")

    monkeypatch.setattr(pymysql.connections.Connection, "__init__", no_server)
    yield env, reached


REFUSED = "is refused"
CASES: list[tuple[str, list[str], int, str]] = [
    # (id, argv with {in_}, exit code, text in the error line)
    ("bench-drop", ["bench", "--workload-file", "{in_}/drop.json"], USAGE, "DROP is not replayed"),
    ("ab-drop", ["ab", "--workload-file", "{in_}/drop.json"], USAGE, "DROP is not replayed"),
    ("accelerate-drop", ["accelerate", "--workload-file", "{in_}/drop.json"], USAGE, "DROP"),
    ("check-drop", ["capture", "--check", "{in_}/drop.json"], USAGE, "DROP is not replayed"),
    ("bench-multi", ["bench", "--workload-file", "{in_}/multi.json"], USAGE, "more than one"),
    ("ab-multi", ["ab", "--workload-file", "{in_}/multi.json"], USAGE, "more than one"),
    ("check-multi", ["capture", "--check", "{in_}/multi.json"], USAGE, "more than one"),
    (
        "accelerate-multi",
        ["accelerate", "--workload-file", "{in_}/multi.json", "--allow-ddl"],
        USAGE,
        "more than one",
    ),
    (
        "check-comment-multi",
        ["capture", "--check", "{in_}/comment-multi.json"],
        USAGE,
        "more than one",
    ),
    (
        "bench-exec-comment",
        ["bench", "--workload-file", "{in_}/exec-comment.json"],
        USAGE,
        "executable",
    ),
    ("check-exec-comment", ["capture", "--check", "{in_}/exec-comment.json"], USAGE, "executable"),
    ("bench-outfile", ["bench", "--workload-file", "{in_}/outfile.json"], USAGE, "OUTFILE"),
    ("ab-load-file", ["ab", "--workload-file", "{in_}/load-file.json"], USAGE, "LOAD_FILE()"),
    ("bench-sleep", ["bench", "--workload-file", "{in_}/sleep.json"], USAGE, "SLEEP()"),
    ("check-mysql-user", ["capture", "--check", "{in_}/mysql-user.json"], USAGE, "system schema"),
    ("bench-bidi", ["bench", "--workload-file", "{in_}/bidi.json"], USAGE, "bidirectional"),
    (
        "bench-fullwidth-semicolon",
        ["bench", "--workload-file", "{in_}/fullwidth-semicolon.json"],
        USAGE,
        "U+FF1B",
    ),
    ("bench-nul", ["bench", "--workload-file", "{in_}/nul.json"], USAGE, "NUL"),
    (
        "bench-long-statement",
        ["bench", "--workload-file", "{in_}/long-statement.json"],
        USAGE,
        "at most",
    ),
    (
        "bench-trace-drop",
        ["bench", "--workload-file", "{in_}/trace-drop.json", "--replay-mode", "sequence"],
        USAGE,
        "connection",
    ),
    ("ab-trace-drop", ["ab", "--workload-file", "{in_}/trace-drop.json"], USAGE, "DROP"),
    ("bench-set-global", ["bench", "--workload-file", "{in_}/set-global.json"], USAGE, "SET"),
    (
        "accelerate-ddl-drop",
        ["accelerate", "--workload-file", "{in_}/ddl-drop.json", "--allow-ddl"],
        USAGE,
        "not a CREATE TABLE",
    ),
    (
        "bench-ddl-drop",
        ["bench", "--workload-file", "{in_}/ddl-drop.json"],
        USAGE,
        "not a CREATE TABLE",
    ),
    (
        "accelerate-ddl-connect",
        ["accelerate", "--workload-file", "{in_}/ddl-connect.json", "--allow-ddl"],
        USAGE,
        "ENGINE=CONNECT",
    ),
    (
        "bench-count-text",
        ["bench", "--workload-file", "{in_}/count-text.json"],
        USAGE,
        "valid integer",
    ),
    ("check-extra-field", ["capture", "--check", "{in_}/extra-field.json"], USAGE, "Extra inputs"),
    (
        "ab-count-negative",
        ["ab", "--workload-file", "{in_}/count-negative.json"],
        USAGE,
        "greater than or equal to 0",
    ),
    ("bench-threads", ["bench", "--workload-file", "{in_}/threads.json"], USAGE, "100000"),
    ("bench-nan", ["bench", "--workload-file", "{in_}/nan.json"], USAGE, "finite number"),
    ("bench-nested", ["bench", "--workload-file", "{in_}/nested.json"], USAGE, "nested deeper"),
    ("ab-nested", ["ab", "--workload-file", "{in_}/nested.json"], USAGE, "nested deeper"),
    (
        "accelerate-nested",
        ["accelerate", "--workload-file", "{in_}/nested.json"],
        USAGE,
        "nested deeper",
    ),
    ("check-nested", ["capture", "--check", "{in_}/nested.json"], USAGE, "nested deeper"),
    (
        "check-nested-object",
        ["capture", "--check", "{in_}/nested-object.json"],
        USAGE,
        "nested deeper",
    ),
    ("report-nested", ["report", "{in_}/nested.json"], USAGE, "nested deeper"),
    ("report-nested-object", ["report", "{in_}/nested-object.json"], USAGE, "nested deeper"),
    ("report-nested-in-dir", ["report", "{in_}/nested-dir"], USAGE, "no myaccel artifacts"),
    ("accelerate-allow-ddl-alone", ["accelerate", "--allow-ddl"], USAGE, "the capture's DDL"),
    (
        "accelerate-existing-server",
        [
            "accelerate",
            "--socket",
            "/nonexistent.sock",
            "--workload-file",
            "{in_}/capture.json",
            "--allow-ddl",
        ],
        USAGE,
        "on a sandbox only",
    ),
]


def _param(i: str, a: list[str], w: int, n: str) -> object:
    return pytest.param(a, w, n, id=i)


@pytest.mark.parametrize(("args", "want", "needle"), [_param(*c) for c in CASES])
def test_bad_workload_file(
    wenv: tuple[Env, list[object]], args: list[str], want: int, needle: str
) -> None:
    e, reached = wenv
    before = snapshot(*e.roots())
    code, out, err = run_cli(e.fmt(args))
    assert_clean_error(code, out, err, want, needle)
    assert snapshot(*e.roots()) == before, "a refused command changed files"
    assert reached == [], "a refused workload reached a server"


def test_the_refusal_is_one_line_naming_the_file_class_and_statement(
    wenv: tuple[Env, list[object]],
) -> None:
    e, _ = wenv
    code, out, err = run_cli(["bench", "--workload-file", f"{e.inputs}/drop.json"])
    line = assert_clean_error(code, out, err, USAGE, REFUSED)
    assert f"workload '{e.inputs}/drop.json' is refused: class " in line
    assert "(DROP TABLE sbtest.sbtest1): DROP is not replayed" in line
    assert "hint: a workload file may hold single DML statements" in err


def test_the_battery_is_large() -> None:
    assert len(CASES) >= 20
    assert len({c[0] for c in CASES}) == len(CASES)
    firsts = {c[1][0] for c in CASES} | {c[1][1] for c in CASES}
    assert {"bench", "ab", "accelerate", "capture", "--check", "report"} <= firsts


def test_a_capture_gets_as_far_as_the_server(wenv: tuple[Env, list[object]]) -> None:
    """The control: the same command with the capture unchanged passes every check and
    stops at the server (none here), so the cases above stop before it."""
    e, reached = wenv
    code, _out, err = run_cli(["bench", "--workload-file", f"{e.inputs}/capture.json"])
    assert code == ExitCode.CONNECTION and reached, err
