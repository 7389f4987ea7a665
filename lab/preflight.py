"""Whether this machine can run the lab; the answer is a skip reason or None."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from lab.config import AMD64, NEEDED_FREE_BYTES, Arch

TOOLS = {
    "qemu-system-x86_64": "qemu-system-x86",
    "qemu-img": "qemu-utils",
    "debootstrap": "debootstrap",
    "mkfs.ext4": "e2fsprogs",
    "ssh": "openssh-client",
    "scp": "openssh-client",
    "ssh-keygen": "openssh-client",
    "ip": "iproute2",
    "ping": "iputils-ping",
}


def _free_bytes(path: Path) -> int:
    probe = path
    while not probe.exists():
        probe = probe.parent
    return shutil.disk_usage(probe).free


def tools(arch: Arch = AMD64) -> dict[str, str]:
    """The commands the lab runs for `arch`, each with its Debian package. A foreign
    architecture's image is built through qemu-user-static (lab/image.py: foreign_exec)."""
    needed = dict(TOOLS)
    if arch != AMD64:
        del needed[AMD64.qemu_system]
        needed[arch.qemu_system] = arch.qemu_package
    if arch.foreign:
        needed[f"qemu-{arch.machine}-static"] = "qemu-user-static"
    return needed


def missing_reason(cache: Path, image_cached: bool, arch: Arch = AMD64) -> str | None:
    """Why the lab cannot run here, or None. A cached image needs no debootstrap, and only
    room for an overlay."""
    for tool, package in tools(arch).items():
        if tool in ("debootstrap", f"qemu-{arch.machine}-static") and image_cached:
            continue
        if shutil.which(tool) is None and not Path("/usr/sbin", tool).exists():
            target = "make lab-test" if arch == AMD64 else "make lab-arm-test"
            return f"lab: {tool} is missing (apt-get install {package}, or {target})"
    if os.geteuid() != 0:
        # the image's debootstrap, and the multiqueue NIC's tap in a network namespace
        return "lab: the lab needs root (debootstrap, and a tap device in a network namespace)"
    free = _free_bytes(cache)
    needed = NEEDED_FREE_BYTES if not image_cached else NEEDED_FREE_BYTES // 4
    if free < needed:
        return (
            f"lab: {free / 1024**3:.1f} GiB free under {cache}, the lab needs "
            f"{needed / 1024**3:.0f} GiB (set MYACCEL_LAB_CACHE to a larger disk)"
        )
    return None
