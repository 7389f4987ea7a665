"""Hostile workload files against a real MariaDB 10.11 sandbox: `bench`, `ab`, `capture
--check` and `accelerate` refuse them (exit 2, one error line) and the sandbox's tables are
intact afterwards (the sbtest tables with their rows, the captured schema's); a capture's
DDL runs only with --allow-ddl and only as checked; a legit capture still replays (text
outside ASCII included: the replay's connections say SET NAMES utf8mb4).

Each command runs as a process with a timeout: before the fix a replayed DROP TABLE left
the run hanging, which must fail the test, not stall it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from myaccel.bench import replay
from myaccel.bench.workload import Workload
from myaccel.capture import demo
from myaccel.errors import UsageError
from myaccel.server.sandbox import Sandbox

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from workload_files import SHOP_DDL, legit_doc, with_example

pytestmark = pytest.mark.integration

MYACCEL = str(Path(sys.executable).parent / "myaccel")
SBTEST_ROWS = 50


class Box:
    def __init__(self, home: Path, sb: Sandbox) -> None:
        self.home, self.sb = home, sb

    def run(self, *args: str, timeout: float = 180) -> tuple[int, str, str]:
        env = {**os.environ, "MYACCEL_HOME": str(self.home)}
        try:
            r = subprocess.run(
                [MYACCEL, *args],
                capture_output=True,
                text=True,
                env=env,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"myaccel {' '.join(args)} did not end in {timeout} s: {exc.stderr!r}")
        return r.returncode, r.stdout, r.stderr

    def tables(self) -> dict[str, int]:
        """schema.table -> rows, of every table outside the system schemas."""
        names = self.sb.query(
            "SELECT table_schema, table_name FROM information_schema.TABLES WHERE "
            "table_schema NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')"
        )
        return {
            f"{s}.{t}": int(self.sb.query(f"SELECT COUNT(*) FROM `{s}`.`{t}`")[0][0])
            for s, t in names
        }


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Box]:
    home = tmp_path_factory.mktemp("workload-guard")
    sb = Sandbox.init("wguard", home=home, timeout_s=180)
    try:
        demo.create_schema(sb.connect_params())  # shop: items (2,000 rows) and orders
        sb.query(
            "CREATE TABLE sbtest.sbtest1 (id INT PRIMARY KEY, k INT, c CHAR(120), pad CHAR(60))"
        )
        sb.query(
            f"INSERT INTO sbtest.sbtest1 SELECT seq, seq, 'c', 'p' FROM sbtest.seq_1_to_{SBTEST_ROWS}"
        )
        yield Box(home, sb)
    finally:
        sb.destroy()


def _file(tmp_path: Path, name: str, doc: object) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc))
    return str(path)


def _trace_drop() -> dict[str, Any]:
    d = legit_doc()
    replayed = {c["id"] for c in d["classes"] if c["replayable"]}
    for t in d["connections"]:
        for st in t["statements"]:
            if st["class_id"] in replayed:
                st["sql"] = "DROP TABLE sbtest.sbtest1"
    return d


def _ddl_drop() -> dict[str, Any]:
    d = legit_doc()
    d["schemas"][0]["name"] = "shop2"
    d["schemas"][0]["ddl"] = [
        "CREATE DATABASE `shop2`",
        *SHOP_DDL[1:],
        "DROP TABLE sbtest.sbtest1",
    ]
    for c in d["classes"]:
        c["schema_name"] = "shop2"
    return d


HOSTILE: dict[str, Any] = {
    "drop": lambda: with_example("DROP TABLE sbtest.sbtest1"),
    "multi": lambda: with_example("SELECT 1; DROP TABLE sbtest.sbtest1"),
    "exec-comment": lambda: with_example("SELECT 1 /*! ; DROP TABLE sbtest.sbtest1 */"),
    "dash-dash": lambda: with_example("SELECT 1 --1; DROP TABLE sbtest.sbtest1"),
    "backslash": lambda: with_example("SELECT 'a\\'; DROP TABLE sbtest.sbtest1; -- '"),
    "trace-drop": _trace_drop,
    "ddl-drop": _ddl_drop,
}


def _assert_refused(code: int, err: str, needle: str) -> None:
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    hints = [ln for ln in err.splitlines() if ln.startswith("hint:")]
    assert code == 2 and len(errors) == 1 and len(hints) == 1, err
    assert needle in errors[0] and "Traceback" not in err, err


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_file_is_refused_and_the_tables_stay(box: Box, tmp_path: Path, name: str) -> None:
    before = box.tables()
    assert before["sbtest.sbtest1"] == SBTEST_ROWS and before["shop.items"] == demo.ITEMS
    path = _file(tmp_path, name, HOSTILE[name]())
    replay_opts = ["--time", "3", "--warmup", "0", "--runs", "1"]
    for args in (
        ["bench", "--sandbox", box.sb.name, "--workload-file", path, *replay_opts],
        ["bench", "--sandbox", box.sb.name, "--workload-file", path, "--replay-mode", "sequence"],
        ["ab", "--sandbox", box.sb.name, "--workload-file", path, *replay_opts],
        ["capture", "--sandbox", box.sb.name, "--check", path, "--duration", "1"],
        ["accelerate", "--sandbox", box.sb.name, "--workload-file", path, "--allow-ddl"],
    ):
        code, _, err = box.run(*args)
        _assert_refused(code, err, "is refused")
    assert box.tables() == before


def test_a_statement_on_another_schema_of_the_server_is_refused(box: Box, tmp_path: Path) -> None:
    """Nothing in the file says sbtest: the check against the server refuses it."""
    before = box.tables()
    path = _file(tmp_path, "other", with_example("DELETE FROM sbtest.sbtest1 WHERE id > 0"))
    for args in (
        ["bench", "--sandbox", box.sb.name, "--workload-file", path, "--time", "3", "--runs", "1"],
        ["capture", "--sandbox", box.sb.name, "--check", path, "--duration", "1"],
    ):
        code, _, err = box.run(*args)
        _assert_refused(code, err, "names schema 'sbtest' of this server")
    assert box.tables() == before


def test_accelerate_runs_no_ddl_without_allow_ddl(box: Box, tmp_path: Path) -> None:
    d = legit_doc()
    d["schemas"][0]["name"] = "shop3"
    d["schemas"][0]["ddl"] = ["CREATE DATABASE `shop3`", *SHOP_DDL[1:]]
    for c in d["classes"]:
        c["schema_name"] = "shop3"
    path = _file(tmp_path, "shop3", d)
    before = box.tables()
    code, _, err = box.run("accelerate", "--sandbox", box.sb.name, "--workload-file", path)
    _assert_refused(code, err, "lacks schema(s) shop3")
    assert "--allow-ddl" in err
    assert box.tables() == before


def test_the_ddl_creates_the_schema_as_checked(box: Box) -> None:
    w = Workload.model_validate(_ddl_drop())  # a file's DDL changed after its check
    with pytest.raises(UsageError, match="DDL of schema 'shop2'"):
        replay.create_schemas(box.sb.connect_params(), w, allow_ddl=True)
    assert "shop2" not in {k.split(".")[0] for k in box.tables()}
    s = w.schemas[0].model_copy(update={"ddl": w.schemas[0].ddl[:-1]})
    ok = w.model_copy(update={"schemas": [s]})
    before = box.tables()
    try:
        assert replay.create_schemas(box.sb.connect_params(), ok, allow_ddl=True) == ["shop2"]
        after = box.tables()
        assert after == {**before, "shop2.items": 0, "shop2.orders": 0}
    finally:
        box.sb.query("DROP DATABASE IF EXISTS shop2")


def test_a_capture_still_replays(box: Box, tmp_path: Path) -> None:
    """The legit file (and one with text outside ASCII) replays, valid runs and no error."""
    d = with_example("SELECT name, price FROM items WHERE name = 'café' OR id = 7")
    for name, doc in (("legit", legit_doc()), ("utf8", d)):
        path = _file(tmp_path, name, doc)
        code, out, err = box.run(
            "bench", "--sandbox", box.sb.name, "--workload-file", path, "--time", "2",
            "--warmup", "0", "--runs", "1", "--replay-mode", "sequence",
        )  # fmt: skip
        assert code == 0, err
        assert "| 1 (1) |" in out, out
