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


def apply_refused(sb: Sandbox, tmp_path: Path, doc: dict[str, Any], *extra: str) -> str:
    """Apply ``doc``; assert exit 2, one error line with a hint, and that nothing changed."""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(doc))
    home = sb.home
    before = (variables(sb), tree_hash(home, sb), sb.is_running())
    code, out, err = run(["apply", str(plan), "--sandbox", NAME, "--yes", *extra])
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


# ---------------------------------------------------------------- issue 38: every target kind

BYPASS = "[mysqld]\ninnodb_flush_log_at_trx_commit=0\ninnodb_doublewrite=0\n"
RESTART_ONLY = ("mysql:innodb_log_buffer_size", "32M", "restart")


def apply_refused_dir(sb: Sandbox, tmp_path: Path, doc: dict[str, Any], *extra: str) -> str:
    """``apply_refused`` (no journal, no file, no variable changed), and the sandbox's
    conf.d/ is not even created."""
    had_conf_d = (sb.dir / "conf.d").exists()
    line = apply_refused(sb, tmp_path, doc, *extra)
    assert (sb.dir / "conf.d").exists() == had_conf_d
    return line


def test_file_target_writing_the_managed_option_file_is_refused(
    sb: Sandbox, strict_plan: dict[str, Any], tmp_path: Path
) -> None:
    """The tester's plan: the sandbox's own 99-myaccel.cnf through file:, with both
    durability knobs off, and a restart-only knob. It was applied with exit 0 and the
    server restarted with innodb_flush_log_at_trx_commit=0 and innodb_doublewrite=0."""
    managed = sb.dir / "conf.d" / "99-myaccel.cnf"
    doc = with_recs(strict_plan, RESTART_ONLY, (f"file:{managed}", BYPASS, "restart"))
    line = apply_refused_dir(sb, tmp_path, doc)
    assert line.startswith(f"error: test-1: file:{managed} writes a file myaccel manages")
    assert "(and 2 more problems: test-1)" in line
    v = variables(sb)
    assert (v["innodb_flush_log_at_trx_commit"], v["innodb_doublewrite"]) == ("1", "ON")


@pytest.mark.parametrize(
    ("target", "content"),
    [
        ("file:{conf_d}/50-fast.cnf", BYPASS),
        ("file:{conf_d}/50-fast.cnf", "[mariadb-10.11]\nloose-skip-innodb-doublewrite\n"),
        ("file:{conf_d}/50-fast.cnf", '[client-server]\nInnodb-Flush-Log-At-Trx = "2" # x\n'),
        ("systemd:mariadb.service/ExecStart", "/usr/sbin/mariadbd --sync-binlog=0"),
        ("systemd:server/Environment", "MYSQLD_OPTS=--skip-innodb-doublewrite"),
    ],
)
def test_durability_through_any_target_kind_is_refused(
    sb: Sandbox, strict_plan: dict[str, Any], tmp_path: Path, target: str, content: str
) -> None:
    t = target.format(conf_d=sb.dir / "conf.d")
    doc = with_recs(strict_plan, (t, content, "restart"), RESTART_ONLY)
    line = apply_refused_dir(sb, tmp_path, doc)
    assert line.startswith(f"error: test-0: {t} ") and "a durability knob" in line
    assert "--durability strict" in line


def test_include_directive_is_refused(
    sb: Sandbox, strict_plan: dict[str, Any], tmp_path: Path
) -> None:
    t = f"file:{sb.dir / 'conf.d' / '50-more.cnf'}"
    doc = with_recs(strict_plan, (t, "[mysqld]\n!includedir /tmp\n", "restart"), RESTART_ONLY)
    line = apply_refused_dir(sb, tmp_path, doc)
    assert "adds `!includedir /tmp`, which makes the server read files" in line


def test_set_persist_of_a_durability_knob_is_refused(
    sb: Sandbox, strict_plan: dict[str, Any], tmp_path: Path
) -> None:
    doc = with_recs(strict_plan, ("mysql:innodb_flush_log_at_trx_commit", "2", "online"))
    line = apply_refused_dir(sb, tmp_path, doc, "--persist")
    assert "changes innodb_flush_log_at_trx_commit, a durability knob" in line


def test_buffer_pool_larger_than_the_host_memory_is_refused(
    sb: Sandbox, strict_plan: dict[str, Any], tmp_path: Path
) -> None:
    """999P is inside the catalog's range: it used to fail at the server, after the
    journal was opened (a journal and an empty conf.d/ stayed)."""
    doc = with_recs(strict_plan, ("mysql:innodb_buffer_pool_size", "999P", "online"))
    line = apply_refused_dir(sb, tmp_path, doc)
    assert "sets innodb_buffer_pool_size to 1124774006935781376 bytes (999P), more than " in line
    assert "this host's memory (MemTotal " in line
