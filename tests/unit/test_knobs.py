"""Knob catalog: schema sanity, version resolution, documented defaults, values, options."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from myaccel.errors import UsageError
from myaccel.knobs import (
    Catalog,
    CatalogError,
    DefaultNotComputable,
    InvalidKnobValue,
    KnobNotAvailable,
    Machine,
    UnknownKnob,
    render_markdown,
)
from myaccel.knobs.catalog import DATA_PATH, change_applies, parse_version
from myaccel.knobs.formula import FormulaError, compile_formula
from myaccel.knobs.values import format_size, parse_int
from myaccel.server.flavor import parse_server_version

GiB = 1 << 30
MiB = 1 << 20
REPO = Path(__file__).resolve().parents[2]
LATEST = {
    "mysql": ["5.7.44", "8.0.40", "8.4.3", "9.1.0", "9.7.4"],
    "mariadb": ["10.6.21", "10.11.11", "11.4.5", "11.8.2"],
    "percona": ["5.7.44", "8.0.40", "8.4.3"],
}


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return Catalog.load()


# ------------------------------------------------------------------ schema sanity


def test_catalog_size_and_groups(cat: Catalog) -> None:
    assert len(cat) >= 60
    names = [s.name for s in cat]
    assert len(names) == len(set(names))
    assert {s.group for s in cat} <= {g.id for g in cat.groups}


def test_every_knob_has_a_source_wherever_it_exists(cat: Catalog) -> None:
    for flavor, versions in LATEST.items():
        for v in versions:
            srv = cat.for_server(flavor, v)
            for k in srv.knobs():
                assert k.source.startswith("https://"), (flavor, v, k.name)
                assert "{" not in k.source, k.source


def test_every_knob_exists_somewhere_and_has_type_scope_dynamic(cat: Catalog) -> None:
    for spec in cat:
        assert spec.summary and spec.history, spec.name
        seen = False
        for flavor, versions in LATEST.items():
            for v in versions:
                k = cat.for_server(flavor, v).knob(spec.name)
                if k.exists:
                    seen = True
                    assert k.dynamic is not None, (spec.name, flavor, v)
                    assert k.default_value is not None or k.auto is not None, (spec.name, v)
                    if spec.type == "enum":
                        assert k.values, (spec.name, flavor, v)
        assert seen, spec.name


def test_defaults_have_the_knob_type_and_lie_in_range(cat: Catalog) -> None:
    for flavor, versions in LATEST.items():
        for v in versions:
            srv = cat.for_server(flavor, v)
            for k in srv.knobs():
                d = k.default_value
                if d is None:
                    continue
                t = k.spec.type
                if t in ("int", "size"):
                    assert isinstance(d, int) and not isinstance(d, bool), k.name
                elif t == "bool":
                    assert isinstance(d, bool), k.name
                elif t == "float":
                    assert isinstance(d, float), k.name
                elif t == "enum":
                    assert d in k.values, (k.name, flavor, v, d)
                # the documented default passes the server's own validation
                assert srv.parse_value(k.name, d) == d, (k.name, flavor, v)


def test_size_defaults_round_trip_through_option_spelling(cat: Catalog) -> None:
    srv = cat.for_server("mariadb", "10.11.11")
    for k in srv.knobs():
        if k.spec.type == "size" and isinstance(k.default_value, int):
            line = srv.format_option(k.name, k.default_value)
            text = line.split(" = ", 1)[1]
            assert srv.parse_value(k.name, text) == k.default_value


def test_formulas_compile_and_reference_known_names(cat: Catalog) -> None:
    for spec in cat:
        for changes in spec.history.values():
            for ch in changes:
                if ch.auto and ch.auto.formula:
                    f = compile_formula(ch.auto.formula)
                    assert f.names <= {"logical_cpus", "ram_bytes"} | {s.name for s in cat}


def test_durability_knobs(cat: Catalog) -> None:
    durable = {s.name for s in cat if s.durability}
    assert durable == {
        "innodb_flush_log_at_trx_commit",
        "sync_binlog",
        "innodb_doublewrite",
        "innodb_flush_method",
        "innodb_flush_log_at_timeout",  # how many seconds trx_commit 0 or 2 can lose
    }
    assert cat.is_unsafe("innodb_flush_log_at_timeout", "5")
    assert not cat.is_unsafe("innodb_flush_log_at_timeout", "1")
    assert cat.is_unsafe("innodb_flush_log_at_trx_commit", "2")
    assert cat.is_unsafe("innodb_flush_log_at_trx_commit", 0)
    assert not cat.is_unsafe("innodb_flush_log_at_trx_commit", "1")
    assert cat.is_unsafe("sync_binlog", "0") and cat.is_unsafe("sync_binlog", "100")
    assert not cat.is_unsafe("sync_binlog", "1")
    assert cat.is_unsafe("innodb_doublewrite", "OFF")
    assert cat.is_unsafe("innodb_doublewrite", "detect_only")
    assert not cat.is_unsafe("innodb_doublewrite", "ON")
    assert cat.is_unsafe("innodb_flush_method", "O_DIRECT_NO_FSYNC")
    assert not cat.is_unsafe("innodb_flush_method", "o_direct")
    assert not cat.is_unsafe("innodb_io_capacity", "100")


def test_broken_catalog_is_rejected(tmp_path: Path) -> None:
    raw = json.loads(DATA_PATH.read_text())
    raw["knobs"][0]["history"]["mysql"][0]["auto"] = {"text": "x", "formula": "nosuch * 2"}
    bad = tmp_path / "k.json"
    bad.write_text(json.dumps(raw))
    with pytest.raises(CatalogError, match="unknown names"):
        Catalog.load(bad)
    raw = json.loads(DATA_PATH.read_text())
    raw["knobs"][0]["type"] = "integer"
    bad.write_text(json.dumps(raw))
    with pytest.raises(
        CatalogError, match=r"does not match myaccel\.knobs/1: field 'knobs\.0\.type'"
    ):
        Catalog.load(bad)
    with pytest.raises(CatalogError, match="does not exist") as exc:
        Catalog.load(tmp_path / "missing.json")
    assert "reinstall myaccel" in exc.value.hint
    raw["schema_version"] = "myaccel.knobs/9"
    bad.write_text(json.dumps(raw))
    with pytest.raises(CatalogError, match=r"has schema 'myaccel\.knobs/9', expected"):
        Catalog.load(bad)


def test_formula_language_is_restricted() -> None:
    for text in ("__import__('os')", "a.b", "x[0]", "lambda: 1", "open(1)", "'s'"):
        with pytest.raises(FormulaError):
            compile_formula(text)
    f = compile_formula("1 if a <= GiB else max(1, min(64, a // b // 2, c // 4))")
    assert f.names == {"a", "b", "c"}
    vals = {"a": 8 * GiB, "b": 128 * MiB, "c": 64}
    assert f.evaluate(vals.__getitem__) == 16


def test_docs_are_generated_from_the_catalog(cat: Catalog) -> None:
    text = render_markdown(cat)
    assert (REPO / "docs" / "knobs.md").read_text() == text, (
        "docs/knobs.md is stale: regenerate it with render_markdown()"
    )
    for spec in cat:
        assert f"### `{spec.name}`" in text


# ------------------------------------------------------------------ version resolution


def test_known_series_resolve_exactly(cat: Catalog) -> None:
    for flavor, versions in LATEST.items():
        for v in versions:
            srv = cat.for_server(flavor, v)
            assert srv.exact and not srv.warnings, (flavor, v)


def test_version_strings_from_servers(cat: Catalog) -> None:
    srv = cat.for_server("mariadb", "10.11.6-MariaDB-0+deb12u1")
    assert srv.version == (10, 11, 6) and srv.series == "10.11"
    srv = cat.for_server("mysql", parse_server_version("8.0.36-0ubuntu0.22.04.1") or "")
    assert srv.series == "8.0"
    with pytest.raises(UsageError, match="MariaDB"):
        cat.for_server("mysql", "10.11.6-MariaDB")
    with pytest.raises(UsageError, match="flavor"):
        cat.for_server("postgres", "16.1.0")
    with pytest.raises(UsageError, match="version"):
        cat.for_server("mysql", "latest")


def test_every_fixture_version_resolves_by_its_own_flavor(cat: Catalog) -> None:
    """The catalog's series are chosen per flavor, never by the number: MySQL's calendar
    versions (26.x) resolve to MySQL's newest series, MariaDB 12.x to MariaDB's, with a
    warning when the line was not checked."""
    data = json.loads(
        (Path(__file__).parent.parent / "fixtures" / "version_strings.json").read_text()
    )
    for case in data["cases"]:
        sv = parse_server_version(case["version"], case["comment"])
        assert sv is not None
        srv = cat.for_server(sv.flavor, sv)
        assert srv.flavor == sv.flavor
        assert srv.exact is (srv.series in (case["line"], case["line"].split(".")[0]))
        if sv.flavor != "mariadb" and sv.major >= 26:
            assert srv.series == ("9" if sv.flavor == "mysql" else "8.4"), case
            assert srv.warnings and "nearest lower" in srv.warnings[0]
        if sv.flavor == "mariadb" and sv.major >= 12:
            assert srv.series == "11.8" and not srv.exact, case


def test_unknown_series_uses_nearest_lower_with_warning(
    cat: Catalog, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="myaccel.knobs.catalog"):
        srv = cat.for_server("mariadb", "10.8.3")
    assert not srv.exact and srv.series == "10.6"
    assert srv.warnings and "nearest lower known series 10.6" in srv.warnings[0]
    assert "10.8" in caplog.text
    # changes recorded up to the real version still apply: 10.8 autosizes the chunk size
    assert srv.default("innodb_buffer_pool_chunk_size") == 0
    assert not srv.exists("innodb_log_write_ahead_size")  # removed in 10.8.0

    srv = cat.for_server("mariadb", "11.2.4")
    assert srv.series == "10.11" and srv.warnings
    srv = cat.for_server("mariadb", "12.0.1")
    assert srv.series == "11.8" and srv.warnings
    srv = cat.for_server("percona", "9.1.0")
    assert srv.series == "8.4" and srv.warnings
    assert srv.default("innodb_io_capacity") == 10000


def test_older_than_every_series_uses_the_oldest(cat: Catalog) -> None:
    srv = cat.for_server("mysql", "5.6.51")
    assert srv.series == "5.7" and not srv.exact and "older" in srv.warnings[0]
    assert srv.exists("innodb_buffer_pool_size")


def test_mysql_9_is_one_known_series(cat: Catalog) -> None:
    for v in ("9.0.1", "9.5.0"):
        srv = cat.for_server("mysql", v)
        assert srv.exact and srv.series == "9"


def test_backport_lists_follow_series() -> None:
    since = ["10.6.19", "10.11.9", "11.2.5", "11.4.3"]
    assert not change_applies(since, (10, 6, 18))
    assert change_applies(since, (10, 6, 19))
    assert not change_applies(since, (10, 11, 8))
    assert change_applies(since, (10, 11, 9))
    assert not change_applies(since, (11, 0, 6))  # series in between, not listed
    assert change_applies(since, (11, 8, 0))  # newer than every listed series
    assert not change_applies(since, (10, 5, 30))
    assert change_applies(["8.0.30"], (8, 4, 0))
    assert parse_version("9") == (9, 0, 0)


# ------------------------------------------------------------------ documented defaults


@pytest.mark.parametrize(
    ("name", "v80", "v84"),
    [
        ("innodb_io_capacity", 200, 10000),
        ("innodb_io_capacity_max", 2000, 20000),
        ("innodb_adaptive_hash_index", True, False),
        ("innodb_change_buffering", "all", "none"),
        ("innodb_flush_method", "fsync", "O_DIRECT"),
        ("innodb_log_buffer_size", 16 * MiB, 64 * MiB),
        ("innodb_numa_interleave", False, True),
        ("innodb_use_fdatasync", False, True),
        ("innodb_redo_log_capacity", 100 * MiB, 100 * MiB),
        ("innodb_flush_neighbors", 0, 0),
        ("innodb_buffer_pool_size", 128 * MiB, 128 * MiB),
        ("innodb_dedicated_server", False, False),
        ("log_bin", True, True),
        ("sync_binlog", 1, 1),
    ],
)
def test_mysql_84_changed_defaults(cat: Catalog, name: str, v80: object, v84: object) -> None:
    assert cat.for_server("mysql", "8.0.40").default(name) == v80
    assert cat.for_server("mysql", "8.4.0").default(name) == v84
    assert cat.for_server("mysql", "9.1.0").default(name) == v84


def test_mysql_84_machine_dependent_defaults(cat: Catalog) -> None:
    srv = cat.for_server("mysql", "8.4.3")
    big = Machine(logical_cpus=64, ram_bytes=256 * GiB)
    small = Machine(logical_cpus=4, ram_bytes=8 * GiB)
    assert srv.default("innodb_read_io_threads", big) == 32
    assert srv.default("innodb_read_io_threads", small) == 4
    assert srv.default("innodb_purge_threads", big) == 4
    assert srv.default("innodb_purge_threads", Machine(16, 8 * GiB)) == 1
    assert srv.default("innodb_parallel_read_threads", big) == 8
    assert srv.default("temptable_max_ram", big) == 4 * GiB
    assert srv.default("temptable_max_ram", small) == GiB
    # buffer pool instances: <= 1 GiB -> 1 (no machine needed), else min(chunks/2, cpus/4)
    assert srv.default("innodb_buffer_pool_instances") == 1
    bp = {"innodb_buffer_pool_size": 32 * GiB}
    assert srv.default("innodb_buffer_pool_instances", big, bp) == 16
    assert srv.default("innodb_buffer_pool_instances", small, bp) == 1
    assert srv.default("innodb_page_cleaners", big, bp) == 16
    assert srv.machine_dependent("innodb_page_cleaners")
    with pytest.raises(DefaultNotComputable, match="machine"):
        srv.default("innodb_read_io_threads")
    # 8.0: instances 8 above 1 GiB, page cleaners capped at 4
    old = cat.for_server("mysql", "8.0.40")
    assert old.default("innodb_buffer_pool_instances", settings=bp) == 8
    assert old.default("innodb_page_cleaners", settings=bp) == 4
    assert old.default("innodb_page_cleaners") == 1
    assert not old.machine_dependent("innodb_page_cleaners")
    assert old.default("innodb_read_io_threads") == 4


def test_mysql_80_30_redo_capacity(cat: Catalog) -> None:
    assert not cat.for_server("mysql", "8.0.29").exists("innodb_redo_log_capacity")
    srv = cat.for_server("mysql", "8.0.30")
    assert srv.exists("innodb_redo_log_capacity") and srv.dynamic("innodb_redo_log_capacity")
    assert srv.deprecated("innodb_log_file_size")
    assert srv.deprecated("innodb_log_files_in_group")
    assert not cat.for_server("mysql", "8.0.29").deprecated("innodb_log_file_size")
    assert srv.knob("innodb_doublewrite").values[-1] == "DETECT_ONLY"
    assert cat.for_server("mysql", "8.0.29").knob("innodb_doublewrite").values == ("OFF", "ON")
    with pytest.raises(KnobNotAvailable, match=r"only exists from MySQL 8\.0\.30"):
        cat.for_server("mysql", "5.7.44").default("innodb_redo_log_capacity")


def test_mysql_57_specifics(cat: Catalog) -> None:
    srv = cat.for_server("mysql", "5.7.44")
    assert srv.default("query_cache_type") == "OFF" and srv.deprecated("query_cache_type")
    assert srv.default("log_bin") is False
    assert srv.default("innodb_max_dirty_pages_pct") == 75.0
    assert srv.default("back_log") == 80
    assert srv.default("table_definition_cache") == 1400
    assert srv.default("innodb_flush_neighbors") == 1
    assert not srv.exists("innodb_dedicated_server")
    new = cat.for_server("mysql", "8.0.40")
    assert new.removed("query_cache_size") and not new.exists("query_cache_size")
    assert new.knob("query_cache_size").removed_in == "8.0.3"


def test_mariadb_removed_and_changed(cat: Catalog) -> None:
    for v in ("10.6.0", "10.11.11", "11.4.5", "11.8.2"):
        srv = cat.for_server("mariadb", v)
        for name in (
            "innodb_buffer_pool_instances",
            "innodb_page_cleaners",
            "innodb_log_files_in_group",
            "innodb_thread_concurrency",
        ):
            assert srv.removed(name), (name, v)
            assert srv.knob(name).removed_in == "10.6.0"
        for name in ("innodb_dedicated_server", "innodb_redo_log_capacity", "temptable_max_ram"):
            assert not srv.exists(name) and not srv.removed(name)
        assert srv.default("innodb_io_capacity") == 200
        assert srv.default("innodb_adaptive_hash_index") is False
        assert srv.default("innodb_flush_method") == "O_DIRECT"
        assert srv.default("performance_schema") is False
        assert srv.default("sync_binlog") == 0
        assert srv.default("binlog_format") == "MIXED"
        assert "pool-of-threads" in srv.knob("thread_handling").values
        assert srv.default("thread_pool_size", Machine(8, 16 * GiB)) == 8
    # change buffer: default none from 10.6.7, deprecated 10.9, removed 11.0
    assert cat.for_server("mariadb", "10.6.6").default("innodb_change_buffering") == "all"
    assert cat.for_server("mariadb", "10.6.7").default("innodb_change_buffering") == "none"
    assert cat.for_server("mariadb", "10.11.11").deprecated("innodb_change_buffering")
    assert cat.for_server("mariadb", "11.4.5").removed("innodb_change_buffering")
    # 11.x: innodb_flush_method deprecated, innodb_doublewrite an enum with "fast"
    assert not cat.for_server("mariadb", "10.11.11").deprecated("innodb_flush_method")
    assert cat.for_server("mariadb", "11.4.5").deprecated("innodb_flush_method")
    new = cat.for_server("mariadb", "11.8.2")
    assert new.parse_value("innodb_doublewrite", "FAST") == "fast"
    assert new.dynamic("innodb_doublewrite")
    assert cat.is_unsafe("innodb_doublewrite", "fast")
    with pytest.raises(InvalidKnobValue):
        cat.for_server("mariadb", "10.11.11").parse_value("innodb_doublewrite", "fast")
    # purge batch size: 127 via backports
    assert cat.for_server("mariadb", "10.6.15").default("innodb_purge_batch_size") == 300
    assert cat.for_server("mariadb", "10.6.18").default("innodb_purge_batch_size") == 1000
    assert cat.for_server("mariadb", "11.4.2").default("innodb_purge_batch_size") == 1000
    assert cat.for_server("mariadb", "10.6.19").default("innodb_purge_batch_size") == 127
    assert cat.for_server("mariadb", "10.11.8").default("innodb_purge_batch_size") == 1000
    assert cat.for_server("mariadb", "11.8.2").default("innodb_purge_batch_size") == 127
    # redo log: resizable online from 10.9; write-ahead size removed 10.8, back read-only
    assert not cat.for_server("mariadb", "10.6.21").dynamic("innodb_log_file_size")
    assert cat.for_server("mariadb", "10.11.11").dynamic("innodb_log_file_size")
    assert cat.for_server("mariadb", "10.6.21").dynamic("innodb_log_write_ahead_size")
    assert not cat.for_server("mariadb", "10.11.8").exists("innodb_log_write_ahead_size")
    assert cat.for_server("mariadb", "10.11.9").exists("innodb_log_write_ahead_size")
    assert not cat.for_server("mariadb", "10.11.9").dynamic("innodb_log_write_ahead_size")
    assert cat.for_server("mariadb", "10.6.21").default("innodb_buffer_pool_chunk_size") == (
        128 * MiB
    )
    assert cat.for_server("mariadb", "10.11.11").default("innodb_buffer_pool_chunk_size") == 0


def test_autosized_defaults_follow_other_knobs(cat: Catalog) -> None:
    srv = cat.for_server("mariadb", "10.11.11")
    assert srv.default("thread_cache_size") == 151
    assert srv.default("thread_cache_size", settings={"max_connections": 1000}) == 256
    assert srv.default("back_log") == 80
    assert srv.default("back_log", settings={"max-connections": 10000}) == 900
    assert srv.default("innodb_io_capacity_max", settings={"innodb_io_capacity": 5000}) == 10000
    assert srv.default("innodb_open_files") == 2000
    assert not srv.machine_dependent("innodb_open_files")
    assert srv.machine_dependent("table_open_cache_instances")
    assert srv.default("table_open_cache_instances") == 8  # nominal
    with pytest.raises(DefaultNotComputable):
        srv.default("open_files_limit")


def test_machine_from_probe_facts() -> None:
    from myaccel.model import Fact

    class Cpu:
        logical_cpus = Fact[int](value=8)

    class Mem:
        total_bytes = Fact[int](value=16 * GiB)

    class NoMem:
        total_bytes = Fact[int](unknown="no /proc/meminfo")

    assert Machine.from_facts(Cpu(), Mem()) == Machine(8, 16 * GiB)  # type: ignore[arg-type]
    assert Machine.from_facts(Cpu(), NoMem()) is None  # type: ignore[arg-type]


def test_percona_adds_thread_pool(cat: Catalog) -> None:
    ps = cat.for_server("percona", "8.0.40")
    my = cat.for_server("mysql", "8.0.40")
    assert ps.exists("thread_pool_size") and not my.exists("thread_pool_size")
    assert "pool-of-threads" in ps.knob("thread_handling").values
    assert "pool-of-threads" not in my.knob("thread_handling").values
    assert ps.default("thread_pool_max_threads") == 100000
    assert ps.default("innodb_io_capacity") == 200  # MySQL's history underneath
    assert "ALL_O_DIRECT" in cat.for_server("percona", "5.7.44").knob("innodb_flush_method").values
    assert "ALL_O_DIRECT" not in ps.knob("innodb_flush_method").values
    assert "percona.com" in ps.knob("thread_pool_size").source
    assert "dev.mysql.com/doc/refman/8.0/" in ps.knob("innodb_io_capacity").source


def test_dynamic_and_scope(cat: Catalog) -> None:
    srv = cat.for_server("mysql", "8.0.40")
    assert srv.dynamic("innodb_buffer_pool_size")
    assert not srv.dynamic("innodb_buffer_pool_instances")
    assert srv.dynamic("innodb_log_buffer_size")
    assert not cat.for_server("mysql", "5.7.44").dynamic("innodb_log_buffer_size")
    assert cat.get("sort_buffer_size") is not None
    assert cat.get("sort-buffer-size") == cat.get("SORT_BUFFER_SIZE")
    assert cat.get("nosuch") is None
    assert "innodb_io_capacity" in cat and "nosuch" not in cat
    with pytest.raises(UnknownKnob):
        srv.dynamic("nosuch")
    mdb = cat.for_server("mariadb", "10.11.11")
    with pytest.raises(KnobNotAvailable, match=r"removed in MariaDB 10\.6\.0"):
        mdb.dynamic("innodb_buffer_pool_instances")
    assert mdb.get("innodb_buffer_pool_instances") is None


# ------------------------------------------------------------------ values and options


def test_parse_values(cat: Catalog) -> None:
    assert cat.parse_value("innodb_buffer_pool_size", "128M") == 128 * MiB
    assert cat.parse_value("innodb_buffer_pool_size", "8g") == 8 * GiB
    assert cat.parse_value("innodb_buffer_pool_size", " 1024K ") == MiB
    assert cat.parse_value("innodb_adaptive_hash_index", "on") is True
    assert cat.parse_value("innodb_adaptive_hash_index", "0") is False
    assert cat.parse_value("innodb_adaptive_hash_index", "TRUE") is True
    assert cat.parse_value("innodb_change_buffering", "NONE") == "none"
    assert cat.parse_value("innodb_change_buffering", "0") == "none"
    assert cat.parse_value("innodb_flush_method", "o_direct") == "O_DIRECT"
    assert cat.parse_value("query_cache_type", "2") == "DEMAND"
    assert cat.parse_value("innodb_doublewrite", "1") == "ON"
    assert cat.parse_value("innodb_doublewrite", "true") == "ON"
    assert cat.parse_value("innodb_max_dirty_pages_pct", "90.000000") == 90.0
    assert cat.parse_value("back_log", "-1") == -1
    for name, bad in [
        ("innodb_buffer_pool_size", "1.5G"),
        ("innodb_buffer_pool_size", "lots"),
        ("innodb_adaptive_hash_index", "maybe"),
        ("innodb_change_buffering", "some"),
        ("innodb_max_dirty_pages_pct", "nan"),
    ]:
        with pytest.raises(InvalidKnobValue):
            cat.parse_value(name, bad)


def test_server_parse_checks_ranges_and_version_values(cat: Catalog) -> None:
    srv = cat.for_server("mysql", "8.4.3")
    assert srv.parse_value("innodb_io_capacity", "20000") == 20000
    with pytest.raises(InvalidKnobValue, match="below the minimum 100"):
        srv.parse_value("innodb_io_capacity", "50")
    with pytest.raises(InvalidKnobValue, match="above the maximum 64"):
        srv.parse_value("innodb_buffer_pool_instances", "65")
    assert srv.parse_value("back_log", "-1") == -1  # the autosize sentinel is accepted
    assert srv.parse_value("innodb_doublewrite", "detect_only") == "DETECT_ONLY"
    old = cat.for_server("mysql", "8.0.29")
    with pytest.raises(InvalidKnobValue, match="one of OFF, ON"):
        old.parse_value("innodb_doublewrite", "DETECT_ONLY")
    with pytest.raises(InvalidKnobValue):
        cat.for_server("mysql", "8.0.40").parse_value("innodb_flush_method", "ALL_O_DIRECT")
    assert cat.for_server("percona", "5.7.44").parse_value(
        "innodb_flush_method", "all_o_direct"
    ) == ("ALL_O_DIRECT")
    with pytest.raises(InvalidKnobValue, match="above the maximum 2"):
        srv.parse_value("innodb_flush_log_at_trx_commit", "3")
    assert cat.for_server("mariadb", "10.11.11").parse_value(
        "innodb_flush_log_at_trx_commit", "3"
    ) == (3)


def test_format_option(cat: Catalog) -> None:
    srv = cat.for_server("mysql", "8.4.3")
    assert srv.format_option("innodb_buffer_pool_size", 8 * GiB) == "innodb-buffer-pool-size = 8G"
    assert srv.format_option("innodb_buffer_pool_size", "12288M") == (
        "innodb-buffer-pool-size = 12G"
    )
    assert srv.format_option("innodb_log_buffer_size", 3 * MiB + 1) == (
        "innodb-log-buffer-size = 3145729"
    )
    assert srv.format_option("innodb_io_capacity", 2000) == "innodb-io-capacity = 2000"
    assert srv.format_option("innodb_adaptive_hash_index", "off") == (
        "innodb-adaptive-hash-index = OFF"
    )
    assert srv.format_option("innodb_flush_method", "o_direct") == (
        "innodb-flush-method = O_DIRECT"
    )
    assert srv.format_option("innodb_max_dirty_pages_pct", 80) == (
        "innodb-max-dirty-pages-pct = 80"
    )
    assert srv.format_option("innodb_max_dirty_pages_pct", "75.5") == (
        "innodb-max-dirty-pages-pct = 75.5"
    )
    assert srv.format_option("log_bin", True) == "log-bin"
    assert srv.format_option("log_bin", "OFF") == "skip-log-bin"
    assert srv.format_option("skip_name_resolve", "ON") == "skip-name-resolve = ON"
    with pytest.raises(KnobNotAvailable):
        cat.for_server("mariadb", "10.11.11").format_option("innodb_buffer_pool_instances", 8)
    with pytest.raises(InvalidKnobValue):
        srv.format_option("innodb_io_capacity", True)
    assert cat.format_option("innodb-log-file-size", "1G") == "innodb-log-file-size = 1G"


@given(st.integers(min_value=0, max_value=(1 << 63) - 1))
def test_size_format_parse_round_trip(n: int) -> None:
    assert parse_int(format_size(n)) == n


@given(st.sampled_from(["K", "M", "G", "T", "k", "m", "g"]), st.integers(0, 1 << 20))
def test_size_suffixes(suffix: str, n: int) -> None:
    unit = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[suffix.upper()]
    assert parse_int(f"{n}{suffix}") == n * unit
