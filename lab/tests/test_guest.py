"""The guest is the host myaccel was written for: systemd as PID 1, Debian's own
mariadb.service, 2 NUMA nodes, debugfs; and its probe and plan see that, from inside."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lab.guest import Guest

pytestmark = pytest.mark.lab

# On the development machine (one NUMA node, no debugfs, THP madvise) the plan skips
# numa-binding ("single NUMA node"), os-scheduler ("debugfs is not mounted ...") and os-thp;
# on a two-node systemd host with debugfs it proposes them. Which placement (bind to node 0
# or interleave) depends on whether the planned buffer pool fits in 85% of node 0.
PLACEMENT = ("numa-binding", "numa-interleave")


def _json(guest: Guest, command: str) -> Any:
    return json.loads(guest.run(command, timeout=900))


def test_systemd_is_pid_1_and_mariadb_runs_under_it(guest: Guest) -> None:
    assert guest.run("cat /proc/1/comm").strip() == "systemd"
    assert guest.run("systemctl is-active mariadb.service").strip() == "active"
    pid = guest.run("systemctl show -P MainPID mariadb.service").strip()
    assert "/system.slice/mariadb.service" in guest.run(f"cat /proc/{pid}/cgroup")


def test_guest_has_the_declared_topology(guest: Guest) -> None:
    assert guest.run("nproc").strip() == "4"
    nodes = guest.run("ls -d /sys/devices/system/node/node*").split()
    assert [n.rsplit("/", 1)[1] for n in nodes] == ["node0", "node1"]
    assert guest.run("cat /sys/devices/system/node/node1/cpulist").strip() == "2-3"
    assert guest.run("cat /sys/devices/system/cpu/cpu3/topology/physical_package_id").strip() == "1"


def test_probe_reads_the_guest_kernel(myaccel_guest: Guest) -> None:
    facts = _json(myaccel_guest, "myaccel probe --json")
    nodes = facts["cpu"]["numa_nodes"]["value"]
    assert [n["node"] for n in nodes] == [0, 1], nodes
    assert [n["cpus"] for n in nodes] == ["0-1", "2-3"]
    assert facts["cpu"]["sockets"]["value"] == 2
    thp = facts["memory"]["thp_enabled"]
    assert (
        thp["value"]
        == myaccel_guest.run("cat /sys/kernel/mm/transparent_hugepage/enabled")
        .split("[")[1]
        .split("]")[0]
    ), thp
    knobs = facts["kernel"]["sched_knobs"]
    assert "*" not in knobs, knobs  # "*" is the one entry of an unreadable debugfs
    assert any(fact["value"] is not None for fact in knobs.values()), knobs
    server = facts["server"]
    assert server is not None, "probe found no server on the default socket"
    assert server["flavor"]["value"] == "mariadb"
    main_pid = int(myaccel_guest.run("systemctl show -P MainPID mariadb.service"))
    assert server["pid"]["value"] == main_pid


def test_plan_proposes_what_the_dev_machine_skips(myaccel_guest: Guest) -> None:
    plan = _json(myaccel_guest, "myaccel plan --json")
    proposed = {r["id"]: r for r in plan["recommendations"]}
    skipped = {s["id"]: s["reason"] for s in plan["skipped"]}
    placement = [proposed[rid] for rid in PLACEMENT if rid in proposed]
    assert placement, f"no NUMA placement proposed: {[(r, skipped.get(r)) for r in PLACEMENT]}"
    assert placement[0]["target"] == "systemd:server/NUMAPolicy"
    assert proposed["os-thp"]["proposed"] == "madvise"
    sched = [
        r for r in proposed.values() if r["target"].startswith("debugfs:/sys/kernel/debug/sched/")
    ]
    assert sched, f"no scheduler knob proposed; skipped: {skipped}"
    reasons = " ".join(skipped.values())
    assert "single NUMA node" not in reasons
    assert "debugfs is not mounted" not in reasons
