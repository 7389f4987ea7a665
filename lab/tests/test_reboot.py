"""A clean reboot after an apply (poweroff, then a boot from the same disk): what the docs
say persists (the sysctl.d and tmpfiles.d files, the unit's drop-in) is in effect again;
what they say is runtime only (the NIC's IRQ affinity) is gone, and `verify` says so of it
alone; one `rollback` afterwards restores every value and file and restarts the unit."""

from __future__ import annotations

import json

import pytest

from lab.guest import Guest
from lab.tests.guestcmd import (
    DROP_IN,
    MANAGED,
    apply_json,
    existing,
    main_pid,
    nic_irqs,
    numa_balancing,
    placement,
    rollback_json,
    thp_mode,
)

pytestmark = pytest.mark.lab


def test_a_reboot_keeps_what_persists_and_rollback_undoes_it(myaccel_guest: Guest) -> None:
    guest = myaccel_guest
    before = (thp_mode(guest), numa_balancing(guest), placement(guest, main_pid(guest)))
    irqs_before = nic_irqs(guest, "eth1")
    apply_json(guest, "--only os-thp,numa-balancing-off,numa-binding,nic-irq-affinity-eth1")
    applied = ("madvise", "0", ("0-1", "bind:0"))
    assert (thp_mode(guest), numa_balancing(guest), placement(guest, main_pid(guest))) == applied
    assert {cpus for _, cpus in nic_irqs(guest, "eth1").values()} == {"3"}
    boot_id = guest.run("cat /proc/sys/kernel/random/boot_id")
    guest.stop()
    guest.boot()
    assert guest.run("cat /proc/sys/kernel/random/boot_id") != boot_id
    assert guest.run("systemctl is-active mariadb.service").strip() == "active"
    assert (thp_mode(guest), numa_balancing(guest), placement(guest, main_pid(guest))) == applied
    assert nic_irqs(guest, "eth1") == irqs_before, "the kernel reset the IRQ affinity"
    r = guest.ssh("myaccel verify --json", timeout=900)
    assert r.returncode == 1, r.stdout
    drift = json.loads(r.stdout)["drift"]
    assert [(d["target"], d["runtime_only"]) for d in drift] == [("irq:eth1", True)], drift
    assert "runtime only" in guest.ssh("myaccel verify", timeout=900).stdout
    reverted = rollback_json(guest)
    # THP, the sysctl, the drop-in's 3 keys, the IRQs (already at their old lists)
    assert len(reverted["reverted"]) == 6, reverted
    assert (thp_mode(guest), numa_balancing(guest), placement(guest, main_pid(guest))) == before
    assert nic_irqs(guest, "eth1") == irqs_before
    assert existing(guest, (*MANAGED, DROP_IN)) == []
