"""Issue 36, acceptance 1: the amd64 Debian package in a fresh guest, as a DBA installs it.

A guest of its own (module scope), booted from the cached image with no myaccel in it (the
image's /opt/myaccel venv of dependencies is removed first: nothing but the package may
serve), gets the package built from this checkout as `make dist-amd64` builds it (zstd, no
lintian: tests/integration/test_deb.py; or the file named by MYACCEL_LAB_DEB) and installs
it with `apt-get install -y ./myaccel_*_amd64.deb`, apt pulling the Recommends from Debian's
archive through qemu's user network. Then, inside the guest, as root: `myaccel --version`,
`doctor`, `probe --json`, `plan` against the guest's own MariaDB, and `accelerate -S
/run/mysqld/mysqld.sock -u root` with the lab's short options, then `rollback`; and as an
unprivileged user: `doctor` (saying what needs root), `probe --json` and `plan --facts`
(root's facts, made readable). Every step's time and output is said as it ends.

Marker `lab_package`: not in `make lab-test` (`-m lab`); `make lab-package-test` runs it."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from lab.config import AMD64
from lab.guest import Guest
from lab.tests.debpkg import (
    FACTS,
    Installed,
    build_deb,
    check_installed,
    doctor_as_root,
    facts,
    fresh_guest,
    install_deb,
    ok,
    plan_as_root,
    step,
)
from lab.tests.guestcmd import SERVER
from lab.timing import Timings
from lab.topology import LAB_TOPOLOGY

pytestmark = pytest.mark.lab_package

USER = "dba"  # the unprivileged user
SHARED_FACTS = "/tmp/facts.json"  # root's facts, readable by the user
# accelerate's clone needs more disk than the root file system's ~3.5 GiB free (docs/lab.md,
# "accelerate in the guest, by hand first"): the second disk, XFS (reflink snapshots), is
# mounted where root's MYACCEL_HOME is by default, so the DBA's command line is unchanged.
ROOT_HOME = "/root/.local/share/myaccel"
# the lab's short A/B (test_accelerate.py): the machinery under TCG, never a verdict
SHORT = (
    "--profile quick -w rw --runs 1 --time 5 --scale 0.05 --window 5 --settle 5 --yes "
    "--no-measure-storage"
)


@pytest.fixture(scope="module")
def deb(tmp_path_factory: pytest.TempPathFactory, lab_timings: Timings) -> Path:
    return build_deb(AMD64, tmp_path_factory.mktemp("deb"), lab_timings)


@pytest.fixture(scope="module")
def package_guest(lab_timings: Timings) -> Iterator[Guest]:
    """The lab's machine (4 CPUs, 2 NUMA nodes, the second disk) without the multiqueue NIC."""
    with fresh_guest(AMD64, replace(LAB_TOPOLOGY, nic_queues=0), lab_timings) as machine:
        yield machine


@pytest.fixture(scope="module")
def installed(package_guest: Guest, deb: Path, lab_timings: Timings) -> Installed:
    return install_deb(package_guest, deb, lab_timings)


def test_apt_installs_the_package_and_its_recommends_from_debian(installed: Installed) -> None:
    check_installed(installed)


def test_doctor_probe_and_plan_as_root(installed: Installed) -> None:
    guest, t = installed.guest, installed.timings
    doctor_as_root(guest, t)
    root_facts = facts(guest, t)
    server = root_facts["server"]
    assert server is not None, "probe found no server on the default socket"
    assert server["flavor"]["value"] == "mariadb"
    assert server["pid"]["value"] == int(guest.run("systemctl show -P MainPID mariadb.service"))
    assert [n["node"] for n in root_facts["cpu"]["numa_nodes"]["value"]] == [0, 1]
    plan_as_root(guest, t)


def test_accelerate_as_root_then_rollback(installed: Installed) -> None:
    guest, t = installed.guest, installed.timings
    guest.run(
        f"mountpoint -q {ROOT_HOME} || (mkfs.xfs -q -f /dev/vdb && mkdir -p {ROOT_HOME} && "
        f"mount /dev/vdb {ROOT_HOME})"
    )
    pid0 = int(guest.run("systemctl show -P MainPID mariadb.service"))
    command = f"cd /root && myaccel accelerate {SERVER} {SHORT}"
    stamped = (
        "set -o pipefail; ( "
        + command
        + r""" ) 2>&1 | while IFS= read -r l; do printf '%(%T)T %s\n' -1 "$l"; done"""
    )
    r = step(
        guest,
        t,
        f"myaccel accelerate {SERVER} (root)",
        f"bash -c {shlex.quote(stamped)}",
        timeout=3000,
        show=400,
    )
    try:
        said = r.stdout + r.stderr
        assert r.returncode == 0, said[-3000:]
        assert "restart method: systemd (mariadb.service)" in said, said[-3000:]
        assert guest.run(f"ls {ROOT_HOME}/sandboxes 2>/dev/null || true").split() == []
    finally:
        back = step(guest, t, "myaccel rollback (root)", "myaccel rollback --json", show=40)
    undone = json.loads(ok(back))
    t.say(f"  rollback: journal {'none' if undone['journal'] is None else 'reverted'}")
    left = json.loads(guest.run("myaccel verify --json", timeout=900))
    assert left["journal"] is None, left
    assert guest.run("systemctl is-active mariadb.service").strip() == "active"
    assert guest.run("ls /etc/mysql/mariadb.conf.d/99-myaccel.cnf 2>/dev/null || true") == ""
    pid1 = int(guest.run("systemctl show -P MainPID mariadb.service"))
    t.say(f"  mariadb.service MainPID {pid0} before accelerate, {pid1} after the rollback")


def test_doctor_probe_and_plan_as_an_unprivileged_user(installed: Installed) -> None:
    """The three commands each run (one failing does not hide the others' result)."""
    guest, t = installed.guest, installed.timings
    guest.run(f"id -u {USER} >/dev/null 2>&1 || useradd -m -s /bin/bash {USER}")
    facts(guest, t)
    guest.run(f"install -m 644 {FACTS} {SHARED_FACTS}")
    failed = []
    uid = guest.run(f"id -u {USER}").strip()
    doctor = step(guest, t, f"myaccel doctor ({USER})", "myaccel doctor", user=USER, show=80)
    if doctor.returncode != 0:
        failed.append(f"doctor: exit {doctor.returncode}: {(doctor.stdout + doctor.stderr)[-500:]}")
    elif f"uid {uid}" not in doctor.stdout or "run it with sudo (or as root)" not in doctor.stdout:
        failed.append("doctor does not say what needs root")
    probe = step(
        guest, t, f"myaccel probe --json ({USER})", "myaccel probe --json", user=USER, show=0
    )
    if probe.returncode != 0:
        failed.append(f"probe: exit {probe.returncode}: {(probe.stdout + probe.stderr)[-500:]}")
    else:
        user_facts = json.loads(probe.stdout)
        t.say(
            f"  probe --json as {USER}: server {'reached' if user_facts.get('server') else 'none'}"
        )
        if [n["node"] for n in user_facts["cpu"]["numa_nodes"]["value"]] != [0, 1]:
            failed.append("probe as the user does not see the 2 NUMA nodes")
    plan = step(
        guest,
        t,
        f"myaccel plan --facts {SHARED_FACTS} ({USER})",
        f"myaccel plan --facts {SHARED_FACTS}",
        user=USER,
        show=80,
    )
    if plan.returncode != 0 or not plan.stdout.strip():
        failed.append(f"plan --facts: exit {plan.returncode}: {(plan.stdout + plan.stderr)[-500:]}")
    assert not failed, "\n".join(failed)


def test_the_guest_is_as_before(installed: Installed) -> None:
    """Nothing of myaccel's left in effect: no managed files, the server active."""
    guest, t = installed.guest, installed.timings
    left = guest.run(
        "ls /etc/sysctl.d/99-myaccel.conf /etc/tmpfiles.d/99-myaccel.conf "
        "/etc/systemd/system/mariadb.service.d/99-myaccel.conf 2>/dev/null || true"
    )
    assert left == ""
    assert guest.run("systemctl is-active mariadb.service").strip() == "active"
    t.say(f"lab: {installed.deb.name} installed and run in {guest.workdir}")
