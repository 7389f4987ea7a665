"""Whether the machine is a guest (a VM) and of which hypervisor: advice that needs the host
(hardware prefetch policy, BIOS settings, MSRs) is only given where it can be carried out.

Signals, strongest first: ``/sys/hypervisor/type`` (Xen), the device tree's hypervisor node
(arm64 KVM/Xen guests), the x86 ``hypervisor`` CPU flag, then the DMI system vendor and
product (``Amazon EC2``/``*.metal`` tells EC2's bare-metal instances from its VMs).
"""

from __future__ import annotations

from myaccel.facts.sysroot import Sysroot
from myaccel.model import Fact, known, unknown

DMI = "/sys/class/dmi/id"
# DMI system vendor / product names that only virtual machines report
_VM_VENDORS = {
    # a QEMU machine: accelerated by KVM or emulated by TCG, DMI cannot tell which
    "qemu": "qemu",
    "kvm": "kvm",
    "amazon ec2": "nitro",
    "alibaba cloud": "kvm",
    "google": "kvm",
    "microsoft corporation": "hyper-v",
    "vmware, inc.": "vmware",
    "xen": "xen",
    "openstack foundation": "kvm",
    "innotek gmbh": "virtualbox",
}
_VM_PRODUCTS = ("virtual machine", "kvm", "openstack nova", "hvm domu", "ecs", "cvm")


def _dmi(sr: Sysroot, name: str) -> str:
    return (sr.read_text(f"{DMI}/{name}") or "").strip()


def collect_hypervisor(sr: Sysroot, features: Fact[list[str]]) -> Fact[str]:
    """The hypervisor's name for a guest, ``none`` on bare metal, unknown without signals."""
    xen = (sr.read_text("/sys/hypervisor/type") or "").strip()
    if xen:
        return known(xen, "/sys/hypervisor/type")
    dt = (sr.read_text("/proc/device-tree/hypervisor/compatible") or "").strip("\0 \n")
    if dt:
        return known(dt.split(",")[0] or "unknown", "/proc/device-tree/hypervisor/compatible")
    vendor, product = _dmi(sr, "sys_vendor"), _dmi(sr, "product_name")
    src = f"{DMI}/sys_vendor"
    if vendor:
        if product.lower().endswith(".metal"):
            return known("none", f"{DMI}/product_name")
        name = _VM_VENDORS.get(vendor.lower())
        if name is None and any(p in product.lower() for p in _VM_PRODUCTS):
            name = "kvm"
        if name is not None:
            return known(name, src)
    flags = features.value if features.known and features.value is not None else None
    if flags is not None and "hypervisor" in flags:
        return known(vendor.lower() or "guest", "/proc/cpuinfo flags: hypervisor")
    if vendor:
        return known("none", src)  # a physical vendor and no guest signal
    if flags is not None and any(f in flags for f in ("sse2", "lm", "vmx", "svm")):
        return known("none", "/proc/cpuinfo flags: no hypervisor flag")  # x86 says so
    return unknown("no hypervisor signal readable (no DMI, device tree or CPU flag)", src)
