"""An operating-system crash after apply: the guest's kernel panics without a sync and boots
again from the same disk. What apply persisted comes back at boot (systemd-sysctl,
systemd-tmpfiles); what is runtime-only (a debugfs scheduler knob) is gone and `verify` says
so; one `myaccel rollback` restores the values and removes the files."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lab import crash_matrix
from lab.guest import Guest
from lab.tests.guestcmd import (
    MANAGED,
    apply_json,
    existing,
    numa_balancing,
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
    before = (thp_mode(guest), numa_balancing(guest), guest.run(f"cat {SCHED}").strip())
    apply_json(guest, "--only os-thp,numa-balancing-off,os-sched-migration-cost-ns")
    applied_sched = guest.run(f"cat {SCHED}").strip()
    assert applied_sched != before[2]
    code, report = verify_json(guest)
    assert (code, report["drift"]) == (0, []), report
    boot_id = guest.run("cat /proc/sys/kernel/random/boot_id")
    guest.crash()
    crashed = guest.console.read_text(errors="replace")
    assert "Kernel panic - not syncing: sysrq triggered crash" in crashed
    guest.boot()
    assert guest.run("cat /proc/sys/kernel/random/boot_id") != boot_id
    assert guest.run("systemctl is-active mariadb.service").strip() == "active"
    # persisted: applied again at boot; runtime-only: the kernel's default, and verify says so
    assert (thp_mode(guest), numa_balancing(guest)) == ("madvise", "0")
    assert guest.run(f"cat {SCHED}").strip() == before[2]
    code, report = verify_json(guest)
    assert code == 1, report
    assert [d["target"] for d in report["drift"]] == [f"debugfs:{SCHED}"], report
    reverted = rollback_json(guest)
    assert len(reverted["reverted"]) == 3, reverted
    assert (thp_mode(guest), numa_balancing(guest), guest.run(f"cat {SCHED}").strip()) == before
    assert existing(guest, MANAGED) == []


@pytest.fixture(scope="module")
def crash_plan(myaccel_guest: Guest) -> Guest:
    crash_matrix.prepare_plan(myaccel_guest)
    return myaccel_guest


# three points of the matrix in CI (the whole matrix: `python -m lab crash-matrix`, its
# table in docs/safety.md): a drop-in written and not yet marked, the server down on its
# new files, a rollback half done
@pytest.mark.parametrize(
    ("phase", "point"),
    [("apply", "changed:3"), ("apply", "restart-down"), ("rollback", "reverted:1")],
)
def test_one_rollback_after_an_os_crash_puts_everything_back(
    crash_plan: Guest, phase: str, point: str
) -> None:
    row = crash_matrix.run_point(crash_plan, phase, point)
    assert row.crashed, "the kernel panicked at the point (console)"
    assert row.rollback_exit == 0 and row.journal == "rolled-back", row
    assert row.same, row.diff
