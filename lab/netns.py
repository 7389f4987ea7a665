"""A multiqueue NIC for a guest: a tap device with one file descriptor per queue, made
inside a network namespace of the lab's own (so nothing of the host's network changes), and
handed to qemu as open descriptors (`-netdev tap,fds=...`), while qemu itself stays in the
host's namespace where its ssh port forward listens on 127.0.0.1.

Written here, not taken from a library: pyroute2 makes namespaces and links but not the
per-queue tap descriptors qemu needs (TUNSETIFF with IFF_MULTI_QUEUE on each), and Python
3.11's `os` has no `setns`; both are one system call each, through ctypes and fcntl."""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import struct
import subprocess
from pathlib import Path

from lab.errors import LabError

CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000
IFF_MULTI_QUEUE = 0x0100
IFF_VNET_HDR = 0x4000
TAP = "tap0"


def namespace_for(workdir: Path) -> str:
    """A stable, short name per guest directory (a reboot reuses it)."""
    return "mylab-" + hashlib.sha256(str(workdir.resolve()).encode()).hexdigest()[:8]


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=False, capture_output=True, text=True)


def ensure_namespace(name: str) -> None:
    if Path(f"/run/netns/{name}").exists():
        return
    r = _ip("netns", "add", name)
    if r.returncode != 0:
        raise LabError(f"lab: ip netns add {name} failed: {r.stderr.strip()} (root is needed)")


def delete_namespace(name: str) -> None:
    if Path(f"/run/netns/{name}").exists():
        _ip("netns", "delete", name)


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise LabError(f"lab: setns failed: {os.strerror(err)}")


def open_tap_queues(namespace: str, queues: int) -> list[int]:
    """`queues` descriptors of one multiqueue tap device made inside `namespace` (the
    device lives as long as a descriptor is open: it goes with qemu)."""
    if queues < 1:
        raise LabError("lab: a multiqueue NIC needs at least one queue")
    ensure_namespace(namespace)
    host = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{namespace}", os.O_RDONLY)
    fds: list[int] = []
    try:
        _setns(target)
        try:
            flags = IFF_TAP | IFF_NO_PI | IFF_MULTI_QUEUE | IFF_VNET_HDR
            for _ in range(queues):
                fd = os.open("/dev/net/tun", os.O_RDWR)
                fds.append(fd)
                fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH22x", TAP.encode(), flags))
        finally:
            _setns(host)
    except OSError as e:
        for fd in fds:
            os.close(fd)
        raise LabError(f"lab: a multiqueue tap in {namespace} could not be made: {e}") from e
    finally:
        os.close(host)
        os.close(target)
    _ip("-n", namespace, "link", "set", TAP, "up")
    return fds
