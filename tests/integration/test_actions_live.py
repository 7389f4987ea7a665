"""``ServerVariableSetting`` against the real session sandbox (MariaDB).

Only dynamic variables are changed (SET GLOBAL), and every test puts the old value back in
a ``finally`` even if the code under test fails: the shared sandbox is never stopped or
reconfigured.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from myaccel.actions import (
    ApplyError,
    Journal,
    ServerVariableSetting,
    Setting,
    SimulatedCrash,
    apply_changes,
    rollback,
    setting_for,
    verify,
    verify_journal,
)
from myaccel.errors import UsageError
from myaccel.server.connection import connect, query_value
from myaccel.server.sandbox import Sandbox

pytestmark = pytest.mark.integration

KNOBS = (
    "innodb_io_capacity",
    "tmp_table_size",
    "innodb_adaptive_hash_index",
    "innodb_io_capacity_max",
)


@pytest.fixture
def connect_fn(sandbox_env: Sandbox) -> Iterator[Callable[[], Any]]:
    params = sandbox_env.connect_params()

    def factory() -> Any:
        return connect(params)

    conn = factory()
    try:
        saved = {k: query_value(conn, f"SELECT @@GLOBAL.{k}") for k in KNOBS}
    finally:
        conn.close()
    yield factory
    conn = factory()
    try:  # put everything back whatever happened (max before io_capacity: max >= capacity)
        for k in (
            "innodb_io_capacity_max",
            "innodb_io_capacity",
            "tmp_table_size",
            "innodb_adaptive_hash_index",
        ):
            with conn.cursor() as cur:
                cur.execute(f"SET GLOBAL {k} = %s", (saved[k],))
        now = {k: query_value(conn, f"SELECT @@GLOBAL.{k}") for k in KNOBS}
    finally:
        conn.close()
    assert now == saved


def test_set_global_apply_and_rollback(connect_fn: Callable[[], Any], tmp_path: Path) -> None:
    s = ServerVariableSetting("innodb_io_capacity", connect=connect_fn)
    old = s.read()
    assert old is not None and old.isdigit()
    desired = str(int(old) + 77)
    change = s.plan(desired)
    assert change is not None
    assert (change.current, change.desired, change.writes) == (
        old,
        desired,
        ("SET GLOBAL innodb_io_capacity",),
    )
    assert not change.needs_root

    jdir = tmp_path / "journals"
    result = apply_changes([(s, desired)], jdir)
    assert result.status == "applied"
    assert s.read() == desired
    assert s.plan(desired) is None
    assert verify([(s, desired)]) == []
    entry = Journal.load(Path(result.journal_path or "")).entries[0]
    assert (entry.old.value, entry.new_value, entry.read_back, entry.state) == (
        old,
        desired,
        desired,
        "applied",
    )
    assert verify_journal(journal_dir=jdir, connect=connect_fn) == []

    rb = rollback(journal_dir=jdir, connect=connect_fn)
    assert rb.reverted == ["mysql:innodb_io_capacity"]
    assert s.read() == old


def test_sizes_and_booleans_are_normalized(connect_fn: Callable[[], Any], tmp_path: Path) -> None:
    size = ServerVariableSetting("tmp_table_size", connect=connect_fn)
    ahi = ServerVariableSetting("innodb_adaptive_hash_index", connect=connect_fn)
    old_size, old_ahi = size.read(), ahi.read()
    flip = "OFF" if old_ahi in ("1", "ON") else "ON"
    jdir = tmp_path / "journals"
    result = apply_changes([(size, "48M"), (ahi, flip)], jdir)
    assert result.warnings == []  # 48M reads back as 50331648, OFF as 0: both match
    assert size.read() == str(48 << 20)
    assert size.plan("48M") is None and size.plan(str(48 << 20)) is None
    assert ahi.plan(flip) is None and ahi.plan("1" if flip == "ON" else "0") is None
    rollback(journal_dir=jdir, connect=connect_fn)
    assert (size.read(), ahi.read()) == (old_size, old_ahi)


def test_errors_are_clear_and_roll_back(connect_fn: Callable[[], Any], tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no variable no_such_variable_xyz"):
        ServerVariableSetting("no_such_variable_xyz", connect=connect_fn).plan("1")
    io = ServerVariableSetting("innodb_io_capacity", connect=connect_fn)
    old = io.read()
    assert old is not None
    static = ServerVariableSetting("innodb_page_size", connect=connect_fn)
    jdir = tmp_path / "journals"
    changes: list[tuple[Setting, str]] = [(io, str(int(old) + 1)), (static, "8192")]
    with pytest.raises(ApplyError, match="cannot be changed at runtime") as exc:
        apply_changes(changes, jdir)
    assert "mycnf:mysqld/innodb_page_size" in exc.value.hint
    assert io.read() == old  # the first change was rolled back
    assert Journal.find_unfinished(jdir) == []
    with pytest.raises(UsageError, match="SET PERSIST is MySQL 8 only"):
        ServerVariableSetting("innodb_io_capacity", connect=connect_fn, persist=True).plan("300")


def test_crash_then_rollback_restores_the_server(
    connect_fn: Callable[[], Any], tmp_path: Path
) -> None:
    io = setting_for("mysql:innodb_io_capacity", connect=connect_fn)
    io_max = setting_for("mysql:innodb_io_capacity_max", connect=connect_fn)
    old_io, old_max = io.read(), io_max.read()
    assert old_io is not None and old_max is not None
    jdir = tmp_path / "journals"
    new_max = str(int(old_max) + 1000)
    new_io = str(int(old_io) + 10)
    with pytest.raises(SimulatedCrash):
        apply_changes([(io_max, new_max), (io, new_io)], jdir, crash_after=2)
    assert (io.read(), io_max.read()) == (new_io, new_max)
    [path] = Journal.find_unfinished(jdir)
    assert [e.state for e in Journal.load(path).entries] == ["applied", "pending"]
    with pytest.raises(UsageError, match="needs a server connection"):
        rollback(journal_dir=jdir)  # mysql entries: a connection is required
    rollback(journal_dir=jdir, connect=connect_fn)
    assert (io.read(), io_max.read()) == (old_io, old_max)
