"""One guest per session (4 CPUs in 2 sockets, 2 NUMA nodes of 1536 MiB), started from the
cached image, which holds myaccel's dependencies (lab/image.py), with myaccel's wheel installed in it; every
step's time said as it ends and listed in the summary.

The aarch64 lab (`make lab-arm-test`, marker `lab_arm`): one arm64 guest per CPU model in
turn (`arm_guest` is parametrized by `ARM_CPU_MODELS`), 2 NUMA nodes of 1024 MiB, the same
wheel installed with the aarch64 wheelhouse, and myaccel's cross-built aarch64 binaries."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.config import ARM64, cache_dir
from lab.guest import Guest
from lab.image import build_image, cached_image
from lab.install import build_wheel, install, mariadb_system_tables, wheelhouse
from lab.layers import deps_layer
from lab.preflight import missing_reason
from lab.timing import Timings
from lab.topology import ARM_CPU_MODELS, LAB_TOPOLOGY, arm_topology

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
    house = wheelhouse(cache, TIMINGS)
    image = build_image(TIMINGS, cache, house=house)
    layer = deps_layer(image, house, TIMINGS)
    workdir = Path(tempfile.mkdtemp(prefix="lab-guest-", dir="/tmp"))
    machine = Guest(image, LAB_TOPOLOGY, workdir, TIMINGS, backing=layer)
    try:
        machine.boot()
        yield machine
    finally:
        _stop_and_clean(machine, workdir)


@pytest.fixture(scope="session")
def lab_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """myaccel's wheel, built once per session (pure Python: the same for every guest)."""
    return build_wheel(tmp_path_factory.mktemp("wheel"), TIMINGS)


@pytest.fixture(scope="session")
def myaccel_guest(guest: Guest, lab_wheel: Path) -> Guest:
    """The guest with myaccel installed from its wheel in /opt/myaccel."""
    house = wheelhouse(cache_dir(), TIMINGS)
    version = install(guest, lab_wheel, house, TIMINGS)
    TIMINGS.say(f"lab: guest runs {version}")
    return guest


def _stop_and_clean(machine: Guest, workdir: Path) -> None:
    machine.stop()
    if os.environ.get("MYACCEL_LAB_KEEP"):
        TIMINGS.say(f"lab: kept {workdir} (MYACCEL_LAB_KEEP)")
    else:
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session", params=ARM_CPU_MODELS)
def arm_guest(request: pytest.FixtureRequest, lab_wheel: Path) -> Iterator[Guest]:
    """An arm64 guest of one CPU model (the session's tests run on each model in turn, one
    guest at a time), with myaccel installed from the same wheel as on x86."""
    model: str = request.param
    cache = cache_dir()
    reason = missing_reason(cache, cached_image(cache, ARM64) is not None, ARM64)
    if reason:
        pytest.skip(reason)
    house = wheelhouse(cache, TIMINGS, ARM64)
    image = build_image(TIMINGS, cache, ARM64, house)
    layer = deps_layer(image, house, TIMINGS)  # with MariaDB's system tables made
    workdir = Path(tempfile.mkdtemp(prefix=f"lab-arm-{model}-", dir="/tmp"))
    machine = Guest(image, arm_topology(model), workdir, TIMINGS, backing=layer)
    TIMINGS.label = model
    try:
        machine.boot()
        mariadb_system_tables(machine, TIMINGS)  # nothing to do on the layer
        version = install(machine, lab_wheel, house, TIMINGS)
        TIMINGS.say(f"lab: the {model} guest runs {version}")
        yield machine
    finally:
        _stop_and_clean(machine, workdir)
        TIMINGS.label = ""
