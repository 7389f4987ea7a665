"""Network facts: interfaces, queue counts, the IRQs of each NIC and where they run."""

from __future__ import annotations

from dataclasses import dataclass

from myaccel.cpulist import format_cpu_list
from myaccel.facts.sysroot import Sysroot
from myaccel.model import Fact, Irq, NetInterface, NetworkFacts, known, unknown

NET = "/sys/class/net"
INTERRUPTS = "/proc/interrupts"


@dataclass(frozen=True)
class InterruptLine:
    irq: int
    counts: list[int]
    name: str


def parse_interrupts(text: str) -> list[InterruptLine]:
    lines = text.splitlines()
    if not lines:
        return []
    ncpu = len(lines[0].split())
    out: list[InterruptLine] = []
    for line in lines[1:]:
        head, sep, rest = line.partition(":")
        if not sep or not head.strip().isdigit():
            continue
        toks = rest.split()
        counts: list[int] = []
        for t in toks[:ncpu]:
            if not t.isdigit():
                break
            counts.append(int(t))
        tail = toks[len(counts) :]
        name = tail[-1] if tail else ""
        out.append(InterruptLine(int(head), counts, name))
    return out


def _irqs_of_device(sr: Sysroot, dev_dir: str) -> set[int]:
    """MSI IRQ numbers of a PCI device (or its parent, for virtio)."""
    found: set[int] = set()
    d = dev_dir
    for _ in range(2):
        for n in sr.listdir(f"{d}/msi_irqs"):
            if n.isdigit():
                found.add(int(n))
        if found:
            break
        d = d.rsplit("/", 1)[0]
    return found


def interface_irqs(sr: Sysroot, name: str, ilines: list[InterruptLine]) -> list[int]:
    """The IRQ numbers of one interface, ascending: its device's MSI IRQs (the parent's,
    for virtio) and the /proc/interrupts lines named after it or its device."""
    dev_real = sr.realpath(f"{NET}/{name}/device")
    irq_nums: set[int] = _irqs_of_device(sr, dev_real) if dev_real else set()
    dev_base = dev_real.rstrip("/").rsplit("/", 1)[-1] if dev_real else None
    for il in ilines:
        nm = il.name
        if nm.startswith(name + "-") or nm == name or (dev_base and nm.startswith(dev_base + "-")):
            irq_nums.add(il.irq)
    return sorted(irq_nums)


def collect_network(sr: Sysroot) -> NetworkFacts:
    names = sr.listdir(NET)
    if not names:
        u = unknown("no interfaces in /sys/class/net", NET)
        return NetworkFacts(interfaces=u, irqbalance_running=_irqbalance(sr))
    itext = sr.read_text(INTERRUPTS) or ""
    ilines = parse_interrupts(itext)
    by_irq = {il.irq: il for il in ilines}
    ifaces: list[NetInterface] = []
    for name in names:
        base = f"{NET}/{name}"
        dev_real = sr.realpath(f"{base}/device")
        driver: str | None = None
        if dev_real:
            drv = sr.realpath(f"{base}/device/driver")
            driver = drv.rstrip("/").rsplit("/", 1)[-1] if drv else None
        queues = sr.listdir(f"{base}/queues")
        rxq = sum(1 for q in queues if q.startswith("rx-"))
        txq = sum(1 for q in queues if q.startswith("tx-"))
        irqs: list[Irq] = []
        for n in interface_irqs(sr, name, ilines):
            il_opt = by_irq.get(n)
            aff = sr.read_cpu_list(f"/proc/irq/{n}/smp_affinity_list")
            irqs.append(
                Irq(
                    irq=n,
                    name=il_opt.name if il_opt else "",
                    affinity=format_cpu_list(aff.value) if aff.known and aff.value else None,
                    count=sum(il_opt.counts) if il_opt else None,
                )
            )
        # a virtio NIC's device is the virtio one: its PCI parent has the node
        node = sr.read_int(f"{base}/device/numa_node")
        if not node.known and dev_real:
            node = sr.read_int(dev_real.rstrip("/").rsplit("/", 1)[0] + "/numa_node")
        mtu = sr.read_int(f"{base}/mtu")
        speed = sr.read_int(f"{base}/speed")
        oper = sr.read_line(f"{base}/operstate")
        ifaces.append(
            NetInterface(
                name=name,
                driver=driver,
                operstate=oper.value if oper.known else None,
                mtu=mtu.value if mtu.known else None,
                speed_mbps=speed.value if speed.known and (speed.value or 0) > 0 else None,
                rx_queues=rxq or None,
                tx_queues=txq or None,
                irqs=irqs,
                numa_node=node.value if node.known and (node.value or 0) >= 0 else None,
            )
        )
    return NetworkFacts(
        interfaces=known(ifaces, f"{NET}, {INTERRUPTS}, /proc/irq/*/smp_affinity_list"),
        irqbalance_running=_irqbalance(sr),
    )


def irqbalance_pid(sr: Sysroot, pids: list[str] | None = None) -> int | None:
    """The pid of a running irqbalance, None when none runs (or no process list);
    ``pids``: the process list when the caller has it."""
    for p in sr.listdir("/proc") if pids is None else pids:
        if p.isdigit():
            comm = sr.read_text(f"/proc/{p}/comm")
            if comm is not None and comm.strip() == "irqbalance":
                return int(p)
    return None


def _irqbalance(sr: Sysroot) -> Fact[bool]:
    pids = [p for p in sr.listdir("/proc") if p.isdigit()]
    if not pids:
        return unknown("no process list under /proc", "/proc/*/comm")
    pid = irqbalance_pid(sr, pids)
    if pid is not None:
        return known(True, f"/proc/{pid}/comm")
    return known(False, "/proc/*/comm")
