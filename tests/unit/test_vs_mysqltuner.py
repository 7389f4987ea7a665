"""scripts/vs_mysqltuner.py: MySQLTuner's "Variables to adjust" mapped line by line, over
real MySQLTuner 1.9.9 output captured from a loaded MariaDB 10.11.19 sandbox."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from myaccel.server.optionfile import iter_option_text

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "vs_mysqltuner.py"
FIXTURES = ROOT / "tests" / "fixtures" / "mysqltuner"
# MySQLTuner run with the sandbox restarted with an explicit innodb_buffer_pool_chunk_size,
# after one `myaccel bench` run of oltp_read_write on 8 x 100,000 rows
LOADED = FIXTURES / "mariadb-10.11.19-chunk-set.out"
# stock MySQLTuner on the same server with the chunk size autosized (0): the crash
CRASHED = FIXTURES / "mariadb-10.11.19-stock-crash.out"
MIB = 1024**2


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("vs_mysqltuner", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_the_captured_advice_is_mapped_literally(script: ModuleType) -> None:
    text = LOADED.read_text()
    lines = script.adjust_lines(text)
    # the list as printed, every indented line after the header and nothing else
    printed = text.split("Variables to adjust:")[1].strip().splitlines()
    assert lines == [p.strip() for p in printed]
    # the sizes MySQLTuner printed, read from its own lines of the output
    data = re.search(r"Data in InnoDB tables: ([\d.]+)M", text)
    redo = re.search(r"innodb_log_file_size should be \(=(\d+)M\)", text)
    assert data and redo
    mapped = script.map_line
    known = {"performance_schema", "innodb_buffer_pool_size", "innodb_log_file_size"}
    got = {m.option: m.value for m in (mapped(line, known) for line in lines)}
    assert got == {
        "performance_schema": "ON",
        # ">= the InnoDB data size" taken at its bound, not rounded up to a chunk
        "innodb_buffer_pool_size": str(int(float(data.group(1)) * MIB)),
        # its own figure (a quarter of the pool it read), not a quarter of the new pool
        "innodb_log_file_size": str(int(redo.group(1)) * MIB),
    }


def test_the_option_file_holds_every_mapped_line_and_says_what_was_left_out(
    script: ModuleType,
) -> None:
    lines = [*script.adjust_lines(LOADED.read_text()), "max_connections (> 151)"]
    mapped = [script.map_line(line) for line in lines]
    text = script.option_file(mapped)
    opts = {o.key: o.value for o in iter_option_text(text)}
    assert opts == {m.option: m.value for m in mapped if m.option}
    assert all(o.group == "mysqld" for o in iter_option_text(text))
    assert "# left out: max_connections (> 151) (a direction without a value" in text


def test_the_stock_crash_leaves_no_list_to_map(script: ModuleType) -> None:
    text = CRASHED.read_text()
    assert "Illegal division by zero at /usr/bin/mysqltuner line 6024" in text
    assert script.adjust_lines(text) == []


# Every line shape of MySQLTuner 1.9.9's @adjvars (its source, `push @adjvars`), as printed
@pytest.mark.parametrize(
    ("line", "option", "value"),
    [
        ("performance_schema=ON", "performance_schema", "ON"),
        ("innodb_file_per_table=ON", "innodb_file_per_table", "ON"),
        ("key_buffer_size=0", "key_buffer_size", "0"),
        ("SET innodb_stats_on_metadata = OFF", "innodb_stats_on_metadata", "OFF"),
        ("innodb_buffer_pool_size (>= 1.5G) if possible.", "innodb_buffer_pool_size", str(int(1.5 * 1024**3))),
        ("query_cache_size (=0)", "query_cache_size", "0"),
        ("query_cache_type (=0)", "query_cache_type", "0"),
        ("long_query_time (<= 10)", "long_query_time", "10"),
        ("innodb_buffer_pool_instances (=1)", "innodb_buffer_pool_instances", "1"),
        ("innodb_buffer_pool_instances(=8)", "innodb_buffer_pool_instances", "8"),
        ("innodb_log_file_size should be (=1G) if possible, so InnoDB total log files size equals 25% of buffer pool size.", "innodb_log_file_size", str(1024**3)),
        ("thread_cache_size (start at 4)", "thread_cache_size", "4"),
        ("binlog_cache_size (16.0M)", "binlog_cache_size", str(16 * MIB)),
    ],
)  # fmt: skip
def test_lines_with_a_value(script: ModuleType, line: str, option: str, value: str) -> None:
    m = script.map_line(line)
    assert (m.option, m.value, m.ignored) == (option, value, None)


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("max_connections (> 151)", "direction"),
        ("wait_timeout (< 28800)", "direction"),
        ("join_buffer_size (> 256.0K, or always use indexes with JOINs)", "direction"),
        ("query_cache_size (> 1M) [see warning above]", "direction"),
        ("table_definition_cache(400) > 1200 or -1 (autosizing if supported)", "direction"),
        ("innodb_log_buffer_size (> 16M)", "direction"),
        ("thread_pool_size between 16 and 36 for InnoDB usage", "range"),
        ("vm.swappiness <= 10 (echo 10 > /proc/sys/vm/swappiness)", "kernel"),
        ("fs.aio-max-nr > 1M (echo 1048576 > /proc/sys/fs/aio-max-nr)", "kernel"),
        ("DON'T APPLY SETTINGS BECAUSE THERE ARE TOO MANY PROCESSES RUNNING ON THIS SERVER. OOM KILL CAN OCCUR!", "warning"),
        ("wsrep_slave_threads = 8", "Galera"),
        ("gcs.fc_limit= wsrep_slave_threads * 5 (=40)", "Galera"),
        ("innodb_autoinc_lock_mode should be 2 when using parallel slave", "Galera"),
        ("set up wsrep_cluster_name variable for Galera replication", "Galera"),
        ("innodb_buffer_pool_size must always be equal to or a multiple of innodb_buffer_pool_chunk_size * innodb_buffer_pool_instances", "rule"),
    ],
)  # fmt: skip
def test_lines_without_a_value_are_left_out_with_their_reason(
    script: ModuleType, line: str, why: str
) -> None:
    m = script.map_line(line)
    assert m.option is None and m.ignored is not None and why in m.ignored, m


def test_an_option_the_server_lacks_is_left_out(script: ModuleType) -> None:
    """MariaDB 10.6+ has no innodb_buffer_pool_instances: the server would not start."""
    m = script.map_line("innodb_buffer_pool_instances(=8)", {"innodb_buffer_pool_size"})
    assert m.option is None and m.ignored == (
        "innodb_buffer_pool_instances is not a variable of this server"
    )


@pytest.mark.parametrize(
    ("pool", "chunk"),
    [(128 * MIB, 2 * MIB), (381 * MIB, 5 * MIB), (32 * MIB, MIB), (18048 * MIB, 282 * MIB)],
)
def test_the_explicit_chunk_is_the_autosized_one(script: ModuleType, pool: int, chunk: int) -> None:
    assert script.autosized_chunk(pool) == chunk
    assert chunk % MIB == 0 and chunk <= max(MIB, pool // 64)


def test_the_load_run_takes_the_workload_options_only(script: ModuleType) -> None:
    ab = ["-w", "rw", "--threads=16", "--runs", "6", "--tables", "16", "--target", "5"]
    ab += ["--baseline-set", "x=1", "--cleanup", "--time", "15"]
    assert script.load_args(ab) == [
        "-w", "rw", "--threads=16", "--tables", "16", "--cleanup", "--time", "15",
    ]  # fmt: skip
