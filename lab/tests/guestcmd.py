"""What the host-layer tests read and run in the guest: THP, the sysctl, myaccel's managed
files, and plan + apply + rollback with the server reached on its socket."""

from __future__ import annotations

import json
from typing import Any

from lab.guest import Guest

# plan and apply reach the server the same way (see test_plan_then_apply_on_the_default_socket)
SERVER = "-S /run/mysqld/mysqld.sock -u root"
THP = "/sys/kernel/mm/transparent_hugepage/enabled"
NUMA_BALANCING = "/proc/sys/kernel/numa_balancing"
MANAGED = ("/etc/sysctl.d/99-myaccel.conf", "/etc/tmpfiles.d/99-myaccel.conf")
DROP_IN = "/etc/systemd/system/mariadb.service.d/99-myaccel.conf"


def thp_mode(guest: Guest) -> str:
    return guest.run(f"cat {THP}").split("[", 1)[1].split("]", 1)[0]


def numa_balancing(guest: Guest) -> str:
    return guest.run(f"cat {NUMA_BALANCING}").strip()


def main_pid(guest: Guest) -> int:
    return int(guest.run("systemctl show -P MainPID mariadb.service").strip())


def placement(guest: Guest, pid: int) -> tuple[str, str]:
    """The server's CPUs (``Cpus_allowed_list``) and its memory policy (the policy column
    of its first mapping in ``numa_maps``: ``default``, ``bind:0``, ``interleave:0-1``)."""
    cpus = guest.run(f"grep ^Cpus_allowed_list: /proc/{pid}/status").split()[1]
    policy = guest.run(f"head -1 /proc/{pid}/numa_maps").split()[1]
    return cpus, policy


def existing(guest: Guest, paths: tuple[str, ...]) -> list[str]:
    return guest.run(f"ls -1 {' '.join(paths)} 2>/dev/null || true").split()


def apply_json(guest: Guest, flags: str) -> Any:
    """A plan of the os and numa layers, then apply. Without the server layer the placement
    holds the server's current 128 MiB buffer pool: numa-binding to the node of the
    server's CPUs (node 0 unpinned), with numa-balancing-off (a full plan's 1280 MiB pool
    does not fit 70% of a node's 1.5 GiB: no strict binding then)."""
    guest.run(
        f"cd /root && myaccel plan {SERVER} --layers os,numa,nic --out plan.json >/dev/null",
        timeout=900,
    )
    return json.loads(
        guest.run(f"cd /root && myaccel apply plan.json {SERVER} {flags} --yes --json", timeout=900)
    )


def nic_irqs(guest: Guest, iface: str) -> dict[str, tuple[int, str]]:
    """Each interrupt of a NIC as the guest's kernel lists it: its /proc/interrupts name,
    number and smp_affinity_list (a virtio NIC's MSI IRQs are its PCI parent's)."""
    out = guest.run(
        f"d=$(readlink -f /sys/class/net/{iface}/device)/..; for n in $(ls $d/msi_irqs); do "
        "echo $n $(grep \"^ *$n:\" /proc/interrupts | awk '{print $NF}') "
        "$(cat /proc/irq/$n/smp_affinity_list); done"
    )
    irqs = {}
    for line in out.splitlines():
        number, name, cpus = line.split()
        irqs[name] = (int(number), cpus)
    return irqs


def irq_counts(guest: Guest, numbers: list[int]) -> dict[int, list[int]]:
    """Per-CPU interrupt counts of these IRQs, from /proc/interrupts."""
    counts: dict[int, list[int]] = {}
    ncpu = int(guest.run("nproc --all"))
    for line in guest.run("cat /proc/interrupts").splitlines()[1:]:
        head, _, rest = line.partition(":")
        if head.strip().isdigit() and int(head) in numbers:
            counts[int(head)] = [int(t) for t in rest.split()[:ncpu]]
    return counts


def rollback_json(guest: Guest) -> Any:
    return json.loads(guest.run("myaccel rollback --json", timeout=900))
