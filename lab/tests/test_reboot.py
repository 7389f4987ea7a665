"""A clean reboot after an apply (poweroff, then a boot from the same disk): what the docs
say persists (the sysctl.d and tmpfiles.d files, the unit's drop-in) is in effect again,
`verify` finds no drift, and one `rollback` afterwards restores every value and file and
restarts the unit."""

from __future__ import annotations

import pytest

from lab.guest import Guest
from lab.tests.guestcmd import (
    DROP_IN,
    MANAGED,
    apply_json,
    existing,
    main_pid,
    numa_balancing,
    placement,
    rollback_json,
    thp_mode,
)

pytestmark = pytest.mark.lab


def test_a_reboot_keeps_what_persists_and_rollback_undoes_it(myaccel_guest: Guest) -> None:
    guest = myaccel_guest
    before = (thp_mode(guest), numa_balancing(guest), placement(guest, main_pid(guest)))
    apply_json(guest, "--only os-thp,numa-balancing-off,numa-binding")
    applied = ("madvise", "0", ("0-1", "bind:0"))
    assert (thp_mode(guest), numa_balancing(guest), placement(guest, main_pid(guest))) == applied
    boot_id = guest.run("cat /proc/sys/kernel/random/boot_id")
    guest.stop()
    guest.boot()
    assert guest.run("cat /proc/sys/kernel/random/boot_id") != boot_id
    assert guest.run("systemctl is-active mariadb.service").strip() == "active"
    assert (thp_mode(guest), numa_balancing(guest), placement(guest, main_pid(guest))) == applied
    assert guest.ssh("myaccel verify", timeout=900).returncode == 0
    reverted = rollback_json(guest)
    assert len(reverted["reverted"]) == 5, reverted  # THP, the sysctl, the drop-in's 3 keys
    assert (thp_mode(guest), numa_balancing(guest), placement(guest, main_pid(guest))) == before
    assert existing(guest, (*MANAGED, DROP_IN)) == []
