"""The OS-crash matrix (issue 31, item 4): at a journal step or restart phase of an apply
(or of a rollback), the guest's kernel panics without a sync (``MYACCEL_CRASH_AT=<point>``
with ``MYACCEL_CRASH_HOW=kernel``: myaccel writes ``c`` to ``/proc/sysrq-trigger`` there),
the guest boots again from the same disk, and one ``myaccel rollback`` must leave every
file byte-identical to before the apply, the server up on its old values and the journal
finished.

The apply writes an option file (``innodb_log_buffer_size``, a restart knob), a sysctl
drop-in (``kernel.numa_balancing``) and a systemd drop-in of ``mariadb.service`` (the NUMA
binding: three keys), then restarts the server through systemd: five journal entries.

``python -m lab crash-matrix DIR [POINT ...]`` runs it on the guest booted in DIR and prints
the table docs/safety.md shows; ``lab/tests/test_os_crash.py`` runs a few points in CI.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from lab.errors import LabError
from lab.guest import Guest

SERVER = "-S /run/mysqld/mysqld.sock -u root"
PLAN = "/root/crash-plan.json"
# what the apply may touch, as bytes: every file and directory under these
WATCHED = "/etc/mysql /etc/sysctl.d /etc/tmpfiles.d /etc/systemd/system"
ENTRIES = 5  # innodb_log_buffer_size, kernel.numa_balancing, NUMAPolicy, NUMAMask, CPUAffinity
APPLY_POINTS = (
    *(f"{step}:{i}" for i in range(ENTRIES) for step in ("journaled", "changed", "applied")),
    "restart-stop",
    "restart-down",
    "restart-start",
    "health-check",
)
ROLLBACK_POINTS = (*(f"reverted:{i}" for i in range(ENTRIES)), "rollback-finish")
PANIC = "Kernel panic - not syncing: sysrq triggered crash"


@dataclass(frozen=True)
class State:
    """What must be back after the rollback: the bytes of every watched file (and which
    directories exist), the server's state and values, the kernel value."""

    files: str
    active: str
    log_buffer: str
    numa_balancing: str
    cpus: str
    policy: str


@dataclass(frozen=True)
class Row:
    phase: str  # apply | rollback
    point: str
    crashed: bool  # the console shows the panic
    boot_s: float  # from the crash to ssh again
    rollback_s: float
    rollback_exit: int
    journal: str  # the newest journal's status after the rollback
    same: bool  # State equal to before
    diff: str  # what differs, if anything

    @property
    def ok(self) -> bool:
        return (
            self.crashed and self.rollback_exit == 0 and self.same and self.journal == "rolled-back"
        )


def state(guest: Guest) -> State:
    files = guest.run(
        f"find {WATCHED} -xdev \\( -type f -o -type l \\) -print0 | sort -z | "
        f"xargs -0 sha256sum; find {WATCHED} -xdev -type d | sort"
    )
    active = guest.ssh("systemctl is-active mariadb.service").stdout.strip()
    log_buffer = "-"
    cpus = policy = "-"
    if active == "active":
        log_buffer = guest.run(
            "mariadb -N -B -e 'SELECT @@innodb_log_buffer_size'", timeout=120
        ).strip()
        pid = guest.run("systemctl show -P MainPID mariadb.service").strip()
        cpus = guest.run(f"grep ^Cpus_allowed_list: /proc/{pid}/status").split()[1]
        policy = guest.run(f"head -1 /proc/{pid}/numa_maps").split()[1]
    numa_balancing = guest.run("cat /proc/sys/kernel/numa_balancing").strip()
    return State(files, active, log_buffer, numa_balancing, cpus, policy)


def _diff(before: State, after: State) -> str:
    out = []
    for name in ("active", "log_buffer", "numa_balancing", "cpus", "policy"):
        a, b = getattr(before, name), getattr(after, name)
        if a != b:
            out.append(f"{name} {a} -> {b}")
    if before.files != after.files:
        old, new = set(before.files.splitlines()), set(after.files.splitlines())
        out.append(f"files: gone {sorted(old - new)} new {sorted(new - old)}")
    return "; ".join(out)


def prepare_plan(guest: Guest) -> None:
    """The crash plan: the `--layers os,numa` plan (the NUMA binding and numa-balancing-off
    for the server's 128 MiB pool) with the full plan's innodb_log_buffer_size added (the
    same facts, so the same digest)."""
    guest.run(
        f"cd /root && myaccel plan {SERVER} --layers os,numa --out placement.json >/dev/null "
        f"&& myaccel plan {SERVER} --layers server --out server.json >/dev/null",
        timeout=900,
    )
    merge = (
        "import json; p = json.load(open('placement.json')); s = json.load(open('server.json')); "
        "p['recommendations'] = [r for r in s['recommendations'] if r['id'] == 'server-log-buffer'] "
        "+ [r for r in p['recommendations'] if r['id'] in ('numa-balancing-off', 'numa-binding')]; "
        "p['layers'] = ['server', 'os', 'numa']; p['digest'] = None; "
        f"json.dump(p, open('{PLAN}', 'w'), indent=1)"
    )
    guest.run(f'cd /root && python3 -c "{merge}"')
    targets = json.loads(guest.run(f"cat {PLAN}"))["recommendations"]
    if len(targets) != ENTRIES:
        raise LabError(f"lab: the crash plan has {len(targets)} recommendations, not {ENTRIES}")


def _apply(env: str = "") -> str:
    return f"{env} myaccel apply {PLAN} {SERVER} --yes"


def _crash_and_boot(guest: Guest, command: str) -> tuple[bool, float]:
    """Run ``command`` (which panics the kernel at its crash point); wait for qemu to exit,
    then boot from the same disk. Returns (the console shows the panic, seconds to ssh)."""
    console = guest.console
    r = guest.ssh(command, timeout=900)
    t0 = time.monotonic()
    if not guest.wait_exit(120):  # the point was not reached, or no panic
        raise LabError(
            f"lab: the guest did not go down: `{command}` exited {r.returncode}: "
            f"{(r.stderr or r.stdout).strip()[-300:]}"
        )
    guest.pid = None
    crashed = PANIC in console.read_text(errors="replace")
    guest.boot()
    return crashed, time.monotonic() - t0


def _rollback(guest: Guest) -> tuple[int, float, str]:
    t0 = time.monotonic()
    r = guest.ssh("myaccel rollback", timeout=900)
    took = time.monotonic() - t0
    listed = guest.ssh("myaccel rollback --list").stdout.strip().splitlines()
    status = listed[-1].split()[-1] if listed else "none"
    return r.returncode, took, status


def run_point(guest: Guest, phase: str, point: str) -> Row:
    """One crash: at ``point`` of an apply (phase ``apply``) or of a rollback after a whole
    apply (phase ``rollback``); then boot and one ``myaccel rollback``."""
    before = state(guest)
    env = f"MYACCEL_CRASH_AT={point} MYACCEL_CRASH_HOW=kernel"
    if phase == "apply":
        crashed, boot_s = _crash_and_boot(guest, _apply(env))
    else:
        guest.run(_apply(), timeout=900)
        crashed, boot_s = _crash_and_boot(guest, f"{env} myaccel rollback")
    code, took, journal = _rollback(guest)
    after = state(guest)
    return Row(
        phase, point, crashed, boot_s, took, code, journal, after == before, _diff(before, after)
    )


def table(rows: list[Row]) -> list[str]:
    lines = [
        "| phase | crash point | panic seen | crash to ssh | rollback | exit | journal | files, server, values | result |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.phase} | `{r.point}` | {'yes' if r.crashed else 'no'} | {r.boot_s:.0f} s | "
            f"{r.rollback_s:.0f} s | {r.rollback_exit} | {r.journal} | "
            f"{'as before' if r.same else r.diff} | {'ok' if r.ok else 'FAILED'} |"
        )
    return lines
