"""The facts issue 34's rules need: NUMA distances, the PMD huge page size, the Armv8.5
speculation barrier, and whether the probe runs in a container (on the captured trees and
on small trees made here)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sysroot_tree import sysroot_tree
from test_rules import ROOTS

from myaccel.facts.container import collect_container
from myaccel.facts.cpu import collect_cpu, collect_numa
from myaccel.facts.memory import collect_memory
from myaccel.facts.sysroot import Sysroot
from myaccel.model import CpuFacts, NumaNode

OVERLAY_ROOT = "60 50 0:52 / / rw,relatime - overlay overlay rw,lowerdir=/l,upperdir=/u\n"
EXT4_ROOT = "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"


def test_kunpeng_distances_are_read() -> None:
    nodes = collect_numa(Sysroot(ROOTS / "kunpeng920-2s")).value or []
    assert [n.distances for n in nodes] == [
        [10, 16, 32, 33],
        [16, 10, 25, 32],
        [32, 25, 10, 16],
        [33, 32, 16, 10],
    ]


def test_a_bad_distance_row_gives_no_distances(tmp_path: Path) -> None:
    dst = tmp_path / "root"
    shutil.copytree(ROOTS / "kunpeng920-2s", dst, symlinks=True)
    (dst / "sys/devices/system/node/node2/distance").write_text("32 25 10\n")
    nodes = collect_numa(Sysroot(dst)).value or []
    assert len(nodes) == 4 and all(n.distances is None for n in nodes)


def test_distances_must_be_square_in_a_facts_file() -> None:
    cpu = collect_cpu(Sysroot(ROOTS / "kunpeng920-2s"))
    nodes = cpu.numa_nodes.value or []
    bad = [nodes[0].model_copy(update={"distances": [10, 16]}), *nodes[1:]]
    doc = cpu.model_dump()
    doc["numa_nodes"]["value"] = [n.model_dump() for n in bad]
    with pytest.raises(ValueError, match="not a row of 4"):
        CpuFacts.model_validate(doc)
    assert NumaNode(node=0, cpus="0", cpu_count=1, distances=[10]).distances == [10]


def test_pmd_page_size(tmp_path: Path) -> None:
    m = collect_memory(Sysroot(ROOTS / "graviton2-m6g"))
    assert m.pmd_page_bytes.value == 2 * 1024**2
    # a 64K-page arm64 kernel: THP's PMD page is 512 MiB
    sr = sysroot_tree(
        tmp_path / "k64",
        {
            "/proc/meminfo": "MemTotal: 134217728 kB\nHugepagesize: 524288 kB\n",
            "/sys/kernel/mm/transparent_hugepage/hpage_pmd_size": "536870912\n",
        },
    )
    assert collect_memory(sr).pmd_page_bytes.value == 512 * 1024**2
    # without THP's file, the default huge page size stands for it
    sr = sysroot_tree(tmp_path / "old", {"/proc/meminfo": "Hugepagesize: 524288 kB\n"})
    got = collect_memory(sr).pmd_page_bytes
    assert got.value == 512 * 1024**2 and "Hugepagesize" in got.source


def test_sb_from_the_features_line(tmp_path: Path) -> None:
    dst = tmp_path / "root"
    shutil.copytree(ROOTS / "graviton2-m6g", dst, symlinks=True)
    assert collect_cpu(Sysroot(dst)).has_sb.value is False
    info = dst / "proc/cpuinfo"
    info.write_text(
        "\n".join(
            line + " sb" if line.startswith("Features") else line
            for line in info.read_text().splitlines()
        )
        + "\n"
    )
    assert collect_cpu(Sysroot(dst)).has_sb.value is True


@pytest.mark.parametrize(
    "name", ["graviton2-m6g", "kunpeng920-2s", "yitian710-g8y2xlarge", "this-vm"]
)
def test_the_captured_machines_are_no_containers(name: str) -> None:
    got = collect_container(Sysroot(ROOTS / name))
    assert got.known and got.value == "none", got


@pytest.mark.parametrize(
    ("files", "want"),
    [
        ({"/.dockerenv": "", "/proc/self/mountinfo": OVERLAY_ROOT}, "docker"),
        ({"/run/.containerenv": ""}, "podman"),
        ({"/proc/1/environ": "PATH=/bin\0container=lxc\0"}, "lxc"),
        ({"/proc/1/environ": "container=systemd-nspawn\0"}, "systemd-nspawn"),
        (
            {"/proc/self/cgroup": "0::/kubepods.slice/kubepods-pod1.slice/cri-x.scope\n"},
            "kubernetes",
        ),
        ({"/proc/self/cgroup": "0::/system.slice/docker-abc123.scope\n"}, "docker"),
        ({"/proc/self/cgroup": "12:memory:/docker/abc123\n"}, "docker"),
        ({"/proc/self/cgroup": "0::/machine.slice/libpod-abc.scope\n"}, "podman"),
        ({"/proc/self/cgroup": "0::/\n", "/proc/self/mountinfo": OVERLAY_ROOT}, "container"),
        # a VM image made from a container image keeps /.dockerenv: not a container
        (
            {"/.dockerenv": "", "/proc/self/cgroup": "0::/\n", "/proc/self/mountinfo": EXT4_ROOT},
            "none",
        ),
        ({"/proc/self/cgroup": "0::/user.slice/user-0.slice/session-3.scope\n"}, "none"),
    ],
)
def test_container_signals(tmp_path: Path, files: dict[str, str], want: str) -> None:
    got = collect_container(sysroot_tree(tmp_path, files))
    assert got.known and got.value == want, got


def test_nothing_readable_is_unknown(tmp_path: Path) -> None:
    got = collect_container(sysroot_tree(tmp_path, {}))
    assert not got.known and "cannot tell" in (got.unknown or "")
