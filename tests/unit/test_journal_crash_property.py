"""Property: the journal state machine survives a crash after *every* durable journal write.

test_actions_property.py crashes at the applier's hook points; this one crashes at the
journal's own writes (``write_json_durably``: create, each pending entry, each mark, the
final status), in apply and then again in rollback, and also between a write's temporary
file and its rename (a torn write). For random lists of cheap file settings on a small temp
tree (the settings and the tree snapshot of test_actions_property), and for each crash
point k of the scenario (k = 1 .. number of writes of a full apply):

- apply crashes right after write k (or in the middle of it);
- optionally the rollback crashes after its write m;
- a final rollback leaves the tree byte-identical (bytes, modes, which paths exist) and
  no journal unfinished or in effect.

1,000+ cases: ``max_examples`` scenarios times every crash point of each (counted).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_actions_property import CANDIDATES, FIXTURE, build, tree

from myaccel.actions import Journal, SimulatedCrash, apply_changes, rollback
from myaccel.actions import journal as journal_mod
from myaccel.actions.files import MANAGED_MARKER
from myaccel.actions.journal import journal_lock

# Cheap settings only (no systemd runner, no globs): files, option files, kernel values.
CHEAP = (
    "swappiness",
    "dirty_ratio",
    "numa_balancing",
    "thp_enabled",
    "thp_defrag",
    "io_capacity",
    "buffer_pool",
    "mariadbd_group",
    "file_existing",
    "file_new_in_existing_dir",
    "file_new_in_new_dirs",
)
# The parts of the this-vm sysroot those settings read (a small tree copies fast).
FROM_FIXTURE = (
    "proc/sys/vm",
    "proc/sys/kernel/numa_balancing",
    "sys/kernel/mm/transparent_hugepage",
)
EXTRA_FILES = {
    "etc/sysctl.d/10-user.conf": (b"vm.swappiness = 30\n", 0o644),
    "etc/mysql/conf.d/50-server.cnf": (b"[mysqld]\ninnodb_io_capacity = 500\n", 0o640),
    "etc/existing.conf": (b"keep me\x00\xff\n", 0o600),
    "etc/security/limits.d/10-user.conf": (b"* soft nofile 1024\n", 0o644),
    "etc/tmpfiles.d/.keep": (b"", 0o644),
}
CASES = [0]  # crash cases run (asserted >= 1000 at the end of the module)


def make_small_base(dest: Path) -> Path:
    for rel in FROM_FIXTURE:
        if (FIXTURE / rel).is_dir():
            shutil.copytree(FIXTURE / rel, dest / rel, symlinks=True)
        else:
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(FIXTURE / rel, dest / rel)
    for rel, (data, mode) in EXTRA_FILES.items():
        p = dest / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        p.chmod(mode)
    return dest


@pytest.fixture(scope="module")
def small_base() -> Iterator[Path]:
    holder = tempfile.TemporaryDirectory(prefix="myaccel-jcrash-base-", dir=_fast_tmp())
    yield make_small_base(Path(holder.name) / "base")
    holder.cleanup()


def _fast_tmp() -> str | None:
    """tmpfs when there is one: thousands of tiny trees are created and removed."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


@pytest.fixture
def workdir() -> Iterator[Path]:
    holder = tempfile.TemporaryDirectory(prefix="myaccel-jcrash-", dir=_fast_tmp())
    yield Path(holder.name)
    holder.cleanup()


class Crasher:
    """Wraps ``write_json_durably``: counts the journal writes and crashes after the k-th
    (``torn``: after its temporary file was written, before the rename)."""

    def __init__(self) -> None:
        self.real = journal_mod.write_json_durably
        self.count = 0
        self.at: int | None = None
        self.torn = False

    def arm(self, at: int | None, torn: bool = False) -> None:
        self.count, self.at, self.torn = 0, at, torn

    def __call__(self, path: Path, doc: dict[str, Any]) -> None:
        self.count += 1
        if self.count == self.at and self.torn:
            path.with_name(f".{path.name}.tmp").write_text('{"half": ')
            raise SimulatedCrash(f"torn journal write {self.count}")
        self.real(path, doc)
        if self.count == self.at:
            raise SimulatedCrash(f"after journal write {self.count}")


@pytest.fixture
def crasher(monkeypatch: pytest.MonkeyPatch) -> Crasher:
    # The order of writes is what is under test, not the disk: fsync is a no-op here (a
    # simulated crash loses nothing that was written), which makes 1,000+ cases cheap.
    monkeypatch.setattr("os.fsync", lambda fd: None)
    c = Crasher()
    monkeypatch.setattr(journal_mod, "write_json_durably", c)
    return c


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[tuple[str, str]], bool]:
    names = draw(st.lists(st.sampled_from(CHEAP), unique=True, min_size=1, max_size=4))
    picks = [(n, draw(CANDIDATES[n][1], label=n)) for n in names]
    return picks, draw(st.booleans(), label="managed file from an earlier run")


def _fresh(base: Path, work: Path, n: int, earlier: bool) -> tuple[Path, Path]:
    root = work / str(n) / "root"
    shutil.copytree(base, root, symlinks=True)
    if earlier:
        (root / "etc/mysql/conf.d/99-myaccel.cnf").write_text(
            f"{MANAGED_MARKER}: from an earlier run\n\n[mysqld]\ninnodb_io_capacity = 700\n"
        )
    return root, work / str(n) / "journals"


def _full_writes(
    base: Path, work: Path, picks: list[tuple[str, str]], earlier: bool, crasher: Crasher
) -> int:
    root, jdir = _fresh(base, work, 0, earlier)
    crasher.arm(None)
    apply_changes(build(root, picks), jdir)
    return crasher.count


def _crash_case(
    base: Path,
    work: Path,
    n: int,
    scenario: tuple[list[tuple[str, str]], bool],
    crasher: Crasher,
    torn: bool,
    rb_crash: int | None,
) -> None:
    picks, earlier = scenario
    root, jdir = _fresh(base, work, n, earlier)
    before = tree(root)
    crasher.arm(n, torn)
    with contextlib.suppress(SimulatedCrash):
        apply_changes(build(root, picks), jdir)
    if rb_crash is not None and Journal.find_active(jdir):
        crasher.arm(rb_crash)
        with contextlib.suppress(SimulatedCrash):
            rollback(journal_dir=jdir)
    crasher.arm(None)
    if Journal.find_active(jdir):
        rollback(journal_dir=jdir)
    assert tree(root) == before, f"crash after journal write {n} (torn={torn})"
    assert Journal.find_unfinished(jdir) == []
    assert Journal.find_active(jdir) == []
    with journal_lock(jdir):  # the next apply or rollback removes a torn write's temporary
        assert list(jdir.glob(".*.tmp")) == []
    CASES[0] += 1


PROP = settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@PROP
@given(
    scenario=scenarios(),
    torn=st.booleans(),
    rb_crash=st.one_of(st.none(), st.integers(1, 12)),
)
def test_crash_after_every_journal_write(
    small_base: Path,
    workdir: Path,
    crasher: Crasher,
    scenario: tuple[list[tuple[str, str]], bool],
    torn: bool,
    rb_crash: int | None,
) -> None:
    picks, earlier = scenario
    run = workdir / f"r{CASES[0]}"
    total = _full_writes(small_base, run, picks, earlier, crasher)
    for n in range(1, total + 1):
        _crash_case(small_base, run, n, scenario, crasher, torn, rb_crash)
    shutil.rmtree(run)


def test_zz_at_least_1000_cases() -> None:
    """Runs after the property (file order): the crash cases it ran."""
    print(f"journal crash cases: {CASES[0]}")
    if CASES[0] == 0:
        pytest.skip("the property test did not run in this session (-k?)")
    assert CASES[0] >= 1000, CASES[0]
