"""Fixtures shared by all test suites.

- ``myaccel_home``: a private, empty ``$MYACCEL_HOME`` for one test (nothing touches ~).
- ``sandbox_server``: one real MariaDB/MySQL sandbox named ``pytest`` for the whole session,
  running with the base config, destroyed at the end. Skips when no server is installed.
  Please do not stop it or change its config; init your own sandbox for that.
- ``sandbox_env``: ``sandbox_server`` with ``$MYACCEL_HOME`` pointing at its home for one
  test, so ``myaccel ... --sandbox pytest`` works in-process.
- ``mysql_basedir``: the MySQL to init MySQL sandboxes from (``$MYACCEL_MYSQL_BASEDIR``, else
  the installed one: None = found by the sandbox itself). Skips without MySQL; fails in CI
  (``CI`` set), where `make test` installs it.
- ``mariadb118_basedir``: the MariaDB 11.8 install prefix (``$MYACCEL_MARIADB118_BASEDIR``, else
  the one scripts/ensure-mariadb.sh makes, found by flavor and release line). Skips without
  it; fails in CI.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from myaccel import proc
from myaccel.server.sandbox import Sandbox, find_server

SESSION_SANDBOX = "pytest"

# The quiet gate of bench/ab/accelerate (bench/quiet.py) measures the host once and waits
# for nothing in the tests (their two workers load the machine by design); a test of the
# gate itself passes --quiet-wait.
os.environ.setdefault("MYACCEL_QUIET_WAIT", "0")

# Captured sysroots hold sysfs symlink loops: walking them makes collection never end.
collect_ignore = ["fixtures"]

# The files that take longest in `make test` (its --durations, 2026-11-28: 60 to 450 s each),
# slowest first. `make test` hands whole files to two workers (--dist loadfile) in collection
# order (--no-loadscope-reorder): started first, none of them is left running alone at the
# end while the other worker idles (4.5 of 21.8 minutes before this order).
SLOWEST_FIRST = (
    "tests/integration/test_mysql97.py",
    "tests/integration/test_accelerate_existing.py",
    "tests/integration/test_guard_stall_live.py",
    "tests/integration/test_secrets.py",
    "tests/integration/test_bench.py",
    "tests/integration/test_simulate_live.py",
    "tests/unit/test_journal_crash_property.py",
    "tests/integration/test_tune_live.py",
    "tests/integration/test_signals_live.py",
    "tests/integration/test_capture_live.py",
    "tests/integration/test_clone_secrets.py",
    "tests/integration/test_replay_per_request_live.py",
    "tests/integration/test_clone_live.py",
    "tests/integration/test_versions_live.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slowest files first, then the other integration tests, then the rest; a stable
    sort, so each file keeps its own order."""
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}

    def key(item: pytest.Item) -> tuple[int, int]:
        path = item.nodeid.split("::", 1)[0]
        return rank.get(path, len(rank)), 0 if item.get_closest_marker("integration") else 1

    items.sort(key=key)


@pytest.fixture
def myaccel_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "myaccel-home"
    home.mkdir()
    monkeypatch.setenv("MYACCEL_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def sandbox_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    if proc.which("mariadbd") is None and proc.which("mysqld") is None:
        pytest.skip("no mariadbd/mysqld installed (apt-get install mariadb-server)")
    home = tmp_path_factory.mktemp("sandbox-home")
    sb = Sandbox.init(SESSION_SANDBOX, home=home, timeout_s=120)
    try:
        yield sb
    finally:
        sb.destroy()


@pytest.fixture
def sandbox_env(sandbox_server: Sandbox, monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    monkeypatch.setenv("MYACCEL_HOME", str(sandbox_server.home))
    if not sandbox_server.is_running():
        sandbox_server.start(timeout_s=120)
    return sandbox_server


@pytest.fixture(scope="session")
def mysql_basedir() -> Path | None:
    env = os.environ.get("MYACCEL_MYSQL_BASEDIR")
    if env:
        return Path(env)
    try:
        install = find_server(flavor="mysql")
    except Exception as exc:
        if os.environ.get("CI"):
            pytest.fail(f"MySQL is not installed ({exc}): `make test` installs it")
        pytest.skip(f"no MySQL installed ({exc}); run: bash scripts/ensure-mysql.sh")
    return install.basedir if install.custom else None


@pytest.fixture(scope="session")
def mariadb118_basedir() -> Path:
    env = os.environ.get("MYACCEL_MARIADB118_BASEDIR")
    if env:
        return Path(env)
    try:
        install = find_server(flavor="mariadb", series="11.8")
    except Exception as exc:
        if os.environ.get("CI"):
            pytest.fail(f"MariaDB 11.8 is not installed ({exc}): `make test` installs it")
        pytest.skip(f"no MariaDB 11.8 installed ({exc}); run: bash scripts/ensure-mariadb.sh")
    return install.basedir
