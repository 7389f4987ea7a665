"""The Lua wrapper + report hooks against real sysbench 1.0.20 (and the session sandbox).

Each run is short (2-3 s); the tables live in a private database of the shared sandbox,
dropped at the end.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from myaccel import proc
from myaccel.bench.records import FailureKind
from myaccel.bench.sysbench_output import LUA_WRAPPER, MYACCEL_PREFIX, parse_output

if TYPE_CHECKING:
    from myaccel.server.sandbox import Sandbox

pytestmark = pytest.mark.integration

HOOK_DB = "myaccel_lua_hooks"


@pytest.fixture(scope="module")
def sysbench() -> str:
    path = proc.which("sysbench")
    if path is None:
        pytest.skip("sysbench is not installed (apt-get install sysbench)")
    return path


@pytest.fixture(scope="module")
def hook_db(
    sandbox_server: Sandbox, sysbench: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[str]]:
    """sysbench connection options for a private database with 2 x 1000 rows, prepared
    through the wrapper (so ``prepare`` via the wrapper is exercised too)."""
    params = sandbox_server.bench_params(tcp=False)
    sandbox_server.query(f"CREATE DATABASE IF NOT EXISTS `{HOOK_DB}`")
    for host in ("localhost", "127.0.0.1"):
        sandbox_server.query(f"GRANT ALL PRIVILEGES ON `{HOOK_DB}`.* TO '{params.user}'@'{host}'")
    conn = [
        "--db-driver=mysql",
        f"--mysql-socket={params.socket}",
        f"--mysql-user={params.user}",
        f"--mysql-db={HOOK_DB}",
    ]
    # the password through a private 0600 file of the test's own (never on sysbench's
    # command line); myaccel itself hands it over a pipe, read once, which these several
    # sysbench runs could not share
    cnf = tmp_path_factory.mktemp("hooks") / "sysbench.cnf"
    cnf.touch(mode=0o600)
    cnf.write_text(f'mysql-password="{params.password}"\n')
    conn.append(f"--config-file={cnf}")
    prepared = proc.run(
        [
            sysbench,
            str(LUA_WRAPPER),
            "--myaccel-workload=oltp_read_only",
            *conn,
            "--tables=2",
            "--table-size=1000",
            "prepare",
        ],
        timeout_s=120,
    )
    out = parse_output(prepared.stdout + prepared.stderr, exit_code=prepared.returncode)
    assert out.failure is FailureKind.OK, (out.failure_reasons, prepared.stdout)
    assert out.tables_created == ("sbtest1", "sbtest2")
    try:
        yield conn
    finally:
        sandbox_server.query(f"DROP DATABASE IF EXISTS `{HOOK_DB}`")


COMMON = [
    "--tables=2",
    "--table-size=1000",
    "--threads=2",
    "--report-interval=1",
    "--rand-type=uniform",
    "--histogram=off",
    "--percentile=95",
]


def myaccel_records(text: str) -> list[dict[str, object]]:
    """Every MYACCEL line must be one whole JSON object (no interleaving)."""
    records = []
    for line in text.splitlines():
        if MYACCEL_PREFIX.strip() in line:
            assert line.startswith(MYACCEL_PREFIX), line
            rec = json.loads(line[len(MYACCEL_PREFIX) :])
            assert isinstance(rec, dict)
            records.append(rec)
    return records


def without_myaccel(text: str) -> str:
    return "".join(
        line for line in text.splitlines(keepends=True) if not line.startswith(MYACCEL_PREFIX)
    )


def test_wrapper_run_prints_machine_and_human_reports(sysbench: str, hook_db: list[str]) -> None:
    cp = proc.run(
        [
            sysbench,
            str(LUA_WRAPPER),
            "--myaccel-workload=oltp_read_only",
            *hook_db,
            *COMMON,
            "--time=3",
            "run",
        ],
        timeout_s=120,
    )
    text = cp.stdout + cp.stderr
    assert cp.returncode == 0, text
    records = myaccel_records(text)
    kinds = [r["kind"] for r in records]
    assert kinds[-1] == "summary" and kinds.count("summary") == 1
    # 3 s at 1 s intervals; the last one is often lost, more can come on a loaded host.
    assert 1 <= kinds.count("interval") <= 4
    assert records[-1]["workload"] == "oltp_read_only"
    assert records[-1]["sysbench"] == "1.0.20"

    out = parse_output(text, exit_code=cp.returncode)
    assert out.failure is FailureKind.OK, out.failure_reasons
    assert all(i.source == "myaccel" for i in out.intervals)
    # The last interval may catch workers finishing ("thds: 1").
    assert out.intervals[0].threads == 2 and all(1 <= i.threads <= 2 for i in out.intervals)
    s = out.summary
    assert s is not None and s.source == "myaccel"
    assert s.transactions > 0 and s.queries_read > 0 and s.queries_write == 0
    assert s.threads == 2 and s.percentile == 95
    # The default human report is still there, complete with threads fairness.
    assert "SQL statistics:" in text and "Threads fairness:" in text
    assert s.fairness_events_avg is not None

    human = parse_output(without_myaccel(text), exit_code=cp.returncode)
    h = human.summary
    assert h is not None and h.source == "text"
    assert h.transactions == s.transactions
    assert h.queries_total == s.queries_total
    assert h.transactions_per_s == pytest.approx(s.transactions_per_s, abs=0.006)
    assert h.latency_ms_avg == pytest.approx(s.latency_ms_avg, abs=0.006)
    assert h.total_time_s == pytest.approx(s.total_time_s, abs=0.0001)
    assert [round(i.t_s) for i in out.intervals] == [i.t_s for i in human.intervals]


def test_each_thread_says_what_it_ran(sysbench: str, hook_db: list[str]) -> None:
    """Issue 35, defect 3: every worker thread ends with a line of its events, its options
    and its calls of each statement group; in a normal oltp_read_write run each group is
    called once per event, and the text of a flagged run says so."""
    from myaccel.bench.sysbench_myaccel import describe_threads

    cp = proc.run(
        [sysbench, str(LUA_WRAPPER), "--myaccel-workload=oltp_read_write", *hook_db, *COMMON,
         "--time=2", "run"],
        timeout_s=120,
    )  # fmt: skip
    text = cp.stdout + cp.stderr
    assert cp.returncode == 0, text
    out = parse_output(text, exit_code=cp.returncode)
    assert out.failure is FailureKind.OK and out.malformed_myaccel_lines == 0, out.warnings
    assert sorted(t.tid for t in out.threads_ran) == [0, 1]
    assert out.summary is not None
    assert sum(t.events for t in out.threads_ran) == out.summary.transactions
    for t in out.threads_ran:
        assert t.options["delete_inserts"] == 1 and t.options["skip_trx"] is False, t
        assert set(t.calls) >= {"execute_index_updates", "execute_delete_inserts"}, t
        assert all(n == t.events for n in t.calls.values()), t
    said = describe_threads(out.threads_ran)
    assert "2 thread(s)" in said and "delete_inserts=1" in said
    assert "delete_inserts 1.00" in said and "index_updates 1.00" in said


# A workload that makes LuaJIT's collector run all the time, then loads sysbench's own
# oltp_read_write: sysbench's reading of the workload's options then always meets a
# collection, which in a normal run happens in about 1 start in 6 (issue 35, defect 3).
GC_STRESSED_READ_WRITE = """\
collectgarbage("setpause", 0)
collectgarbage("setstepmul", 100000)
collectgarbage("collect")
dofile(assert(package.searchpath("oltp_read_write", package.path)))
"""


def _gc_stressed_workload(tmp_path: Path) -> Path:
    script = tmp_path / "gc_stressed_read_write.lua"
    script.write_text(GC_STRESSED_READ_WRITE)
    return script


def test_option_defaults_survive_a_collection_while_sysbench_reads_them(
    sysbench: str, tmp_path: Path
) -> None:
    """Issue 35, defect 3, its cause: sysbench 1.0.20 hands each numeric option default to C
    as a pointer into a Lua string nothing holds; a collection while it reads them turns
    the defaults into garbage (`help` shows "[(]", a run reads 0). The wrapper keeps those
    strings alive, so the defaults stay what the workload declares."""
    cp = proc.run(
        [sysbench, str(LUA_WRAPPER), f"--myaccel-workload={_gc_stressed_workload(tmp_path)}",
         "help"],
        timeout_s=60,
    )  # fmt: skip
    text = cp.stdout + cp.stderr
    defaults = dict(re.findall(r"--(\w+)=N .*\[([^\]]*)\]", text))
    assert defaults, text
    assert defaults["delete_inserts"] == "1" and defaults["index_updates"] == "1", defaults
    assert defaults["point_selects"] == "10" and defaults["table_size"] == "10000", defaults
    assert defaults["range_size"] == "100" and defaults["tables"] == "1", defaults


def test_a_run_under_collections_still_runs_the_whole_transaction(
    sysbench: str, hook_db: list[str], tmp_path: Path
) -> None:
    """The same stress in a real run: every thread reads delete_inserts = 1 and the run
    makes 20 statements per transaction, 4 of them writes (without the fix: 0, and 18
    statements with 2 writes, the shape of the runs left out as "not the workload")."""
    cp = proc.run(
        [sysbench, str(LUA_WRAPPER), f"--myaccel-workload={_gc_stressed_workload(tmp_path)}",
         *hook_db, *COMMON, "--time=2", "run"],
        timeout_s=120,
    )  # fmt: skip
    text = cp.stdout + cp.stderr
    assert cp.returncode == 0, text
    out = parse_output(text, exit_code=cp.returncode)
    assert out.summary is not None and out.summary.transactions > 0, text
    assert [t.options["delete_inserts"] for t in out.threads_ran] == [1, 1], out.threads_ran
    statements = out.summary.queries_total / out.summary.transactions
    writes = out.summary.queries_write / out.summary.transactions
    assert 19.9 < statements < 20.1 and 3.9 < writes < 4.1, (statements, writes)


def test_wrapper_checkpoints_and_lua_fallback(sysbench: str, hook_db: list[str]) -> None:
    """Workload from the environment, C reporters disabled (Lua fallback text), and
    --report-checkpoints: cumulative hooks then run in the checkpoint thread too."""
    cp = proc.run(
        [
            sysbench,
            str(LUA_WRAPPER),
            *hook_db,
            *COMMON,
            "--time=3",
            "--report-checkpoints=1,2",
            "run",
        ],
        env={"MYACCEL_WORKLOAD": "oltp_point_select", "MYACCEL_NO_FFI": "1"},
        timeout_s=120,
    )
    text = cp.stdout + cp.stderr
    assert cp.returncode == 0, text
    kinds = [r["kind"] for r in myaccel_records(text)]
    assert kinds.count("checkpoint") == 2 and kinds[-1] == "summary"

    out = parse_output(text, exit_code=cp.returncode)
    assert out.failure is FailureKind.OK, out.failure_reasons
    assert [round(c.checkpoint_at_s or 0) for c in out.checkpoints] == [1, 2]
    s = out.summary
    assert s is not None and s.window_s is not None
    # The final summary covers only the time after the last checkpoint.
    assert s.window_s < s.total_time_s - 1.5
    assert s.fairness_events_avg is None  # not printed by the Lua fallback
    assert "Threads fairness:" not in text  # the Lua fallback cannot print it
    # Human and machine interval reports come in pairs, each line whole.
    assert len(re.findall(r"^\[ \d+s \] thds: ", text, re.MULTILINE)) == kinds.count("interval")

    human = parse_output(without_myaccel(text))
    assert human.summary is not None and human.summary.transactions == s.transactions
    assert len(human.checkpoints) == 2


def test_wrapper_works_without_a_database(sysbench: str, tmp_path: Path) -> None:
    """Any Lua workload, here one that needs no server: the hooks still report."""
    workload = tmp_path / "noop.lua"
    workload.write_text("function event()\nend\n")
    cp = proc.run(
        [
            sysbench,
            str(LUA_WRAPPER),
            f"--myaccel-workload={workload}",
            "--threads=1",
            "--rate=2000",
            "--time=2",
            "--report-interval=1",
            "run",
        ],
        cwd=tmp_path,
        timeout_s=60,
    )
    text = cp.stdout + cp.stderr
    assert cp.returncode == 0, text
    out = parse_output(text, exit_code=cp.returncode)
    assert out.summary is not None and out.summary.source == "myaccel"
    assert out.summary.transactions > 0 and out.summary.queries_total == 0
    assert "General statistics:" in text  # sysbench's generic (non-SQL) summary
    assert len(out.intervals) == text.count('"kind":"interval"')
    assert out.failure is FailureKind.OK, out.failure_reasons


def test_wrapper_without_workload_fails_clearly(sysbench: str, tmp_path: Path) -> None:
    cp = proc.run(
        [sysbench, str(LUA_WRAPPER), "run"],
        env={"MYACCEL_WORKLOAD": ""},
        cwd=tmp_path,
        timeout_s=60,
    )
    text = cp.stdout + cp.stderr
    assert cp.returncode == 1
    out = parse_output(text, exit_code=cp.returncode)
    assert out.failure is FailureKind.FATAL_ERROR
    assert "no workload given" in out.fatal_errors[0].line

    cp = proc.run(
        [sysbench, str(LUA_WRAPPER), "--myaccel-workload=no_such_workload", "run"],
        cwd=tmp_path,
        timeout_s=60,
    )
    assert cp.returncode == 1
    assert "workload 'no_such_workload' not found" in cp.stdout + cp.stderr
