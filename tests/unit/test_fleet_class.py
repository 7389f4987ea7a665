"""The fleet's class key (ansible/plugins/modules/myaccel_probe.py ``summarize``): hosts
that differ in CPUs, memory or NUMA nodes are planned apart; one-node hosts keep their key."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def probe_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    pytest.importorskip("ansible")
    top = tmp_path_factory.mktemp("collections")
    (top / "ansible_collections" / "myaccel").mkdir(parents=True)
    (top / "ansible_collections" / "myaccel" / "fleet").symlink_to(ROOT / "ansible")
    sys.path.insert(0, str(top))
    try:
        yield importlib.import_module(
            "ansible_collections.myaccel.fleet.plugins.modules.myaccel_probe"
        )
    finally:
        sys.path.remove(str(top))
        for name in [n for n in sys.modules if n.startswith("ansible_collections.myaccel")]:
            del sys.modules[name]


def facts(cpus: int, nodes: int, gib: int) -> dict[str, Any]:
    return {
        "cpu": {
            "arch": {"value": "x86_64"},
            "model_name": {"value": "QEMU TCG CPU version 2.5+"},
            "logical_cpus": {"value": cpus},
            "numa_nodes": {"value": [{"node": n} for n in range(nodes)]},
        },
        "memory": {"total_bytes": {"value": gib * 2**30}},
        "server": {"flavor": {"value": "mariadb"}, "version": {"value": "10.11.18"}},
    }


def test_numa_nodes_split_a_class_and_one_node_keeps_its_key(probe_module: ModuleType) -> None:
    one = probe_module.summarize(facts(4, 1, 3))
    two = probe_module.summarize(facts(4, 2, 3))
    assert one["class"] == "x86_64__qemu_tcg_cpu_version_2_5__4c__3g__mariadb__10_11"
    assert two["class"] == "x86_64__qemu_tcg_cpu_version_2_5__4c__2n__3g__mariadb__10_11"
    assert (one["numa_nodes"], two["numa_nodes"]) == (1, 2)
    small = probe_module.summarize(facts(2, 1, 2))
    assert small["class"] == "x86_64__qemu_tcg_cpu_version_2_5__2c__2g__mariadb__10_11"
    # facts without the NUMA section (an old probe): one node, as before
    bare = facts(4, 1, 3)
    del bare["cpu"]["numa_nodes"]
    assert probe_module.summarize(bare)["class"] == one["class"]
