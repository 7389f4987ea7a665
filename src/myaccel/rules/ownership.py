"""Who owns a setting: the server's own settings are the plan's to apply anywhere; the
kernel's host-wide settings (sysctls, the scheduler, THP, IRQs) are not a container's to
change, since it shares the host's kernel; the hardware's (prefetchers, BIOS, MSRs) belong
to whoever runs the machine, which a guest or a container never does, and neither does a
guest whose hypervisor nobody could read.

The engine passes every recommendation through ``owned`` (one decision per plan, from the
facts ``container`` and ``cpu.hypervisor``): a host setting in a container becomes
advisory, with the reason in its rationale and its evidence (``owner``); host hardware
advice on anything but a known bare-metal host is skipped with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from myaccel.model import Facts
from myaccel.rules.model import Recommendation, Skipped

Scope = Literal["server", "host-kernel", "host-hardware", "build"]
Role = Literal["host", "guest", "guest-unknown-hypervisor", "container", "unknown"]

# advice whose subject is the machine's hardware or firmware
_HARDWARE_ADVICE = ("advice:prefetch", "advice:bios", "advice:msr")
# targets that change the kernel for everything on it
_HOST_KERNEL = ("sysctl:", "debugfs:", "sysfs:", "irq:")


@dataclass(frozen=True)
class Machine:
    """Who runs this probe's kernel and hardware, and what says so."""

    role: Role
    why: str


@dataclass(frozen=True)
class Decision:
    action: Literal["apply", "advisory", "skip"]
    reason: str


def scope_of(target: str) -> Scope:
    if target.startswith("build:"):
        return "build"
    if target.startswith(_HARDWARE_ADVICE):
        return "host-hardware"
    if target.startswith("sysctl:net."):
        return "server"  # per network namespace: a container's own
    if target.startswith(_HOST_KERNEL):
        return "host-kernel"
    return "server"  # mysql:, mycnf:, systemd:server/, advice about the server itself


def machine(facts: Facts) -> Machine:
    c = facts.container
    if c.known and c.value not in (None, "none"):
        return Machine("container", f"{c.value} ({c.source})")
    if not c.known:
        return Machine("unknown", f"cannot tell whether this is a container ({c.unknown})")
    hv = facts.cpu.hypervisor
    if hv.known and hv.value in (None, "none"):
        return Machine("host", f"bare metal ({hv.source})")
    if hv.known:
        return Machine("guest", f"a {hv.value} guest ({hv.source})")
    return Machine("guest-unknown-hypervisor", f"hypervisor unknown ({hv.unknown})")


def decide(scope: Scope, m: Machine) -> Decision:
    if scope in ("server", "build"):
        return Decision("apply", "")
    if scope == "host-kernel":
        if m.role == "container":
            return Decision(
                "advisory",
                f"host-wide setting: this container ({m.why}) shares the host's kernel; "
                "set it on the host",
            )
        if m.role == "unknown":
            return Decision("advisory", f"host-wide setting, and {m.why}: set it on the host")
        return Decision("apply", "")
    if m.role == "host":
        return Decision("apply", "")
    if m.role == "guest":
        return Decision("skip", f"belongs to the host of this guest: {m.why}")
    if m.role == "guest-unknown-hypervisor":
        return Decision("skip", f"{m.why}: no host-level advice")
    return Decision("skip", f"{m.why}: no host-level advice")


def owned(r: Recommendation, m: Machine) -> Recommendation | Skipped:
    """``r`` as the owner of its setting may act on it: unchanged, advisory (a host-wide
    setting where this is no host's kernel) or skipped (hardware that is not this
    machine's)."""
    d = decide(scope_of(r.target), m)
    if d.action == "skip":
        return Skipped(id=r.id, layer=r.layer, reason=d.reason)
    if d.action == "advisory" and r.action == "apply":
        return r.model_copy(
            update={
                "action": "advisory",
                "rationale": f"{d.reason}. {r.rationale}",
                "evidence": {**r.evidence, "owner": d.reason},
            }
        )
    return r
