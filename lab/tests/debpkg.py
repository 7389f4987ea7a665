"""Issue 36's package tests, shared by both architectures (test_package.py: amd64,
test_package_arm.py: arm64): the .deb built from this checkout as `make dist-<arch>` builds
it (zstd, no lintian), a fresh guest with no myaccel in it, apt installing the package and
its Recommends from Debian, and each guest command timed and its output said as it ends."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lab.config import AMD64, REPO, Arch, cache_dir
from lab.guest import Guest, Result
from lab.image import build_image, cached_image
from lab.install import build_wheel, mariadb_system_tables, wheelhouse
from lab.preflight import missing_reason
from lab.timing import Timings
from lab.topology import Topology
from myaccel import __version__

GUEST_DEB_DIR = "/tmp/myaccel-deb"  # readable by apt's _apt user (not /root)
FACTS = "/root/facts.json"  # root's probe
APT = "DEBIAN_FRONTEND=noninteractive apt-get -q -o Dpkg::Use-Pty=0"
# what a DBA's apt must pull with the package (its Recommends, docs/packaging.md), and the
# command of each that `doctor` must find
TOOLS = ("sysbench", "fio", "linux-perf", "numactl", "mariadb-backup")
TOOL_COMMANDS = {"linux-perf": "perf"}


@dataclass(frozen=True)
class Installed:
    guest: Guest
    deb: Path
    recommends: list[str]
    before: dict[str, bool]  # each Recommends: installed before apt ran
    apt_output: str
    timings: Timings


def host(argv: list[str], env: dict[str, str] | None = None) -> str:
    r = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=1800, env=env)
    assert r.returncode == 0, f"{argv}: {r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def step(
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


def ok(r: Result) -> str:
    assert r.returncode == 0, f"exit {r.returncode}: {(r.stdout + r.stderr)[-3000:]}"
    return r.stdout


def build_deb(arch: Arch, tmp: Path, timings: Timings) -> Path:
    """The package for ``arch``: the file MYACCEL_LAB_DEB_<ARCH> names (MYACCEL_LAB_DEB on
    amd64 too), or built from this checkout as `make dist-<arch>` does, with zstd and without
    lintian (seconds instead of minutes; arm64 from PyPI's aarch64 wheels)."""
    names = [f"MYACCEL_LAB_DEB_{arch.debian.upper()}"] + (
        ["MYACCEL_LAB_DEB"] if arch == AMD64 else []
    )
    for name in names:
        given = os.environ.get(name)
        if given:
            timings.say(f"lab: the package {given} ({name})")
            return Path(given).resolve()
    if shutil.which("dpkg-deb") is None:
        pytest.skip("dpkg-deb is missing")
    wheel = build_wheel(tmp, timings)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with timings.step(f"build_deb.py --arch {arch.debian} --compress zstd --no-lintian (host)"):
        out = host(
            [sys.executable, str(REPO / "packaging/build_deb.py"), "--arch", arch.debian,
             "--wheel", str(wheel), "--out", str(tmp), "--work", str(tmp / "work"),
             "--compress", "zstd", "--no-lintian"],
            env=env,
        )  # fmt: skip
    for line in out.strip().splitlines():
        timings.say(f"  | {line}")
    return tmp / f"myaccel_{__version__}_{arch.debian}.deb"


@contextmanager
def fresh_guest(arch: Arch, topology: Topology, timings: Timings) -> Iterator[Guest]:
    """A guest of its own from the cached image, no layer and no wheel, MariaDB running:
    the image's venv of myaccel's dependencies (lab/image.py) is removed first, as it is not
    on a DBA's server, so nothing but the package can serve."""
    cache = cache_dir()
    reason = missing_reason(cache, cached_image(cache, arch) is not None, arch)
    if reason:
        pytest.skip(reason)
    image = build_image(timings, cache, arch, house=wheelhouse(cache, timings, arch))
    workdir = Path(tempfile.mkdtemp(prefix=f"lab-package-{arch.debian}-", dir="/tmp"))
    machine = Guest(image, topology, workdir, timings)
    try:
        machine.boot()
        mariadb_system_tables(machine, timings)  # the arm64 image has none (lab/install.py)
        machine.run("rm -rf /opt/myaccel /usr/local/bin/myaccel")
        yield machine
    finally:
        machine.stop()
        if os.environ.get("MYACCEL_LAB_KEEP"):
            timings.say(f"lab: kept {workdir} (MYACCEL_LAB_KEEP)")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def dpkg_installed(guest: Guest, package: str) -> bool:
    r = guest.ssh(f"dpkg-query -W -f='${{Status}}' {package}", timeout=120)
    return r.returncode == 0 and r.stdout.strip() == "install ok installed"


def install_deb(guest: Guest, deb: Path, timings: Timings) -> Installed:
    """`apt-get install -y ./myaccel_*.deb` in the guest after an `apt-get update`."""
    t = timings
    recommends = host(["dpkg-deb", "--field", str(deb), "Recommends"]).strip().split(", ")
    with t.step(f"scp {deb.name} ({deb.stat().st_size / 2**20:.1f} MiB) into the guest"):
        guest.run(f"rm -rf {GUEST_DEB_DIR} && mkdir -p {GUEST_DEB_DIR}")
        guest.copy_in([deb], GUEST_DEB_DIR + "/")
        guest.run(f"chmod 755 {GUEST_DEB_DIR} && chmod 644 {GUEST_DEB_DIR}/{deb.name}")
    sources = step(guest, t, "the guest's apt sources", "cat /etc/apt/sources.list")
    assert "deb http://deb.debian.org/debian bookworm main" in ok(sources)
    ok(step(guest, t, "apt-get update in the guest", f"{APT} update", timeout=1800))
    before = {p: dpkg_installed(guest, p) for p in recommends}
    t.say(f"  Recommends before apt: {before}")
    r = step(
        guest,
        t,
        f"apt-get install -y ./{deb.name} in the guest",
        f"cd {GUEST_DEB_DIR} && {APT} install -y ./{deb.name}",
        timeout=5400,
        show=200,
    )
    ok(r)
    return Installed(guest, deb, recommends, before, r.stdout, t)


def check_installed(installed: Installed) -> None:
    """The package and every Recommends installed, those absent before fetched by apt from
    Debian's archive (through qemu's user network), and `myaccel --version` runs as root."""
    guest, t = installed.guest, installed.timings
    assert dpkg_installed(guest, "myaccel")
    assert set(TOOLS) <= set(installed.recommends)
    missing = [p for p in installed.recommends if not dpkg_installed(guest, p)]
    assert not missing, f"Recommends not installed by apt: {missing}"
    pulled = [p for p, was in installed.before.items() if not was]
    there = [p for p, was in installed.before.items() if was]
    t.say(f"  Recommends installed by apt: {pulled}; already in the image: {there}")
    for package in pulled:
        assert f"Setting up {package} (" in installed.apt_output, package
    assert guest.run("command -v myaccel").strip() == "/usr/bin/myaccel"
    version = ok(step(guest, t, "myaccel --version (root)", "myaccel --version"))
    assert version.strip() == f"myaccel, version {__version__}"


def facts(guest: Guest, t: Timings) -> Any:
    """Root's `probe --json` (written to FACTS as well), once per guest."""
    if guest.ssh(f"test -s {FACTS}", timeout=60).returncode != 0:
        r = step(
            guest, t, "myaccel probe --json (root)", f"myaccel probe --json --out {FACTS}", show=0
        )
        ok(r)
        t.say(f"  probe --json: {len(r.stdout)} bytes, sections {sorted(json.loads(r.stdout))}")
    return json.loads(guest.run(f"cat {FACTS}", timeout=300))


def doctor_as_root(guest: Guest, t: Timings) -> None:
    """`myaccel doctor` as root: exit 0, root said, every tool apt installed found."""
    doctor = ok(step(guest, t, "myaccel doctor (root)", "myaccel doctor", show=80, timeout=1800))
    assert "running as root" in doctor
    for tool in TOOLS:
        command = TOOL_COMMANDS.get(tool, tool)
        assert f"/usr/bin/{command}" in doctor, command


def plan_as_root(guest: Guest, t: Timings) -> None:
    """`myaccel plan` and `plan --json` as root against the guest's server: a plan is made."""
    plan = step(guest, t, "myaccel plan (root)", "cd /root && myaccel plan", show=80, timeout=1800)
    assert ok(plan).strip()
    said = step(guest, t, "myaccel plan --json (root)", "myaccel plan --json", show=0, timeout=1800)
    doc = json.loads(ok(said))
    assert doc["recommendations"], doc.get("skipped")
    t.say(
        f"  plan --json: {len(doc['recommendations'])} recommendations, "
        f"{len(doc['skipped'])} skipped"
    )
