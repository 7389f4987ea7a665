"""`myaccel accelerate` on the guest's own systemd server, as a DBA runs it: the unit found
from the server's cgroup (no --restart-command), the A/B on a clone inside the guest with
MYACCEL_HOME on a second disk (vdb, XFS: the A/B's snapshots are reflinks), the guarded apply, and `--swap-binary` for real: a
second binary of the server's version (a copy of Debian's mariadbd in a complete build
directory) swapped into mariadb.service by an ExecStart drop-in; then the two rollbacks,
checked from inside the guest (/proc/PID/exe, the unit's ExecStart, the files)."""

from __future__ import annotations

import json
import shlex

import pytest

from lab.guest import Guest
from lab.tests.guestcmd import SERVER, existing, main_pid
from lab.timing import Timings

# 313 s to 1,294 s under TCG: `make lab-test` runs it, CI's `make lab-ci-test` does not.
pytestmark = [pytest.mark.lab, pytest.mark.lab_long]

HOME = "/srv/myaccel"
BUILD = f"{HOME}/second-binary"
MYCNF = "/etc/mysql/mariadb.conf.d/99-myaccel.cnf"
BINARY_DROP_IN = "/etc/systemd/system/mariadb.service.d/zz-myaccel-binary.conf"

# A complete build directory whose install tree is Debian's server with its own copy of
# mariadbd: what `accelerate --build --build-dir` reuses without compiling.
SECOND_BINARY = f"""
import shutil
from pathlib import Path
from myaccel.builder.manifest import BuildManifest
from myaccel.server.sandbox.install import find_server
inst = find_server()
root = Path("{BUILD}")
install = root / "install"
(install / "sbin").mkdir(parents=True)
shutil.copy2(inst.binary, install / "sbin" / inst.binary.name)
for d in ("bin", "lib", "share"):
    (install / d).symlink_to(Path("/usr") / d)
BuildManifest(
    status="complete",
    source={{"flavor": inst.version.flavor, "version": inst.version.text, "path": "a copy"}},
    request={{"opts": ["lto", "pgo"]}},
    out_dir=str(root),
    install_dir=str(install),
).save(root)
print(install / "sbin" / inst.binary.name)
"""


def _exe(guest: Guest) -> str:
    return guest.run(f"readlink /proc/{main_pid(guest)}/exe").strip()


def test_accelerate_the_systemd_server_with_a_swapped_binary(
    myaccel_guest: Guest, lab_timings: Timings
) -> None:
    """One read-write run per arm, 5 s each: the machinery, not a verdict (a TCG guest is
    never timed); --force swaps the copy in although it cannot beat itself."""
    guest = myaccel_guest
    guest.run(
        f"mountpoint -q {HOME} || (mkfs.xfs -q -f /dev/vdb && mkdir -p {HOME} && "
        f"mount /dev/vdb {HOME})"
    )
    guest.run(f"rm -rf {BUILD}")
    copy = guest.run(f"/opt/myaccel/bin/python -c '{SECOND_BINARY}'").strip()
    assert _exe(guest) == "/usr/sbin/mariadbd"
    pid0 = main_pid(guest)
    command = (
        f"cd /root && MYACCEL_HOME={HOME} myaccel accelerate {SERVER} --build "
        f"--build-dir {BUILD} --swap-binary --force --profile quick -w rw --runs 1 --time 5 "
        f"--scale 0.05 --window 5 --settle 5 --yes --out {HOME}/acc"
    )
    # every line with the guest's clock, so that the log shows where the time goes
    stamped = (
        "set -o pipefail; ( "
        + command
        + r""" ) 2>&1 | while IFS= read -r l; do printf '%(%T)T %s\n' -1 "$l"; done"""
    )
    r = guest.ssh(f"bash -c {shlex.quote(stamped)}", timeout=3000)
    said = r.stdout + r.stderr
    for line in said.strip().splitlines():
        lab_timings.say(f"  accelerate: {line}")
    assert r.returncode == 0, said[-3000:]
    assert "restart method: systemd (mariadb.service)" in said, said[-3000:]
    try:
        summary = json.loads(guest.run(f"cat {HOME}/acc/existing-build.json"))
        assert summary["swap"]["journal"], summary["swap"]
        # the unit runs the second binary, started by systemd
        assert _exe(guest) == copy
        assert main_pid(guest) != pid0
        assert copy in guest.run("systemctl show -P ExecStart mariadb.service")
        assert existing(guest, (MYCNF, BINARY_DROP_IN)) == [MYCNF, BINARY_DROP_IN]
        assert guest.run("systemctl is-active mariadb.service").strip() == "active"
        # no clone left behind, in the guest's sandboxes
        assert guest.run(f"ls {HOME}/sandboxes 2>/dev/null || true").split() == []
    finally:
        for _ in range(2):  # the swap's journal, then the plan's
            guest.ssh(f"MYACCEL_HOME={HOME} myaccel rollback", timeout=900)
    assert _exe(guest) == "/usr/sbin/mariadbd"
    assert existing(guest, (MYCNF, BINARY_DROP_IN)) == []
    assert guest.run("systemctl is-active mariadb.service").strip() == "active"
    left = json.loads(guest.run(f"MYACCEL_HOME={HOME} myaccel verify --json"))
    assert left["journal"] is None, left  # no applied journal remains
