"""A bug report's machine at the lab's size (lab/repro.py): no guest needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab import repro
from lab.errors import LabError

pytestmark = pytest.mark.lab

SYSROOTS = Path(__file__).parents[2] / "tests" / "fixtures" / "sysroots"


def test_a_four_node_report_keeps_its_layout_and_proportions() -> None:
    machine = repro.read_machine(SYSROOTS / "kunpeng920-2s")
    assert (machine.arch, machine.sockets, sorted(machine.node_cpus)) == (
        "aarch64",
        2,
        [0, 1, 2, 3],
    )
    t = repro.guest_topology(machine)
    assert (t.sockets, t.cpus, len(t.nodes)) == (2, 4, 4)
    total = sum(machine.node_kib.values())
    for node, guest in zip(sorted(machine.node_kib), t.nodes, strict=True):
        # each node's share of the memory within one 16 MiB step of the report's
        assert abs(guest.memory_mib / t.memory_mib - machine.node_kib[node] / total) < 0.01


def test_a_small_report_is_not_made_larger() -> None:
    machine = repro.read_machine(SYSROOTS / "this-vm")
    t = repro.guest_topology(machine)
    assert (t.cpus, len(t.nodes)) == (2, 1)
    assert t.memory_mib <= sum(machine.node_kib.values()) // 1024


def test_what_is_not_a_report_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="not a captured sysroot"):
        repro.read_machine(tmp_path)
    (tmp_path / "x.cnf").write_text("innodb_buffer_pool_size=1G\n")
    with pytest.raises(LabError, match="not an option file"):
        repro.check_option_file(tmp_path / "x.cnf")
