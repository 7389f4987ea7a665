"""apply's guard on a real MariaDB sandbox: durability-knob changes from a strict (or
hand-edited) plan and out-of-range values are refused with exit 2, and nothing changes:
server variables, option files and everything under $MYACCEL_HOME (journals included)
hash the same before and after. A sealed relaxed plan is applied (the guard is not a wall)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from myaccel.cli.main import cli
from myaccel.server.connection import connect, query_rows
from myaccel.server.sandbox import Sandbox

pytestmark = pytest.mark.integration

NAME = "guard"
# volatile files of a running server: the datadir, its temp dir and the error log
VOLATILE = ("data", "tmp", "mysqld.err")


def run(args: list[str]) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, args)
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture(scope="module")
def sb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    home = tmp_path_factory.mktemp("guard-home")
    mp = pytest.MonkeyPatch()
    mp.setenv("MYACCEL_HOME", str(home))
    s = Sandbox.init(NAME, home=home, timeout_s=120)
    try:
        yield s
    finally:
        s.destroy()
        mp.undo()


@pytest.fixture(scope="module")
def strict_plan(sb: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    p = tmp_path_factory.mktemp("guard-plan") / "plan.json"
    code, _, err = run(["plan", "--sandbox", NAME, "--layers", "server", "--out", str(p)])
    assert code == 0, err
    doc: dict[str, Any] = json.loads(p.read_text())
    assert doc["durability"] == "strict" and doc["digest"]
    return doc


def variables(sb: Sandbox) -> dict[str, str]:
    conn = connect(sb.connect_params())
    try:
        return {str(n): str(v) for n, v in query_rows(conn, "SHOW GLOBAL VARIABLES")}
    finally:
        conn.close()


def tree_hash(home: Path, sb: Sandbox) -> dict[str, str]:
    """Path -> sha256 of every file under MYACCEL_HOME (option files, journals and their
    lock, sandbox state, pid file) but the running server's datadir, temp dir and error
    log."""
    out: dict[str, str] = {}
    for f in sorted(home.rglob("*")):
        rel = f.relative_to(home)
        inside = f.relative_to(sb.dir).parts if f.is_relative_to(sb.dir) else ()
        if inside and inside[0] in VOLATILE:
            continue
        if f.is_file():  # directories aside: apply still makes an empty conf.d/ (issue 15.7)
            out[str(rel)] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def with_recs(doc: dict[str, Any], *changes: tuple[str, str, str]) -> dict[str, Any]:
    new = json.loads(json.dumps(doc))
    base = doc["recommendations"][0]
    new["recommendations"] = [
        dict(base, id=f"test-{i}", target=t, proposed=v, risk=risk, current=None)
        for i, (t, v, risk) in enumerate(changes)
    ]
    return new


def apply_refused(sb: Sandbox, tmp_path: Path, doc: dict[str, Any]) -> str:
    """Apply ``doc``; assert exit 2, one error line with a hint, and that nothing changed."""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(doc))
    home = sb.home
    before = (variables(sb), tree_hash(home, sb), sb.is_running())
    code, out, err = run(["apply", str(plan), "--sandbox", NAME, "--yes"])
    after = (variables(sb), tree_hash(home, sb), sb.is_running())
    assert code == 2, (code, out, err)
    assert out == ""  # not one `change ...` line
    lines = err.splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: ")
    assert "Traceback" not in err
    for b, a in zip(before[:2], after[:2], strict=True):
        assert {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)} == set()
    assert after == before
    assert not (sb.dir / "conf.d" / "99-myaccel.cnf").exists()
    return lines[0]


@pytest.mark.parametrize(
    ("target", "value", "risk"),
    [
        ("mysql:innodb_flush_log_at_trx_commit", "0", "online"),
        ("mysql:sync_binlog", "0", "online"),
        ("mysql:innodb_doublewrite", "0", "restart"),
        ("mysql:innodb_flush_method", "O_DSYNC", "restart"),
    ],
)
def test_strict_plan_with_a_durability_change_is_refused(
    sb: Sandbox, strict_plan: dict[str, Any], tmp_path: Path, target: str, value: str, risk: str
) -> None:
    doc = with_recs(
        strict_plan, ("mysql:innodb_io_capacity", "400", "online"), (target, value, risk)
    )
    line = apply_refused(sb, tmp_path, doc)
    assert f"test-1: {target} = {value} changes" in line and "durability knob" in line


def test_relaxed_by_hand_is_refused(
    sb: Sandbox, strict_plan: dict[str, Any], tmp_path: Path
) -> None:
    doc = with_recs(strict_plan, ("mysql:innodb_flush_log_at_trx_commit", "2", "online"))
    doc["durability"] = "relaxed"
    line = apply_refused(sb, tmp_path, doc)
    assert "digest does not match its content" in line


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("-5", "below the minimum 2097152 (2M)"),
        ("64E", "above the maximum"),
        ("1.5G", "not a size"),
    ],
)
def test_out_of_range_value_is_refused(
    sb: Sandbox, strict_plan: dict[str, Any], tmp_path: Path, value: str, words: str
) -> None:
    doc = with_recs(strict_plan, ("mysql:innodb_buffer_pool_size", value, "online"))
    line = apply_refused(sb, tmp_path, doc)
    assert f"innodb_buffer_pool_size = {value} is not valid on MariaDB 10." in line
    assert words in line and "source: https://mariadb.com/kb/" in line


def test_dry_run_is_refused_too(sb: Sandbox, strict_plan: dict[str, Any], tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(with_recs(strict_plan, ("mysql:sync_binlog", "0", "online"))))
    code, out, err = run(["apply", str(plan), "--sandbox", NAME, "--dry-run"])
    assert code == 2 and out == "" and "durability knob" in err


def test_sealed_relaxed_plan_is_applied_and_rolled_back(sb: Sandbox, tmp_path: Path) -> None:
    plan = tmp_path / "relaxed.json"
    make = ["plan", "--sandbox", NAME, "--layers", "server", "--durability", "relaxed"]
    code, _, err = run([*make, "--out", str(plan)])
    assert code == 0, err
    ids = {r["id"] for r in json.loads(plan.read_text())["recommendations"]}
    assert "durability-flush-log-at-trx-commit" in ids
    assert variables(sb)["innodb_flush_log_at_trx_commit"] == "1"
    only = ["--only", "durability-flush-log-at-trx-commit"]
    code, out, err = run(["apply", str(plan), "--sandbox", NAME, "--yes", *only])
    assert code == 0, err
    # a durability recommendation is applied through the option file and a restart
    assert "change mycnf:mysqld/innodb_flush_log_at_trx_commit: None -> 2" in out
    assert variables(sb)["innodb_flush_log_at_trx_commit"] == "2"
    code, _, err = run(["rollback"])
    assert code == 0, err
    assert variables(sb)["innodb_flush_log_at_trx_commit"] == "1"
