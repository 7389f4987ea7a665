"""Issue 34's defects on fixture trees made here (copies of the captured Graviton2 tree,
AWS m6g, with the files that make the case; the values SYNTH unless a source is named):
the collectors are in the loop, not only the rules.

- container-2g: a Docker container (``/.dockerenv`` on an overlay root, cgroup namespace
  ``0::/``, ``memory.max`` 2 GiB) on a 124 GiB host: no host-wide setting applied from
  inside it, and writeback judged by its 2 GiB (defects 7a, 7b).
- arm64-64k: a 64K-page arm64 kernel (PMD huge page 512 MiB, as the kernel's arm64
  hugetlbpage documentation gives for the 64K granule): no code huge pages, no 2 MiB text
  alignment (defect 6).
- no-dmi: the captured tree itself has no readable hypervisor signal: no hardware advice
  (defect 5)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from test_rules import MYSQL_80, ROOTS, arm_binary, ids, server

from myaccel.facts.collect import collect_facts
from myaccel.model import Facts, known
from myaccel.rules.engine import make_plan
from myaccel.rules.ownership import scope_of

GIB = 1024**3
OVERLAY = "60 50 0:52 / / rw,relatime - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w\n"


def copy(tmp_path: Path, name: str = "graviton2-m6g") -> Path:
    dst = tmp_path / name
    shutil.copytree(ROOTS / name, dst, symlinks=True)
    return dst


def write(root: Path, logical: str, text: str) -> None:
    p = root / logical.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def probe(root: Path) -> Facts:
    f = collect_facts(root, perf_live_test=False)
    return f.model_copy(
        update={"server": server("8.0.34", "MySQL Community Server - GPL", MYSQL_80)}
    )


def test_container_2g_on_a_124g_host(tmp_path: Path) -> None:
    root = copy(tmp_path)
    meminfo = (root / "proc/meminfo").read_text()
    write(
        root,
        "/proc/meminfo",
        re.sub(r"MemTotal:\s+\d+ kB", "MemTotal:       130023424 kB", meminfo),
    )
    write(root, "/.dockerenv", "")
    write(root, "/proc/self/cgroup", "0::/\n")
    write(root, "/proc/self/mountinfo", OVERLAY)
    write(root, "/sys/fs/cgroup/memory.max", f"{2 * GIB}\n")
    write(root, "/proc/sys/vm/dirty_background_ratio", "10\n")
    write(root, "/proc/sys/kernel/sched_migration_cost_ns", "500000\n")
    f = probe(root)
    assert f.container.value == "docker" and f.memory.effective_limit_bytes.value == 2 * GIB
    p = make_plan(f)
    assert "os-dirty-background" not in ids(p)
    assert "below 64 GiB (2 GiB" in {s.id: s.reason for s in p.skipped}["os-dirty"]
    host_kernel = [r for r in p.recommendations if scope_of(r.target) == "host-kernel"]
    assert host_kernel, "named, as advice"
    assert all(r.action == "advisory" and "docker" in r.evidence["owner"] for r in host_kernel)
    assert not any(r.target == "advice:prefetch" for r in p.recommendations)
    # the same tree without the container's files is a host: its settings apply
    for logical in ("/.dockerenv", "/sys/fs/cgroup/memory.max"):
        (root / logical.lstrip("/")).unlink()
    write(root, "/proc/self/cgroup", "0::/user.slice/user-0.slice/session-3.scope\n")
    bare = make_plan(probe(root))
    assert ids(bare).get("os-dirty-background") == "5"
    assert any(
        scope_of(r.target) == "host-kernel" and r.action == "apply" for r in bare.recommendations
    )


def test_arm64_64k_pages(tmp_path: Path) -> None:
    root = copy(tmp_path)
    meminfo = (root / "proc/meminfo").read_text()
    write(
        root,
        "/proc/meminfo",
        re.sub(r"Hugepagesize:\s+\d+ kB", "Hugepagesize:     524288 kB", meminfo),
    )
    write(root, "/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", "536870912\n")
    f = probe(root)
    assert f.memory.pmd_page_bytes.value == 512 * 1024**2 and f.kernel.file_thp.value
    ready = f.model_copy(
        update={
            "binary": arm_binary().model_copy(update={"text_huge_page_ready": known(True, "t")})
        }
    )
    p = make_plan(ready)
    assert "os-code-huge-pages" not in ids(p)
    p = make_plan(f.model_copy(update={"binary": arm_binary()}))
    assert "build-text-alignment" not in ids(p)
    assert "512 MiB" in {s.id: s.reason for s in p.skipped}["build-text-alignment"]
    # the captured tree (2 MiB PMD) proposes the alignment
    assert "build-text-alignment" in ids(
        make_plan(probe(copy(tmp_path / "again")).model_copy(update={"binary": arm_binary()}))
    )


def test_no_dmi_means_no_hardware_advice(tmp_path: Path) -> None:
    f = probe(copy(tmp_path, "kunpeng920-2s"))
    assert not f.cpu.hypervisor.known
    p = make_plan(f)
    assert "hardware-prefetch" not in ids(p)
    assert "hypervisor unknown" in {s.id: s.reason for s in p.skipped}["hardware-prefetch"]
