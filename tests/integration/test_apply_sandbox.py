"""`myaccel plan` -> `apply` -> `verify` -> `rollback` on a real MariaDB sandbox, including
a value the server rejects at startup (automatic rollback)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from myaccel.cli.main import cli
from myaccel.server.connection import connect, query_value
from myaccel.server.sandbox import Sandbox

pytestmark = pytest.mark.integration


def run(args: list[str]) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, args)
    return r.exit_code, r.stdout, r.stderr


def var(sb: Sandbox, name: str) -> str:
    conn = connect(sb.connect_params())
    try:
        return str(query_value(conn, f"SELECT @@GLOBAL.{name}"))
    finally:
        conn.close()


@pytest.fixture
def sb(myaccel_home: Path) -> Sandbox:
    s = Sandbox.init("apply", timeout_s=120)
    yield s
    s.destroy()


def make_plan(tmp_path: Path, sandbox: str) -> Path:
    p = tmp_path / "plan.json"
    code, _, err = run(["plan", "--sandbox", sandbox, "--layers", "server", "--out", str(p)])
    assert code == 0, err
    return p


def test_apply_verify_rollback(sb: Sandbox, tmp_path: Path) -> None:
    plan = make_plan(tmp_path, "apply")
    recs = {r["id"]: r for r in json.loads(plan.read_text())["recommendations"]}
    # this machine's plan has a dynamic knob (buffer pool) and a restart-only one (log buffer)
    assert recs["server-buffer-pool-size"]["risk"] == "online"
    assert recs["server-log-buffer"]["risk"] == "restart"
    before = {n: var(sb, n) for n in ("innodb_buffer_pool_size", "innodb_log_buffer_size")}
    cnf = sb.dir / "conf.d" / "99-myaccel.cnf"

    code, out, err = run(["apply", str(plan), "--sandbox", "apply", "--dry-run"])
    assert code == 0, err
    assert "would change mycnf:mysqld/innodb_log_buffer_size" in out and not cnf.exists()

    code, out, err = run(["apply", str(plan), "--sandbox", "apply", "--yes"])
    assert code == 0, err
    assert var(sb, "innodb_log_buffer_size") == str(64 * 1024**2)  # restart-only: after the restart
    assert var(sb, "innodb_buffer_pool_size") != before["innodb_buffer_pool_size"]
    assert cnf.is_file() and "Managed by myaccel" in cnf.read_text()
    assert run(["verify"])[0] == 0

    # a second apply is refused while nothing is rolled back? no: it finds nothing to change
    code, out, _ = run(["apply", str(plan), "--sandbox", "apply", "--yes"])
    assert code == 0 and "nothing to change" in out

    code, out, err = run(["rollback"])
    assert code == 0, err
    assert {n: var(sb, n) for n in before} == before
    assert not cnf.exists()
    assert sb.status().active_config in (None, "", "base") or "base" in str(
        sb.status().active_config
    )


def test_rejected_value_rolls_back_automatically(
    sb: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The guard now refuses a pool beyond the host's memory before anything happens
    # (test_guard_live.py); blind it to memory here so that a value the server cannot
    # start with still reaches the restart, whose failure must roll back on its own.
    monkeypatch.setattr("myaccel.actions.guard.host_memory", lambda facts: None)
    plan = make_plan(tmp_path, "apply")
    doc = json.loads(plan.read_text())
    bad = dict(doc["recommendations"][0])
    # valid for the catalog (apply's guard lets it through), but no memory for it at startup
    bad.update(
        id="test-bad-value",
        target="mysql:innodb_buffer_pool_size",
        current=None,
        proposed="64T",
        risk="restart",
    )
    pool = var(sb, "innodb_buffer_pool_size")
    doc["recommendations"] = [bad]
    plan.write_text(json.dumps(doc))
    code, _, err = run(["apply", str(plan), "--sandbox", "apply", "--yes"])
    assert code != 0
    assert "did not come back healthy" in err and "rolled back" in err
    assert sb.is_running()
    assert var(sb, "innodb_buffer_pool_size") == pool
    assert not (sb.dir / "conf.d" / "99-myaccel.cnf").exists()


def test_plan_of_another_host_is_refused(sb: Sandbox, tmp_path: Path) -> None:
    plan = make_plan(tmp_path, "apply")
    doc = json.loads(plan.read_text())
    doc["facts_digest"] = "0000000000000000"
    plan.write_text(json.dumps(doc))
    code, _, err = run(["apply", str(plan), "--sandbox", "apply", "--yes"])
    assert code == 2 and err.startswith("error: this plan was made for other facts")
    assert not (sb.dir / "conf.d" / "99-myaccel.cnf").exists()
