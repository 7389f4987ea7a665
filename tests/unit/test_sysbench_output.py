"""parse_output on real sysbench 1.0.20 outputs (tests/fixtures/sysbench, see its README).

The expected numbers were read by eye from the fixture files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from myaccel.bench.records import FailureKind, Summary, SysbenchOutput
from myaccel.bench.sysbench_output import LUA_REPORT_MODULE, LUA_WRAPPER, parse_output

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sysbench"
ALL_FIXTURES = sorted(p.stem for p in FIXTURES.glob("*.txt"))


def text_of(name: str) -> str:
    return (FIXTURES / f"{name}.txt").read_text()


def rc_of(name: str) -> int:
    return int((FIXTURES / f"{name}.rc").read_text().strip())


def parse(name: str, *, with_rc: bool = True) -> SysbenchOutput:
    return parse_output(text_of(name), exit_code=rc_of(name) if with_rc else None)


def without_myaccel(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if "MYACCEL" not in line)


def test_fixture_set_is_complete() -> None:
    assert len(ALL_FIXTURES) >= 40
    for name in ALL_FIXTURES:
        cmd = (FIXTURES / f"{name}.cmd").read_text()
        assert cmd.count("\n") == 1 and "sysbench" in cmd, name
        assert rc_of(name) in (0, 1, 139), name


def test_lua_files_are_shipped_next_to_the_parser() -> None:
    assert LUA_WRAPPER.is_file()
    assert LUA_REPORT_MODULE.is_file()


# ------------------------------------------------------------------ plain text runs

# name: (threads, intervals, read, write, other, transactions, tps, queries, qps,
#        total_time_s, lat min, avg, max, percentile, pct value, sum,
#        fairness events avg, stddev, exec avg, stddev)
# fmt: off
TEXT_RUNS: dict[str, tuple[float, ...]] = {
    "run_oltp_read_only_t4": (
        4, 6, 314580, 0, 44940, 22470, 3738.44, 359520, 59815.08, 6.0094,
        0.32, 1.07, 11.85, 95, 2.14, 23979.76, 5617.5, 925.36, 5.9949, 0.00,
    ),
    "run_oltp_read_only_t4_p99": (
        4, 6, 282562, 0, 40366, 20183, 3361.42, 322928, 53782.68, 6.0034,
        0.34, 1.19, 16.02, 99, 2.57, 23979.93, 5045.75, 1124.04, 5.9950, 0.00,
    ),
    "run_oltp_read_write_t4": (
        4, 6, 123914, 35404, 17702, 8851, 1473.30, 177020, 29465.96, 6.0065,
        0.74, 2.71, 12.97, 95, 3.96, 24000.21, 2212.75, 44.95, 6.0001, 0.00,
    ),
    "run_oltp_write_only_t4": (
        4, 6, 0, 99224, 49612, 24806, 4131.73, 148836, 24790.40, 6.0026,
        0.26, 0.97, 7.74, 95, 1.32, 23980.63, 6201.5, 88.67, 5.9952, 0.00,
    ),
    "run_oltp_point_select_t8": (
        8, 5, 509799, 0, 0, 509799, 84912.48, 509799, 84912.48, 6.0029,
        0.01, 0.09, 10.33, 95, 0.22, 47842.48, 63724.875, 8205.29, 5.9803, 0.00,
    ),
    "run_oltp_update_index_t4": (
        4, 5, 0, 53124, 0, 53124, 8843.51, 53124, 8843.51, 6.0061,
        0.13, 0.45, 5.95, 95, 0.64, 23973.09, 13281.0, 75.66, 5.9933, 0.00,
    ),
    "run_oltp_update_non_index_t4": (
        4, 6, 0, 57201, 0, 57201, 9528.61, 57201, 9528.61, 6.0021,
        0.13, 0.42, 6.87, 95, 0.59, 23972.49, 14300.25, 58.26, 5.9931, 0.00,
    ),
    "run_oltp_insert_t2": (
        2, 6, 0, 29349, 0, 29349, 4889.02, 29349, 4889.02, 6.0020,
        0.13, 0.41, 7.86, 95, 0.51, 11941.36, 14674.5, 5.50, 5.9707, 0.00,
    ),
    "run_select_random_points_t4": (
        4, 6, 159700, 0, 0, 159700, 26602.83, 159700, 26602.83, 6.0021,
        0.03, 0.15, 10.95, 95, 0.30, 23911.75, 39925.0, 2412.91, 5.9779, 0.00,
    ),
    "run_select_random_ranges_t4": (
        4, 6, 140317, 0, 0, 140317, 23371.85, 140317, 23371.85, 6.0026,
        0.05, 0.17, 3.31, 95, 0.32, 23920.36, 35079.25, 2270.49, 5.9801, 0.00,
    ),
    "events_limit_no_interval": (
        2, 0, 20000, 0, 0, 20000, 143020.82, 20000, 143020.82, 0.1387,
        0.01, 0.01, 2.05, 95, 0.02, 271.97, 10000.0, 33.00, 0.1360, 0.00,
    ),
    "warning_deprecated_max_time": (
        2, 2, 439503, 0, 0, 439503, 146366.92, 439503, 146366.92, 3.0018,
        0.01, 0.01, 1.88, 95, 0.02, 5918.34, 219751.5, 315.50, 2.9592, 0.00,
    ),
    "rate_limited_oltp_point_select_t4": (
        4, 5, 10237, 0, 0, 10237, 2045.35, 10237, 2045.35, 5.0038,
        0.02, 0.12, 5.23, 95, 0.23, 1196.28, 2559.25, 102.40, 0.2991, 0.03,
    ),
    "deadlock_oltp_read_write_t16_1x10": (
        16, 6, 154448, 34248, 18543, 7511, 1248.62, 207239, 34451.22, 6.0144,
        0.99, 12.79, 74.65, 95, 27.66, 96101.10, 469.4375, 10.11, 6.0063, 0.00,
    ),
}
# fmt: on


@pytest.mark.parametrize("name", sorted(TEXT_RUNS))
def test_text_run_summary(name: str) -> None:
    (
        threads, n_intervals, reads, writes, other, trx, tps, queries, qps, total_time,
        lat_min, lat_avg, lat_max, pct, lat_pct, lat_sum, fe_avg, fe_sd, ft_avg, ft_sd,
    ) = TEXT_RUNS[name]  # fmt: skip
    out = parse(name)
    assert out.sysbench_version == "1.0.20"
    assert out.luajit == "system LuaJIT 2.1.0-beta3"
    assert out.command == "run"
    assert out.threads_started
    assert out.options.threads == threads
    assert len(out.intervals) == n_intervals
    assert all(i.source == "text" and i.threads == threads for i in out.intervals)
    s = out.summary
    assert s is not None and s.source == "text"
    assert (s.queries_read, s.queries_write, s.queries_other) == (reads, writes, other)
    assert s.queries_total == reads + writes + other == queries
    assert s.transactions == s.total_events == trx
    assert s.transactions_per_s == tps
    assert s.queries_per_s == qps
    assert s.reconnects == 0 and s.reconnects_per_s == 0.0
    assert s.total_time_s == total_time
    assert (s.latency_ms_min, s.latency_ms_avg, s.latency_ms_max) == (lat_min, lat_avg, lat_max)
    assert (s.percentile, s.latency_ms_pct, s.latency_ms_sum) == (pct, lat_pct, lat_sum)
    assert (s.fairness_events_avg, s.fairness_events_stddev) == (fe_avg, fe_sd)
    assert (s.fairness_exec_time_avg_s, s.fairness_exec_time_stddev_s) == (ft_avg, ft_sd)
    assert s.window_s is None and s.checkpoint_at_s is None
    assert out.checkpoints == ()
    assert out.fatal_errors == ()
    if name.startswith("deadlock"):
        assert out.failure is FailureKind.IGNORED_ERRORS_PRESENT
        assert s.ignored_errors == 3521 and s.ignored_errors_per_s == 585.33
        assert "3521 ignored error(s)" in out.failure_reasons[0]
        assert out.usable and not out.ok
    else:
        assert out.failure is FailureKind.OK, out.failure_reasons
        assert s.ignored_errors == 0
        assert out.failure_reasons == ()
        assert out.ok and out.usable


def test_text_intervals_first_and_last() -> None:
    out = parse("run_oltp_read_write_t4")
    first, last = out.intervals[0], out.intervals[-1]
    # [ 1s ] thds: 4 tps: 1369.20 qps: 27412.88 (r/w/o: 19190.71/5480.78/2741.39)
    #        lat (ms,95%): 4.41 err/s: 0.00 reconn/s: 0.00
    assert (first.t_s, first.threads, first.tps, first.qps) == (1.0, 4, 1369.20, 27412.88)
    assert (first.reads_per_s, first.writes_per_s, first.other_per_s) == (
        19190.71,
        5480.78,
        2741.39,
    )
    assert (first.latency_ms_pct, first.percentile) == (4.41, 95)
    assert (first.err_per_s, first.reconn_per_s) == (0.0, 0.0)
    assert first.events is None and first.dt_s is None  # counts only come from MYACCEL
    assert (last.t_s, last.tps, last.latency_ms_pct) == (6.0, 1385.89, 4.03)

    dl = parse("deadlock_oltp_read_write_t16_1x10").intervals
    assert [i.err_per_s for i in dl] == [544.35, 598.78, 563.92, 602.27, 619.00, 587.59]
    assert dl[0].latency_ms_pct == 28.67

    p99 = parse("run_oltp_read_only_t4_p99").intervals
    assert {i.percentile for i in p99} == {99}
    assert p99[0].latency_ms_pct == 2.52


def test_echoed_options() -> None:
    o = parse("run_oltp_read_only_t4").options
    assert (o.threads, o.report_interval_s, o.random_seed, o.seeded_from_time) == (4, 1, None, True)
    assert o.lines == (
        "Number of threads: 4",
        "Report intermediate results every 1 second(s)",
        "Initializing random number generator from current time",
    )
    o = parse("events_limit_no_interval").options
    assert (o.threads, o.report_interval_s, o.random_seed, o.seeded_from_time) == (
        2,
        None,
        42,
        False,
    )
    o = parse("rate_limited_oltp_point_select_t4").options
    assert (o.target_rate_per_s, o.random_seed) == (2000, 7)
    o = parse("run_oltp_point_select_t2_checkpoints").options
    assert o.report_checkpoints_s == (2, 5)


def test_rate_limited_queue_lines() -> None:
    iv = parse("rate_limited_oltp_point_select_t4").intervals
    # "[ 2s ] queue length: 0, concurrency: 2"
    assert [(i.queue_length, i.concurrency) for i in iv[:4]] == [(0, 0), (0, 2), (0, 0), (0, 0)]
    assert iv[1].tps == 2045.10
    hooked = parse("rate_limited_hooks_oltp_point_select_t4").intervals
    assert hooked[0].source == "myaccel"
    assert (hooked[0].queue_length, hooked[0].concurrency) == (1, 0)


def test_warning_is_collected() -> None:
    out = parse("warning_deprecated_max_time")
    assert out.warnings == ("--max-time is deprecated, use --time instead",)
    assert out.ok


def test_text_checkpoints() -> None:
    out = parse("run_oltp_point_select_t2_checkpoints")
    assert out.ok
    assert [c.checkpoint_at_s for c in out.checkpoints] == [2.0, 5.0]
    c1, c2 = out.checkpoints
    assert (c1.transactions, c1.transactions_per_s, c1.total_time_s) == (272161, 136008.24, 2.0001)
    assert (c2.transactions, c2.transactions_per_s, c2.total_time_s) == (431822, 143938.85, 5.0002)
    assert c2.fairness_events_avg == 215910.5
    s = out.summary
    assert s is not None and s.checkpoint_at_s is None
    # The final summary covers only the 2 s after the last checkpoint, but "total time" is 7 s.
    assert (s.transactions, s.transactions_per_s, s.total_time_s) == (285781, 142835.94, 7.0009)
    assert s.transactions_per_s is not None
    assert s.transactions / s.transactions_per_s == pytest.approx(2.0, abs=0.01)
    assert len(out.intervals) == 6


# ------------------------------------------------------------------ MYACCEL lines

# name: (threads, intervals, events, reads, writes, other, tps, lat avg, lat pct, sum,
#        fairness events avg from the human text, text tps)
# fmt: off
HOOK_RUNS: dict[str, tuple[float, ...]] = {
    "hooks_oltp_read_only_t4": (
        4, 6, 28032, 392448, 0, 56064, 4668.855417, 0.855303, 1.469452071, 23975.85974,
        7008.0, 4668.86,
    ),
    "hooks_oltp_read_write_t4": (
        4, 6, 10118, 141652, 40472, 20236, 1684.791539, 2.370986, 3.615449234, 23989.63968,
        2529.5, 1684.79,
    ),
    "hooks_oltp_point_select_t8": (
        8, 5, 623116, 623116, 0, 0, 103782.1784, 0.07677, 0.1886513095, 47836.67334,
        77889.5, 103782.18,
    ),
    "rate_limited_hooks_oltp_point_select_t4": (
        4, 4, 9978, 9978, 0, 0, 1994.280251, 0.082207, 0.1920790331, 820.26472,
        2494.5, 1994.28,
    ),
}
# fmt: on


@pytest.mark.parametrize("name", sorted(HOOK_RUNS))
def test_myaccel_lines_are_preferred(name: str) -> None:
    threads, n_iv, events, reads, writes, other, tps, lat_avg, lat_pct, lat_sum, fe_avg, ttps = (
        HOOK_RUNS[name]
    )
    out = parse(name)
    assert out.ok, out.failure_reasons
    assert out.malformed_myaccel_lines == 0
    assert out.myaccel_lines == n_iv + 1
    assert len(out.intervals) == n_iv
    assert all(i.source == "myaccel" and i.threads == threads for i in out.intervals)
    assert all(i.events is not None and i.dt_s is not None for i in out.intervals)
    s = out.summary
    assert s is not None and s.source == "myaccel"
    assert (s.transactions, s.queries_read, s.queries_write, s.queries_other) == (
        events,
        reads,
        writes,
        other,
    )
    assert s.queries_total == reads + writes + other
    assert s.threads == threads
    assert (s.transactions_per_s, s.latency_ms_avg, s.latency_ms_pct) == (tps, lat_avg, lat_pct)
    assert (s.latency_ms_sum, s.percentile) == (lat_sum, 95)
    assert s.window_s is not None and s.window_s == pytest.approx(s.total_time_s, abs=0.01)
    # Fairness is not visible to Lua: it comes from the human text next to the MYACCEL line.
    assert s.fairness_events_avg == fe_avg

    # The human text alone (MYACCEL lines removed) parses to the same figures, rounded.
    text_only = parse_output(without_myaccel(text_of(name)), exit_code=0)
    t = text_only.summary
    assert t is not None and t.source == "text"
    assert text_only.ok
    assert t.transactions == s.transactions and t.queries_total == s.queries_total
    assert t.transactions_per_s == ttps == round(tps, 2)
    assert t.latency_ms_avg == round(lat_avg, 2)
    assert t.latency_ms_sum == round(lat_sum, 2)
    assert t.total_time_s == round(s.total_time_s, 4)
    assert len(text_only.intervals) == len(out.intervals)
    for a, b in zip(out.intervals, text_only.intervals, strict=True):
        assert b.t_s == round(a.t_s)
        assert b.tps == round(a.tps, 2)
        assert b.latency_ms_pct == round(a.latency_ms_pct, 2)


def test_myaccel_interval_counts() -> None:
    first = parse("hooks_oltp_read_write_t4").intervals[0]
    # MYACCEL {"kind":"interval","t":1.000203784,"dt":1.00142232,"threads":4,"events":1570,
    #   "reads":22028,"writes":6280,"other":3144,...,"tps":1567.770129,...,"lat_ms_pct":3.681140593}
    assert (first.t_s, first.dt_s, first.events) == (1.000203784, 1.00142232, 1570)
    assert (first.reads, first.writes, first.other, first.errors, first.reconnects) == (
        22028,
        6280,
        3144,
        0,
        0,
    )
    assert (first.tps, first.latency_ms_pct) == (1567.770129, 3.681140593)


def test_myaccel_checkpoints() -> None:
    out = parse("hooks_oltp_point_select_t2_checkpoints")
    assert out.ok
    assert len(out.checkpoints) == 2
    c1, c2 = out.checkpoints
    assert all(c.source == "myaccel" for c in out.checkpoints)
    assert (c1.checkpoint_at_s, c1.transactions, c1.window_s) == (2.000147212, 91810, 2.001124012)
    assert (c2.checkpoint_at_s, c2.transactions, c2.window_s) == (5.000172342, 430534, 3.000064152)
    assert (c1.fairness_events_avg, c2.fairness_events_avg) == (45941.5, 215265.5)
    s = out.summary
    assert s is not None
    assert (s.transactions, s.total_time_s, s.window_s) == (264433, 7.002033085, 2.001850785)
    assert s.fairness_events_avg == 132181.5
    assert len(out.intervals) == 7


def test_myaccel_without_ffi_fallback() -> None:
    out = parse("hooks_noffi_oltp_read_only_t2_checkpoints")
    assert out.ok
    s = out.summary
    assert s is not None and s.source == "myaccel"
    assert (s.transactions, s.window_s, s.latency_ms_max) == (5868, 2.003497443, 14.583451)
    assert s.total_time_s == 5.00362651
    assert s.fairness_events_avg is None  # the Lua fallback text has no fairness section
    assert [c.transactions for c in out.checkpoints] == [7842]
    # The interval right after the checkpoint has an empty latency histogram (0.001 ms).
    assert [round(i.t_s) for i in out.intervals] == [1, 2, 3, 4, 5]
    assert out.intervals[2].latency_ms_pct == 0.001
    text_only = parse_output(without_myaccel(text_of("hooks_noffi_oltp_read_only_t2_checkpoints")))
    assert len(text_only.intervals) == 5
    assert text_only.intervals[0].tps == 2600.44
    assert text_only.summary is not None
    assert text_only.summary.transactions_per_s == 2928.88
    assert [c.transactions for c in text_only.checkpoints] == [7842]


def test_lua_report_default_format() -> None:
    # sysbench.report_default() prints "err/s 0.00" without the colon of the C reporter.
    text = text_of("lua_report_default_oltp_point_select_t2")
    assert "err/s 0.00 reconn/s" in text
    out = parse("lua_report_default_oltp_point_select_t2")
    assert out.ok
    assert [(i.t_s, i.tps) for i in out.intervals] == [
        (1.0, 71872.88),
        (2.0, 77735.95),
        (3.0, 76466.96),
    ]
    assert [c.transactions for c in out.checkpoints] == [150049]
    assert out.summary is not None
    assert (out.summary.transactions, out.summary.transactions_per_s) == (136489, 68347.40)


def test_line_glued_by_another_thread() -> None:
    # Seen in a real run: print() writes its newline separately, so the checkpoint thread's
    # report can start before the interval line ends.
    text = text_of("lua_report_default_oltp_point_select_t2")
    glued = text.replace("reconn/s: 0.00\nSQL statistics:", "reconn/s: 0.00SQL statistics:", 1)
    assert glued != text
    out = parse_output(glued)
    assert out == parse_output(text)


def test_myaccel_deadlock_run() -> None:
    out = parse("deadlock_hooks_oltp_read_write_t16_1x10_ignore_all")
    assert out.failure is FailureKind.IGNORED_ERRORS_PRESENT
    s = out.summary
    assert s is not None and s.source == "myaccel"
    assert (s.ignored_errors, s.ignored_errors_per_s) == (3002, 598.8366116)
    assert out.intervals[0].errors is not None and out.intervals[0].errors > 0


# ------------------------------------------------------------------ failures


@pytest.mark.parametrize(
    ("name", "failure", "code", "reason"),
    [
        ("fatal_missing_table_ps", FailureKind.FATAL_SQL_ERROR, 1146, "in mysql_stmt_prepare()"),
        ("fatal_missing_table_nops", FailureKind.FATAL_SQL_ERROR, 1146, "in mysql_drv_query()"),
        ("fatal_drop_table_midrun", FailureKind.FATAL_SQL_ERROR, 1146, "mysql_stmt_execute()"),
        ("fatal_drop_table_midrun_hooks", FailureKind.FATAL_SQL_ERROR, 1146, "SQL error 1146"),
        ("too_many_connections_t20", FailureKind.TOO_MANY_CONNECTIONS, 1040, "max_connections"),
        ("connect_refused_no_server", FailureKind.CONNECTION_FAILED, 2002, "could not connect"),
        ("server_killed_midrun", FailureKind.CONNECTION_LOST, 2013, "lost mid-run (error 2013)"),
        ("connections_killed_by_server", FailureKind.CONNECTION_LOST, 2013, "error 2013"),
        ("invalid_option", FailureKind.FATAL_ERROR, None, "invalid option: --no-such-opt=1"),
        ("unknown_workload", FailureKind.FATAL_ERROR, None, "Cannot find benchmark"),
    ],
)
def test_fatal_failures(name: str, failure: FailureKind, code: int | None, reason: str) -> None:
    for with_rc in (True, False):
        out = parse(name, with_rc=with_rc)
        assert out.failure is failure, (with_rc, out.failure_reasons)
        assert out.summary is None
        assert not out.ok and not out.usable
        assert any(reason in r for r in out.failure_reasons), out.failure_reasons
        assert out.fatal_errors
        if code is not None:
            assert code in {f.error_code for f in out.fatal_errors}


def test_fatal_sql_error_details() -> None:
    out = parse("fatal_missing_table_nops")
    f = out.fatal_errors[0]
    assert f.line.startswith("FATAL: mysql_drv_query() returned error 1146")
    assert (f.function, f.error_code) == ("mysql_drv_query", 1146)
    assert f.error_message == "Table 'sbdrop.sbtest1' doesn't exist"
    assert f.query == "SELECT c FROM sbtest1 WHERE id=5211"
    lua = out.fatal_errors[1]
    assert (lua.function, lua.error_code, lua.sql_state) == ("thread_run", 1146, "42S02")

    ps = parse("fatal_missing_table_ps").fatal_errors
    # FATAL: mysql_stmt_prepare() failed / FATAL: MySQL error: 1146 "Table ... doesn't exist"
    assert (ps[1].function, ps[1].error_code) == ("mysql_stmt_prepare", 1146)
    assert ps[1].error_message == "Table 'sbdrop.sbtest1' doesn't exist"
    assert ps[-1].line == "FATAL: Thread initialization failed!"

    drop = parse("fatal_drop_table_midrun")
    assert len(drop.intervals) == 3
    assert drop.fatal_errors[0].query == "SELECT c FROM sbtest1 WHERE id=?"
    assert drop.fatal_errors[0].function == "mysql_stmt_execute"
    hooked = parse("fatal_drop_table_midrun_hooks")
    assert len(hooked.intervals) == 2 and hooked.intervals[0].source == "myaccel"


def test_too_many_connections_details() -> None:
    out = parse("too_many_connections_t20")
    codes = [f.error_code for f in out.fatal_errors if f.error_code is not None]
    assert set(codes) == {1040}
    # "(last message repeated 1 times)" folds one "unable to connect" line.
    assert any(f.repeated == 2 and "unable to connect" in f.line for f in out.fatal_errors)
    assert out.fatal_errors[-1].line == "FATAL: Thread initialization failed!"


@pytest.mark.parametrize(
    "name",
    [
        "server_killed_restarted_ignore_all",
        "server_killed_restarted_ignore_all_hooks",
        "server_killed_restarted_ignore_2013_2006",
        "server_killed_restarted_nops_ignore_2013_2006",
    ],
)
def test_segfault_on_reconnect(name: str) -> None:
    # sysbench prints nothing: the output stops after the 3s interval line.
    out = parse(name)
    assert rc_of(name) == 139
    assert out.failure is FailureKind.CRASHED
    assert "SIGSEGV" in out.failure_reasons[0]
    assert out.fatal_errors == () and out.summary is None
    assert len(out.intervals) == 3
    blind = parse(name, with_rc=False)
    assert blind.failure is FailureKind.NO_SUMMARY
    assert "no complete summary after 3 interval report(s)" in blind.failure_reasons[0]


def test_reconnect_seen_at_verbosity_5() -> None:
    out = parse("server_killed_reconnect_verbosity5")
    assert out.failure is FailureKind.CRASHED
    assert "reconnect" in out.failure_reasons[0]
    assert out.ignored_error_codes == (2013,)
    assert out.reconnect_attempts == 1
    assert parse("server_killed_reconnect_verbosity5", with_rc=False).failure is (
        FailureKind.CONNECTION_LOST
    )


def test_prepare_and_cleanup() -> None:
    out = parse("prepare_oltp_4x10000")
    assert (out.command, out.failure) == ("prepare", FailureKind.OK)
    assert out.tables_created == ("sbtest1", "sbtest2", "sbtest3", "sbtest4")
    assert out.rows_inserted == 40000
    assert not out.usable  # nothing measured
    tiny = parse("prepare_sbtiny_1x10")
    assert (tiny.tables_created, tiny.rows_inserted) == (("sbtest1",), 10)
    out = parse("cleanup_sbtiny_1")
    assert (out.command, out.failure, out.tables_dropped) == (
        "cleanup",
        FailureKind.OK,
        ("sbtest1",),
    )


# ------------------------------------------------------------------ synthetic edge cases


def test_exit_code_without_fatal_line() -> None:
    out = parse_output(text_of("run_oltp_read_only_t4"), exit_code=1)
    assert out.failure is FailureKind.FATAL_ERROR
    assert "exited with code 1" in out.failure_reasons[0]


def test_reconnects_make_a_run_invalid() -> None:
    text = text_of("run_oltp_read_only_t4").replace(
        "    reconnects:                          0      (0.00 per sec.)",
        "    reconnects:                          3      (0.50 per sec.)",
    )
    out = parse_output(text)
    assert out.failure is FailureKind.RECONNECTS_PRESENT
    assert out.summary is not None and out.summary.reconnects == 3
    assert not out.usable


def test_server_gone_away_is_connection_lost() -> None:
    # Not recorded here (needs an idle connection to die); the message shape is drv_mysql's.
    text = (
        "sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)\n\nThreads started!\n\n"
        "FATAL: mysql_drv_query() returned error 2006 (MySQL server has gone away) "
        "for query 'BEGIN'\n"
    )
    out = parse_output(text, exit_code=1)
    assert out.failure is FailureKind.CONNECTION_LOST
    assert out.fatal_errors[0].error_message == "MySQL server has gone away"


@pytest.mark.parametrize("text", ["", "\n\n", "hello world\n", "\x00\xff garbage", "[ 1s ]"])
def test_garbage_is_unrecognized(text: str) -> None:
    out = parse_output(text)
    assert out.failure is FailureKind.UNRECOGNIZED
    assert out.summary is None and out.intervals == ()


def test_bytes_input_and_crlf() -> None:
    raw = text_of("run_oltp_read_only_t4").replace("\n", "\r\n").encode()
    out = parse_output(raw + b"\xff\xfe\n")
    assert out.ok and out.summary is not None
    assert out.summary.transactions == 22470


def test_nan_interval_and_malformed_myaccel() -> None:
    text = (
        text_of("hooks_oltp_read_only_t4")
        + "[ 9s ] thds: 4 tps: nan qps: nan (r/w/o: nan/nan/nan) lat (ms,95%): 0.00 "
        "err/s: nan reconn/s: nan\n"
        + 'MYACCEL {"v":1,"kind":"interval","t":9.0,"threads":4,"events":"x"}\n'
        + "MYACCEL [1,2,3]\n"
        + 'MYACCEL {"v":1,"kind":"interval","t":1e999,"tps":1}\n'
        + "MYACCEL " + "[" * 100000 + "\n"
        + "    total:      " + "9" * 5000 + "\n"
    )  # fmt: skip
    out = parse_output(text, exit_code=0)
    assert out.malformed_myaccel_lines == 4
    assert any("could not be read" in w for w in out.warnings)
    assert len(out.intervals) == 6  # the nan line is not an interval
    assert out.summary is not None and out.summary.transactions == 28032


def test_output_cut_inside_a_number_is_not_trusted() -> None:
    text = text_of("run_oltp_read_only_t4")
    cut = text.index("23979.76") + 3  # "         sum:    239" without a newline
    out = parse_output(text[:cut])
    assert out.summary is None
    assert out.failure is FailureKind.NO_SUMMARY
    assert any("middle of a line" in w for w in out.warnings)


def test_json_round_trip() -> None:
    for name in ALL_FIXTURES:
        out = parse(name)
        again = SysbenchOutput.model_validate_json(out.model_dump_json())
        assert again == out, name
        json.loads(out.model_dump_json())


# ------------------------------------------------------------------ robustness

CORE_FIELDS = (
    "queries_read",
    "queries_write",
    "queries_other",
    "queries_total",
    "transactions",
    "ignored_errors",
    "reconnects",
    "total_time_s",
    "total_events",
    "latency_ms_min",
    "latency_ms_avg",
    "latency_ms_max",
    "latency_ms_sum",
)


def core(s: Summary) -> tuple[object, ...]:
    return tuple(getattr(s, f) for f in CORE_FIELDS)


def check_truncation(full: SysbenchOutput, cut: SysbenchOutput) -> None:
    """A truncated capture may lose data but never invents or changes figures."""
    if cut.summary is not None:
        assert full.summary is not None
        if cut.summary.source == full.summary.source:
            assert core(cut.summary) == core(full.summary)
        else:  # MYACCEL line lost: the text figures are the same, rounded for print
            assert core(cut.summary) == pytest.approx(core(full.summary), abs=0.006)
    else:
        assert cut.failure is not FailureKind.OK or full.summary is None
    assert len(cut.intervals) <= len(full.intervals)
    for a, b in zip(cut.intervals, full.intervals, strict=False):
        assert round(a.t_s) == round(b.t_s)
        assert a.tps == pytest.approx(b.tps, abs=0.006)
    assert len(cut.checkpoints) <= len(full.checkpoints)


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_truncations_never_crash_or_invent(name: str) -> None:
    text = text_of(name)
    full = parse_output(text)
    cuts = {int(len(text) * k / 13) for k in range(13)}
    # Also cut at and inside the last few lines, where the summary is.
    for pos in [i for i, ch in enumerate(text) if ch == "\n"][-25:]:
        cuts.update({pos, pos + 1, max(pos - 3, 0)})
    for c in sorted(cuts):
        check_truncation(full, parse_output(text[:c]))
        check_truncation(full, parse_output(text[:c], exit_code=rc_of(name)))


@settings(
    max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(name=st.sampled_from(ALL_FIXTURES), frac=st.floats(0.0, 1.0))
def test_random_truncation(name: str, frac: float) -> None:
    text = text_of(name)
    check_truncation(parse_output(text), parse_output(text[: int(len(text) * frac)]))


ALL_LINES = sorted({line for n in ALL_FIXTURES for line in text_of(n).splitlines()})


@settings(max_examples=150, deadline=None, database=None)
@given(
    lines=st.lists(
        st.one_of(st.sampled_from(ALL_LINES), st.text(max_size=80)),
        max_size=60,
    ),
    exit_code=st.one_of(st.none(), st.integers(-20, 300)),
)
def test_shuffled_fixture_lines_never_crash(lines: list[str], exit_code: int | None) -> None:
    out = parse_output("\n".join(lines) + "\n", exit_code=exit_code)
    assert isinstance(out.failure, FailureKind)
    assert out.failure_reasons or out.failure is FailureKind.OK


@settings(max_examples=100, deadline=None, database=None)
@given(data=st.binary(max_size=2000))
def test_random_bytes_never_crash(data: bytes) -> None:
    parse_output(data)


def test_thread_lines_are_read_and_a_skipped_group_is_said() -> None:
    """Issue 35, defect 3: the per-thread lines are counts, not malformed reports; two
    threads that never called the DELETE/INSERT group are said so, per event."""
    from myaccel.bench.sysbench_myaccel import describe_threads

    def line(tid: int, events: int, deletes: int) -> str:
        return "MYACCEL " + json.dumps({
            "v": 1, "kind": "thread", "tid": tid, "events": events,
            "opt.delete_inserts": 1, "opt.skip_trx": False,
            "calls.execute_index_updates": events, "calls.execute_delete_inserts": deletes,
        })  # fmt: skip

    text = "\n".join([line(0, 300, 0), line(1, 267, 0), 'MYACCEL {"kind":"thread","tid":-1}'])
    out = parse_output(text + "\n")
    assert [t.tid for t in out.threads_ran] == [0, 1]
    assert out.malformed_myaccel_lines == 1  # the line without its counts
    said = describe_threads(out.threads_ran)
    assert "2 thread(s): 567 events" in said
    assert "delete_inserts=1" in said and "skip_trx=False" in said
    assert "delete_inserts 0.00" in said and "index_updates 1.00" in said
    assert describe_threads(()) == ""
