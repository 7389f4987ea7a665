"""Timed replay (``--replay-mode timed``): the gaps between a connection's statements taken
from performance_schema rows and general-log lines, carried into the replay's steps, and
the Lua engine's schedule run by sysbench itself against a stub driver (no server)."""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from myaccel.bench.replay import replay_lua, trace_steps, write_replay_script
from myaccel.bench.trace_gaps import spread_starts, timed_traces, with_gaps
from myaccel.bench.workload import Concurrency, Workload
from myaccel.capture import assemble
from myaccel.capture.assemble import Event, build_classes
from myaccel.capture.general_log import parse_general_log
from myaccel.capture.pfs import PerformanceSchemaSource
from myaccel.cli.main import cli
from myaccel.errors import UsageError

PS_PER_US = 10**6
T0 = 5_000_000 * PS_PER_US  # the server's timer at the first statement (5 s)


def _row(thread: int, event: int, start_us: float, wait_us: float, sql: str) -> tuple[Any, ...]:
    start = T0 + int(start_us * PS_PER_US)
    wait = int(wait_us * PS_PER_US)
    return (thread, event, start, start + wait, wait, sql, "shop", 1, 0, 1)


# performance_schema rows (events_statements_history_long) of two client threads and ours
PFS_ROWS = [
    _row(50, 10, 0, 200, "SELECT a FROM t WHERE id = 1"),
    _row(50, 11, 550, 100, "SET @x = 1"),  # 350 us after the end of the first
    _row(50, 12, 1_000, 300, "SELECT a FROM t WHERE id = 2"),  # 350 after the SET's end
    _row(50, 13, 1_300, 50, "UPDATE t SET b = 1 WHERE id = 2"),  # at once
    _row(51, 7, 20, 1_000, "SELECT a FROM t WHERE id = 3"),
    _row(51, 8, 6_020, 80, "SELECT a FROM t WHERE id = 4"),  # 5 ms of think time
    _row(99, 1, 30, 10, "SELECT COUNT(*) FROM performance_schema.threads"),  # ours
]


class _Ours:
    def __init__(self) -> None:
        self.thread_ids = {99}

    def query(self, conn: object, sql: str, *args: object) -> list[tuple[Any, ...]]:
        return PFS_ROWS if "history_long" in sql else []


def _pfs_events() -> list[Event]:
    src = PerformanceSchemaSource(_Ours(), history_size=10_000)  # type: ignore[arg-type]
    return src.finish(None)  # type: ignore[arg-type]


def _workload(events: list[Event], source: str = "performance_schema") -> Workload:
    classes, traces, truncated = build_classes(events)
    traces, gaps = with_gaps(traces)
    return Workload(
        created_at="2026-01-01T00:00:00+00:00",
        myaccel_version="test",
        server={"flavor": "mysql"},
        source=source,  # type: ignore[arg-type]
        window_s=1.0,
        statements_total=len(events),
        statements_per_s=float(len(events)),
        classes=classes,
        connections=traces,
        connections_truncated=truncated,
        trace_gaps=gaps,
        concurrency=Concurrency(connections=len(traces), sample_interval_s=0.25),
    )


def test_gaps_from_performance_schema_timers() -> None:
    w = _workload(_pfs_events())
    assert w.trace_gaps == "end-to-start"
    by_conn = {t.id: [s.gap_us for s in t.statements] for t in w.connections}
    assert by_conn == {50: [None, 350.0, 350.0, 0.0], 51: [None, 5_000.0]}
    # the SET is not replayed: its gap and its latency go to the next statement
    steps, kind = trace_steps(w)
    assert kind == "end-to-start"
    assert [(s.sql, s.gap_us) for s in steps[0]] == [
        ("SELECT a FROM t WHERE id = 1", 0.0),
        ("SELECT a FROM t WHERE id = 2", 800.0),
        ("UPDATE t SET b = 1 WHERE id = 2", 0.0),
    ]
    lua = replay_lua(w, "timed")
    assert "gap_from = [[end]], timed = true," in lua
    assert re.search(r"sql = \[\[SELECT a FROM t WHERE id = 2\]\], c = \d+, g = 800 }", lua)
    assert "g = 5000 }" in lua and "SET @x" not in lua.split("traces = {")[1]
    assert "g = " not in replay_lua(w, "sequence")  # sequence keeps no timing


# A general log of one client connection: 2 statements in the log's first (partial)
# second, 4 in each of the next two, 1 in its last (partial) second.
GENERAL_LOG = "".join(
    [
        "Time\t\t    Id Command\tArgument\n",
        "261125  4:49:09\t    12 Query\tSELECT a FROM t WHERE id = 1\n",
        "\t\t    12 Query\tSELECT a FROM t WHERE id = 2\n",
        "261125  4:49:10\t    12 Query\tSELECT a FROM t WHERE id = 3\n",
        *["\t\t    12 Query\tSELECT a FROM t WHERE id = 4\n"] * 3,
        "261125  4:49:11\t    12 Query\tSELECT a FROM t WHERE id = 5\n",
        "\t\t    12 Query\tSET @y = 2\n",
        *["\t\t    12 Query\tSELECT a FROM t WHERE id = 6\n"] * 2,
        "261125  4:49:12\t    12 Query\tSELECT a FROM t WHERE id = 7\n",
    ]
)


def test_gaps_from_general_log_seconds() -> None:
    events = parse_general_log(GENERAL_LOG.splitlines(True), exclude=set())
    assert [e.t_s for e in events] == [0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3]
    w = _workload(events, "general_log")
    assert w.trace_gaps == "start-to-start"
    (trace,) = w.connections
    assert [s.t_ms for s in trace.statements][:3] == [0, 0, 1000]  # the log's seconds kept
    # the partial first second ends at 1 s, at the median rate of the inner seconds (4/s)
    assert spread_starts(trace.statements) == [0.5 + k / 4 for k in range(11)]
    assert [s.gap_us for s in trace.statements] == [None] + [250_000.0] * 10
    steps, _ = trace_steps(w)
    gaps = [s.gap_us for s in steps[0]]
    assert gaps[7] == 500_000.0 and len(gaps) == 10  # the SET's interval carried


def test_inner_seconds_spread_evenly_and_idle_seconds_kept() -> None:
    events = [Event(conn_id=1, t_s=float(t), sql=f"SELECT {i}") for i, t in enumerate([4, 4, 7])]
    w = _workload(events, "general_log")
    assert [s.gap_us for s in w.connections[0].statements] == [None, 500_000.0, 2_500_000.0]


def test_an_older_capture_gets_its_gaps_when_replayed() -> None:
    w = _workload(_pfs_events())
    old = w.model_copy(
        update={
            "trace_gaps": None,
            "connections": [
                t.model_copy(
                    update={
                        "statements": [s.model_copy(update={"gap_us": None}) for s in t.statements]
                    }
                )
                for t in w.connections
            ],
        }
    )
    traces, kind = timed_traces(old)
    assert kind == "end-to-start"
    assert [[s.gap_us for s in t.statements] for t in traces] == [
        [s.gap_us for s in t.statements] for t in w.connections
    ]
    # and a file without the new fields still loads as myaccel.workload/1
    doc = old.model_dump(mode="json", exclude={"trace_gaps"})
    for t in doc["connections"]:
        for s in t["statements"]:
            del s["gap_us"]
    assert Workload.model_validate(doc).trace_gaps is None


def test_traces_keep_the_same_first_part_of_every_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(assemble, "MAX_TRACE_STATEMENTS", 10)
    # sources list a connection's statements together: connection 0 first, then 1
    events = [
        Event(conn_id=c, t_s=i / 10, sql=f"SELECT v FROM t WHERE id = {i}")
        for c in (0, 1)
        for i in range(10)
    ]
    _, traces, truncated = build_classes(events)
    assert truncated and [len(t.statements) for t in traces] == [5, 5]
    assert max(s.t_ms for t in traces for s in t.statements) == 400.0


def test_timed_refuses_paced_and_a_workload_without_traces(
    tmp_path: Path, myaccel_home: Path
) -> None:
    w = _workload(_pfs_events())
    with pytest.raises(UsageError, match="no connection traces"):
        replay_lua(w.model_copy(update={"connections": []}), "timed")
    path = tmp_path / "w.json"
    path.write_text(w.model_dump_json())
    r = CliRunner().invoke(
        cli,
        [
            "bench",
            "--sandbox",
            "x",
            "--workload-file",
            str(path),
            "--replay-mode",
            "timed",
            "--paced",
        ],
    )
    assert r.exit_code == 2 and "--paced and --replay-mode timed" in r.stderr
    r = CliRunner().invoke(cli, ["capture", "--help"])
    assert "--replay-mode" in r.stdout


# ---------------------------------------------------------------- the engine's schedule

HARNESS = """
local ffi = require("ffi")
pcall(ffi.cdef, "struct timespec { long tv_sec; long tv_nsec; };")
pcall(ffi.cdef, "int clock_gettime(int clk_id, struct timespec *tp);")
pcall(ffi.cdef, "int usleep(unsigned int usec);")
local ts = ffi.new("struct timespec")
local function now()
  ffi.C.clock_gettime(1, ts)
  return tonumber(ts.tv_sec) * 1e6 + tonumber(ts.tv_nsec) / 1e3
end
local busy_us = tonumber(os.getenv("STUB_BUSY_US") or "0")
sysbench.sql.driver = function()
  return { connect = function() return {
    query = function(self, sql)
      local t = now()
      if sql:sub(1, 3) ~= "USE" and busy_us > 0 then ffi.C.usleep(busy_us) end
      print(string.format("Q %.0f %.0f %s", t, now(), sql))
    end,
    disconnect = function() end } end }
end
dofile(os.getenv("REPLAY_SCRIPT"))
"""


def _timed_workload(gaps_ms: list[float], source: str) -> Workload:
    """One connection whose statements follow each other by ``gaps_ms`` (end to start
    with performance_schema, start to start with the general log)."""
    t, events = 0.0, []
    for i, g in enumerate([0.0, *gaps_ms]):
        t += g / 1000
        lat = 10.0 if source == "performance_schema" else None
        events.append(Event(conn_id=1, t_s=t, sql=f"SELECT {i}", schema="shop", latency_us=lat))
    w = _workload(events, source)
    traces = [
        tr.model_copy(
            update={
                "statements": [
                    s.model_copy(update={"gap_us": None if i == 0 else gaps_ms[i - 1] * 1000})
                    for i, s in enumerate(tr.statements)
                ]
            }
        )
        for tr in w.connections
    ]
    return w.model_copy(update={"connections": traces})


def _run_engine(
    tmp_path: Path, w: Workload, events: int, busy_us: int = 0, time_s: int = 0
) -> list[tuple[float, float, str]]:
    sysbench = shutil.which("sysbench")
    if sysbench is None:
        pytest.skip("sysbench is not installed")
    script = write_replay_script(w, tmp_path, mode="timed")
    harness = tmp_path / "harness.lua"
    harness.write_text(HARNESS)
    r = subprocess.run(
        [sysbench, str(harness), "--threads=1", f"--events={events}", f"--time={time_s}", "run"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"REPLAY_SCRIPT": str(script), "STUB_BUSY_US": str(busy_us), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    out = []
    for line in r.stdout.splitlines():
        m = re.match(r"^Q (\d+) (\d+) (.*)$", line)
        if m and not m.group(3).startswith("USE"):
            out.append((float(m.group(1)) / 1000, float(m.group(2)) / 1000, m.group(3)))
    return out


def test_engine_waits_the_gap_after_the_previous_statement_ended(tmp_path: Path) -> None:
    w = _timed_workload([30.0, 60.0], "performance_schema")
    q = _run_engine(tmp_path, w, events=4)
    assert [s for _, _, s in q] == ["SELECT 0", "SELECT 1", "SELECT 2", "SELECT 0"]
    gaps = [q[i][0] - q[i - 1][1] for i in range(1, len(q))]  # end to start, ms
    # never early (less than the usleep overshoot it learns), slower only on a busy host
    assert 28 <= gaps[0] < 200 and 58 <= gaps[1] < 300, gaps
    assert gaps[2] < 25, gaps  # a trace's first statement has no gap: starting again at once


def test_engine_start_to_start_falls_behind_a_slow_server(tmp_path: Path) -> None:
    # the captured schedule: every 30 ms; the stub server takes 40 ms a statement
    w = _timed_workload([30.0, 30.0], "general_log")
    assert replay_lua(w, "timed").count("gap_from = [[start]]") == 1
    q = _run_engine(tmp_path, w, events=3, busy_us=40_000)
    starts = [a for a, _, _ in q]
    intervals = [starts[i] - starts[i - 1] for i in range(1, len(starts))]
    # closed loop: each starts when the previous one ended (40 ms), none waits 30 ms more
    assert all(38 <= x < 60 for x in intervals), intervals


def test_engine_ends_a_wait_past_the_runs_end(tmp_path: Path) -> None:
    w = _timed_workload([10.0, 30_000.0], "performance_schema")  # then 30 s idle
    t0 = time.monotonic()
    q = _run_engine(tmp_path, w, events=0, time_s=1)
    assert [s for _, _, s in q] == ["SELECT 0", "SELECT 1"]
    assert time.monotonic() - t0 < 10  # not 30 s: the run ended at its --time


def test_a_two_second_trace_spreads_its_partial_first_second_at_the_full_ones_rate() -> None:
    """A long capture's traces are cut after a few seconds: with the first second partial
    (the log started inside it) and one whole second, the first second's statements are
    spread at the whole second's rate, ending with it, not over the whole second (which
    made the timed replay of such a trace run at half the captured rate)."""
    from myaccel.bench.trace_gaps import spread_starts
    from myaccel.bench.workload import Statement

    sts = [Statement(t_ms=0.0, class_id="c", sql="SELECT 1") for _ in range(200)]
    sts += [Statement(t_ms=1000.0, class_id="c", sql="SELECT 1") for _ in range(1000)]
    starts = spread_starts(sts)
    assert starts[0] == pytest.approx(1 - 200 / 1000)  # 0.8 s: the partial second's start
    assert starts[199] < 1.0 <= starts[200]
    assert starts[-1] - starts[0] == pytest.approx(1.2 - 1 / 1000, abs=1e-6)


def test_a_whole_second_log_keeps_a_whole_second_after_the_partial_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The general log's 1 s stamps: the first second (the capture started inside it) alone
    reaches the limit; the traces still hold the next, whole second, so the timed replay
    learns the real rate (measured before: 19,000 statements/s captured, 3,235 replayed)."""
    monkeypatch.setattr(assemble, "MAX_TRACE_STATEMENTS", 10)
    per_second = {0: 6, 1: 20, 2: 20}  # per connection; second 0 is partial
    events = [
        Event(conn_id=c, t_s=float(sec), sql=f"SELECT v FROM t WHERE id = {i}")
        for c in (0, 1)
        for sec, n in per_second.items()
        for i in range(n)
    ]
    _, traces, truncated = build_classes(events)
    assert truncated
    assert [len(t.statements) for t in traces] == [26, 26]  # seconds 0 and 1, whole
    starts = spread_starts(traces[0].statements)
    # 20 per second throughout: the partial first second is spread at the whole one's rate
    assert all(abs(b - a - 1 / 20) < 1e-9 for a, b in itertools.pairwise(starts))
