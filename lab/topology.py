"""A guest's machine, declared: a CPU model, CPUs in sockets, NUMA nodes with their own
memory, virtio disks and a virtio NIC; `qemu_argv` turns it into qemu-system-x86_64 options,
or qemu-system-aarch64's for an arm64 image (`-M virt`, the topology in the device tree)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lab.config import AMD64, Arch
from lab.errors import LabError


@dataclass(frozen=True)
class NumaNode:
    cpus: tuple[int, ...]
    memory_mib: int


@dataclass(frozen=True)
class Topology:
    """sockets x cores_per_socket CPUs (one thread each); nodes partition the CPUs; each
    extra disk is a blank virtio disk of that many GiB after the root disk (vda)."""

    sockets: int = 2
    cores_per_socket: int = 2
    nodes: tuple[NumaNode, ...] = field(
        default_factory=lambda: (NumaNode((0, 1), 1536), NumaNode((2, 3), 1536))
    )
    extra_disks_gib: tuple[int, ...] = ()
    # qemu's -cpu: x86's `max`; for aarch64 a named core (neoverse-n1, cortex-a72)
    cpu_model: str = "max"
    # > 0: a second NIC (eth1), virtio with this many queue pairs, each with its own
    # interrupts, on a tap device in a network namespace of the lab's (lab/netns.py)
    nic_queues: int = 0

    @property
    def cpus(self) -> int:
        return self.sockets * self.cores_per_socket

    @property
    def memory_mib(self) -> int:
        return sum(node.memory_mib for node in self.nodes)

    def check(self) -> None:
        claimed = sorted(cpu for node in self.nodes for cpu in node.cpus)
        if claimed != list(range(self.cpus)):
            raise LabError(
                f"lab: NUMA nodes claim CPUs {claimed}, the machine has 0-{self.cpus - 1}"
            )
        if not self.nodes or any(node.memory_mib <= 0 for node in self.nodes):
            raise LabError("lab: every NUMA node needs memory")
        if len(self.extra_disks_gib) > 1:
            raise LabError("lab: at most one extra disk (vdb)")
        if not 0 <= self.nic_queues <= 16:
            raise LabError("lab: a multiqueue NIC has 1 to 16 queue pairs")


BOOT_MODULE_BLACKLIST = ("kvm", "kvm_amd", "kvm_intel", "powernow_k8", "acpi_cpufreq", "pcspkr")


def _cpu_list(cpus: tuple[int, ...]) -> str:
    """qemu's form: contiguous runs as `a-b`, runs joined by a repeated `cpus=` key."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and cpu == runs[-1][-1] + 1:
            runs[-1].append(cpu)
        else:
            runs.append([cpu])
    return ",cpus=".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def qemu_argv(
    topology: Topology,
    *,
    kernel: Path,
    initrd: Path,
    disks: list[Path],
    ssh_port: int,
    console: Path,
    pidfile: Path,
    arch: Arch = AMD64,
    tap_fds: tuple[int, ...] = (),
) -> list[str]:
    """Options for a daemonized TCG guest; `disks` are qcow2 files, the root disk first.
    aarch64: the `virt` board, whose device tree carries the sockets (`cpu-map`) and each
    CPU's and memory range's `numa-node-id`; the kernel boots from it without firmware.
    `tap_fds`: the open queues of the multiqueue NIC's tap (one per queue pair)."""
    topology.check()
    if len(tap_fds) != topology.nic_queues:
        raise LabError(f"lab: {topology.nic_queues} NIC queues need as many tap descriptors")
    argv = [arch.qemu_system]
    if arch != AMD64:
        argv += ["-M", "virt"]
    argv += [
        "-accel", "tcg,thread=multi",
        "-cpu", topology.cpu_model,
        "-m", f"{topology.memory_mib}M",
        "-smp", f"{topology.cpus},sockets={topology.sockets},cores={topology.cores_per_socket},threads=1",
    ]  # fmt: skip
    for i, node in enumerate(topology.nodes):
        argv += [
            "-object", f"memory-backend-ram,id=m{i},size={node.memory_mib}M",
            "-numa", f"node,nodeid={i},cpus={_cpu_list(node.cpus)},memdev=m{i}",
        ]  # fmt: skip
    argv += [
        "-kernel", str(kernel),
        "-initrd", str(initrd),
        # panic=1 + -no-reboot: a crashed kernel ends the qemu process instead of hanging.
        # nokaslr: the kernel's ~45 MB land on node 0 at every boot; randomized, they moved
        # between the nodes and flipped the plan between numa-binding and numa-interleave.
        # module_blacklist: what udev would load on every CPU for nothing under TCG (KVM,
        # the AMD frequency driver that fails per CPU, the PC speaker): with 32 CPUs their
        # loads stalled the boot by minutes (soft lockups in udev workers, seen).
        "-append", f"root=/dev/vda rw console={arch.console} net.ifnames=0 panic=1 nokaslr"
        f" module_blacklist={','.join(BOOT_MODULE_BLACKLIST)}",
        "-no-reboot",
    ]  # fmt: skip
    for disk in disks:
        argv += ["-drive", f"file={disk},if=virtio,format=qcow2,cache=writeback"]
    argv += [
        "-netdev", f"user,id=n0,hostfwd=tcp:127.0.0.1:{ssh_port}-:22",
        "-device", "virtio-net-pci,netdev=n0",
    ]  # fmt: skip
    if tap_fds:
        # one MSI-X vector per queue (input and output) and one for configuration
        argv += [
            "-netdev", f"tap,id=n1,vhost=off,fds={':'.join(map(str, tap_fds))}",
            "-device", f"virtio-net-pci,netdev=n1,mq=on,vectors={2 * len(tap_fds) + 2}",
        ]  # fmt: skip
    argv += [
        "-display", "none",
        "-monitor", "none",
        "-serial", f"file:{console}",
        "-pidfile", str(pidfile),
        "-daemonize",
    ]  # fmt: skip
    return argv


# The tests' machine (docs/lab.md): 4 CPUs in 2 sockets, 2 NUMA nodes of 1536 MiB, 3 GiB;
# besides the ssh NIC (eth0) a multiqueue one (eth1: 4 queue pairs, 9 interrupts); a blank
# 16 GiB second disk (vdb, sparse: only what accelerate's clone and snapshots write).
LAB_TOPOLOGY = Topology(
    sockets=2,
    cores_per_socket=2,
    nodes=(NumaNode((0, 1), 1536), NumaNode((2, 3), 1536)),
    extra_disks_gib=(16,),
    nic_queues=4,
)


# The aarch64 lab's machine (docs/lab.md, "The aarch64 lab"): 4 CPUs in 2 sockets, 2 NUMA
# nodes of 1024 MiB; neoverse-n1 has LSE atomics (ARMv8.2), cortex-a72 (ARMv8.0) has not.
ARM_CPU_MODELS = ("neoverse-n1", "cortex-a72")


def arm_topology(cpu_model: str) -> Topology:
    if cpu_model not in ARM_CPU_MODELS:
        raise LabError(f"lab: the aarch64 lab's CPU models are {', '.join(ARM_CPU_MODELS)}")
    return Topology(
        sockets=2,
        cores_per_socket=2,
        nodes=(NumaNode((0, 1), 1024), NumaNode((2, 3), 1024)),
        cpu_model=cpu_model,
    )


def lab_topology(arch: Arch, cpu_model: str | None = None) -> Topology:
    """The lab's machine for an architecture: LAB_TOPOLOGY on amd64, else `arm_topology`
    (neoverse-n1 unless a model is named)."""
    if arch == AMD64:
        if cpu_model not in (None, LAB_TOPOLOGY.cpu_model):
            raise LabError("lab: the amd64 lab has one CPU model (max)")
        return LAB_TOPOLOGY
    return arm_topology(cpu_model or ARM_CPU_MODELS[0])
