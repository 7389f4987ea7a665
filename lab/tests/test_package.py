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
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from lab.config import REPO, cache_dir
from lab.guest import Guest, Result
from lab.image import build_image, cached_image
from lab.install import build_wheel, wheelhouse
from lab.preflight import missing_reason
from lab.tests.guestcmd import SERVER
from lab.timing import Timings
from lab.topology import LAB_TOPOLOGY
from myaccel import __version__

pytestmark = pytest.mark.lab_package

GUEST_DEB_DIR = "/tmp/myaccel-deb"  # readable by apt's _apt user (not /root)
USER = "dba"  # the unprivileged user
FACTS = "/root/facts.json"  # root's probe
SHARED_FACTS = "/tmp/facts.json"  # the same, readable by the user
# accelerate's clone needs more disk than the root file system's ~3.5 GiB free (docs/lab.md,
# "accelerate in the guest, by hand first"): the second disk, XFS (reflink snapshots), is
# mounted where root's MYACCEL_HOME is by default, so the DBA's command line is unchanged.
ROOT_HOME = "/root/.local/share/myaccel"
# the lab's short A/B (test_accelerate.py): the machinery under TCG, never a verdict
SHORT = (
    "--profile quick -w rw --runs 1 --time 5 --scale 0.05 --window 5 --settle 5 --yes "
    "--no-measure-storage"
)
APT = "DEBIAN_FRONTEND=noninteractive apt-get -q -o Dpkg::Use-Pty=0"


@dataclass(frozen=True)
class Installed:
    guest: Guest
    deb: Path
    recommends: list[str]
    before: dict[str, bool]  # each Recommends: installed before apt ran
    apt_output: str
    timings: Timings


def _host(argv: list[str], env: dict[str, str] | None = None) -> str:
    r = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=1800, env=env)
    assert r.returncode == 0, f"{argv}: {r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def _step(
    guest: Guest,
    timings: Timings,
    name: str,
    command: str,
    *,
    user: str | None = None,
    timeout: float = 900,
    show: int = 60,
) -> Result:
    """`command` in the guest (as root, or as `user` through a login shell), timed as a lab
    step; its exit and its output (the first `show` lines) said as it ends."""
    if user is not None:
        command = f"runuser -l {user} -c {shlex.quote(command)}"
    with timings.step(name):
        r = guest.ssh(command, timeout=timeout)
    lines = (r.stdout + r.stderr).rstrip().splitlines()
    timings.say(f"  $ {command}  -> exit {r.returncode}, {len(lines)} lines")
    for line in lines[:show]:
        timings.say(f"  | {line}")
    if len(lines) > show:
        timings.say(f"  | ... ({len(lines) - show} more lines)")
    return r


def _ok(r: Result) -> str:
    assert r.returncode == 0, f"exit {r.returncode}: {(r.stdout + r.stderr)[-3000:]}"
    return r.stdout


@pytest.fixture(scope="module")
def deb(tmp_path_factory: pytest.TempPathFactory, lab_timings: Timings) -> Path:
    """The amd64 package: MYACCEL_LAB_DEB, or built from this checkout as `make dist-amd64`
    does, with zstd and without lintian (seconds instead of minutes)."""
    given = os.environ.get("MYACCEL_LAB_DEB")
    if given:
        lab_timings.say(f"lab: the package {given} (MYACCEL_LAB_DEB)")
        return Path(given).resolve()
    for tool in ("dpkg-deb",):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is missing")
    tmp = tmp_path_factory.mktemp("deb")
    wheel = build_wheel(tmp, lab_timings)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with lab_timings.step("build_deb.py --arch amd64 --compress zstd --no-lintian (host)"):
        out = _host(
            [sys.executable, str(REPO / "packaging/build_deb.py"), "--arch", "amd64",
             "--wheel", str(wheel), "--out", str(tmp), "--work", str(tmp / "work"),
             "--compress", "zstd", "--no-lintian"],
            env=env,
        )  # fmt: skip
    for line in out.strip().splitlines():
        lab_timings.say(f"  | {line}")
    return tmp / f"myaccel_{__version__}_amd64.deb"


@pytest.fixture(scope="module")
def package_guest(lab_timings: Timings) -> Iterator[Guest]:
    """A fresh guest of its own from the cached image, no layer and no wheel: the lab's
    machine (4 CPUs, 2 NUMA nodes, the second disk) without the multiqueue NIC."""
    cache = cache_dir()
    reason = missing_reason(cache, cached_image(cache) is not None)
    if reason:
        pytest.skip(reason)
    image = build_image(lab_timings, cache, house=wheelhouse(cache, lab_timings))
    workdir = Path(tempfile.mkdtemp(prefix="lab-package-", dir="/tmp"))
    machine = Guest(image, replace(LAB_TOPOLOGY, nic_queues=0), workdir, lab_timings)
    try:
        machine.boot()
        # the image's venv of myaccel's dependencies (lab/image.py): not on a DBA's server
        machine.run("rm -rf /opt/myaccel /usr/local/bin/myaccel")
        yield machine
    finally:
        machine.stop()
        if os.environ.get("MYACCEL_LAB_KEEP"):
            lab_timings.say(f"lab: kept {workdir} (MYACCEL_LAB_KEEP)")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def installed(package_guest: Guest, deb: Path, lab_timings: Timings) -> Installed:
    guest, t = package_guest, lab_timings
    recommends = _host(["dpkg-deb", "--field", str(deb), "Recommends"]).strip().split(", ")
    with lab_timings.step(f"scp {deb.name} ({deb.stat().st_size / 2**20:.1f} MiB) into the guest"):
        guest.run(f"rm -rf {GUEST_DEB_DIR} && mkdir -p {GUEST_DEB_DIR}")
        guest.copy_in([deb], GUEST_DEB_DIR + "/")
        guest.run(f"chmod 755 {GUEST_DEB_DIR} && chmod 644 {GUEST_DEB_DIR}/{deb.name}")
    sources = _step(guest, t, "the guest's apt sources", "cat /etc/apt/sources.list")
    assert "deb http://deb.debian.org/debian bookworm main" in _ok(sources)
    _ok(_step(guest, t, "apt-get update in the guest", f"{APT} update", timeout=1800))
    before = {p: _dpkg_installed(guest, p) for p in recommends}
    t.say(f"  Recommends before apt: {before}")
    r = _step(
        guest,
        t,
        "apt-get install -y ./myaccel_*_amd64.deb in the guest",
        f"cd {GUEST_DEB_DIR} && {APT} install -y ./{deb.name}",
        timeout=3000,
        show=200,
    )
    _ok(r)
    return Installed(guest, deb, recommends, before, r.stdout, t)


def _dpkg_installed(guest: Guest, package: str) -> bool:
    r = guest.ssh(f"dpkg-query -W -f='${{Status}}' {package}", timeout=120)
    return r.returncode == 0 and r.stdout.strip() == "install ok installed"


def test_apt_installs_the_package_and_its_recommends_from_debian(installed: Installed) -> None:
    guest, t = installed.guest, installed.timings
    assert _dpkg_installed(guest, "myaccel")
    assert {"sysbench", "fio", "linux-perf", "numactl", "mariadb-backup"} <= set(
        installed.recommends
    )
    missing = [p for p in installed.recommends if not _dpkg_installed(guest, p)]
    assert not missing, f"Recommends not installed by apt: {missing}"
    pulled = [p for p, was in installed.before.items() if not was]
    there = [p for p, was in installed.before.items() if was]
    t.say(f"  Recommends installed by apt: {pulled}; already in the image: {there}")
    for package in pulled:  # fetched from Debian's archive through qemu's user network
        assert f"Setting up {package} (" in installed.apt_output, package
    assert guest.run("command -v myaccel").strip() == "/usr/bin/myaccel"
    version = _ok(_step(guest, t, "myaccel --version (root)", "myaccel --version"))
    assert version.strip() == f"myaccel, version {__version__}"


def test_doctor_probe_and_plan_as_root(installed: Installed) -> None:
    guest, t = installed.guest, installed.timings
    doctor = _ok(_step(guest, t, "myaccel doctor (root)", "myaccel doctor", show=80))
    assert "running as root" in doctor
    for tool in ("sysbench", "fio", "perf", "numactl", "mariadb-backup"):
        assert f"/usr/bin/{tool}" in doctor, tool  # what apt installed, found
    facts = _facts(guest, t)
    server = facts["server"]
    assert server is not None, "probe found no server on the default socket"
    assert server["flavor"]["value"] == "mariadb"
    assert server["pid"]["value"] == int(guest.run("systemctl show -P MainPID mariadb.service"))
    assert [n["node"] for n in facts["cpu"]["numa_nodes"]["value"]] == [0, 1]
    plan = _ok(_step(guest, t, "myaccel plan (root)", "cd /root && myaccel plan", show=80))
    assert plan.strip()
    doc = json.loads(
        _ok(_step(guest, t, "myaccel plan --json (root)", "myaccel plan --json", show=0))
    )
    assert doc["recommendations"], doc.get("skipped")
    counts = f"{len(doc['recommendations'])} recommendations, {len(doc['skipped'])} skipped"
    t.say(f"  plan --json: {counts}")


def _facts(guest: Guest, t: Timings) -> Any:
    """Root's `probe --json` (written to FACTS as well), once per guest."""
    if guest.ssh(f"test -s {FACTS}", timeout=60).returncode != 0:
        r = _step(
            guest, t, "myaccel probe --json (root)", f"myaccel probe --json --out {FACTS}", show=0
        )
        _ok(r)
        t.say(f"  probe --json: {len(r.stdout)} bytes, sections {sorted(json.loads(r.stdout))}")
    return json.loads(guest.run(f"cat {FACTS}"))


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
    r = _step(
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
        back = _step(guest, t, "myaccel rollback (root)", "myaccel rollback --json", show=40)
    undone = json.loads(_ok(back))
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
    _facts(guest, t)
    guest.run(f"install -m 644 {FACTS} {SHARED_FACTS}")
    failed = []
    uid = guest.run(f"id -u {USER}").strip()
    doctor = _step(guest, t, f"myaccel doctor ({USER})", "myaccel doctor", user=USER, show=80)
    if doctor.returncode != 0:
        failed.append(f"doctor: exit {doctor.returncode}: {(doctor.stdout + doctor.stderr)[-500:]}")
    elif f"uid {uid}" not in doctor.stdout or "run it with sudo (or as root)" not in doctor.stdout:
        failed.append("doctor does not say what needs root")
    probe = _step(
        guest, t, f"myaccel probe --json ({USER})", "myaccel probe --json", user=USER, show=0
    )
    if probe.returncode != 0:
        failed.append(f"probe: exit {probe.returncode}: {(probe.stdout + probe.stderr)[-500:]}")
    else:
        facts = json.loads(probe.stdout)
        t.say(f"  probe --json as {USER}: server {'reached' if facts.get('server') else 'none'}")
        if [n["node"] for n in facts["cpu"]["numa_nodes"]["value"]] != [0, 1]:
            failed.append("probe as the user does not see the 2 NUMA nodes")
    plan = _step(
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
