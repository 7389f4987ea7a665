"""An operating-system crash after apply: the guest's kernel panics without a sync and boots
again from the same disk. What apply persisted comes back at boot (systemd-sysctl,
systemd-tmpfiles, the server unit's drop-in); what is runtime-only (a debugfs scheduler
knob, the NIC's IRQ affinity) is gone and `verify` says so of those alone; one `myaccel
rollback` restores every value and file and restarts the unit.

This is also the lab's reboot test: a clean reboot (poweroff, boot) is its easier case, the
same files with every write synced; it was its own test (235 s in CI, two boots of the
same assertions) until the CI budget of issue 31 folded it in here."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lab import crash_matrix
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

SCHED = "/sys/kernel/debug/sched/migration_cost_ns"


def verify_json(guest: Guest) -> tuple[int, Any]:
    """`myaccel verify --json`: exit 0 without drift, 1 with."""
    r = guest.ssh("myaccel verify --json", timeout=900)
    assert r.returncode in (0, 1), r.stderr.strip()
    return r.returncode, json.loads(r.stdout)


def test_applied_settings_survive_a_kernel_crash_and_roll_back(myaccel_guest: Guest) -> None:
    guest = myaccel_guest

    def state() -> tuple[str, str, str, tuple[str, str]]:
        sched = guest.run(f"cat {SCHED}").strip()
        return thp_mode(guest), numa_balancing(guest), sched, placement(guest, main_pid(guest))

    before, irqs_before = state(), nic_irqs(guest, "eth1")
    apply_json(
        guest,
        "--only os-thp,numa-balancing-off,os-sched-migration-cost-ns,numa-binding,"
        "nic-irq-affinity-eth1",
    )
    applied = state()
    assert applied[2] != before[2]
    assert (applied[0], applied[1], applied[3]) == ("madvise", "0", ("0-1", "bind:0"))
    assert {cpus for _, cpus in nic_irqs(guest, "eth1").values()} == {"3"}
    code, report = verify_json(guest)
    assert (code, report["drift"]) == (0, []), report
    boot_id = guest.run("cat /proc/sys/kernel/random/boot_id")
    guest.crash()
    crashed = guest.console.read_text(errors="replace")
    assert "Kernel panic - not syncing: sysrq triggered crash" in crashed
    guest.boot()
    assert guest.run("cat /proc/sys/kernel/random/boot_id") != boot_id
    assert guest.run("systemctl is-active mariadb.service").strip() == "active"
    # persisted: applied again at boot (the drop-in's placement too); runtime-only: the
    # kernel's default, and verify says so of those two alone
    after = state()
    assert (after[0], after[1], after[3]) == (applied[0], applied[1], applied[3])
    assert after[2] == before[2]
    assert nic_irqs(guest, "eth1") == irqs_before, "the kernel reset the IRQ affinity"
    code, report = verify_json(guest)
    assert code == 1, report
    drift = sorted((d["target"], d["runtime_only"]) for d in report["drift"])
    assert [t for t, _ in drift] == [f"debugfs:{SCHED}", "irq:eth1"], report
    assert dict(drift)["irq:eth1"] is True, report
    assert "runtime only" in guest.ssh("myaccel verify", timeout=900).stdout
    reverted = rollback_json(guest)
    # THP, the sysctl, the scheduler knob, the drop-in's 3 keys, the IRQs
    assert len(reverted["reverted"]) == 7, reverted
    assert state() == before
    assert nic_irqs(guest, "eth1") == irqs_before
    assert existing(guest, (*MANAGED, DROP_IN)) == []


@pytest.fixture(scope="module")
def crash_plan(myaccel_guest: Guest) -> Guest:
    crash_matrix.prepare_plan(myaccel_guest)
    return myaccel_guest


# two points of the matrix in `make lab-test` (the whole matrix: `python -m lab
# crash-matrix`, its table in docs/safety.md): a drop-in written and not yet marked, a
# rollback half done. The server down on its new files (`apply:restart-down`, 168 s) was a
# third until the CI budget of issue 31; the matrix still runs it. CI's `make lab-ci-test`
# leaves both out (lab_long: 223 s and 250 s, each after a boot of 80 s, on 2026-12-02) and
# keeps the kernel crash above.
@pytest.mark.lab_long
@pytest.mark.parametrize(
    ("phase", "point"),
    [("apply", "changed:3"), ("rollback", "reverted:1")],
)
def test_one_rollback_after_an_os_crash_puts_everything_back(
    crash_plan: Guest, phase: str, point: str
) -> None:
    row = crash_matrix.run_point(crash_plan, phase, point)
    assert row.crashed, "the kernel panicked at the point (console)"
    assert row.rollback_exit == 0 and row.journal == "rolled-back", row
    assert row.same, row.diff
