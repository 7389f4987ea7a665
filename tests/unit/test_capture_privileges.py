"""The capture's privilege check (``capture.privileges`` over ``server.privileges``, shared
with the clone preflight), where its general log goes (``capture.logdir``: the server's
uid, the directory's owner and modes, refusals), and the error for an empty capture."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from myaccel.capture import logdir
from myaccel.capture.privileges import needed, refusal
from myaccel.capture.session import _nothing_captured, _Window
from myaccel.clone.errors import MissingPrivileges
from myaccel.errors import ExitCode
from myaccel.server.privileges import AccountPrivileges, Need, grant_statements

PFS = "performance_schema"


def _acc(**kw: Any) -> AccountPrivileges:
    return AccountPrivileges(user="cap@localhost", **kw)


def test_levels_cover_what_is_below_them() -> None:
    need = Need("SELECT", PFS, "threads")
    assert not _acc().holds(need)
    assert _acc(global_={"SELECT"}).holds(need)
    assert _acc(schemas={PFS: {"SELECT"}}).holds(need)
    assert _acc(tables={(PFS, "threads"): {"SELECT"}}).holds(need)
    assert not _acc(tables={(PFS, "setup_consumers"): {"SELECT"}}).holds(need)
    assert not _acc(schemas={PFS: {"SELECT"}}).holds(Need("PROCESS"))
    # MySQL still honours SUPER for SET GLOBAL
    assert _acc(global_={"SUPER"}).holds(Need("SYSTEM_VARIABLES_ADMIN"))
    assert not _acc(global_={"SYSTEM_VARIABLES_ADMIN"}).holds(Need("SUPER"))


def test_grant_statements_one_per_object() -> None:
    missing = [
        Need("SELECT", PFS, "setup_consumers"),
        Need("UPDATE", PFS, "setup_consumers"),
        Need("PROCESS"),
    ]
    assert grant_statements(missing, "cap@10.0.0.%") == [
        "GRANT SELECT, UPDATE ON performance_schema.setup_consumers TO 'cap'@'10.0.0.%'",
        "GRANT PROCESS ON *.* TO 'cap'@'10.0.0.%'",
    ]


def test_needs_per_source_and_flavor() -> None:
    assert [n.describe() for n in needed("general_log", "mariadb")] == [
        "SUPER on *.*",
        "PROCESS on *.*",
    ]
    assert needed("general_log", "mysql")[0] == Need("SYSTEM_VARIABLES_ADMIN")
    assert [n.describe() for n in needed("performance_schema", "mysql")] == [
        "SELECT on performance_schema.setup_consumers",
        "UPDATE on performance_schema.setup_consumers",
        "SELECT on performance_schema.events_statements_history_long",
        "SELECT on performance_schema.threads",
    ]


def test_refusal_names_each_missing_privilege_and_its_grant() -> None:
    acc = _acc(tables={(PFS, "setup_consumers"): {"SELECT"}, (PFS, "threads"): {"SELECT"}})
    err = refusal(acc, "performance_schema", "mariadb")
    assert isinstance(err, MissingPrivileges) and err.exit_code == ExitCode.CONNECTION
    assert err.message == (
        "the account cap@localhost lacks UPDATE on performance_schema.setup_consumers, SELECT "
        "on performance_schema.events_statements_history_long for a capture from performance "
        "schema"
    )
    assert err.hint.startswith(
        "GRANT UPDATE ON performance_schema.setup_consumers TO 'cap'@'localhost'; GRANT SELECT "
        "ON performance_schema.events_statements_history_long TO 'cap'@'localhost'"
    )
    assert "\n" not in err.message + err.hint
    assert refusal(_acc(global_={"SUPER", "PROCESS"}), "general_log", "mariadb") is None
    assert refusal(_acc(global_={"SUPER", "PROCESS"}), "general_log", "mysql") is None
    assert refusal(_acc(global_={"PROCESS"}), "general_log", "mysql") is not None


def test_ids_from_proc_status() -> None:
    text = "Name:\tmariadbd\nUid:\t102\t102\t102\t102\nGid:\t105\t105\t105\t105\n"
    assert logdir.ids_from_status(text) == (102, 105)
    assert logdir.ids_from_status("Name:\tx\n") is None


def test_server_user_from_pid_file_then_datadir(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    (proc / "4242").mkdir(parents=True)
    (proc / "4242" / "status").write_text("Uid:\t0\t102\t102\t102\nGid:\t0\t105\t105\t105\n")
    pid_file = tmp_path / "mysqld.pid"
    pid_file.write_text("4242\n")
    u = logdir.find_server_user(str(pid_file), str(tmp_path), proc_root=proc)
    assert u is not None and (u.uid, u.gid) == (102, 105)  # the effective ids
    assert "pid 4242" in u.evidence
    # no such process (or an unreadable pid file): the datadir's owner
    pid_file.write_text("999999\n")
    u = logdir.find_server_user(str(pid_file), str(tmp_path), proc_root=proc)
    st = tmp_path.stat()
    assert u is not None and (u.uid, u.gid) == (st.st_uid, st.st_gid)
    assert "datadir" in u.evidence
    assert logdir.find_server_user("", str(tmp_path / "gone"), proc_root=proc) is None


def _st(uid: int, gid: int, mode: int) -> os.stat_result:
    return os.stat_result((stat.S_IFDIR | mode, 0, 0, 0, uid, gid, 0, 0, 0, 0))


def test_traversable() -> None:
    tree = {
        Path("/"): _st(0, 0, 0o755),
        Path("/root"): _st(0, 0, 0o700),
        Path("/root/.myaccel"): _st(0, 0, 0o700),
        Path("/tmp"): _st(0, 0, 0o1777),
        Path("/tmp/myaccel-capture"): _st(0, 0, 0o711),
        Path("/tmp/myaccel-capture/d"): _st(102, 105, 0o700),
        Path("/srv"): _st(0, 105, 0o750),
    }
    assert logdir.traversable(Path("/tmp/myaccel-capture/d"), 102, 105, tree.__getitem__)
    assert not logdir.traversable(Path("/tmp/myaccel-capture/d"), 103, 105, tree.__getitem__)
    assert not logdir.traversable(Path("/root/.myaccel"), 102, 105, tree.__getitem__)
    assert logdir.traversable(Path("/root/.myaccel"), 0, 0, tree.__getitem__)
    assert logdir.traversable(Path("/srv"), 102, 105, tree.__getitem__)  # by its group
    assert not logdir.traversable(Path("/srv"), 102, 106, tree.__getitem__)


def test_plan_per_who_runs_what(tmp_path: Path) -> None:
    home, shared = tmp_path / "home", tmp_path / "tmp"
    mysql = logdir.ServerUser(102, 105, "server pid 7")
    # the server runs as myaccel's user: myaccel's own private directory, as before
    assert logdir.plan_log_dir(logdir.ServerUser(0, 0, "x"), 0, home, shared) == (
        logdir.LogDirPlan(home / "capture", None)
    )
    assert logdir.plan_log_dir(None, 1000, home, shared).owner is None
    # root, server as mysql: a directory of mysql's under a shared root-owned parent
    assert logdir.plan_log_dir(mysql, 0, home, shared) == logdir.LogDirPlan(
        shared / "myaccel-capture", (102, 105)
    )
    # neither root nor the server's user: refused, one line, with a hint
    with pytest.raises(logdir.LogDirRefused) as ei:
        logdir.plan_log_dir(mysql, 1000, home, shared)
    assert "uid 102" in ei.value.message and "\n" not in ei.value.message
    assert "as root" in ei.value.hint and "performance_schema" in ei.value.hint
    assert ei.value.exit_code == ExitCode.IO_ERROR


def test_stale_dirs_of_dead_captures(tmp_path: Path) -> None:
    for name in ("general-log-111-a", "general-log-222-b", "other-333"):
        (tmp_path / name).mkdir()
    assert logdir.stale_dirs(tmp_path, alive=lambda pid: pid == 222) == [
        tmp_path / "general-log-111-a"
    ]


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A directory every user may search (pytest's own tmp_path is root's 0700)."""
    d = Path(tempfile.mkdtemp(prefix="myaccel-unit-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_make_log_dir_for_another_user(open_tmp: Path) -> None:
    shared = open_tmp / "shared"
    shared.mkdir(mode=0o755)
    other = logdir.ServerUser(65534, 65534, "test")  # nobody
    plan = logdir.LogDirPlan(shared / "myaccel-capture", (65534, 65534))
    log = logdir.make_log_dir(plan, other)
    assert log.local == log.path  # the server shares this file system
    path = log.path
    d = path.parent
    assert stat.S_IMODE((shared / "myaccel-capture").stat().st_mode) == 0o711
    assert (d.stat().st_uid, stat.S_IMODE(d.stat().st_mode)) == (65534, 0o700)
    assert (path.stat().st_uid, stat.S_IMODE(path.stat().st_mode)) == (65534, 0o600)
    assert d.name.startswith(f"general-log-{os.getpid()}-")
    # a parent the server's user cannot search: refused, nothing left
    shared.chmod(0o700)
    with pytest.raises(logdir.LogDirRefused, match="cannot reach"):
        logdir.make_log_dir(plan, other)
    assert [p.name for p in (shared / "myaccel-capture").iterdir()] == [d.name]


def test_shared_parent_must_be_roots_alone(tmp_path: Path) -> None:
    parent = tmp_path / "myaccel-capture"
    parent.mkdir(mode=0o777)
    parent.chmod(0o777)
    with pytest.raises(logdir.LogDirRefused, match="only root writes"):
        logdir.make_log_dir(logdir.LogDirPlan(parent, (65534, 65534)), None)


def test_empty_capture_says_why() -> None:
    src: Any = SimpleNamespace(name="general_log")
    quiet = _nothing_captured(src, _Window([], [], 2.0, questions=30, ours_statements=30))
    assert quiet.exit_code == ExitCode.FAILURE
    assert "is it receiving traffic?" in quiet.message and "settings are back" in quiet.hint
    src = SimpleNamespace(name="performance_schema")
    lost = _nothing_captured(src, _Window([], [], 2.0, questions=1030, ours_statements=30))
    assert "counted 1,000 of other clients" in lost.message
    assert "setup_instruments" in lost.hint


def test_rollback_removes_only_a_dead_captures_own_dir(tmp_path: Path) -> None:
    dead, live = 999_999_999, os.getpid()
    home_dir = tmp_path / "capture" / f"general-log-{dead}-abc"
    shared_dir = tmp_path / "myaccel-capture" / f"general-log-{dead}-def"
    running = tmp_path / "capture" / f"general-log-{live}-ghi"
    elsewhere = tmp_path / "logs" / f"general-log-{dead}-jkl"
    for d in (home_dir, shared_dir, running, elsewhere):
        d.mkdir(parents=True)
    entries = [
        ("mysql:general_log", "ON"),
        *(("mysql:general_log_file", str(d / "general.log")) for d in (home_dir, shared_dir)),
        ("mysql:general_log_file", str(running / "general.log")),
        ("mysql:general_log_file", str(elsewhere / "general.log")),
        ("mysql:general_log_file", "/var/lib/mysql/host.log"),
    ]
    assert logdir.left_by(entries) == [home_dir, shared_dir]
    said: list[str] = []
    logdir.remove_left(entries, said.append)
    assert not home_dir.exists() and not shared_dir.exists()
    assert running.exists() and elsewhere.exists() and len(said) == 2


def test_a_server_with_its_own_tmp_is_reached_through_its_root(tmp_path: Path) -> None:
    """A unit's PrivateTmp=true: the server is told a name in its /tmp, myaccel makes
    and reads the file through /proc/PID/root."""
    proc = tmp_path / "proc"
    (proc / "42" / "root" / "tmp").mkdir(parents=True)
    assert logdir.private_tmp(42, Path("/tmp"), proc_root=proc)  # another directory
    (proc / "43" / "root").mkdir(parents=True)
    (proc / "43" / "root" / "tmp").symlink_to("/tmp")
    assert not logdir.private_tmp(43, Path("/tmp"), proc_root=proc)  # the same one
    assert not logdir.private_tmp(44, Path("/tmp"), proc_root=proc)  # gone: not said
    plan = logdir.LogDirPlan(Path("/tmp/myaccel-capture"), (1, 1), Path("/proc/42/root"))
    assert plan.local(Path("/tmp/myaccel-capture/x")) == Path("/proc/42/root/tmp/myaccel-capture/x")
