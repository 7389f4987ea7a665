"""The aarch64 lab (`make lab-arm-test`): Debian 12 arm64 guests on qemu's `virt` board, one
with `-cpu neoverse-n1` (ARMv8.2, LSE atomics) and one with `-cpu cortex-a72` (ARMv8.0, no
LSE), each 4 CPUs in 2 sockets and 2 NUMA nodes. myaccel's probe must see what the CPU model
and the topology define, and myaccel's cross-built aarch64 binaries must run where their
atomics can: inline LSE on neoverse-n1 only, outline atomics on both."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from lab import crossbuild
from lab.guest import Guest
from lab.timing import Timings

pytestmark = pytest.mark.lab_arm

# qemu's models (target/arm/cpu64.c): MIDR implementer 0x41 (Arm), the part, and whether
# ID_AA64ISAR0_EL1.Atomic says LSE (the kernel's `atomics` hwcap)
MODELS: dict[str, dict[str, Any]] = {
    "neoverse-n1": {"part": "0xd0c", "family": "neoverse-n1", "lse": True},
    "cortex-a72": {"part": "0xd08", "family": "cortex-a72", "lse": False},
}
SIGILL_EXIT = 128 + 4  # the shell's status of a process killed by SIGILL
BENCH = "--bench --ops 20000 --threads 2"


def _model(guest: Guest) -> dict[str, Any]:
    return MODELS[guest.topology.cpu_model]


def _json(guest: Guest, command: str) -> Any:
    return json.loads(guest.run(command, timeout=900))


def test_arm_guest_has_the_declared_machine(arm_guest: Guest) -> None:
    assert arm_guest.run("uname -m").strip() == "aarch64"
    assert arm_guest.run("cat /proc/1/comm").strip() == "systemd"
    assert arm_guest.run("systemctl is-active mariadb.service").strip() == "active"
    assert arm_guest.run("nproc").strip() == "4"
    cpuinfo = arm_guest.run("cat /proc/cpuinfo")
    assert f"CPU part\t: {_model(arm_guest)['part']}" in cpuinfo, cpuinfo[:400]
    hwcaps = arm_guest.run("grep -m1 ^Features /proc/cpuinfo").split(":", 1)[1].split()
    assert ("atomics" in hwcaps) == _model(arm_guest)["lse"], hwcaps
    nodes = arm_guest.run("ls -d /sys/devices/system/node/node*").split()
    assert [n.rsplit("/", 1)[1] for n in nodes] == ["node0", "node1"]
    cpulists = arm_guest.run("cat /sys/devices/system/node/node[01]/cpulist").split()
    assert cpulists == ["0-1", "2-3"]
    sockets = arm_guest.run("cat /sys/devices/system/cpu/cpu[0-3]/topology/physical_package_id")
    assert sockets.split() == ["0", "0", "1", "1"]


def test_probe_reports_the_cpu_model_and_topology(arm_guest: Guest, lab_timings: Timings) -> None:
    guest = arm_guest
    want = _model(guest)
    facts = _json(guest, "myaccel probe --json")
    cpu = facts["cpu"]
    shown = ("arch", "implementer", "part", "model", "family", "has_lse", "sockets", "numa_nodes")
    for key in (*shown, "caches"):  # the real output, in the session's log (docs/lab.md)
        lab_timings.say(f"lab: {guest.topology.cpu_model} probe cpu.{key} = {cpu[key]['value']}")
    assert cpu["arch"]["value"] == "aarch64"
    assert cpu["implementer"]["value"] == "0x41"
    assert cpu["part"]["value"] == want["part"]
    assert cpu["family"]["value"] == want["family"]
    assert cpu["has_lse"]["value"] is want["lse"], cpu["has_lse"]
    assert ("atomics" in cpu["features"]["value"]) is want["lse"]
    assert cpu["logical_cpus"]["value"] == 4
    assert cpu["sockets"]["value"] == 2
    nodes = cpu["numa_nodes"]["value"]
    assert [(n["node"], n["cpus"]) for n in nodes] == [(0, "0-1"), (1, "2-3")], nodes
    assert facts["server"] is not None, "probe found no server on the default socket"
    assert facts["server"]["pid"]["value"] == int(
        guest.run("systemctl show -P MainPID mariadb.service")
    )


def test_probe_knows_the_cache_line_size(arm_guest: Guest) -> None:
    """The L1 data cache line: what glibc reads from CTR_EL0 (`getconf`), the probe must
    report too. Here the kernel lists the caches (level, type) with no size or line size:
    Linux 6.1 on arm64 takes them from the device tree, and qemu's virt board describes no
    caches (this was a strict xfail until the probe asked the CPU through glibc)."""
    line = int(arm_guest.run("getconf LEVEL1_DCACHE_LINESIZE").strip())
    assert line == 64
    caches = _json(arm_guest, "myaccel probe --json")["cpu"]["caches"]
    l1d = [c for c in caches["value"] or [] if c["level"] == 1 and c["type"] == "Data"]
    assert l1d and l1d[0]["line_size_bytes"] == line, caches


def test_cross_built_atomics_run_where_the_cpu_has_them(
    arm_guest: Guest,
    arm_builds: dict[str, crossbuild.CrossBuild],
    lab_timings: Timings,
) -> None:
    """The outline-atomics build runs on both models; the inline-LSE build (`--opt lse
    --target-cpu neoverse-n1`) runs on neoverse-n1 and dies of SIGILL on cortex-a72."""
    guest = arm_guest
    lse = _model(guest)["lse"]
    for label, build in arm_builds.items():
        where = f"/root/cross/{label}"
        guest.run(f"mkdir -p {where}")
        guest.copy_in([build.binary, build.manifest], where + "/")
        checks = _json(
            guest,
            f"myaccel verify-build {where}/kvlabd --manifest {where}/manifest.json --json",
        )
        atomics = next(c for c in checks if c["id"] == "atomics")
        assert atomics["status"] == "pass" and atomics["expected"] == build.atomics, atomics
        with lab_timings.step(f"kvlabd {BENCH} ({label} atomics)"):
            # the status through the shell: a command killed by a signal is ssh's exit 255
            r = guest.ssh(f"{where}/kvlabd {BENCH}; echo status=$?", timeout=600)
        status = int(r.stdout.strip().splitlines()[-1].removeprefix("status="))
        if label == "lse" and not lse:
            assert status == SIGILL_EXIT, (status, r.stdout, r.stderr)
        else:
            assert status == 0 and "checksum=" in r.stdout, (status, r.stdout, r.stderr)


@pytest.fixture(scope="session")
def arm_builds(
    tmp_path_factory: pytest.TempPathFactory, lab_timings: Timings
) -> dict[str, crossbuild.CrossBuild]:
    """kvlabd built by `myaccel build --cross aarch64` on the host, once per session."""
    reason = crossbuild.missing_reason()
    if reason:
        pytest.skip(reason)
    out: Path = tmp_path_factory.mktemp("cross")
    return {label: crossbuild.cross_build(out, label, lab_timings) for label in crossbuild.BUILDS}


# myaccel's aarch64 LSE build of MariaDB (docs/building.md: `myaccel build --cross aarch64
# --opt lse --target-cpu neoverse-n1`): 16 minutes of both CPUs here, so no test builds it;
# MYACCEL_ARM64_INSTALL names its install tree (the manifest one directory up).
ARM64_INSTALL = Path(os.environ.get("MYACCEL_ARM64_INSTALL", "/work/srcs/b/arm64-lse/install"))
GUEST_BUILD = "/root/arm64-lse"


@pytest.fixture(scope="module")
def lse_mariadb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The install tree with its server stripped (228 MB with debug info, 30 MB without),
    and the build's manifest, as one tarball for the guest."""
    binary = ARM64_INSTALL / "bin" / "mariadbd"
    if not binary.is_file():
        pytest.skip(f"no aarch64 LSE build of MariaDB at {ARM64_INSTALL} (MYACCEL_ARM64_INSTALL)")
    stage = tmp_path_factory.mktemp("lse-mariadb")
    install = stage / "arm64-lse" / "install"
    shutil.copytree(ARM64_INSTALL, install, symlinks=True)
    subprocess.run(["aarch64-linux-gnu-strip", str(install / "bin" / "mariadbd")], check=True)
    # the manifest as the build wrote it, its directories moved to where the guest has them
    manifest = json.loads((ARM64_INSTALL.parent / "manifest.json").read_text())
    manifest.update(out_dir=GUEST_BUILD, install_dir=f"{GUEST_BUILD}/install")
    (install.parent / "manifest.json").write_text(json.dumps(manifest, indent=2))
    tarball = stage / "arm64-lse.tar.gz"
    subprocess.run(["tar", "-C", str(stage), "-czf", str(tarball), "arm64-lse"], check=True)
    return tarball


def test_the_lse_mariadb_build_starts_natively(
    arm_guest: Guest, lse_mariadb: Path, lab_timings: Timings
) -> None:
    """`verify-build --smoke` in the guest, natively (no qemu-user): on neoverse-n1 the
    server answers and the checks see inline LSE; on cortex-a72, which has no LSE, the same
    binary cannot run (SIGILL), and the smoke run fails, saying so."""
    guest = arm_guest
    guest.copy_in([lse_mariadb], "/root/")
    guest.run(f"rm -rf {GUEST_BUILD} && tar -C /root -xzf /root/{lse_mariadb.name}")
    r = guest.ssh(
        f"myaccel verify-build {GUEST_BUILD}/install/bin/mariadbd "
        f"--manifest {GUEST_BUILD}/manifest.json --smoke --json",
        timeout=900,
    )
    lab_timings.say(f"lab: verify-build --smoke exit {r.returncode}: {r.stderr.strip()[-300:]}")
    if _model(guest)["lse"]:
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        smoke = doc["smoke"]
        lab_timings.say(
            f"lab: natively, {smoke['version']} answered after {smoke['answered_s']:.1f} s, "
            f"peak RSS {smoke['peak_rss_kib']} KiB"
        )
        assert doc["smoke"]["machine"] == "aarch64" and "qemu" not in " ".join(doc["smoke"]["argv"])
        assert (doc["smoke"]["rows"], doc["smoke"]["id_sum"]) == (3, 6)
        [atomics] = [c for c in doc["checks"] if c["id"] == "atomics"]
        assert atomics["status"] == "pass" and "inline-lse" in atomics["evidence"], atomics
    else:
        assert r.returncode != 0, r.stdout
        assert "was killed by SIGILL" in r.stderr and "--atomics outline" in r.stderr, r.stderr
