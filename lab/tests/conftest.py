"""One guest per session (4 CPUs in 2 sockets, 2 NUMA nodes of 1536 MiB), with myaccel's
wheel installed in it; every step's time said as it ends and listed in the summary."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.config import cache_dir
from lab.guest import Guest
from lab.image import build_image, cached_image
from lab.install import build_wheel, install, wheelhouse
from lab.preflight import missing_reason
from lab.timing import Timings
from lab.topology import LAB_TOPOLOGY

_CONFIG: list[pytest.Config] = []


def _say(line: str) -> None:
    """Through pytest's capture: the step times show while the session runs."""
    capman = _CONFIG[0].pluginmanager.getplugin("capturemanager") if _CONFIG else None
    if capman is None:
        print(line, flush=True)
        return
    with capman.global_and_fixture_disabled():
        print(line, flush=True)


TIMINGS = Timings(say=_say)


def pytest_configure(config: pytest.Config) -> None:
    _CONFIG[:] = [config]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not TIMINGS.steps:
        return
    terminalreporter.section("lab step times")
    for line in TIMINGS.table():
        terminalreporter.write_line(line)


@pytest.fixture(autouse=True)
def _timed_test(request: pytest.FixtureRequest) -> Iterator[None]:
    with TIMINGS.step(f"test {request.node.name}"):
        yield


@pytest.fixture(scope="session")
def lab_timings() -> Timings:
    return TIMINGS


@pytest.fixture(scope="session")
def guest() -> Iterator[Guest]:
    cache = cache_dir()
    reason = missing_reason(cache, cached_image(cache) is not None)
    if reason:
        pytest.skip(reason)
    image = build_image(TIMINGS, cache)
    workdir = Path(tempfile.mkdtemp(prefix="lab-guest-", dir="/tmp"))
    machine = Guest(image, LAB_TOPOLOGY, workdir, TIMINGS)
    try:
        machine.boot()
        yield machine
    finally:
        machine.stop()
        if os.environ.get("MYACCEL_LAB_KEEP"):
            TIMINGS.say(f"lab: kept {workdir} (MYACCEL_LAB_KEEP)")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def myaccel_guest(guest: Guest, tmp_path_factory: pytest.TempPathFactory) -> Guest:
    """The guest with myaccel installed from its wheel in /opt/myaccel."""
    wheel = build_wheel(tmp_path_factory.mktemp("wheel"), TIMINGS)
    house = wheelhouse(cache_dir(), TIMINGS)
    version = install(guest, wheel, house, TIMINGS)
    TIMINGS.say(f"lab: guest runs {version}")
    return guest
