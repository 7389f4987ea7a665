"""Each need checked on this host: found (with the tool's version, the kernel's value, the
free space) or missing, and the line that fixes it for this host's package manager."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from myaccel import proc
from myaccel.doctor.needs import COMMANDS, Need
from myaccel.paths import myaccel_home
from myaccel.units import format_bytes

GIB = 1024**3
# a sandbox with the quick profile's dataset and its snapshots (measured: 1.1-1.6 GiB)
DISK_FLOOR = 4 * GIB


@dataclass(frozen=True)
class Finding:
    need: Need
    ok: bool
    found: str  # the path and version, the value read, or why it is missing

    @property
    def blocking(self) -> bool:
        return self.need.required and not self.ok


def package_manager(os_release: str | None = None) -> str:
    """``apt-get`` or ``dnf``, from /etc/os-release (Debian and Ubuntu: apt-get)."""
    text = os_release
    if text is None:
        try:
            text = Path("/etc/os-release").read_text()
        except OSError:
            text = ""
    ids = " ".join(
        line.split("=", 1)[1].strip().strip('"').lower()
        for line in text.splitlines()
        if line.startswith(("ID=", "ID_LIKE="))
    ).split()
    rpm = {"fedora", "rhel", "centos", "rocky", "almalinux", "ol", "amzn"}
    return "dnf" if rpm & set(ids) else "apt-get"


def _version(path: str, args: tuple[str, ...]) -> str:
    if not args:
        return "present"
    done = proc.run([path, *args], timeout_s=10)
    lines = [ln.strip() for ln in (done.stdout + "\n" + done.stderr).splitlines() if ln.strip()]
    return lines[0][:60] if lines else "?"


def _which(name: str) -> str | None:
    path = proc.which(name)
    if path is None and name.startswith("inferno-"):  # also where `myaccel profile` looks
        from myaccel.errors import ToolMissing
        from myaccel.profile.record import find_inferno

        try:
            path = find_inferno(name)
        except ToolMissing:
            return None
    return path


def _tool(need: Need) -> Finding:
    for name in (need.name, *need.alternatives):
        path = _which(name)
        if path is not None:
            return Finding(need, True, f"{path} ({_version(path, need.version_args)})")
    return Finding(need, False, "not installed")


def _perf_events() -> tuple[bool, str]:
    if os.geteuid() == 0:
        return True, "root"
    try:
        level = int(Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip())
    except (OSError, ValueError):
        return False, "perf_event_paranoid unreadable"
    return level <= 1, f"perf_event_paranoid {level}"


def _kernel(need: Need) -> Finding:
    if need.name == "perf events":
        ok, found = _perf_events()
        return Finding(need, ok, found)
    if need.name == "debugfs":
        try:
            ok = Path("/sys/kernel/debug/sched").is_dir()
        except PermissionError:  # /sys/kernel/debug is root's only: mounted, not readable
            return Finding(need, False, "mounted, readable by root only")
        return Finding(need, ok, "mounted" if ok else "/sys/kernel/debug/sched absent")
    if need.name == "systemd":
        ok = Path("/run/systemd/system").is_dir()
        return Finding(need, ok, "PID 1 is systemd" if ok else "systemd is not running")
    raise ValueError(f"unknown kernel feature {need.name!r}")


def _disk(need: Need, home: Path) -> Finding:
    probe = home
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    text = f"{format_bytes(free)} free under {home}"
    return Finding(need, free >= DISK_FLOOR, text if free >= DISK_FLOOR else f"only {text}")


def check(need: Need, home: Path | None = None) -> Finding:
    if need.kind == "tool":
        return _tool(need)
    if need.kind == "root":
        root = os.geteuid() == 0
        return Finding(need, root, "running as root" if root else f"uid {os.geteuid()}")
    if need.kind == "kernel":
        return _kernel(need)
    return _disk(need, home or myaccel_home())


def check_commands(names: list[str]) -> dict[str, list[Finding]]:
    """Each command's findings; a need shared by commands is checked once."""
    seen: dict[Need, Finding] = {}
    out: dict[str, list[Finding]] = {}
    for name in names:
        out[name] = []
        for need in COMMANDS[name]:
            key = Need(need.name, need.kind, "", True)
            if key not in seen:
                seen[key] = check(need)
            f = seen[key]
            out[name].append(Finding(need, f.ok, f.found))
    return out


DISK_FIX = "free some space, or set MYACCEL_HOME to a larger disk"


def fixes(findings: list[Finding], manager: str) -> list[str]:
    """The lines that install what is missing: one package-manager line, then the rest."""
    packages: list[str] = []
    other: list[str] = []
    for f in findings:
        n = f.need
        if f.ok:
            continue
        pkg = n.apt if manager == "apt-get" else n.dnf
        if n.kind == "tool" and pkg:
            if pkg not in packages:
                packages.append(pkg)
        elif n.fix and n.fix not in other:
            other.append(n.fix)
        elif n.kind == "root" and "run it with sudo (or as root)" not in other:
            other.append("run it with sudo (or as root)")
        elif n.name == "perf events" and n.required:
            other.append("sysctl kernel.perf_event_paranoid=1 (or run as root)")
        elif n.kind == "disk" and DISK_FIX not in other:
            other.append(DISK_FIX)
    head = [f"{manager} install {' '.join(packages)}"] if packages else []
    return head + other
