"""``irq:eth1``: the CPUs that a NIC's interrupts run on (every IRQ of the interface, through
/proc/irq/N/smp_affinity_list), the value a CPU list (``3``, ``14-15``).

Runtime only: the kernel resets IRQ affinity at boot, and no boot-time file of the
distribution carries it (irqbalance, when it runs, rewrites it every few seconds: the plan
advises stopping it first and this setting warns while it runs). ``verify`` says so after a
reboot. The journal keeps each IRQ's old list with its /proc/interrupts name, so a rollback
finds the same queue again even if the IRQ numbers changed."""

from __future__ import annotations

import json
from pathlib import Path

from myaccel.actions.files import read_kernel_value, write_kernel_value
from myaccel.actions.journal import JournalEntry, OldState
from myaccel.actions.settings.base import Change, RootedSetting
from myaccel.cpulist import format_cpu_list, parse_cpu_list
from myaccel.errors import UsageError
from myaccel.facts.network import INTERRUPTS, interface_irqs, irqbalance_pid, parse_interrupts
from myaccel.facts.sysroot import Sysroot

RUNTIME_ONLY = "runtime only: the kernel resets IRQ affinity at boot (apply again after one)"


def _affinity_file(irq: int) -> str:
    return f"/proc/irq/{irq}/smp_affinity_list"


def _shown(lists: dict[int, str | None]) -> str | None:
    """One list when every IRQ has it, else ``N:list`` for each."""
    if len(set(lists.values())) == 1:
        return next(iter(lists.values()))
    return " ".join(f"{n}:{v}" for n, v in lists.items())


class IrqAffinitySetting(RootedSetting):
    kind = "irq"
    spec_fields = ("interface", "root")

    @property
    def survives_reboot(self) -> bool:
        return False

    def __init__(self, interface: str, *, root: str | Path = "/") -> None:
        super().__init__(root)
        if not interface or "/" in interface or interface in (".", "..") or len(interface) > 15:
            raise UsageError(
                f"'{interface}' is not a network interface name", hint="write it like irq:eth0"
            )
        self.interface = interface
        self.target = f"irq:{interface}"

    def _sysroot(self) -> Sysroot:
        return Sysroot(self.root)

    def _irqs(self) -> dict[int, str]:
        """The interface's IRQ numbers and their /proc/interrupts names."""
        sr = self._sysroot()
        if not sr.exists(f"/sys/class/net/{self.interface}"):
            raise UsageError(
                f"{self.target}: no network interface '{self.interface}' on this machine",
                hint="see `ip link` (interface names differ between machines)",
            )
        lines = parse_interrupts(sr.read_text(INTERRUPTS) or "")
        names = {il.irq: il.name for il in lines}
        irqs = {n: names.get(n, "") for n in interface_irqs(sr, self.interface, lines)}
        if not irqs:
            raise UsageError(
                f"{self.target}: {self.interface} has no interrupts of its own",
                hint="a virtual interface (bridge, veth, loopback) has none to place; skip it",
            )
        return irqs

    def _lists(self) -> dict[int, str | None]:
        return {n: read_kernel_value(self.root, _affinity_file(n)) for n in self._irqs()}

    def read(self) -> str | None:
        """The CPU list every IRQ of the interface has, or each IRQ's when they differ."""
        return _shown(self._lists())

    def _validate(self, desired: str) -> str:
        try:
            cpus = parse_cpu_list(desired.strip())
        except ValueError:
            cpus = []
        if not cpus:
            raise UsageError(
                f"{self.target}: '{desired}' is not a CPU list", hint="write it like 3 or 14-15"
            )
        online = self._sysroot().read_cpu_list("/sys/devices/system/cpu/online")
        if online.known and online.value and not set(cpus) <= set(online.value):
            raise UsageError(
                f"{self.target}: CPUs {format_cpu_list(sorted(set(cpus) - set(online.value)))}"
                " are not online here",
                hint=f"this machine's online CPUs are {format_cpu_list(online.value)}",
            )
        return format_cpu_list(cpus)

    def matches(self, actual: str | None, desired: str) -> bool:
        if actual is None:
            return False
        try:
            return parse_cpu_list(actual) == parse_cpu_list(desired)
        except ValueError:
            return False

    def _warnings(self) -> tuple[str, ...]:
        pid = irqbalance_pid(self._sysroot())
        if pid is None:
            return (RUNTIME_ONLY,)
        return (
            RUNTIME_ONLY,
            f"irqbalance (pid {pid}) is running and will move these interrupts again: "
            "stop it first (systemctl disable --now irqbalance)",
        )

    def plan(self, desired: str) -> Change | None:
        desired = self._validate(desired)
        lists = self._lists()
        if all(self.matches(v, desired) for v in lists.values()):
            return None
        return self._change(
            _shown(lists),
            desired,
            [_affinity_file(n) for n in lists],
            warnings=self._warnings(),
        )

    def capture(self) -> OldState:
        irqs = self._irqs()
        old = {
            str(n): {"name": name, "cpus": read_kernel_value(self.root, _affinity_file(n))}
            for n, name in irqs.items()
        }
        return OldState(value=json.dumps(old, sort_keys=True))

    def apply(self, desired: str) -> None:
        desired = self._validate(desired)
        for n, current in self._lists().items():
            if not self.matches(current, desired):
                write_kernel_value(self.root, _affinity_file(n), desired, emulate=not self.live)

    def revert(self, entry: JournalEntry) -> None:
        """Each IRQ back to its old list, found by its name when that is unique now (IRQ
        numbers may change across a reboot), else by its number; gone IRQs are skipped."""
        if entry.old.value is None:
            return
        old: dict[str, dict[str, str | None]] = json.loads(entry.old.value)
        lines = parse_interrupts(self._sysroot().read_text(INTERRUPTS) or "")
        by_name: dict[str, list[int]] = {}
        for il in lines:
            by_name.setdefault(il.name, []).append(il.irq)
        for number, was in old.items():
            cpus = was.get("cpus")
            name = was.get("name") or ""
            same = by_name.get(name, [])
            irq = same[0] if name and len(same) == 1 else int(number)
            path = _affinity_file(irq)
            current = read_kernel_value(self.root, path)
            if cpus is None or current is None or self.matches(current, cpus):
                continue
            write_kernel_value(self.root, path, cpus, emulate=not self.live)
