"""myaccel into the guest the way a DBA installs it: the wheel built on the host, its pinned
dependencies as wheels downloaded on the host for the guest's Python (3.11, glibc 2.36), a
venv in the guest installed with `--no-index` (the guest needs no network), and
`/usr/local/bin/myaccel`. The repository tree never enters the guest.

The guest reaches PyPI through qemu's user-mode NAT, but this host's TLS is intercepted by a
CA only the host trusts, so the guest's pip cannot verify pypi.org: hence the wheelhouse.
`--no-compile`: byte-compiling all of scipy and matplotlib under TCG took 227 s; what myaccel
imports is compiled on first use instead."""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
import sys
from pathlib import Path

from lab.config import AMD64, DEPENDENCIES_MARK, GUEST_VENV, REPO, Arch, pinned_dependencies
from lab.errors import LabError
from lab.guest import Guest
from lab.timing import Timings

GUEST_WHEELS = "/root/myaccel-wheels"
# Debian 12's python3 and glibc 2.36: every manylinux tag up to 2_36 (pip does not expand
# a --platform manylinux_2_36 to the older ones itself).
GUEST_PYTHON = "3.11"
GUEST_PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in range(36, 16, -1)] + ["manylinux2014_x86_64"]


def guest_platforms(arch: Arch = AMD64) -> list[str]:
    """The platform tags of the guest's glibc for `arch` (aarch64: manylinux2014_aarch64 is
    manylinux_2_17_aarch64, the oldest aarch64 wheels there are)."""
    if arch == AMD64:
        return GUEST_PLATFORMS
    return [f"manylinux_2_{n}_{arch.machine}" for n in range(36, 16, -1)] + [
        f"manylinux2014_{arch.machine}"
    ]


def _host(argv: list[str], what: str, timeout: float = 900) -> None:
    r = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        last = (r.stderr.strip() or r.stdout.strip()).splitlines()[-1:]
        raise LabError(f"lab: {what} failed (exit {r.returncode}): {' '.join(last)}")


def build_wheel(outdir: Path, timings: Timings) -> Path:
    """`python -m build --wheel` of this checkout, as the Ansible collection's wheel."""
    with timings.step("wheel build (host)"):
        _host(
            [sys.executable, "-m", "build", "--wheel", "--outdir", str(outdir), str(REPO)],
            "python -m build --wheel",
        )
    wheels = sorted(outdir.glob("myaccel-*.whl"))
    if len(wheels) != 1:
        raise LabError(f"lab: expected one myaccel wheel in {outdir}, found {len(wheels)}")
    return wheels[0]


def wheelhouse(cache: Path, timings: Timings, arch: Arch = AMD64) -> Path:
    """The pinned dependencies as wheels for the guest, cached by the pin list."""
    deps = pinned_dependencies()
    platforms = guest_platforms(arch)
    key = hashlib.sha256(json.dumps([deps, GUEST_PYTHON, platforms]).encode()).hexdigest()[:16]
    house = cache / "wheelhouse" / key
    if (house / ".complete").exists():
        timings.say(f"lab: wheelhouse {house} (cached)")
        return house
    house.mkdir(parents=True, exist_ok=True)
    argv = [
        sys.executable, "-m", "pip", "download", "-q",
        "--dest", str(house),
        "--only-binary=:all:",
        "--python-version", GUEST_PYTHON,
        "--implementation", "cp",
        *(f"--platform={platform}" for platform in platforms),
        *deps,
    ]  # fmt: skip
    for_arch = "" if arch == AMD64 else f" for {arch.machine}"
    with timings.step(f"wheelhouse{for_arch} (pip download on the host)"):
        _host(argv, "pip download")
    (house / ".complete").touch()
    return house


def install_dependencies(guest: Guest, house: Path, timings: Timings) -> None:
    """The venv with myaccel's pinned dependencies only (what lab/layers.py keeps)."""
    with timings.step("copy the wheelhouse into the guest (scp)"):
        guest.run(f"rm -rf {GUEST_WHEELS} && mkdir -p {GUEST_WHEELS}")
        guest.copy_in(sorted(house.glob("*.whl")), GUEST_WHEELS + "/")
    with timings.step("pip install of the dependencies in the guest (offline)"):
        guest.run(f"python3 -m venv {GUEST_VENV}")
        guest.run(
            f"{GUEST_VENV}/bin/pip install -q --no-compile --no-index --find-links {GUEST_WHEELS} "
            + shlex.join(pinned_dependencies()),
            timeout=1800,
        )
        guest.run(f"rm -rf {GUEST_WHEELS}")
    with timings.step("matplotlib's font cache and the report's modules compiled, in the guest"):
        # what every report would otherwise do on its first run in each guest (measured: the
        # font cache alone, about 30 s of accelerate's first report under TCG)
        guest.run(
            f"{GUEST_VENV}/bin/python -c 'import matplotlib.pyplot, numpy, scipy.stats'",
            timeout=1800,
        )
        guest.run(f"touch {GUEST_VENV}/{DEPENDENCIES_MARK}")


def install(guest: Guest, wheel: Path, house: Path, timings: Timings) -> str:
    """Install into the guest; returns `myaccel --version` as the guest prints it. On a
    guest started from a dependencies layer only the wheel itself goes in."""
    if guest.ssh(f"test -f {GUEST_VENV}/{DEPENDENCIES_MARK}", timeout=60).returncode != 0:
        install_dependencies(guest, house, timings)
    with timings.step("myaccel's wheel into the guest (scp, pip --no-deps)"):
        guest.run(f"rm -rf {GUEST_WHEELS} && mkdir -p {GUEST_WHEELS}")
        guest.copy_in([wheel], GUEST_WHEELS + "/")
        guest.run(
            f"{GUEST_VENV}/bin/pip install -q --no-compile --no-index --no-deps "
            f"{GUEST_WHEELS}/{wheel.name}",
            timeout=1800,
        )
        guest.run(f"ln -sf {GUEST_VENV}/bin/myaccel /usr/local/bin/myaccel")
    return guest.run("myaccel --version", timeout=300).strip()


def mariadb_system_tables(guest: Guest, timings: Timings) -> None:
    """Create MariaDB's system tables in the guest when its image has none, then start the
    server. The arm64 image needs it: mariadb-server's postinst runs mariadb-install-db in
    debootstrap's chroot, under qemu-user there, and that left an empty /var/lib/mysql (the
    postinst sends its output to the logger, absent in the chroot, so the cause is not
    recorded); in the booted guest the same command takes about 25 s."""
    if guest.ssh("test -d /var/lib/mysql/mysql", timeout=60).returncode == 0:
        return
    with timings.step("mariadb-install-db in the guest (no system tables in the image)"):
        guest.run("systemctl stop mariadb.service", timeout=300)
        guest.run(
            "find /var/lib/mysql -mindepth 1 ! -name 'debian-*.flag' -delete && "
            "mariadb-install-db --user=mysql --skip-test-db --disable-log-bin >/dev/null",
            timeout=900,
        )
        guest.run("systemctl start mariadb.service", timeout=300)
