"""Issue 36, acceptance 2 in the aarch64 lab: the arm64 Debian package, cross-built here from
PyPI's aarch64 wheels, installed with apt in a fresh aarch64 guest (qemu's `virt` board,
`-cpu neoverse-n1`, 4 CPUs in 2 sockets, 2 NUMA nodes), as a DBA on an ARM server installs it.

The guest's own aarch64 python3 runs the launcher and imports the bundled extension modules
(numpy, scipy, pydantic_core, psutil, matplotlib): what packaging/arm64-smoke.sh can only
do under qemu-user on this host, done here on an aarch64 kernel with systemd and the guest's
MariaDB. Then, as root: `myaccel --version`, `doctor`, `probe --json` (the CPU model's part,
LSE, the 2 NUMA nodes, the running server) and `plan`. accelerate is left to the amd64
package test (test_package.py): its A/B under aarch64 TCG would take hours and shows
nothing the package changes.

Marker `lab_package` (not `lab`, not `lab_arm`); `make lab-package-arm-test` runs it."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.config import ARM64
from lab.guest import Guest
from lab.tests.debpkg import (
    Installed,
    build_deb,
    check_installed,
    doctor_as_root,
    facts,
    fresh_guest,
    host,
    install_deb,
    ok,
    plan_as_root,
    step,
)
from lab.timing import Timings
from lab.topology import arm_topology

pytestmark = pytest.mark.lab_package

CPU_MODEL = "neoverse-n1"  # MIDR part 0xd0c, ARMv8.2: LSE atomics
LIB = "/usr/lib/myaccel/python"  # the package's own tree of pinned libraries
IMPORTS = f"""
import sys; sys.path.insert(0, {LIB!r})
import platform, numpy, scipy.stats, pydantic_core, psutil, matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot
print(platform.machine(), numpy.__version__, int(numpy.arange(10).sum()),
      round(float(scipy.stats.mannwhitneyu([1, 2, 3], [4, 5, 6]).pvalue), 3))
"""


@pytest.fixture(scope="module")
def deb(tmp_path_factory: pytest.TempPathFactory, lab_timings: Timings) -> Path:
    return build_deb(ARM64, tmp_path_factory.mktemp("deb-arm64"), lab_timings)


@pytest.fixture(scope="module")
def arm_package_guest(lab_timings: Timings) -> Iterator[Guest]:
    lab_timings.label = CPU_MODEL
    try:
        with fresh_guest(ARM64, arm_topology(CPU_MODEL), lab_timings) as machine:
            yield machine
    finally:
        lab_timings.label = ""


@pytest.fixture(scope="module")
def installed(arm_package_guest: Guest, deb: Path, lab_timings: Timings) -> Installed:
    return install_deb(arm_package_guest, deb, lab_timings)


def test_the_package_holds_aarch64_extension_modules(deb: Path) -> None:
    contents = host(["dpkg-deb", "--contents", str(deb)])
    modules = [line.split()[-1] for line in contents.splitlines() if line.endswith(".so")]
    assert modules, "no extension module in the package"
    assert all("x86_64" not in m for m in modules), [m for m in modules if "x86_64" in m][:5]
    assert any(m.endswith("aarch64-linux-gnu.so") for m in modules)


def test_apt_installs_the_arm64_package_in_the_aarch64_guest(installed: Installed) -> None:
    guest = installed.guest
    assert guest.run("uname -m").strip() == "aarch64"
    assert guest.run("dpkg --print-architecture").strip() == "arm64"
    check_installed(installed)  # and `myaccel --version`, on the guest's aarch64 python3


def test_its_compiled_libraries_load_on_the_guest_python(installed: Installed) -> None:
    guest, t = installed.guest, installed.timings
    core = guest.run(f"ls {LIB}/numpy/_core/_multiarray_umath.*.so").strip()
    # the ELF header's e_machine (the image has no `file`): 183 is EM_AARCH64
    elf = "import sys; h = open(sys.argv[1], 'rb').read(20); print(h[:4], h[18] | h[19] << 8)"
    kind = ok(
        step(guest, t, "e_machine of numpy's core module", f"python3 -c {shlex.quote(elf)} {core}")
    )
    assert kind.split() == ["b'\\x7fELF'", "183"], kind
    command = f"python3 -I -c {shlex.quote(IMPORTS)}"
    said = ok(step(guest, t, "import the bundled compiled libraries", command, timeout=1800))
    machine, _numpy, total, pvalue = said.split()
    assert (machine, total, pvalue) == ("aarch64", "45", "0.1"), said


def test_doctor_probe_and_plan_as_root(installed: Installed) -> None:
    guest, t = installed.guest, installed.timings
    doctor_as_root(guest, t)
    root_facts = facts(guest, t)
    cpu = root_facts["cpu"]
    for key in ("arch", "part", "family", "has_lse", "sockets", "numa_nodes"):
        t.say(f"  probe cpu.{key} = {cpu[key]['value']}")
    assert cpu["arch"]["value"] == "aarch64"
    assert cpu["part"]["value"] == "0xd0c"
    assert cpu["family"]["value"] == CPU_MODEL
    assert cpu["has_lse"]["value"] is True
    assert [(n["node"], n["cpus"]) for n in cpu["numa_nodes"]["value"]] == [(0, "0-1"), (1, "2-3")]
    server = root_facts["server"]
    assert server is not None, "probe found no server on the default socket"
    assert server["pid"]["value"] == int(guest.run("systemctl show -P MainPID mariadb.service"))
    plan_as_root(guest, t)
