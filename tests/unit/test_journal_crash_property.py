"""Property: the journal state machine survives a crash after *every* durable journal write,
through both callers of the apply protocol (``actions.protocol.apply_with_restart``):
``myaccel apply`` (``entry="apply"``: the call ``cli/apply.py`` makes) and the
existing-server rollout of ``accelerate`` (``entry="rollout"``: ``rollout.guarded_apply``
itself, its windows of the server's counters and health check stubbed); the rollbacks are
``rollback_with_restart`` as ``myaccel rollback`` runs it.

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

When option files change, the apply restarts the "server" (a stand-in that restarts
instantly): one more case per scenario crashes during that restart, and the journal must
still be unfinished then (kept open until the restart and its check passed), never
``applied``.

1,000+ cases per entry: ``max_examples`` scenarios times every crash point of each.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_actions_property import CANDIDATES, FIXTURE, build, tree

from myaccel.accelerate import rollout
from myaccel.accelerate.live import Window
from myaccel.actions import Journal, OptionFileSetting, SimulatedCrash, protocol
from myaccel.actions import journal as journal_mod
from myaccel.actions.files import MANAGED_MARKER
from myaccel.actions.journal import journal_lock
from myaccel.actions.plan_apply import PlannedChanges
from myaccel.actions.protocol import apply_with_restart, rollback_with_restart
from myaccel.actions.session import journal_in_effect
from myaccel.actions.target import UnmanagedServer
from myaccel.rules.model import Plan
from myaccel.server.connection import ConnectParams

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
ENTRIES = ("apply", "rollout")
CASES = dict.fromkeys(ENTRIES, 0)  # crash cases run per entry (asserted >= 1000 at the end)
PLAN = cast(Plan, SimpleNamespace(created_at="plan", facts_digest="sha256:test"))
# never connected to: the rollout's windows and health checks are stubbed
PARAMS = ConnectParams(host=None, port=3306, socket="/nonexistent.sock", user="u", password=None)


@dataclass(frozen=True, eq=False)
class InstantServer(UnmanagedServer):
    """A server that restarts and starts at once (nothing runs) and is always reachable;
    ``crash_on_restart`` dies in the restart, as SIGKILL would."""

    crash_on_restart: bool = False

    def startable(self) -> bool:
        return True

    def restart(self, log: protocol.Note) -> None:
        if self.crash_on_restart:
            raise SimulatedCrash("crash during the restart")

    def start(self, log: protocol.Note) -> None:
        pass

    def reachable(self) -> bool:
        return True


def _quiet(_msg: str) -> None:
    pass


def _apply(entry: str, root: Path, picks: list[tuple[str, str]], crash_restart: bool) -> None:
    """The apply as ``entry`` calls the protocol; the journal goes to $MYACCEL_HOME."""
    changes = build(root, picks)
    restart = any(isinstance(s, OptionFileSetting) for s, _ in changes)
    if entry == "apply":  # cli/apply.py: apply_with_restart on the options' target
        target = InstantServer(crash_on_restart=crash_restart)
        apply_with_restart(target, changes, restart=restart, note=_quiet, plan_id="plan")
        return
    target = InstantServer(params=PARAMS, crash_on_restart=crash_restart)
    pc = PlannedChanges(changes=changes, restart_needed=restart)
    rollout.guarded_apply(PLAN, pc, target, window_s=0, settle_s=0, say=_quiet)


def _rollback() -> None:
    """``myaccel rollback``: the journal in effect, on the server it records (here the
    stand-in: the record of a stand-in names no server myaccel could start)."""
    rollback_with_restart(InstantServer(params=PARAMS), journal_in_effect(_jdir()), note=_quiet)


def _jdir() -> Path:
    return journal_mod.journals_dir()


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
    # the rollout's windows of the server's counters and the health checks: no server
    monkeypatch.setattr(
        rollout, "safe_window", lambda params, label, s, due=None: (Window(label, 0.0), [])
    )
    monkeypatch.setattr(rollout, "health_check", lambda target, expected: [])
    monkeypatch.setattr(protocol, "health_check", lambda target, expected: [])
    return c


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[tuple[str, str]], bool]:
    names = draw(st.lists(st.sampled_from(CHEAP), unique=True, min_size=1, max_size=4))
    picks = [(n, draw(CANDIDATES[n][1], label=n)) for n in names]
    return picks, draw(st.booleans(), label="managed file from an earlier run")


def _fresh(base: Path, work: Path, n: int, earlier: bool) -> Path:
    """A fresh tree; $MYACCEL_HOME (the journals) beside it."""
    root = work / str(n) / "root"
    shutil.copytree(base, root, symlinks=True)
    if earlier:
        (root / "etc/mysql/conf.d/99-myaccel.cnf").write_text(
            f"{MANAGED_MARKER}: from an earlier run\n\n[mysqld]\ninnodb_io_capacity = 700\n"
        )
    os.environ["MYACCEL_HOME"] = str(work / str(n) / "home")
    return root


def _full_writes(
    entry: str,
    base: Path,
    work: Path,
    picks: list[tuple[str, str]],
    earlier: bool,
    crasher: Crasher,
) -> int:
    root = _fresh(base, work, 0, earlier)
    crasher.arm(None)
    _apply(entry, root, picks, crash_restart=False)
    return crasher.count


def _crash_case(
    entry: str,
    base: Path,
    work: Path,
    n: int,
    scenario: tuple[list[tuple[str, str]], bool],
    crasher: Crasher,
    torn: bool,
    rb_crash: int | None,
    crash_restart: bool = False,
) -> None:
    """Crash after journal write ``n`` (or, ``crash_restart``, in the restart), then
    rollbacks until nothing is in effect: the tree is as before."""
    picks, earlier = scenario
    root = _fresh(base, work, n, earlier)
    jdir = _jdir()
    before = tree(root)
    crasher.arm(None if crash_restart else n, torn)
    with contextlib.suppress(SimulatedCrash):
        _apply(entry, root, picks, crash_restart)
    if crash_restart:
        # the journal stays open until the restart and its check passed
        assert Journal.find_unfinished(jdir), (
            f"{entry}: a crash in the restart left no open journal"
        )
    if rb_crash is not None and Journal.find_active(jdir):
        crasher.arm(rb_crash)
        with contextlib.suppress(SimulatedCrash):
            _rollback()
    crasher.arm(None)
    if Journal.find_active(jdir):
        _rollback()
    assert tree(root) == before, f"{entry}: crash after journal write {n} (torn={torn})"
    assert Journal.find_unfinished(jdir) == []
    assert Journal.find_active(jdir) == []
    with journal_lock(jdir):  # the next apply or rollback removes a torn write's temporary
        assert list(jdir.glob(".*.tmp")) == []
    CASES[entry] += 1


PROP = settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture
def home_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """$MYACCEL_HOME is set per case (``_fresh``) and put back after the test."""
    monkeypatch.setenv("MYACCEL_HOME", str(Path(tempfile.gettempdir()) / "unused"))


@pytest.mark.parametrize("entry", ENTRIES)
@PROP
@given(
    scenario=scenarios(),
    torn=st.booleans(),
    rb_crash=st.one_of(st.none(), st.integers(1, 12)),
)
def test_crash_after_every_journal_write(
    entry: str,
    small_base: Path,
    workdir: Path,
    crasher: Crasher,
    home_env: None,
    scenario: tuple[list[tuple[str, str]], bool],
    torn: bool,
    rb_crash: int | None,
) -> None:
    picks, earlier = scenario
    run = workdir / f"r{CASES[entry]}"
    total = _full_writes(entry, small_base, run, picks, earlier, crasher)
    for n in range(1, total + 1):
        _crash_case(entry, small_base, run, n, scenario, crasher, torn, rb_crash)
    if any(isinstance(s, OptionFileSetting) for s, _ in build(run / "0" / "root", picks)):
        _crash_case(entry, small_base, run, total + 1, scenario, crasher, torn, rb_crash, True)
    shutil.rmtree(run)


@pytest.mark.parametrize("entry", ENTRIES)
def test_zz_at_least_1000_cases(entry: str) -> None:
    """Runs after the property (file order): the crash cases it ran through ``entry``."""
    print(f"journal crash cases through {entry}: {CASES[entry]}")
    if CASES[entry] == 0:
        pytest.skip("the property test did not run in this session (-k?)")
    assert CASES[entry] >= 1000, CASES[entry]
