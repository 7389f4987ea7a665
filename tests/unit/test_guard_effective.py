"""apply's guard judges what a plan would make the server read, whatever the target kind
(issue 38, item 1-3): option files written by ``file:``, any group the server reads, any
spelling of an option, server command lines in systemd drop-ins and environment files,
include directives, myaccel's own managed files, buffers larger than the host's memory.
Every refusal here passed the guard before (it looked only at ``mysql:`` and ``mycnf:``
targets, in four groups, and at the catalog's range)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from myaccel.actions.effective import HostMemory, durability_knobs, host_memory, meminfo_total
from myaccel.actions.guard import (
    DurabilityRefused,
    IncludeRefused,
    ManagedFileRefused,
    MemoryRefused,
    PlanRefused,
    ServerId,
    check_apply,
    check_plan,
)
from myaccel.knobs.catalog import Catalog
from myaccel.rules.model import Plan, Recommendation
from myaccel.server.option_spelling import (
    clean_value,
    command_line_words,
    include_directives,
    is_server_group,
    option_file_words,
    option_word,
)

MARIADB = ServerId("mariadb", "10.11.19-MariaDB-0+deb12u1", "server")
GIB = 1 << 30
RAM = HostMemory(8 * GIB, "/proc/meminfo")

# (line as written in an option file, the durability knob it changes)
OPTION_FILE_SPELLINGS = [
    ("innodb_flush_log_at_trx_commit=0", "innodb_flush_log_at_trx_commit"),
    ("innodb-flush-log-at-trx-commit = 0", "innodb_flush_log_at_trx_commit"),
    ("INNODB_Flush_Log_At_Trx_Commit=2", "innodb_flush_log_at_trx_commit"),
    ("loose-innodb-flush-log-at-trx-commit=0", "innodb_flush_log_at_trx_commit"),
    ("loose_loose_innodb_flush_log_at_trx_commit=0", "innodb_flush_log_at_trx_commit"),
    ("--innodb-flush-log-at-trx-commit=0", "innodb_flush_log_at_trx_commit"),
    ('innodb_flush_log_at_trx_commit = "0" # fast', "innodb_flush_log_at_trx_commit"),
    ("innodb_flush_log_at_trx_commit='2'", "innodb_flush_log_at_trx_commit"),
    (
        "innodb_flush_log_at_trx_commit=0#no blank before the comment",
        "innodb_flush_log_at_trx_commit",
    ),
    ("\tinnodb_flush_log_at_trx_commit\t=\t0\t", "innodb_flush_log_at_trx_commit"),
    ("innodb_flush_log_at_trx=0", "innodb_flush_log_at_trx_commit"),  # a prefix
    ("innodb-flush-log-at-trx-comm = 2", "innodb_flush_log_at_trx_commit"),
    ("set-variable = innodb_flush_log_at_trx_commit=0", "innodb_flush_log_at_trx_commit"),
    ("skip-innodb-doublewrite", "innodb_doublewrite"),
    ("skip_innodb_doublewrite # off", "innodb_doublewrite"),
    ("disable-innodb-doublewrite", "innodb_doublewrite"),
    ("loose-skip-innodb-doublewrite", "innodb_doublewrite"),
    ("skip-loose-innodb-doublewrite", "innodb_doublewrite"),  # prefixes in any order
    ("enable-innodb-doublewrite", "innodb_doublewrite"),  # any value: a safe one too
    ("innodb_doublewrite=OFF", "innodb_doublewrite"),
    ("innodb-doublewrite = false", "innodb_doublewrite"),
    ("innodb_doublewrite", "innodb_doublewrite"),
    ("sync_binlog=0", "sync_binlog"),
    ("SYNC-BINLOG = 1000", "sync_binlog"),
    ("sync_bin=0", "sync_binlog"),
    ("innodb_flush_method=O_DIRECT_NO_FSYNC", "innodb_flush_method"),
    ("innodb-flush-method = nosync", "innodb_flush_method"),
    ("loose-innodb_flush_method='littlesync'", "innodb_flush_method"),
]
SERVER_GROUPS = [
    "mysqld",
    "server",
    "mariadb",
    "mariadbd",
    "mysqld-8.0",
    "mariadb-10.11",
    "mariadbd-11.4",
    "client-server",
    "galera",
    "mysqld1",
    "MYSQLD",
    " mysqld ",
]
# (command-line text in a systemd value or a file, the durability knob it changes)
COMMAND_LINE_SPELLINGS = [
    ("/usr/sbin/mariadbd --innodb-flush-log-at-trx-commit=0", "innodb_flush_log_at_trx_commit"),
    ("/usr/sbin/mysqld --innodb_flush_log_at_trx_commit 2", "innodb_flush_log_at_trx_commit"),
    ("/usr/sbin/mariadbd --loose-skip-innodb-doublewrite", "innodb_doublewrite"),
    ("/usr/sbin/mariadbd --skip-innodb_doublewrite $MYSQLD_OPTS", "innodb_doublewrite"),
    ("/usr/sbin/mariadbd --disable-innodb-doublewrite", "innodb_doublewrite"),
    ('MYSQLD_OPTS="--sync-binlog=0"', "sync_binlog"),
    ("MYSQLD_OPTS=--SYNC_BINLOG=0", "sync_binlog"),
    ("'MYSQLD_OPTS=--innodb-flush-method=O_DIRECT_NO_FSYNC'", "innodb_flush_method"),
    ('MYSQLD_OPTS="--port=3307 --innodb-flush-log-at-trx=0"', "innodb_flush_log_at_trx_commit"),
    ("/usr/sbin/mariadbd --set-variable=sync_binlog=0", "sync_binlog"),
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
    return Recommendation(**(fields | kw))


def plan(*recs: Recommendation, durability: str = "strict") -> Plan:
    """A sealed plan (its digest matches) for a MariaDB 10.11 server."""
    return Plan(
        created_at="2026-01-01T00:00:00+00:00",
        myaccel_version="test",
        facts_digest="0" * 16,
        hostname="test",
        server={"flavor": "mariadb", "version": "10.11.19"},
        durability=durability,  # type: ignore[arg-type]
        recommendations=list(recs),
    ).sealed()


def relaxed(*recs: Recommendation) -> Plan:
    return plan(*recs, durability="relaxed")


def refused(p: Plan, memory: HostMemory | None = RAM, **kw: Any) -> PlanRefused:
    with pytest.raises(PlanRefused) as e:
        check_plan(p, MARIADB, memory=memory, **kw)
    err = e.value
    assert err.exit_code == 2 and "\n" not in err.message and err.hint
    return err


def os_rec(target: str, proposed: str, *, id: str = "t") -> Recommendation:
    return rec(target, proposed, id=id, layer="os", risk="restart")


def passes(p: Plan, memory: HostMemory | None = RAM) -> None:
    check_plan(p, MARIADB, memory=memory)


# ---------------------------------------------------------------- spellings


@pytest.mark.parametrize(("line", "knob"), OPTION_FILE_SPELLINGS)
def test_option_file_spellings_name_the_durability_knob(line: str, knob: str) -> None:
    cat = Catalog.load()
    words = list(option_file_words(f"[mysqld]\n{line}\n", names={s.name for s in cat.specs}))
    assert len(words) == 1
    assert durability_knobs(cat, words[0].name) == [knob]


@pytest.mark.parametrize(("line", "knob"), OPTION_FILE_SPELLINGS)
def test_file_target_writing_a_durability_option_is_refused(line: str, knob: str) -> None:
    content = f"# tuned\n[mysqld]\ninnodb_io_capacity=2000\n{line}\n"
    err = refused(plan(os_rec("file:/etc/mysql/conf.d/50-fast.cnf", content, id="f")))
    assert isinstance(err, DurabilityRefused)
    assert err.message.startswith("f: file:/etc/mysql/conf.d/50-fast.cnf writes `")
    assert f"which changes {knob}, a durability knob" in err.message
    assert "--durability strict" in err.message and "--durability relaxed" in err.hint


@pytest.mark.parametrize("group", SERVER_GROUPS)
def test_every_group_the_server_reads_counts(group: str) -> None:
    assert is_server_group(group)
    content = f"[client]\nuser=app\n[{group}]\ninnodb_flush_log_at_trx_commit=0\n"
    assert isinstance(refused(plan(os_rec("file:/etc/my.cnf", content))), DurabilityRefused)
    mycnf = rec(f"mycnf:{group.strip()}/innodb_flush_log_at_trx_commit", "0")
    assert isinstance(refused(plan(mycnf)), DurabilityRefused)


@pytest.mark.parametrize("group", ["client", "mysql", "mysqladmin", "client-mariadb"])
def test_groups_the_server_does_not_read_are_left_alone(group: str) -> None:
    assert not is_server_group(group)
    content = f"[{group}]\ninnodb_flush_log_at_trx_commit=0\n[mysqld]\ninnodb_io_capacity=2000\n"
    passes(plan(os_rec("file:/etc/mysql/conf.d/60-client.cnf", content)))


def test_comments_are_not_options() -> None:
    content = (
        "[mysqld]\n# innodb_flush_log_at_trx_commit=0\n; sync_binlog=0\n"
        "innodb_io_capacity = 2000 # sync_binlog=0 is a comment\n"
    )
    passes(plan(os_rec("file:/etc/mysql/conf.d/60-x.cnf", content)))
    unit = (
        "[Service]\n# ExecStart=/usr/sbin/mariadbd --skip-innodb-doublewrite\nLimitNOFILE=65535\n"
    )
    passes(plan(os_rec("file:/etc/systemd/system/mariadb.service.d/50-x.conf", unit)))


@pytest.mark.parametrize(
    ("key", "name", "value"),
    [
        ("--Loose-Innodb-Flush-Log-At-Trx-Commit", "innodb_flush_log_at_trx_commit", "0"),
        ("skip-innodb-doublewrite", "innodb_doublewrite", "OFF"),
        ("disable_innodb_doublewrite", "innodb_doublewrite", "OFF"),
        ("enable-innodb-doublewrite", "innodb_doublewrite", "ON"),
        ("skip-name-resolve", "skip_name_resolve", None),  # a name of its own
    ],
)
def test_option_word(key: str, name: str, value: str | None) -> None:
    w = option_word(key, "0" if value == "0" else None, names={"skip_name_resolve"})
    assert (w.name, w.value) == (name, value)


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ('"0" # fast', "0"),
        ("'O_DIRECT' ", "O_DIRECT"),
        ("0#x", "0"),
        ('"a # b"', "a # b"),
        ("  2  ", "2"),
    ],
)
def test_clean_value(raw: str, value: str) -> None:
    assert clean_value(raw) == value


# ---------------------------------------------------------------- target kinds


@pytest.mark.parametrize(("text", "knob"), COMMAND_LINE_SPELLINGS)
@pytest.mark.parametrize(
    "target",
    [
        "systemd:mariadb.service/ExecStart",
        "systemd:server/Environment",
        "file:/etc/systemd/system/mariadb.service.d/50-opts.conf",
        "file:/etc/default/mariadb",
    ],
)
def test_server_command_lines_are_read(text: str, knob: str, target: str) -> None:
    value = text
    if target.startswith("file:/etc/systemd"):
        value = f"[Service]\nExecStart=\nExecStart={text}\n"
    err = refused(plan(os_rec(target, value, id="cmd")))
    assert isinstance(err, DurabilityRefused)
    assert err.message.startswith(f"cmd: {target} passes `--")
    assert f"which changes {knob}, a durability knob" in err.message


def test_continued_unit_lines_are_read() -> None:
    unit = "[Service]\nExecStart=\nExecStart=/usr/sbin/mariadbd \\\n    --sync-binlog=0\n"
    assert isinstance(refused(plan(os_rec("file:/lib/systemd/x.service", unit))), DurabilityRefused)
    assert [w.name for w in command_line_words(unit)] == ["sync_binlog"]


@pytest.mark.parametrize(
    "target",
    [
        "mycnf:mysqld/innodb-flush-log-at-trx",  # a prefix the server completes
        "mycnf:client-server/innodb_flush_log_at_trx_commit",
        "mycnf:galera/sync_binlog",
        "mycnf:mysqld/loose-disable-innodb-doublewrite",
        "mycnf:mysqld/set-variable",
        "mysql:INNODB_FLUSH_LOG_AT_TRX_COMMIT",
        "mysql:sync_binlog",
    ],
)
def test_server_targets_in_any_spelling_are_refused(target: str) -> None:
    value = "sync_binlog=0" if target.endswith("set-variable") else "0"
    assert isinstance(refused(plan(rec(target, value))), DurabilityRefused)


def test_set_persist_is_a_mysql_target_like_set_global() -> None:
    """``apply --persist`` turns the same ``mysql:`` recommendations into SET PERSIST: the
    guard judges the recommendation, however it is written to the server."""
    err = refused(plan(rec("mysql:innodb_flush_log_at_trx_commit", "2", risk="online")))
    assert isinstance(err, DurabilityRefused)


def test_sealed_relaxed_plan_may_change_durability_through_any_target() -> None:
    passes(
        relaxed(
            os_rec("file:/etc/mysql/conf.d/50-x.cnf", "[mysqld]\nskip-innodb-doublewrite\n"),
            os_rec(
                "systemd:mariadb.service/ExecStart", "/usr/sbin/mariadbd --sync-binlog=0", id="s"
            ),
            os_rec("file:/etc/mysql/conf.d/51-x.cnf", "!includedir /etc/mysql/extra.d\n", id="i"),
        )
    )


def test_relaxed_edited_by_hand_is_refused_for_files_too() -> None:
    p = plan(os_rec("file:/etc/mysql/conf.d/50-x.cnf", "[server]\nsync_binlog=0\n"))
    edited = p.model_copy(update={"durability": "relaxed"})
    err = refused(edited)
    assert isinstance(err, DurabilityRefused) and "digest does not match" in err.message


@pytest.mark.parametrize(
    ("target", "text", "knob"),
    [
        (
            "file:/etc/mysql/init.sql",
            "-- run at start\nSET GLOBAL innodb_flush_log_at_trx_commit = 0;\n",
            "innodb_flush_log_at_trx_commit",
        ),
        ("file:/etc/mysql/init.sql", "set @@global.sync_binlog=0;", "sync_binlog"),
        ("file:/root/tune.sh", 'mysql -e "SET PERSIST sync_binlog = 0"\n', "sync_binlog"),
        (
            "mysql:init_connect",
            "SET GLOBAL innodb_flush_log_at_trx_commit=2",
            "innodb_flush_log_at_trx_commit",
        ),
        (
            "file:/var/lib/mysql/mysqld-auto.cnf",
            '{"Version": 2, "mysql_static_variables": {"innodb_doublewrite": '
            '{"Value": "OFF", "Metadata": {"User": "root"}}}}',
            "innodb_doublewrite",
        ),
        ("file:/etc/my.cnf", "\ufeff[mysqld]\nsync_binlog=0\n", "sync_binlog"),
        ("file:/etc/my.cnf", "sync_binlog=0\n[mysqld]\nport=3306\n", "sync_binlog"),  # no group
    ],
)
def test_sql_json_and_odd_option_files_are_read(target: str, text: str, knob: str) -> None:
    err = refused(plan(os_rec(target, text, id="x")))
    assert isinstance(err, DurabilityRefused), err.message
    assert f"changes {knob}, a durability knob" in err.message


# ---------------------------------------------------------------- includes


@pytest.mark.parametrize(
    "content",
    [
        "[mysqld]\n!include /etc/mysql/extra.cnf\n",
        "!includedir /etc/mysql/more.d\n",
        "[mysqld]\ninnodb_io_capacity=2000\n  !INCLUDEDIR /tmp/x\n",
    ],
)
def test_strict_plan_may_not_add_include_directives(content: str) -> None:
    err = refused(plan(os_rec("file:/etc/mysql/conf.d/50-x.cnf", content, id="inc")))
    assert isinstance(err, IncludeRefused)
    assert err.message.startswith("inc: file:/etc/mysql/conf.d/50-x.cnf adds `!")
    assert "files the plan does not show" in err.message and "--durability strict" in err.message
    assert include_directives(content)


@pytest.mark.parametrize(
    ("target", "value"),
    [
        ("systemd:mariadb.service/EnvironmentFile", "/etc/mysql/opts.env"),
        (
            "file:/etc/systemd/system/mariadb.service.d/50-x.conf",
            "[Service]\nEnvironmentFile=-/x\n",
        ),
    ],
)
def test_strict_plan_may_not_add_an_environment_file(target: str, value: str) -> None:
    assert isinstance(refused(plan(os_rec(target, value))), IncludeRefused)


@pytest.mark.parametrize(
    ("target", "value"),
    [
        ("file:/etc/mysql/conf.d/50-x.cnf", "[mysqld]\ninit-file = /var/lib/mysql/init.sql\n"),
        ("systemd:mariadb.service/ExecStart", "/usr/sbin/mariadbd --defaults-extra-file=/x.cnf"),
        ("systemd:mariadb.service/Environment", "MYSQLD_OPTS=--loose-init_file=/x.sql"),
    ],
)
def test_strict_plan_may_not_point_the_server_at_other_files(target: str, value: str) -> None:
    err = refused(plan(os_rec(target, value, id="p")))
    assert isinstance(err, IncludeRefused) and "files the plan does not show" in err.message


# ---------------------------------------------------------------- managed files


@pytest.mark.parametrize(
    "path",
    [
        "/etc/mysql/mariadb.conf.d/99-myaccel.cnf",
        "/etc/sysctl.d/99-myaccel.conf",
        "/etc/tmpfiles.d/99-myaccel.conf",
        "/etc/systemd/system/mariadb.service.d/99-myaccel.conf",
        "/etc/systemd/system/mariadb.service.d/zz-myaccel-binary.conf",
        "/etc/mysql/conf.d/99-myaccel-extra.cnf",
        "/etc/mysql/conf.d/zz-myaccel.cnf",
        "/etc/mysql/conf.d/99-MyAccel.cnf",
        "/etc/mysql/conf.d/../conf.d/99-myaccel.cnf",
    ],
)
@pytest.mark.parametrize("durability", ["strict", "relaxed"])
def test_managed_files_are_never_written_by_a_file_target(path: str, durability: str) -> None:
    p = plan(
        os_rec(f"file:{path}", "[mysqld]\ninnodb_io_capacity=2000\n", id="m"), durability=durability
    )
    err = refused(p)
    assert isinstance(err, ManagedFileRefused) and err.code == "plan-managed-file"
    assert err.message.startswith(f"m: file:{path} writes a file myaccel manages")
    assert "mysql: or mycnf:" in err.hint


def test_managed_file_behind_a_symlink_is_found(tmp_path: Path) -> None:
    conf = tmp_path / "conf.d"
    conf.mkdir()
    (conf / "99-myaccel.cnf").write_text("# Managed by myaccel\n")
    (tmp_path / "tuning.cnf").symlink_to(conf / "99-myaccel.cnf")
    (tmp_path / "dir").symlink_to(conf)
    for path in (tmp_path / "tuning.cnf", tmp_path / "dir" / "x" / ".." / "99-myaccel.cnf"):
        err = refused(plan(os_rec(f"file:{path}", "")))
        assert isinstance(err, ManagedFileRefused)
    err = refused(plan(os_rec(f"file:{tmp_path / 'tuning.cnf'}", "")))
    assert f"({os.path.realpath(tmp_path / 'tuning.cnf')} once" in err.message


def test_managed_file_comes_first_and_the_others_are_counted() -> None:
    content = "[mysqld]\ninnodb_flush_log_at_trx_commit=0\ninnodb_doublewrite=0\n"
    p = plan(
        os_rec("file:/srv/sb/conf.d/99-myaccel.cnf", content, id="bypass"),
        rec("mysql:innodb_log_file_size", "256M", id="restart", risk="restart"),
    )
    err = refused(p)
    assert isinstance(err, ManagedFileRefused)
    assert err.message.endswith("(and 2 more problems: bypass)")


# ---------------------------------------------------------------- memory


@pytest.mark.parametrize(
    ("target", "value"),
    [
        ("mysql:innodb_buffer_pool_size", "999P"),
        ("mysql:innodb_buffer_pool_size", "9G"),
        ("mycnf:mysqld/key-buffer-size", "16G"),
        ("mysql:key_buffer_size", str(8 * GIB + 1)),
        ("mysql:aria_pagecache_buffer_size", "1T"),
        ("file:/etc/mysql/conf.d/50-x.cnf", "[mysqld]\nquery_cache_size = 64G\n"),
        ("systemd:mariadb.service/ExecStart", "/usr/sbin/mariadbd --innodb-buffer-pool-size 1P"),
    ],
)
def test_buffers_larger_than_the_host_memory_are_refused(target: str, value: str) -> None:
    err = refused(plan(rec(target, value, id="mem")))
    assert isinstance(err, MemoryRefused) and err.code == "plan-memory"
    assert "more than this host's memory (MemTotal 8.0 GiB, /proc/meminfo)" in err.message
    assert "re-make the plan" in err.hint


def test_log_buffer_larger_than_a_small_host_memory_is_refused() -> None:
    small = HostMemory(GIB, "/proc/meminfo")
    err = refused(plan(rec("mycnf:mysqld/innodb-log-buffer-size", "1536M")), memory=small)
    assert isinstance(err, MemoryRefused) and "MemTotal 1.0 GiB" in err.message


def test_buffers_within_memory_pass_and_no_memory_means_no_check() -> None:
    p = plan(
        rec("mysql:innodb_buffer_pool_size", "6G", id="a"),
        rec("mycnf:mysqld/key-buffer-size", "64M", id="b"),
        rec("mysql:max_heap_table_size", "16G", id="c"),  # a limit, not an allocation
    )
    passes(p)
    passes(plan(rec("mysql:innodb_buffer_pool_size", "999P")), memory=None)


def test_a_remote_server_is_not_bound_by_this_host_memory() -> None:
    remote = HostMemory(8 * GIB, "/proc/meminfo", server_remote=True)
    passes(plan(rec("mysql:innodb_buffer_pool_size", "64G")), memory=remote)
    # an option file is written on this host, for a server of this host
    err = refused(plan(rec("mycnf:mysqld/innodb_buffer_pool_size", "64G")), memory=remote)
    assert isinstance(err, MemoryRefused)


def test_out_of_range_is_named_before_memory() -> None:
    err = refused(plan(rec("mysql:innodb_buffer_pool_size", "64E", id="x")))
    assert "above the maximum" in err.message and "more problem" not in err.message


def test_check_apply_reads_the_host_memory() -> None:
    total = meminfo_total()
    assert total is not None and total > 0
    assert host_memory(None) == HostMemory(total, "/proc/meminfo", False)
    with pytest.raises(MemoryRefused):
        check_apply(plan(rec("mysql:innodb_buffer_pool_size", "999P")), None)


# ---------------------------------------------------------------- not a wall


def test_strict_plans_without_durability_changes_pass() -> None:
    passes(
        plan(
            rec("mysql:innodb_io_capacity", "2000", id="a"),
            rec("mycnf:mysqld/loose-innodb-io-capacity-max", "4000", id="b"),
            os_rec(
                "file:/etc/mysql/conf.d/50-x.cnf",
                "[mysqld]\ninnodb_io_capacity=2000\nskip-name-resolve\n",
                id="c",
            ),
            os_rec("file:/etc/security/limits.d/50-mysql.conf", "mysql - nofile 65535\n", id="d"),
            os_rec("systemd:mariadb.service/LimitNOFILE", "65535", id="e"),
            os_rec(
                "systemd:mariadb.service/ExecStart",
                "/usr/sbin/mariadbd --innodb-io-capacity=2000",
                id="f",
            ),
            os_rec("sysctl:vm.swappiness", "1", id="g"),
        )
    )
