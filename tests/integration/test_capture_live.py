"""Capture and replay on real servers, MariaDB 10.11 (general log) and MySQL 9.7
(performance_schema): the demo driver runs a known mix on a schema of its own; `myaccel
capture` records it on one sandbox; `myaccel capture --check` replays it on a second
sandbox holding the same schema and captures the replay. Asserted: the known classes and
their shares, the replayed mix within 5 points per class, the server's settings exactly as
before (journal rolled back), the capture's cost printed, `rollback` after a crash, a
timed replay (`--replay-mode timed`: each connection's captured gaps) that runs, the
demo's mix through its sysbench driver in MIX's proportions. Times are printed, never asserted (scripts/capture_fidelity.py is the 20 s benchmark)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from myaccel.actions import apply_changes
from myaccel.actions.settings import setting_for
from myaccel.actions.target import sandbox_target
from myaccel.bench.workload import load_workload
from myaccel.capture import demo
from myaccel.capture.fidelity import compare, format_fidelity
from myaccel.cli.main import cli
from myaccel.server.connection import connect
from myaccel.server.sandbox import Sandbox

pytestmark = pytest.mark.integration

WINDOW = ["--duration", "2", "--baseline", "1"]


class Pair:
    """A flavor's two sandboxes (capture on ``a``, replay on ``b``) in one MYACCEL_HOME."""

    def __init__(self, home: Path, a: Sandbox, b: Sandbox) -> None:
        self.home, self.a, self.b = home, a, b

    def run(self, *args: str) -> tuple[int, str, str]:
        r = CliRunner().invoke(cli, list(args), env={"MYACCEL_HOME": str(self.home)})
        return r.exit_code, r.stdout, r.stderr


def _pair(
    tmp: pytest.TempPathFactory, flavor: str, basedir: Path | None, mp: pytest.MonkeyPatch
) -> Iterator[Pair]:
    home = tmp.mktemp(f"capture-{flavor}")
    mp.setenv("MYACCEL_HOME", str(home))
    made: list[Sandbox] = []
    try:
        for name in (f"cap-{flavor}-a", f"cap-{flavor}-b"):
            sb = Sandbox.init(name, basedir=basedir, home=home, timeout_s=180, flavor=flavor)
            made.append(sb)
            demo.create_schema(sb.connect_params())
        yield Pair(home, made[0], made[1])
    finally:
        for sb in made:
            sb.destroy()


@pytest.fixture(scope="module")
def module_mp() -> Iterator[pytest.MonkeyPatch]:
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


@pytest.fixture(scope="module")
def mariadb(
    tmp_path_factory: pytest.TempPathFactory, module_mp: pytest.MonkeyPatch
) -> Iterator[Pair]:
    yield from _pair(tmp_path_factory, "mariadb", None, module_mp)


@pytest.fixture(scope="module")
def mysql(
    tmp_path_factory: pytest.TempPathFactory,
    mysql_basedir: Path | None,
    module_mp: pytest.MonkeyPatch,
) -> Iterator[Pair]:
    yield from _pair(tmp_path_factory, "mysql", mysql_basedir, module_mp)


def _settings(sb: Sandbox) -> dict[str, Any]:
    """Everything a capture may switch: global variables and performance_schema consumers."""
    out: dict[str, Any] = {
        str(k): v for k, v in sb.query("SHOW GLOBAL VARIABLES") if not str(k).startswith("gtid_")
    }  # the GTID positions move with every write: they are state, not settings
    if str(out.get("performance_schema")) in ("ON", "1"):
        out["consumers"] = sorted(
            sb.query("SELECT NAME, ENABLED FROM performance_schema.setup_consumers")
        )
    return out


def _capture_and_replay(p: Pair, tmp_path: Path, source: str) -> Path:
    before = _settings(p.a)
    w_path, r_path = tmp_path / "w.json", tmp_path / "r.json"
    driver = demo.Driver(p.a.connect_params(), threads=4).start()
    try:
        code, out, err = p.run("capture", "--sandbox", p.a.name, *WINDOW, "--out", str(w_path))
    finally:
        driver.stop()
    assert code == 0, err
    print(out)
    assert "capture cost:" in out
    assert _settings(p.a) == before  # exactly as before the capture
    w = load_workload(w_path)
    assert w.source == source and w.concurrency.connections == 4
    assert [s.name for s in w.schemas] == [demo.SCHEMA]
    shares = {c.text: c.share_pct for c in w.classes}
    for share, text in demo.MIX:
        assert abs(shares.get(text, 0) - 100 * share) <= 5, (text, shares)
    assert w.journal and json.loads(Path(w.journal).read_text())["status"] == "rolled-back"

    code, out, err = p.run(
        "capture",
        "--sandbox",
        p.b.name,
        "--check",
        str(w_path),
        "--duration",
        "3",
        "--baseline",
        "0",
        "--out",
        str(r_path),
    )
    assert code == 0, err
    print(out)
    fid = compare(w, load_workload(r_path))
    assert {r.text for r in fid.rows} == {text for _, text in demo.MIX}, format_fidelity(fid)
    assert fid.mix_matches, format_fidelity(fid)
    assert fid.replayed_connections == 4
    ddl = w.schemas[0].ddl  # what a sandbox without the schema is given
    assert ddl[0].startswith("CREATE DATABASE") and len(ddl) == 1 + len(w.schemas[0].tables)
    return w_path


def _timed_replay(p: Pair, w_path: Path, tmp_path: Path, gaps: str) -> None:
    """`bench --replay-mode timed` for 2 s: every connection traced with its gaps, the
    replay issues statements (its rate printed against the captured one)."""
    t0 = time.monotonic()
    w = load_workload(w_path)
    shape = [(t.id, len(t.statements), t.statements[-1].gap_us) for t in w.connections]
    assert w.trace_gaps == gaps and len(w.connections) == 4, (w.trace_gaps, shape)
    assert all(n > 1 and g is not None for _, n, g in shape), shape
    out = tmp_path / "timed"
    code, _out, err = p.run(
        "bench",
        "--sandbox",
        p.b.name,
        "--workload-file",
        str(w_path),
        "--replay-mode",
        "timed",
        *("--time", "2", "--warmup", "0", "--runs", "1", "--out", str(out)),
    )
    assert code == 0, (code, _out, err)
    run = json.loads(next(out.rglob("run-001.json")).read_text())
    assert run["summary"]["queries"] > 0, run["summary"]
    assert run["replay"]["mode"] == "timed"  # (the script itself is removed with the run)
    print(
        f"timed replay: {run['summary']['qps']:,.0f} statements/s (captured "
        f"{w.statements_per_s:,.0f}), {time.monotonic() - t0:.1f} s"
    )


def test_mariadb_general_log(mariadb: Pair, tmp_path: Path) -> None:
    w_path = _capture_and_replay(mariadb, tmp_path, "general_log")
    _timed_replay(mariadb, w_path, tmp_path, "start-to-start")
    # each connection's statements in order, at the captured rate
    code, _out, err = mariadb.run(
        "bench",
        "--sandbox",
        mariadb.b.name,
        "--workload-file",
        str(w_path),
        "--replay-mode",
        "sequence",
        "--paced",
        "--time",
        "2",
        "--warmup",
        "0",
        "--runs",
        "1",
        "--out",
        str(tmp_path / "seq"),
    )
    assert code == 0, err
    run = json.loads(next((tmp_path / "seq").rglob("run-001.json")).read_text())
    assert run["summary"]["queries"] > 0 and "--rate=" in " ".join(run["command"])
    # PGO training's replay (build --train W.json) on a new server: the schema from the DDL
    from myaccel.builder.train import ReplayWorkload, train_sandbox
    from myaccel.server.sandbox.install import find_server

    with (tmp_path / "train.log").open("w") as log:
        detail = train_sandbox(
            find_server(flavor="mariadb").basedir,
            tmp_path / "train-home",
            ReplayWorkload(str(w_path), "train", duration_s=2),
            log,
        )
    assert detail["runs"][0]["statements_per_s"] > 0, (tmp_path / "train.log").read_text()


def test_sysbench_driver_runs_the_mix(mariadb: Pair, tmp_path: Path) -> None:
    """The demo's mix through sysbench (`demo.SysbenchDriver`, lua/myaccel_demo_mix.lua),
    captured for 2 s: the five classes in MIX's proportions (within 5 points), one
    connection per sysbench thread."""
    t0 = time.monotonic()
    w_path = tmp_path / "w.json"
    driver = demo.start_driver("sysbench", mariadb.a.connect_params(), threads=2, time_s=60)
    try:
        code, _out, err = mariadb.run(
            "capture", "--sandbox", mariadb.a.name, *WINDOW, "--out", str(w_path)
        )
    finally:
        driver.stop()
    assert code == 0, err
    w = load_workload(w_path)
    assert w.concurrency.connections == 2
    assert {c.text for c in w.replay_classes()} == {text for _, text in demo.MIX}
    shares = {c.text: c.share_pct for c in w.classes}
    for share, text in demo.MIX:
        assert abs(shares.get(text, 0) - 100 * share) <= 5, (text, shares)
    print(
        f"sysbench driver: {w.statements_per_s:,.0f} statements/s at 2 connections, "
        f"{time.monotonic() - t0:.1f} s"
    )


def test_mysql_performance_schema(mysql: Pair, tmp_path: Path) -> None:
    w_path = _capture_and_replay(mysql, tmp_path, "performance_schema")
    _timed_replay(mysql, w_path, tmp_path, "end-to-start")


def test_rollback_after_a_crash(mysql: Pair) -> None:
    """A capture that died with its switches on: `myaccel rollback` puts them back."""
    sb = mysql.b
    before = _settings(sb)
    target = "pfs-consumer:events_statements_history_long"
    params = sb.connect_params()
    apply_changes(
        [(setting_for(target, connect=lambda: connect(params)), "YES")],
        server=sandbox_target(sb.name).describe(),
        keep_open=True,  # as capture leaves it until its window ends
    )
    assert _settings(sb) != before
    code, out, err = mysql.run("rollback")
    assert code == 0, err
    assert f"reverted {target}" in out
    assert _settings(sb) == before
