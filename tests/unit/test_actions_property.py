"""Property: apply then rollback leaves every file of the tree byte-identical.

For random subsets and orders of settings (sysctl, sysfs, debugfs, option-file knobs,
systemd drop-ins, managed files that did or did not exist, with or without a managed file
left by an earlier run) and random values, on a fresh copy of the this-vm sysroot:

- apply + rollback restores the full tree snapshot (bytes, modes, which paths exist);
- a crash at any point of the apply (entry journaled / changed / marked applied), then
  rollback, does the same;
- a crash during that rollback, then another rollback, still does the same.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from myaccel.actions import (
    DebugfsSetting,
    FileSetting,
    Journal,
    OptionFileSetting,
    Setting,
    SimulatedCrash,
    SysctlSetting,
    SysfsSetting,
    SystemdDropInSetting,
    apply_changes,
    rollback,
)
from myaccel.actions.files import MANAGED_MARKER

FIXTURE = Path(__file__).parents[1] / "fixtures" / "sysroots" / "this-vm"
CONF_DIR = "/etc/mysql/conf.d"
THP = "/sys/kernel/mm/transparent_hugepage"


def make_base(dest: Path) -> Path:
    shutil.copytree(FIXTURE, dest, symlinks=True)
    files = {
        "etc/sysctl.d/10-user.conf": (b"vm.swappiness = 30\n", 0o644),
        "etc/mysql/conf.d/50-server.cnf": (b"[mysqld]\ninnodb_io_capacity = 500\n", 0o640),
        "etc/existing.conf": (b"keep me\x00\xff\n", 0o600),
        "etc/security/limits.d/10-user.conf": (b"* soft nofile 1024\n", 0o644),
        "lib/systemd/system/mariadb.service": (b"[Service]\nExecStart=/usr/sbin/mariadbd\n", 0o644),
        "sys/kernel/debug/sched/base_slice_ns": (b"3000000\n", 0o644),
    }
    for rel, (data, mode) in files.items():
        p = dest / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        p.chmod(mode)
    return dest


def tree(root: Path) -> dict[str, tuple[Any, ...]]:
    out: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            st_ = p.lstat()
            rel = str(p.relative_to(root))
            if stat.S_ISLNK(st_.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st_.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st_.st_mode))
            else:
                out[rel] = ("file", stat.S_IMODE(st_.st_mode), p.read_bytes())
    return out


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_base(tmp_path_factory.mktemp("actions-prop") / "base")


def _noop_runner(argv: Any) -> None:
    return None


SettingFactory = Callable[[Path], Setting]
# id -> (factory, strategy of desired values)
CANDIDATES: dict[str, tuple[SettingFactory, st.SearchStrategy[str]]] = {
    "swappiness": (
        lambda r: SysctlSetting("vm.swappiness", root=r),
        st.integers(0, 100).map(str),
    ),
    "dirty_ratio": (
        lambda r: SysctlSetting("vm.dirty_ratio", root=r, persist=False),
        st.integers(1, 90).map(str),
    ),
    "dirty_background_ratio": (
        lambda r: SysctlSetting("vm.dirty_background_ratio", root=r),
        st.integers(1, 50).map(str),
    ),
    "numa_balancing": (
        lambda r: SysctlSetting("kernel.numa_balancing", root=r),
        st.sampled_from(["0", "1"]),
    ),
    "thp_enabled": (
        lambda r: SysfsSetting(f"{THP}/enabled", root=r),
        st.sampled_from(["always", "madvise", "never"]),
    ),
    "thp_defrag": (
        lambda r: SysfsSetting(f"{THP}/defrag", root=r, persist=False),
        st.sampled_from(["always", "defer", "defer+madvise", "madvise", "never"]),
    ),
    "thp_shmem": (
        lambda r: SysfsSetting(f"{THP}/shmem_enabled", root=r),
        st.sampled_from(["always", "within_size", "advise", "never", "deny", "force"]),
    ),
    "base_slice": (
        lambda r: DebugfsSetting("/sys/kernel/debug/sched/base_slice_ns", root=r),
        st.integers(100000, 10000000).map(str),
    ),
    "io_capacity": (
        lambda r: OptionFileSetting("mysqld", "innodb_io_capacity", root=r, conf_dir=CONF_DIR),
        st.integers(100, 20000).map(str),
    ),
    "buffer_pool": (
        lambda r: OptionFileSetting("mysqld", "innodb_buffer_pool_size", root=r, conf_dir=CONF_DIR),
        st.sampled_from(["128M", "1G", "8G", "134217728"]),
    ),
    "mariadbd_group": (
        lambda r: OptionFileSetting("mariadbd", "max_connections", root=r, conf_dir=CONF_DIR),
        st.integers(10, 5000).map(str),
    ),
    "numa_policy": (
        lambda r: SystemdDropInSetting(
            "mariadb.service", "NUMAPolicy", root=r, runner=_noop_runner
        ),
        st.sampled_from(["interleave", "bind", "default"]),
    ),
    "nofile": (
        lambda r: SystemdDropInSetting(
            "mariadb.service", "LimitNOFILE", root=r, runner=_noop_runner
        ),
        st.integers(1024, 1 << 20).map(str),
    ),
    "file_existing": (
        lambda r: FileSetting("/etc/existing.conf", root=r),
        st.text(max_size=40),
    ),
    "file_new_in_existing_dir": (
        lambda r: FileSetting("/etc/security/limits.d/99-myaccel.conf", root=r),
        st.text(max_size=40),
    ),
    "file_new_in_new_dirs": (
        lambda r: FileSetting("/etc/myaccel-new/a/b/c.conf", root=r),
        st.text(min_size=1, max_size=40),
    ),
}


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[tuple[str, str]], bool]:
    names = draw(st.lists(st.sampled_from(sorted(CANDIDATES)), unique=True, max_size=8))
    picks = [(n, draw(CANDIDATES[n][1], label=n)) for n in names]
    earlier_managed = draw(st.booleans(), label="managed file from an earlier run")
    return picks, earlier_managed


@pytest.fixture
def fresh(base: Path) -> Iterator[Callable[[bool], tuple[Path, Path]]]:
    """Per-example copies (hypothesis runs many examples in one test call)."""
    holder = tempfile.TemporaryDirectory(prefix="myaccel-prop-")
    counter = [0]

    def make(earlier_managed: bool) -> tuple[Path, Path]:
        counter[0] += 1
        work = Path(holder.name) / str(counter[0])
        root = work / "root"
        shutil.copytree(base, root, symlinks=True)
        if earlier_managed:
            (root / "etc/mysql/conf.d/99-myaccel.cnf").write_text(
                f"{MANAGED_MARKER}: from an earlier run\n\n[mysqld]\ninnodb_io_capacity = 700\n"
            )
        return root, work / "journals"

    yield make
    holder.cleanup()


def build(root: Path, picks: list[tuple[str, str]]) -> list[tuple[Setting, str]]:
    return [(CANDIDATES[name][0](root), value) for name, value in picks]


PROP = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@PROP
@given(scenario=scenarios())
def test_apply_then_rollback_is_byte_identical(
    fresh: Callable[[bool], tuple[Path, Path]], scenario: tuple[list[tuple[str, str]], bool]
) -> None:
    picks, earlier = scenario
    root, jdir = fresh(earlier)
    before = tree(root)
    result = apply_changes(build(root, picks), jdir)
    if result.status == "unchanged":
        assert tree(root) == before
        return
    for setting, desired in build(root, picks):
        assert setting.plan(desired) is None, setting.target  # everything applied
    rollback(journal_dir=jdir)
    assert tree(root) == before


@PROP
@given(
    scenario=scenarios(),
    crash_at=st.integers(0, 7),
    point=st.sampled_from(["journaled", "changed", "applied"]),
    crash_in_rollback=st.one_of(st.none(), st.integers(0, 7)),
)
def test_crash_then_rollback_is_byte_identical(
    fresh: Callable[[bool], tuple[Path, Path]],
    scenario: tuple[list[tuple[str, str]], bool],
    crash_at: int,
    point: str,
    crash_in_rollback: int | None,
) -> None:
    picks, earlier = scenario
    root, jdir = fresh(earlier)
    before = tree(root)

    def crash(at: str, index: int) -> None:
        if at == point and index == crash_at:
            raise SimulatedCrash(f"{at} {index}")

    try:
        apply_changes(build(root, picks), jdir, hook=crash)
    except SimulatedCrash:
        assert len(Journal.find_unfinished(jdir)) == 1
    if not Journal.find_active(jdir):
        assert tree(root) == before  # nothing was changed
        return
    if crash_in_rollback is not None:

        def crash_rb(at: str, index: int) -> None:
            if at == "reverted" and index == crash_in_rollback:
                raise SimulatedCrash

        with contextlib.suppress(SimulatedCrash):
            rollback(journal_dir=jdir, hook=crash_rb)
    if Journal.find_active(jdir):
        rollback(journal_dir=jdir)
    assert tree(root) == before
    assert Journal.find_unfinished(jdir) == []
