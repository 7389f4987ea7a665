"""apply's guard (actions/guard.py): durability knobs need a sealed relaxed plan, values
must fit the catalog's type and range for the server's flavor and version."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from myaccel.actions.guard import (
    DurabilityRefused,
    PlanRefused,
    ServerId,
    ValueRefused,
    applied_recommendations,
    check_apply,
    check_plan,
    plan_problems,
    server_id,
)
from myaccel.facts.collect import collect_facts
from myaccel.knobs.catalog import Catalog
from myaccel.model import Facts, ServerFacts, known
from myaccel.rules.engine import make_plan
from myaccel.rules.model import Plan, Recommendation, target_knob

ROOTS = Path(__file__).parent.parent / "fixtures" / "sysroots"
MARIADB = ServerId("mariadb", "10.11.19-MariaDB-0+deb12u1", "server")
MYSQL = ServerId("mysql", "8.0.40", "server")
DURABILITY_CHANGES = [
    ("innodb_flush_log_at_trx_commit", "0"),
    ("innodb_flush_log_at_trx_commit", "2"),
    ("sync_binlog", "0"),
    ("sync_binlog", "1000"),
    ("innodb_doublewrite", "0"),
    ("innodb_doublewrite", "OFF"),
    ("innodb_flush_method", "O_DIRECT"),  # any change counts, a safe value too
    ("innodb_flush_method", "O_DIRECT_NO_FSYNC"),
]


def rec(target: str, proposed: str, *, id: str = "t", **kw: Any) -> Recommendation:
    fields: dict[str, Any] = {
        "id": id,
        "layer": "server",
        "title": "test",
        "target": target,
        "current": None,
        "proposed": proposed,
        "rationale": "test",
        "expected_effect": "test",
        "effect_source": "test",
        "risk": "online",
        "verify": "test",
    }
    fields.update(kw)
    return Recommendation(**fields)


def plan(*recs: Recommendation, durability: str = "strict", sealed: bool = True) -> Plan:
    p = Plan(
        created_at="2026-01-01T00:00:00+00:00",
        myaccel_version="test",
        facts_digest="0" * 16,
        hostname="test",
        server={"flavor": "mariadb", "version": "10.11.19", "connection": "test"},
        durability=durability,  # type: ignore[arg-type]
        recommendations=list(recs),
    )
    return p.sealed() if sealed else p


def refused(p: Plan, server: ServerId | None = MARIADB, **kw: Any) -> PlanRefused:
    with pytest.raises(PlanRefused) as e:
        check_plan(p, server, **kw)
    return e.value


# ---------------------------------------------------------------- durability


@pytest.mark.parametrize(("knob", "value"), DURABILITY_CHANGES)
@pytest.mark.parametrize("scheme", ["mysql:{}", "mycnf:mysqld/{}", "mycnf:server/loose-{}"])
def test_strict_plan_changing_a_durability_knob_is_refused(
    knob: str, value: str, scheme: str
) -> None:
    target = scheme.format(knob if scheme == "mysql:{}" else knob.replace("_", "-"))
    err = refused(plan(rec(target, value, id="x")))
    assert isinstance(err, DurabilityRefused) and err.exit_code == 2
    assert err.message.startswith(f"x: {target} = {value} changes {knob}, a durability knob")
    assert "--durability strict" in err.message and "\n" not in err.message
    assert "--durability relaxed" in err.hint


@pytest.mark.parametrize(("knob", "value"), DURABILITY_CHANGES)
def test_sealed_relaxed_plan_may_change_durability_knobs(knob: str, value: str) -> None:
    p = plan(rec(f"mysql:{knob}", value), durability="relaxed")
    assert p.digest_ok
    check_plan(p, MARIADB)  # no error


def test_relaxed_written_by_hand_is_refused() -> None:
    strict = plan(rec("mysql:innodb_flush_log_at_trx_commit", "0"))
    doc = json.loads(strict.model_dump_json())
    doc["durability"] = "relaxed"  # the edit: digest stays the strict plan's
    edited = Plan.model_validate(doc)
    err = refused(edited)
    assert isinstance(err, DurabilityRefused)
    assert "digest does not match" in err.message and "re-make the plan" in err.hint


def test_relaxed_plan_edited_elsewhere_loses_its_durability_permission() -> None:
    p = plan(
        rec("mysql:sync_binlog", "0", id="a"),
        rec("mysql:innodb_io_capacity", "1000", id="b"),
        durability="relaxed",
    )
    doc = json.loads(p.model_dump_json())
    doc["recommendations"][1]["proposed"] = "2000"
    assert "digest does not match" in refused(Plan.model_validate(doc)).message


def test_relaxed_plan_without_digest_is_refused_with_a_hint() -> None:
    old = plan(rec("mysql:sync_binlog", "0"), durability="relaxed", sealed=False)
    err = refused(old)
    assert "has no digest" in err.message and "older myaccel" in err.message
    assert "myaccel plan --durability relaxed" in err.hint


def test_plan_without_digest_still_loads_and_applies_non_durability_changes() -> None:
    doc = json.loads(plan(rec("mysql:innodb_io_capacity", "1000")).model_dump_json())
    del doc["digest"]
    p = Plan.model_validate(doc)
    assert p.digest is None and not p.digest_ok
    check_plan(p, MARIADB)


def test_durability_knobs_in_the_catalog() -> None:
    cat = Catalog.load()
    for knob in ("innodb_flush_log_at_trx_commit", "sync_binlog", "innodb_doublewrite"):
        assert cat.is_durability(knob)
    assert cat.is_durability("innodb-flush-method")
    assert not cat.is_durability("innodb_io_capacity") and not cat.is_durability("nosuch")


def test_digest_covers_durability_and_content() -> None:
    p = plan(rec("mysql:innodb_io_capacity", "1000"))
    assert p.digest == p.content_digest() and len(p.digest or "") == 64
    relaxed = p.model_copy(update={"durability": "relaxed"})
    assert relaxed.content_digest() != p.content_digest() and not relaxed.digest_ok
    # a JSON round trip keeps it
    assert Plan.model_validate_json(p.model_dump_json()).digest_ok


# ---------------------------------------------------------------- values


@pytest.mark.parametrize(
    ("target", "value", "server", "words"),
    [
        ("mysql:innodb_buffer_pool_size", "-5", MARIADB, "below the minimum 2097152 (2M)"),
        ("mysql:innodb_buffer_pool_size", "1M", MARIADB, "below the minimum 2097152"),
        ("mysql:innodb_buffer_pool_size", "0", MYSQL, "below the minimum 5242880 (5M)"),
        ("mysql:innodb_buffer_pool_size", "99999999999999999999", MARIADB, "above the maximum"),
        ("mysql:innodb_buffer_pool_size", "1.5G", MARIADB, "not a size in bytes"),
        ("mysql:innodb_buffer_pool_size", "lots", MYSQL, "not a size in bytes"),
        ("mysql:innodb_flush_neighbors", "3", MARIADB, "above the maximum 2"),
        ("mysql:innodb_io_capacity", "50", MARIADB, "below the minimum 100"),
        ("mysql:max_connections", "0", MYSQL, "below the minimum 1"),
        ("mysql:max_connections", "200000", MYSQL, "above the maximum 100000"),
        ("mysql:tmp_table_size", "-1", MYSQL, "below the minimum"),  # no catalog min: >= 0
        ("mysql:thread_handling", "bogus-value", MARIADB, "not one of its values"),
        ("mysql:innodb_adaptive_hash_index", "maybe", MARIADB, "not a boolean"),
        ("mycnf:mysqld/innodb-io-capacity", "-1", MARIADB, "below the minimum 100"),
    ],
)
def test_out_of_range_or_bad_type_is_refused(
    target: str, value: str, server: ServerId, words: str
) -> None:
    err = refused(plan(rec(target, value, id="bad")), server)
    assert isinstance(err, ValueRefused) and err.exit_code == 2
    assert err.message.startswith(f"bad: {target} = {value} is not valid")
    assert words in err.message, err.message
    assert "allowed: " in err.message and "(source: https://" in err.message
    assert err.hint and "\n" not in err.message


def test_message_names_range_and_source() -> None:
    err = refused(plan(rec("mysql:innodb_buffer_pool_size", "-5", id="bp")))
    assert err.message == (
        "bp: mysql:innodb_buffer_pool_size = -5 is not valid on MariaDB 10.11.19: below the "
        "minimum 2097152 (2M); allowed: 2097152 (2M) to 18446744073701163008 (source: "
        "https://mariadb.com/kb/en/innodb-system-variables/#innodb_buffer_pool_size)"
    )


def test_enum_values_depend_on_the_version() -> None:
    # innodb_doublewrite=fast exists from MariaDB 11.4.2 only
    p = plan(rec("mysql:innodb_doublewrite", "fast"), durability="relaxed")
    check_plan(p, ServerId("mariadb", "11.4.5", "server"))
    assert "not one of its values" in refused(p, MARIADB).message


def test_removed_and_missing_knobs_are_refused() -> None:
    err = refused(plan(rec("mysql:innodb_buffer_pool_instances", "8", id="i")), MARIADB)
    assert "innodb_buffer_pool_instances was removed in MariaDB" in err.message
    assert "source: https://" in err.message
    check_plan(plan(rec("mysql:innodb_buffer_pool_instances", "8")), MYSQL)
    err = refused(plan(rec("mysql:innodb_redo_log_capacity", "1G")), MARIADB)
    assert "does not exist in MariaDB" in err.message or "only exists" in err.message
    err = refused(
        plan(rec("mysql:innodb_redo_log_capacity", "1G")), ServerId("mysql", "8.0.20", "x")
    )
    assert "only exists from MySQL 8.0.30" in err.message


def test_unknown_knob_is_refused() -> None:
    err = refused(plan(rec("mysql:innodb_nosuch_knob", "1", id="u")))
    assert isinstance(err, ValueRefused)
    assert "innodb_nosuch_knob is not in myaccel's knob catalog" in err.message


def test_control_characters_are_refused() -> None:
    err = refused(plan(rec("mycnf:mysqld/innodb_io_capacity", "1000\n[client]\nuser=x")))
    assert "control character" in err.message and "\n" not in err.message


def test_sentinels_and_suffixes_are_accepted() -> None:
    check_plan(
        plan(
            rec("mysql:table_definition_cache", "-1", id="a"),  # -1 = computed
            rec("mysql:innodb_buffer_pool_size", "16G", id="b"),
            rec("mysql:innodb_adaptive_hash_index", "OFF", id="c"),
            rec("mycnf:mysqld/innodb-log-buffer-size", "64M", id="e"),
            rec("mycnf:client/whatever", "x", id="f"),  # not a server group: not checked
        ),
        MYSQL,
    )
    check_plan(plan(rec("mysql:thread_handling", "pool-of-threads")), MARIADB)
    assert (
        "not one of"
        in refused(plan(rec("mysql:thread_handling", "pool-of-threads")), MYSQL).message
    )


def test_every_problem_is_counted_first_named() -> None:
    p = plan(
        rec("mysql:innodb_buffer_pool_size", "-5", id="first"),
        rec("mysql:sync_binlog", "0", id="dur"),
        rec("mysql:thread_handling", "nope", id="third"),
        rec("mysql:innodb_io_capacity", "1000", id="fine"),
    )
    err = refused(p)
    # durability problems come first, then values; the others are counted
    assert err.message.startswith("dur: mysql:sync_binlog = 0 changes sync_binlog")
    assert err.message.endswith("(and 2 more problems: first, third)")
    assert err.context["problems"] == "3"
    assert len(plan_problems(p, MARIADB)) == 3


def test_only_and_layers_and_advisory_narrow_the_check() -> None:
    p = plan(
        rec("mysql:sync_binlog", "0", id="dur"),
        rec("mysql:innodb_io_capacity", "1000", id="ok"),
        rec("mysql:sync_binlog", "1", id="adv", action="advisory"),
        rec("sysctl:vm.swappiness", "-5", id="os", layer="os"),
    )
    check_plan(p, MARIADB, only=["ok", "adv", "os"])
    check_plan(p, MARIADB, layers=["os"])
    assert [r.id for r in applied_recommendations(p)] == ["dur", "ok"]
    refused(p, MARIADB, only=["dur"])


def test_unknown_server_is_refused_for_server_changes() -> None:
    err = refused(plan(rec("mysql:innodb_io_capacity", "1000")), None)
    assert "cannot be checked" in err.message and "flavor and version" in err.message
    check_plan(plan(rec("sysctl:vm.swappiness", "1", layer="os")), None)
    bad = refused(plan(rec("mysql:innodb_io_capacity", "1")), ServerId("mysql", "garbage", "plan"))
    assert "cannot be used" in bad.message


def test_target_knob() -> None:
    assert target_knob("mysql:innodb_io_capacity") == "innodb_io_capacity"
    assert target_knob("mycnf:mysqld/loose-skip-innodb-doublewrite") == "innodb_doublewrite"
    assert target_knob("mycnf:mariadb-10.11/sync-binlog") == "sync_binlog"
    assert target_knob("mycnf:client/user") is None
    assert target_knob("sysctl:vm.swappiness") is None


def test_skip_option_is_a_durability_change() -> None:
    err = refused(plan(rec("mycnf:mysqld/skip-innodb-doublewrite", "")))
    assert isinstance(err, DurabilityRefused)


# ---------------------------------------------------------------- server identity


def test_server_id_prefers_the_probed_server() -> None:
    p = plan(rec("mysql:innodb_io_capacity", "1000"))
    assert server_id(None, p) == ServerId("mariadb", "10.11.19", "plan")
    f = _facts("this-vm", "8.0.40", "MySQL Community Server - GPL", {})
    assert server_id(f, p) == ServerId("mysql", "8.0.40", "server")
    # the plan's server (MariaDB) has no innodb_buffer_pool_instances; the probed MySQL has
    check_apply(plan(rec("mysql:innodb_buffer_pool_instances", "8")), f)
    with pytest.raises(ValueRefused):
        check_apply(plan(rec("mysql:innodb_buffer_pool_instances", "8")), None)


# ---------------------------------------------------------------- plans myaccel makes


def _facts(root: str, version: str, comment: str, variables: dict[str, str]) -> Facts:
    from myaccel.server.flavor import parse_server_version

    sv = parse_server_version(version, comment)
    assert sv is not None
    q = "test"
    srv = ServerFacts(
        connection="test",
        flavor=known(sv.flavor, q),
        version=known(sv.text, q),
        version_string=known(version, q),
        version_comment=known(comment, q),
        uptime_s=known(60, q),
        datadir=known("/var/lib/mysql", q),
        data_size_bytes=known(10 << 30, q),
        pid=known(1, q),
        binary_path=known("/usr/sbin/mysqld", q),
        cpus_allowed=known("0-127", q),
        mems_allowed=known("0-3", q),
        cgroup_limit_bytes=known(None, q),
        variables=known(dict(variables), q),
        status=known({"Uptime": "60"}, q),
    )
    return _HOSTS[root].model_copy(update={"server": srv})


_HOSTS = {name: collect_facts(ROOTS / name, perf_live_test=False) for name in ("this-vm",)}
_VARS = {
    "innodb_buffer_pool_size": "134217728",
    "innodb_log_buffer_size": "16777216",
    "innodb_io_capacity": "200",
    "innodb_flush_neighbors": "1",
    "innodb_flush_log_at_trx_commit": "1",
    "innodb_adaptive_hash_index": "ON",
    "max_connections": "151",
    "performance_schema": "ON",
    "read_buffer_size": "131072",
    "sort_buffer_size": "262144",
    "join_buffer_size": "262144",
    "table_open_cache": "4000",
    "thread_handling": "one-thread-per-connection",
}


@settings(max_examples=40, deadline=None)
@given(
    mysql=st.booleans(),
    relaxed=st.booleans(),
    flush_method=st.sampled_from(["fsync", "O_DIRECT", "O_DSYNC"]),
    log_bin=st.booleans(),
    sync_binlog=st.sampled_from(["0", "1", "100"]),
    max_conn=st.integers(min_value=10, max_value=5000),
)
def test_plans_myaccel_makes_pass_the_guard(
    mysql: bool, relaxed: bool, flush_method: str, log_bin: bool, sync_binlog: str, max_conn: int
) -> None:
    variables = dict(
        _VARS,
        innodb_flush_method=flush_method,
        log_bin="ON" if log_bin else "OFF",
        sync_binlog=sync_binlog,
        max_connections=str(max_conn),
    )
    if mysql:
        variables["innodb_redo_log_capacity"] = "104857600"
        f = _facts("this-vm", "8.0.40", "MySQL Community Server - GPL", variables)
    else:
        variables["innodb_log_file_size"] = "100663296"
        f = _facts("this-vm", "10.11.19-MariaDB", "mariadb.org binary distribution", variables)
    from myaccel.rules.knobview import knob_view_for

    p = make_plan(f, durability="relaxed" if relaxed else "strict", knobs=knob_view_for(f))
    assert p.digest_ok and applied_recommendations(p)  # the buffer pool, at least
    check_apply(p, f)  # strict or relaxed, what `myaccel plan` makes, apply accepts
    cat = Catalog.load()
    if not relaxed:
        assert not any(
            cat.is_durability(target_knob(r.target) or "") for r in applied_recommendations(p)
        )
