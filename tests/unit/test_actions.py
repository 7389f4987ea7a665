"""Settings, journal and applier on a copy of the this-vm fixture sysroot.

Every test works on ``tmp_path/root`` (a copy of tests/fixtures/sysroots/this-vm plus a few
/etc files) and keeps its journals in ``tmp_path/journals``: nothing outside tmp_path is
touched, even when the tests run as root.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from myaccel.actions import (
    JOURNAL_SCHEMA,
    ApplyError,
    DebugfsSetting,
    FileSetting,
    Journal,
    JournalCorrupt,
    JournalError,
    OptionFileSetting,
    RollbackIncomplete,
    ServerVariableSetting,
    Setting,
    SimulatedCrash,
    SysctlSetting,
    SysfsSetting,
    SystemdDropInSetting,
    UnfinishedJournal,
    apply_changes,
    expand_target,
    normalize_value,
    rollback,
    setting_for,
    setting_from_spec,
    values_equal,
    verify,
    verify_journal,
)
from myaccel.actions.files import MANAGED_MARKER, FileState, parse_choice
from myaccel.actions.journal import canonical_checksum, journals_dir
from myaccel.actions.settings import sql_literal
from myaccel.errors import MyaccelError, UsageError

FIXTURE = Path(__file__).parents[1] / "fixtures" / "sysroots" / "this-vm"
USER_CNF = b"# the user's own server options\n[mysqld]\ninnodb_io_capacity = 500\n"
CONF_DIR = "/etc/mysql/conf.d"


def make_root(dest: Path) -> Path:
    """A copy of the this-vm sysroot with the /etc files the settings look at."""
    shutil.copytree(FIXTURE, dest, symlinks=True)
    files = {
        "etc/sysctl.d/10-user.conf": (b"vm.swappiness = 30\n", 0o644),
        "etc/mysql/my.cnf": (b"[mysqld]\n!includedir /etc/mysql/conf.d/\n", 0o644),
        "etc/mysql/conf.d/50-server.cnf": (USER_CNF, 0o640),
        "etc/existing.conf": (b"keep me\x00\xff binary\n", 0o600),
        "lib/systemd/system/mariadb.service": (b"[Service]\nExecStart=/usr/sbin/mariadbd\n", 0o644),
        "sys/kernel/debug/sched/base_slice_ns": (b"3000000\n", 0o644),
        "sys/kernel/debug/sched/migration_cost_ns": (b"500000\n", 0o644),
    }
    for rel, (data, mode) in files.items():
        p = dest / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        p.chmod(mode)
    return dest


def tree(root: Path) -> dict[str, tuple[Any, ...]]:
    """Every path under root: type, mode and bytes (files) or link target."""
    out: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            rel = str(p.relative_to(root))
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode))
            else:
                out[rel] = ("file", stat.S_IMODE(st.st_mode), p.read_bytes())
    return out


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_root(tmp_path / "root")


@pytest.fixture
def jdir(tmp_path: Path) -> Path:
    return tmp_path / "journals"


def rd(root: Path, logical: str) -> bytes:
    return (root / logical.lstrip("/")).read_bytes()


# ---------------------------------------------------------------- sysctl


def test_sysctl_apply_read_back_and_rollback(root: Path, jdir: Path) -> None:
    before = tree(root)
    s = SysctlSetting("vm.swappiness", root=root)
    assert s.read() == "60"
    change = s.plan("10")
    assert change is not None
    assert (change.current, change.desired) == ("60", "10")
    assert change.writes == ("/proc/sys/vm/swappiness", "/etc/sysctl.d/99-myaccel.conf")
    assert not change.needs_root  # a sysroot copy, not the live /

    result = apply_changes([(s, "10")], jdir)
    assert result.status == "applied"
    assert rd(root, "/proc/sys/vm/swappiness") == b"10\n"
    managed = rd(root, "/etc/sysctl.d/99-myaccel.conf").decode()
    assert managed.startswith(MANAGED_MARKER)
    assert "myaccel rollback" in managed
    assert "vm.swappiness = 10\n" in managed
    assert rd(root, "/etc/sysctl.d/10-user.conf") == b"vm.swappiness = 30\n"
    assert s.plan("10") is None  # applied: nothing left to do
    assert verify([(s, "10")]) == []

    rb = rollback(journal_dir=jdir)
    assert rb.reverted == ["sysctl:vm.swappiness"]
    assert tree(root) == before


def test_sysctl_runtime_ok_but_not_persisted_still_plans(root: Path) -> None:
    s = SysctlSetting("vm.swappiness", root=root)
    change = s.plan("60")  # runtime already 60, but no persistent line yet
    assert change is not None and change.current == "60"
    assert SysctlSetting("vm.swappiness", root=root, persist=False).plan("60") is None


def test_sysctl_shadowed_by_a_later_file_warns(root: Path) -> None:
    (root / "etc/sysctl.conf").write_text("# comment\nvm.swappiness=1\n")
    change = SysctlSetting("vm.swappiness", root=root).plan("10")
    assert change is not None
    assert any("/etc/sysctl.conf also sets vm.swappiness = 1" in w for w in change.warnings)


def test_sysctl_absent_key_and_bad_key(root: Path) -> None:
    with pytest.raises(UsageError, match="does not exist on this machine"):
        SysctlSetting("vm.no_such_knob", root=root).plan("1")
    with pytest.raises(UsageError, match="not a sysctl key"):
        SysctlSetting("../etc/passwd", root=root)
    with pytest.raises(UsageError, match="newline"):
        SysctlSetting("vm.swappiness", root=root).plan("10\nkernel.panic = 1")


def test_sysctl_two_keys_share_the_managed_file(root: Path, jdir: Path) -> None:
    before = tree(root)
    a = SysctlSetting("vm.swappiness", root=root)
    b = SysctlSetting("vm.dirty_ratio", root=root)
    apply_changes([(a, "1"), (b, "15")], jdir)
    text = rd(root, "/etc/sysctl.d/99-myaccel.conf").decode()
    assert "vm.swappiness = 1\n" in text and "vm.dirty_ratio = 15\n" in text
    journal = Journal.load(Journal.list_paths(jdir)[0])
    # the second entry journaled the file as the first one left it
    assert journal.entries[0].old.files[0].existed is False
    assert journal.entries[1].old.files[0].existed is True
    rollback(journal_dir=jdir)
    assert tree(root) == before


# ---------------------------------------------------------------- sysfs / debugfs


def test_sysfs_choice_file(root: Path, jdir: Path) -> None:
    before = tree(root)
    path = "/sys/kernel/mm/transparent_hugepage/enabled"
    s = SysfsSetting(path, root=root)
    assert s.read() == "madvise"
    with pytest.raises(UsageError, match="not one of always, madvise, never"):
        s.plan("sometimes")
    apply_changes([(s, "never")], jdir)
    # emulated kernel: the brackets moved, as the live file would show
    assert rd(root, path) == b"always madvise [never]\n"
    assert s.read() == "never"
    tmpfiles = rd(root, "/etc/tmpfiles.d/99-myaccel.conf").decode()
    assert f"w {path} - - - - never\n" in tmpfiles
    rollback(journal_dir=jdir)
    assert tree(root) == before


def test_sysfs_defrag_with_plus_in_a_choice(root: Path, jdir: Path) -> None:
    before = tree(root)
    s = SysfsSetting("/sys/kernel/mm/transparent_hugepage/defrag", root=root, persist=False)
    apply_changes([(s, "defer+madvise")], jdir)
    assert s.read() == "defer+madvise"
    rollback(journal_dir=jdir)
    assert tree(root) == before


def test_debugfs_sched_knob(root: Path, jdir: Path) -> None:
    before = tree(root)
    s = DebugfsSetting("/sys/kernel/debug/sched/base_slice_ns", root=root)
    assert s.read() == "3000000"
    change = s.plan("4000000")
    assert change is not None and change.writes == ("/sys/kernel/debug/sched/base_slice_ns",)
    apply_changes([(s, "4000000")], jdir)
    assert rd(root, "/sys/kernel/debug/sched/base_slice_ns") == b"4000000\n"
    assert not (root / "etc/tmpfiles.d").exists()  # runtime only by default
    rollback(journal_dir=jdir)
    assert tree(root) == before


def test_debugfs_absent_explains_renames_or_mount(root: Path) -> None:
    with pytest.raises(UsageError) as exc:
        DebugfsSetting("/sys/kernel/debug/sched/min_granularity_ns", root=root).plan("1")
    assert "base_slice_ns" in exc.value.hint
    shutil.rmtree(root / "sys/kernel/debug")
    with pytest.raises(UsageError) as exc:
        DebugfsSetting("/sys/kernel/debug/sched/base_slice_ns", root=root).plan("1")
    assert "mount -t debugfs" in exc.value.hint


def test_parse_choice() -> None:
    assert parse_choice("always [madvise] never\n") == ("madvise", ["always", "madvise", "never"])
    assert parse_choice("[none] mq-deadline") == ("none", ["none", "mq-deadline"])
    assert parse_choice("60\n") == (None, [])


# ---------------------------------------------------------------- whole files


def test_file_that_did_not_exist_in_missing_dirs(root: Path, jdir: Path) -> None:
    before = tree(root)
    s = FileSetting("/etc/myaccel-demo/sub/limits.conf", root=root)
    assert s.read() is None
    apply_changes([(s, "* soft nofile 65535\n")], jdir)
    p = root / "etc/myaccel-demo/sub/limits.conf"
    assert p.read_text() == "* soft nofile 65535\n"
    assert stat.S_IMODE(p.stat().st_mode) == 0o644
    entry = Journal.load(Journal.list_paths(jdir)[0]).entries[0]
    assert entry.old.files[0].existed is False
    assert entry.old.files[0].missing_dirs == ["/etc/myaccel-demo", "/etc/myaccel-demo/sub"]
    rollback(journal_dir=jdir)
    assert not (root / "etc/myaccel-demo").exists()
    assert tree(root) == before


def test_existing_file_bytes_and_mode_restored(root: Path, jdir: Path) -> None:
    before = tree(root)
    s = FileSetting("/etc/existing.conf", root=root)
    apply_changes([(s, "new content\n")], jdir)
    p = root / "etc/existing.conf"
    assert p.read_bytes() == b"new content\n"
    assert stat.S_IMODE(p.stat().st_mode) == 0o600  # mode kept
    entry = Journal.load(Journal.list_paths(jdir)[0]).entries[0]
    old = entry.old.files[0]
    assert base64.b64decode(old.content_b64 or "") == b"keep me\x00\xff binary\n"
    assert (old.mode, old.uid) == ("0600", p.stat().st_uid)
    rollback(journal_dir=jdir)
    assert tree(root) == before


def test_file_refuses_symlinks_and_kernel_paths(root: Path) -> None:
    (root / "etc/link.conf").symlink_to("existing.conf")
    with pytest.raises(UsageError, match="symbolic link"):
        FileSetting("/etc/link.conf", root=root).plan("x")
    with pytest.raises(UsageError, match="kernel interface"):
        FileSetting("/proc/sys/vm/swappiness", root=root)


# ---------------------------------------------------------------- option files


def test_option_file_knobs_share_the_managed_file(root: Path, jdir: Path) -> None:
    before = tree(root)
    io = OptionFileSetting("mysqld", "innodb_io_capacity", root=root, conf_dir=CONF_DIR)
    bp = OptionFileSetting("mysqld", "innodb-buffer-pool-size", root=root, conf_dir=CONF_DIR)
    assert bp.target == "mycnf:mysqld/innodb_buffer_pool_size"
    assert io.read() is None  # the user's 50-server.cnf is not ours to read or write
    change = io.plan("2000")
    assert change is not None and change.takes_effect == "server restart"
    apply_changes([(io, "2000"), (bp, "8G")], jdir)
    text = rd(root, "/etc/mysql/conf.d/99-myaccel.cnf").decode()
    assert text.startswith(MANAGED_MARKER) and "myaccel rollback" in text
    assert "[mysqld]\ninnodb_io_capacity = 2000\ninnodb_buffer_pool_size = 8G\n" in text
    assert rd(root, "/etc/mysql/conf.d/50-server.cnf") == USER_CNF
    assert stat.S_IMODE((root / "etc/mysql/conf.d/50-server.cnf").stat().st_mode) == 0o640
    assert io.read() == "2000" and bp.read() == "8G"
    assert bp.plan("8589934592") is None  # 8G == 8589934592
    rollback(journal_dir=jdir)
    assert tree(root) == before


def test_option_file_refuses_a_users_file_of_that_name(root: Path) -> None:
    (root / "etc/mysql/conf.d/99-myaccel.cnf").write_text("[mysqld]\nmax_connections = 10\n")
    s = OptionFileSetting("mysqld", "innodb_io_capacity", root=root, conf_dir=CONF_DIR)
    with pytest.raises(UsageError, match="not written by myaccel"):
        s.plan("2000")


def test_option_file_shadow_warning_and_missing_dir(root: Path) -> None:
    (root / "etc/mysql/conf.d/zz-late.cnf").write_text("[mysqld]\ninnodb-io-capacity=100\n")
    change = OptionFileSetting("mysqld", "innodb_io_capacity", root=root, conf_dir=CONF_DIR).plan(
        "2000"
    )
    assert change is not None
    assert any("zz-late.cnf also sets innodb_io_capacity" in w for w in change.warnings)
    with pytest.raises(UsageError, match="does not exist"):
        OptionFileSetting("mysqld", "x", root=root, conf_dir="/etc/nowhere").plan("1")


def test_option_file_quotes_values_with_spaces(root: Path, jdir: Path) -> None:
    s = OptionFileSetting("mysqld", "optimizer_switch", root=root, conf_dir=CONF_DIR)
    apply_changes([(s, "index_merge=off, mrr=on")], jdir)
    assert (
        'optimizer_switch = "index_merge=off, mrr=on"'
        in rd(root, "/etc/mysql/conf.d/99-myaccel.cnf").decode()
    )
    assert s.read() == "index_merge=off, mrr=on"


# ---------------------------------------------------------------- systemd


def test_systemd_drop_in_runs_daemon_reload(root: Path, jdir: Path) -> None:
    before = tree(root)
    calls: list[list[str]] = []
    s = setting_for(
        "systemd:server/NUMAPolicy", root=root, runner=lambda argv: calls.append(list(argv))
    )
    assert isinstance(s, SystemdDropInSetting) and s.unit == "mariadb.service"
    change = s.plan("interleave")
    assert change is not None and change.takes_effect == "unit restart"
    apply_changes([(s, "interleave")], jdir)
    text = rd(root, "/etc/systemd/system/mariadb.service.d/99-myaccel.conf").decode()
    assert "[Service]\nNUMAPolicy=interleave\n" in text
    assert calls == [["systemctl", "daemon-reload"]]
    rollback(journal_dir=jdir, runner=lambda argv: calls.append(list(argv)))
    assert calls == [["systemctl", "daemon-reload"]] * 2
    assert tree(root) == before


def test_systemd_without_runner_on_a_sysroot_runs_nothing(root: Path, jdir: Path) -> None:
    s = SystemdDropInSetting("mariadb.service", "LimitNOFILE", root=root)
    apply_changes([(s, "65535")], jdir)  # would fail if it ran systemctl on this host
    assert s.read() == "65535"
    with pytest.raises(UsageError, match="not installed"):
        SystemdDropInSetting("mysqld.service", "NUMAPolicy", root=root).plan("bind")


def test_systemd_readings_compared_as_systemd_prints_them(tmp_path: Path) -> None:
    """What apply and verify compare with ``systemctl show -P``: lists as sets of numbers,
    words without case; a value systemd ignored ('n/a', empty) is not the one written."""
    from myaccel.actions.settings.systemd import cgroup_unit, main_pid_unit, same_value

    assert same_value("CPUAffinity", "0 1", "0-1") and same_value("NUMAMask", "0-3", "0,1,2,3")
    assert not same_value("NUMAMask", "0", "0-1") and not same_value("NUMAMask", "n/a", "0")
    assert same_value("NUMAPolicy", "bind", "Bind") and not same_value("NUMAPolicy", "n/a", "bind")
    line = "0::/system.slice/mariadb.service"
    assert cgroup_unit(f"1:name=x:/\n{line}\n") == ("mariadb.service", line)
    assert cgroup_unit("0::/user.slice/user-0.slice/session-3.scope\n") is None
    (tmp_path / "proc" / "7").mkdir(parents=True)
    (tmp_path / "proc" / "7" / "cgroup").write_text(line + "\n")
    assert main_pid_unit(7, tmp_path) is None  # this host is not run by systemd


# ---------------------------------------------------------------- URIs


def test_setting_for_each_scheme(root: Path) -> None:
    def connect() -> Any:
        raise AssertionError("not called")

    cases: dict[str, type[Setting]] = {
        "sysctl:vm.swappiness": SysctlSetting,
        "sysfs:/sys/kernel/mm/transparent_hugepage/enabled": SysfsSetting,
        "debugfs:/sys/kernel/debug/sched/base_slice_ns": DebugfsSetting,
        "file:/etc/security/limits.d/99-myaccel.conf": FileSetting,
        "mycnf:mysqld/innodb_io_capacity": OptionFileSetting,
        "mysql:innodb_io_capacity": ServerVariableSetting,
        "systemd:mariadb.service/NUMAPolicy": SystemdDropInSetting,
    }
    for target, cls in cases.items():
        s = setting_for(target, root=root, conf_dir=CONF_DIR, connect=connect)
        assert type(s) is cls, target
        assert s.target == target
        rebuilt = setting_from_spec(s.kind, json.loads(json.dumps(s.spec())), connect=connect)
        assert type(rebuilt) is cls and rebuilt.target == target


def test_mycnf_conf_dir_is_found_under_root(root: Path) -> None:
    s = setting_for("mycnf:mysqld/innodb_io_capacity", root=root)
    assert isinstance(s, OptionFileSetting) and s.conf_dir == "/etc/mysql/conf.d"
    (root / "etc/mysql/mariadb.conf.d").mkdir()
    s = setting_for("mycnf:mysqld/innodb_io_capacity", root=root)
    assert isinstance(s, OptionFileSetting) and s.conf_dir == "/etc/mysql/mariadb.conf.d"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("swappiness", "not a setting target"),
        ("sysctl:", "not a setting target"),
        ("registry:HKLM/x", "unknown setting scheme 'registry'"),
        ("build:lse", "advisory"),
        ("advice:madv-collapse", "advisory"),
        ("mycnf:innodb_io_capacity", "needs two parts"),
        ("mycnf:mysqld/a/b", "needs two parts"),
        ("mysql:innodb_io_capacity", "needs a server connection"),
        ("mysql:innodb_io_capacity; DROP TABLE x", "not a server variable name"),
        ("sysfs:/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor", "names several files"),
        ("sysfs:/etc/passwd", "not under /sys"),
        ("sysfs:/sys/kernel/debug/sched/base_slice_ns", "is in debugfs"),
        ("sysfs:/sys/kernel/../../etc/passwd", "not a normalized path"),
        ("debugfs:/sys/kernel/mm/transparent_hugepage/enabled", "not under /sys/kernel/debug"),
        ("file:etc/x.conf", "not absolute"),
        ("systemd:mariadb/NUMAPolicy", "not a systemd unit name"),
        ("systemd:mariadb.service/numa policy", "not a systemd setting name"),
    ],
)
def test_setting_for_errors(root: Path, target: str, message: str) -> None:
    with pytest.raises(UsageError, match=message) as exc:
        setting_for(target, root=root, conf_dir=CONF_DIR)
    assert exc.value.hint


def test_systemd_server_unit_not_found(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    with pytest.raises(UsageError, match="which systemd unit"):
        setting_for("systemd:server/NUMAPolicy", root=tmp_path)


def test_expand_target_globs_in_natural_order(root: Path) -> None:
    for n in (0, 1, 2, 10):
        d = root / f"sys/devices/system/cpu/cpu{n}/cpufreq"
        d.mkdir(parents=True, exist_ok=True)
        (d / "scaling_governor").write_text("schedutil\n")
    got = expand_target("sysfs:/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor", root=root)
    assert got == [
        f"sysfs:/sys/devices/system/cpu/cpu{n}/cpufreq/scaling_governor" for n in (0, 1, 2, 10)
    ]
    assert expand_target("sysctl:vm.swappiness", root=root) == ["sysctl:vm.swappiness"]
    with pytest.raises(UsageError, match="matches no file"):
        expand_target("sysfs:/sys/class/nothing*/x", root=root)


# ---------------------------------------------------------------- values


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("128M", "134217728"),
        ("1G", "1073741824"),
        ("16k", "16384"),
        ("ON", "1"),
        ("on", "TRUE"),
        ("OFF", "0"),
        ("0.000000", "0"),
        ("90.000000", "90"),
        ("O_DIRECT", "o_direct"),
        ("4096\t131072\t6291456", "4096 131072 6291456"),
        ("'madvise'", "madvise"),
    ],
)
def test_values_equal(a: str, b: str) -> None:
    assert values_equal(a, b)


@pytest.mark.parametrize(("a", "b"), [("128M", "128"), ("ON", "2"), ("1.5", "1"), ("a", "b")])
def test_values_differ(a: str, b: str) -> None:
    assert not values_equal(a, b)
    assert not values_equal(None, a)


def test_normalize_value_types() -> None:
    assert normalize_value("8G") == 8 << 30
    assert normalize_value("-1") == -1
    assert normalize_value("0.5") == 0.5
    assert normalize_value(" Barracuda ") == "barracuda"


def test_sql_literal() -> None:
    def esc(s: str) -> str:
        return "'" + s.replace("'", "\\'") + "'"

    assert sql_literal("128M", esc) == "134217728"
    assert sql_literal("2000", esc) == "2000"
    assert sql_literal("0.5", esc) == "0.5"
    assert sql_literal("on", esc) == "ON"
    assert sql_literal("O_DIRECT", esc) == "'O_DIRECT'"
    assert (
        sql_literal("STRICT_TRANS_TABLES,NO_ZERO_DATE", esc) == "'STRICT_TRANS_TABLES,NO_ZERO_DATE'"
    )
    assert sql_literal("x' OR 1", esc) == "'x\\' OR 1'"


# ---------------------------------------------------------------- journal


def test_journal_round_trip_and_checksum(root: Path, jdir: Path) -> None:
    s = SysctlSetting("vm.swappiness", root=root)
    result = apply_changes([(s, "10")], jdir, plan_id="plan-1", facts_digest="sha256:abc")
    path = Path(result.journal_path or "")
    doc = json.loads(path.read_text())
    assert doc["schema_version"] == JOURNAL_SCHEMA
    assert doc["checksum"] == canonical_checksum(doc)
    assert doc["status"] == "applied"
    assert (doc["plan_id"], doc["facts_digest"]) == ("plan-1", "sha256:abc")
    entry = doc["entries"][0]
    assert entry["target"] == "sysctl:vm.swappiness"
    assert entry["old"]["value"] == "60" and entry["new_value"] == "10"
    assert entry["state"] == "applied" and entry["read_back"] == "10"
    assert entry["pending_at"] and entry["applied_at"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert Journal.load(path).data.model_dump() == Journal.load(path).data.model_dump()
    assert Journal.find_unfinished(jdir) == []


def test_tampered_journal_is_detected(root: Path, jdir: Path) -> None:
    s = SysctlSetting("vm.swappiness", root=root)
    path = Path(apply_changes([(s, "10")], jdir).journal_path or "")
    raw = path.read_bytes()
    i = raw.index(b'"value": "60"') + len(b'"value": "')
    path.write_bytes(raw[:i] + b"9" + raw[i + 1 :])  # one byte: old value 60 -> 90
    with pytest.raises(JournalCorrupt, match="fails its checksum") as exc:
        Journal.load(path)
    assert "--ignore-checksum" in exc.value.hint
    with pytest.raises(JournalCorrupt):
        rollback(journal_dir=jdir)
    assert Journal.load(path, verify_checksum=False).entries[0].old.value == "90"


def test_malformed_journals(jdir: Path) -> None:
    jdir.mkdir()
    bad = jdir / "00001-20250101T000000Z.json"
    bad.write_text("{not json")
    with pytest.raises(JournalCorrupt, match="not readable JSON"):
        Journal.load(bad)
    assert Journal.find_unfinished(jdir) == [bad]  # unreadable: state unknown, blocks apply
    bad.write_text(json.dumps({"schema_version": "myaccel.journal/9"}))
    with pytest.raises(JournalCorrupt, match="schema"):
        Journal.load(bad)
    with pytest.raises(JournalError, match="does not exist"):
        Journal.load(jdir / "missing.json")


def test_journal_dir_defaults_to_myaccel_home(myaccel_home: Path) -> None:
    assert journals_dir() == myaccel_home / "journals"


def test_crash_leaves_unfinished_journal_that_blocks_apply(root: Path, jdir: Path) -> None:
    before = tree(root)
    changes: list[tuple[Setting, str]] = [
        (SysctlSetting("vm.swappiness", root=root), "10"),
        (SysfsSetting("/sys/kernel/mm/transparent_hugepage/enabled", root=root), "never"),
        (OptionFileSetting("mysqld", "innodb_io_capacity", root=root, conf_dir=CONF_DIR), "2000"),
    ]
    with pytest.raises(SimulatedCrash):
        apply_changes(changes, jdir, crash_after=2)
    [path] = Journal.find_unfinished(jdir)
    journal = Journal.load(path)
    assert journal.status == "open"
    assert [e.state for e in journal.entries] == ["applied", "pending"]
    assert rd(root, "/sys/kernel/mm/transparent_hugepage/enabled") == b"always madvise [never]\n"

    with pytest.raises(UnfinishedJournal) as exc:
        apply_changes(changes[2:], jdir)
    assert "myaccel rollback" in exc.value.hint
    dry = apply_changes(changes, jdir, dry_run=True)
    assert dry.status == "dry-run" and any("unfinished" in w for w in dry.warnings)

    rb = rollback(journal_dir=jdir)
    assert rb.reverted == [
        "sysfs:/sys/kernel/mm/transparent_hugepage/enabled",
        "sysctl:vm.swappiness",
    ]
    assert any("was open" in w for w in rb.warnings)
    assert tree(root) == before
    assert Journal.find_unfinished(jdir) == []
    assert apply_changes(changes, jdir).status == "applied"


def test_crash_during_rollback_resumes(root: Path, jdir: Path) -> None:
    before = tree(root)
    changes: list[tuple[Setting, str]] = [
        (SysctlSetting("vm.swappiness", root=root), "10"),
        (SysctlSetting("vm.dirty_ratio", root=root), "5"),
        (FileSetting("/etc/new/a.conf", root=root), "a\n"),
    ]
    apply_changes(changes, jdir)

    def crash(point: str, index: int) -> None:
        if point == "reverted" and index == 1:
            raise SimulatedCrash

    with pytest.raises(SimulatedCrash):
        rollback(journal_dir=jdir, hook=crash)
    rb = rollback(journal_dir=jdir)
    assert rb.reverted == ["sysctl:vm.swappiness"]
    assert rb.already_reverted == ["file:/etc/new/a.conf", "sysctl:vm.dirty_ratio"]
    assert tree(root) == before
    with pytest.raises(JournalError, match="nothing to roll back"):
        rollback(journal_dir=jdir)


def test_rollback_of_a_rolled_back_journal_changes_nothing(root: Path, jdir: Path) -> None:
    before = tree(root)
    path = Path(
        apply_changes([(SysctlSetting("vm.swappiness", root=root), "10")], jdir).journal_path or ""
    )
    rollback(path)
    rb = rollback(path)
    assert rb.reverted == [] and rb.already_reverted == ["sysctl:vm.swappiness"]
    assert tree(root) == before


class ExplodingFile(FileSetting):
    """Writes its file, then fails: apply must roll everything back."""

    def apply(self, desired: str) -> None:
        super().apply(desired)
        raise OSError(5, "Input/output error")


def test_error_mid_apply_rolls_back_everything(root: Path, jdir: Path) -> None:
    before = tree(root)
    changes: list[tuple[Setting, str]] = [
        (SysctlSetting("vm.swappiness", root=root), "10"),
        (ExplodingFile("/etc/boom/x.conf", root=root), "x"),
        (SysctlSetting("vm.dirty_ratio", root=root), "5"),
    ]
    with pytest.raises(ApplyError, match="every change of this run was rolled back") as exc:
        apply_changes(changes, jdir)
    assert "Input/output error" in exc.value.message
    assert tree(root) == before
    journal = Journal.load(Path(exc.value.context["journal"]))
    assert journal.status == "rolled-back"
    assert [e.state for e in journal.entries] == ["reverted", "reverted"]
    assert Journal.find_unfinished(jdir) == []


def test_error_without_auto_rollback_leaves_failed_journal(root: Path, jdir: Path) -> None:
    before = tree(root)
    changes: list[tuple[Setting, str]] = [
        (SysctlSetting("vm.swappiness", root=root), "10"),
        (ExplodingFile("/etc/boom/x.conf", root=root), "x"),
    ]
    with pytest.raises(ApplyError, match="left for `myaccel rollback`"):
        apply_changes(changes, jdir, rollback_on_error=False)
    [path] = Journal.find_unfinished(jdir)
    assert Journal.load(path).status == "failed"
    assert [e.state for e in Journal.load(path).entries] == ["applied", "failed"]
    rollback(journal_dir=jdir)
    assert tree(root) == before


def test_partial_rollback_then_retry_restores_files(
    root: Path, jdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A revert that fails leaves the journal failed; the retry still ends byte-identical
    (files are settled to the earliest entry's snapshot)."""
    before = tree(root)
    changes: list[tuple[Setting, str]] = [
        (SysctlSetting("vm.swappiness", root=root), "10"),
        (SysctlSetting("vm.dirty_ratio", root=root), "5"),
        (SysctlSetting("vm.dirty_background_ratio", root=root), "2"),
    ]
    apply_changes(changes, jdir)
    real_revert = SysctlSetting.revert

    def flaky(self: SysctlSetting, entry: Any) -> None:
        if self.key == "vm.dirty_background_ratio":
            raise MyaccelError("device busy")
        real_revert(self, entry)

    monkeypatch.setattr(SysctlSetting, "revert", flaky)
    with pytest.raises(RollbackIncomplete, match="device busy") as exc:
        rollback(journal_dir=jdir)
    assert "resumes" in exc.value.hint
    [path] = Journal.find_unfinished(jdir)
    assert Journal.load(path).status == "failed"
    monkeypatch.setattr(SysctlSetting, "revert", real_revert)
    rb = rollback(journal_dir=jdir)
    assert rb.reverted == ["sysctl:vm.dirty_background_ratio"]
    assert tree(root) == before


def test_stacked_journals_roll_back_newest_first(root: Path, jdir: Path) -> None:
    before = tree(root)
    s = SysctlSetting("vm.swappiness", root=root)
    first = Path(apply_changes([(s, "10")], jdir).journal_path or "")
    second = Path(apply_changes([(s, "20")], jdir).journal_path or "")
    assert Journal.list_paths(jdir) == [first, second]
    assert first.name.startswith("00001-") and second.name.startswith("00002-")
    with pytest.raises(JournalError, match="still in effect"):
        rollback(first)
    assert Path(rollback(journal_dir=jdir).journal_path) == second
    assert s.read() == "10"
    assert Path(rollback(journal_dir=jdir).journal_path) == first
    assert tree(root) == before


def test_rollback_refuses_another_host(root: Path, jdir: Path) -> None:
    path = Path(
        apply_changes([(SysctlSetting("vm.swappiness", root=root), "10")], jdir).journal_path or ""
    )
    doc = json.loads(path.read_text())
    doc["host"] = "elsewhere"
    doc["checksum"] = canonical_checksum(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(JournalError, match="written on host elsewhere"):
        rollback(path)
    assert rollback(path, force=True).reverted == ["sysctl:vm.swappiness"]


def test_dry_run_touches_nothing_and_matches_apply(root: Path, jdir: Path) -> None:
    before = tree(root)
    changes: list[tuple[Setting, str]] = [
        (SysctlSetting("vm.swappiness", root=root), "10"),
        (
            SysctlSetting("vm.dirty_ratio", root=root),
            "20",
        ),  # runtime already 20: only persistence is missing
        (FileSetting("/etc/new.conf", root=root), "x\n"),
    ]
    dry = apply_changes(changes, jdir, dry_run=True)
    assert tree(root) == before and not jdir.exists()
    real = apply_changes(changes, jdir)
    assert [c.target for c in dry.changes] == [c.target for c in real.changes]
    assert dry.unchanged == real.unchanged


def test_nothing_to_change_writes_no_journal(root: Path, jdir: Path) -> None:
    s = SysctlSetting("vm.swappiness", root=root, persist=False)
    result = apply_changes([(s, "60")], jdir)
    assert result.status == "unchanged" and result.unchanged == ["sysctl:vm.swappiness"]
    assert Journal.list_paths(jdir) == []


def test_duplicate_targets_refused(root: Path, jdir: Path) -> None:
    s = SysctlSetting("vm.swappiness", root=root)
    with pytest.raises(UsageError, match="appears twice"):
        apply_changes([(s, "10"), (SysctlSetting("vm.swappiness", root=root), "20")], jdir)


def test_verify_journal_reports_drift(root: Path, jdir: Path) -> None:
    apply_changes(
        [
            (SysctlSetting("vm.swappiness", root=root), "10"),
            (
                OptionFileSetting("mysqld", "innodb_io_capacity", root=root, conf_dir=CONF_DIR),
                "2000",
            ),
        ],
        jdir,
    )
    assert verify_journal(journal_dir=jdir) == []
    (root / "proc/sys/vm/swappiness").write_text("60\n")  # e.g. a reboot without persistence
    [drift] = verify_journal(journal_dir=jdir)
    assert (drift.target, drift.expected, drift.actual) == ("sysctl:vm.swappiness", "10", "60")


def test_restore_file_removes_stray_temporaries(root: Path) -> None:
    from myaccel.actions.files import restore_file

    d = root / "etc/sysctl.d"
    (d / ".99-myaccel.conf.myaccel-tmp-4242").write_text("half written")
    restore_file(root, FileState(path="/etc/sysctl.d/99-myaccel.conf", existed=False))
    assert sorted(os.listdir(d)) == ["10-user.conf"]


def test_sysctl_slash_form_key_keeps_dots_in_names(root: Path, jdir: Path) -> None:
    p = root / "proc/sys/net/ipv4/conf/eth0.100/rp_filter"
    p.parent.mkdir(parents=True)
    p.write_text("1\n")
    before = tree(root)
    s = setting_for("sysctl:net/ipv4/conf/eth0.100/rp_filter", root=root)
    assert s.read() == "1"
    apply_changes([(s, "2")], jdir)
    assert p.read_text() == "2\n"
    assert (
        "net/ipv4/conf/eth0.100/rp_filter = 2\n"
        in rd(root, "/etc/sysctl.d/99-myaccel.conf").decode()
    )
    assert s.plan("2") is None
    rollback(journal_dir=jdir)
    assert tree(root) == before


def test_journal_records_an_absolute_root(
    root: Path, jdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(root.parent)
    before = tree(root)
    result = apply_changes([(setting_for("sysctl:vm.swappiness", root="root"), "10")], jdir)
    entry = Journal.load(Path(result.journal_path or "")).entries[0]
    assert entry.spec["root"] == str(root)
    monkeypatch.chdir("/")
    rollback(journal_dir=jdir)
    assert tree(root) == before


def test_concurrent_apply_is_refused(root: Path, jdir: Path) -> None:
    from myaccel.actions import Busy
    from myaccel.actions.journal import journal_lock

    with journal_lock(jdir), pytest.raises(Busy, match="another myaccel apply"):
        apply_changes([(SysctlSetting("vm.swappiness", root=root), "10")], jdir)


class PretendLive(SysctlSetting):
    @property
    def needs_root(self) -> bool:
        return True


def test_root_is_checked_before_anything_changes(
    root: Path, jdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = tree(root)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(ApplyError, match="needs root") as exc:
        apply_changes([(PretendLive("vm.swappiness", root=root), "10")], jdir)
    assert "sudo" in exc.value.hint
    assert tree(root) == before and not jdir.exists()
    # a dry run needs no root
    assert apply_changes(
        [(PretendLive("vm.swappiness", root=root), "10")], jdir, dry_run=True
    ).changes
