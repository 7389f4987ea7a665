"""Whether this probe runs in a container, and which kind: a container shares the host's
kernel, so host-wide settings (sysctls, the scheduler, THP) are not its to change
(``rules/ownership.py``).

Signals, strongest first: podman's ``/run/.containerenv``; the ``container=`` variable the
container manager gives PID 1 (what systemd-detect-virt reads); a container manager's name
in the process's cgroup path; ``/.dockerenv`` on an overlay root file system; a cgroup
namespace (``0::/``) on an overlay root. ``/.dockerenv`` alone is not enough: a machine
image made from a container image keeps the file (this project's own VMs have it, on an
ext4 root, with a kernel of their own). No signal, with the cgroup file readable: "none".
Nothing readable: unknown.
"""

from __future__ import annotations

from myaccel.facts.sysroot import Sysroot
from myaccel.model import Fact, known, unknown

CGROUP = "/proc/self/cgroup"
MOUNTINFO = "/proc/self/mountinfo"

# container= values (systemd's list of container managers) -> the name used here
_MANAGERS = {
    "docker": "docker",
    "podman": "podman",
    "oci": "container",
    "lxc": "lxc",
    "lxc-libvirt": "lxc",
    "systemd-nspawn": "systemd-nspawn",
    "wsl": "container",
    "proot": "container",
    "pouch": "container",
    "rkt": "container",
}

# a substring of a cgroup path -> the container kind it names
_CGROUP_MARKERS = (
    ("kubepods", "kubernetes"),
    ("/docker/", "docker"),
    ("docker-", "docker"),
    ("libpod-", "podman"),
    ("/libpod_parent/", "podman"),
    ("/lxc/", "lxc"),
    ("lxc.payload", "lxc"),
    ("/machine.slice/systemd-nspawn", "systemd-nspawn"),
    ("/machine.slice/machine-", "systemd-nspawn"),
)


def _root_fs_type(sr: Sysroot) -> str | None:
    """The file system type of ``/`` in the process's mount table, None when unreadable."""
    text = sr.read_text(MOUNTINFO)
    if text is None:
        return None
    found: str | None = None
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 7 or fields[4] != "/" or "-" not in fields[6:]:
            continue
        dash = fields.index("-", 6)
        if dash + 1 < len(fields):
            found = fields[dash + 1]  # the last mount on / is the one seen
    return found


def _pid1_container(sr: Sysroot) -> str | None:
    raw = sr.read_text("/proc/1/environ")
    if raw is None:
        return None
    for item in raw.split("\0"):
        if item.startswith("container="):
            value = item.partition("=")[2].strip()
            return _MANAGERS.get(value, "container") if value else None
    return None


def collect_container(sr: Sysroot) -> Fact[str]:
    if sr.exists("/run/.containerenv"):
        return known("podman", "/run/.containerenv")
    pid1 = _pid1_container(sr)
    if pid1 is not None:
        return known(pid1, "/proc/1/environ container=")
    cgroup = sr.read_text(CGROUP)
    for line in (cgroup or "").splitlines():
        path = line.split(":", 2)[-1]
        for marker, kind in _CGROUP_MARKERS:
            if marker in path:
                return known(kind, f"{CGROUP} ({path.strip()[:80]})")
    root_fs = _root_fs_type(sr)
    overlay = root_fs == "overlay"
    if sr.exists("/.dockerenv") and overlay:
        return known("docker", "/.dockerenv on an overlay root")
    v2_root = any(line.strip() == "0::/" for line in (cgroup or "").splitlines())
    if v2_root and overlay and cgroup is not None and len(cgroup.splitlines()) == 1:
        return known("container", f"{CGROUP} 0::/ (a cgroup namespace) on an overlay root")
    if cgroup is None:
        return unknown(f"{CGROUP} not readable: cannot tell whether this is a container", CGROUP)
    why = f"{CGROUP}: no container manager's path"
    if sr.exists("/.dockerenv"):
        why += f"; /.dockerenv present but / is {root_fs or 'unknown'}, not overlay"
    return known("none", why)
