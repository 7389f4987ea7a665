"""What each command needs from the host, as data: the tools it runs (with their Debian and
Fedora/RHEL packages), root, kernel features and disk. ``required`` means the command
cannot do its job without it; the others narrow what it can do (said in ``why``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

Kind = Literal["tool", "root", "kernel", "disk"]


@dataclass(frozen=True)
class Need:
    name: str  # the tool's name, or "root", a kernel feature, "disk"
    kind: Kind
    why: str
    required: bool = True
    apt: str | None = None  # Debian/Ubuntu package
    dnf: str | None = None  # Fedora/RHEL package (EPEL for sysbench)
    alternatives: tuple[str, ...] = ()  # other tools that do as well (make for ninja)
    fix: str | None = None  # how to get it when no package has it
    version_args: tuple[str, ...] = ("--version",)  # () : the tool prints no version


def _tool(name: str, why: str, apt: str, dnf: str | None = None, **kw: object) -> Need:
    return Need(name, "tool", why, apt=apt, dnf=dnf or apt, **kw)  # type: ignore[arg-type]


SYSBENCH = _tool("sysbench", "runs every benchmark", "sysbench")
FIO = _tool("fio", "--measure-storage: the disk's IOPS for the I/O rules", "fio", required=False)
PERF = _tool("perf", "samples the server (profile), PMU facts", "linux-perf", "perf")
NUMACTL = _tool(
    "numactl", "NUMA placement of sandboxes (tune)", "numactl", required=False, version_args=()
)
TASKSET = _tool("taskset", "pins the benchmark client's CPUs", "util-linux", required=False)
VALGRIND = _tool("valgrind", "instruction counts where no PMU exists", "valgrind", required=False)
BACKUP = _tool(
    "mariadb-backup",
    "copies a running MariaDB for a clone (MySQL uses its clone plugin)",
    "mariadb-backup",
    required=False,
)
SYSTEMCTL = _tool(
    "systemctl", "restarts a systemd unit (--server-unit, --swap-binary)", "systemd",
    required=False,
)  # fmt: skip
INFERNO = Need(
    "inferno-flamegraph",
    "tool",
    "flame graphs (the tables and findings work without it)",
    required=False,
    fix="cargo install inferno --locked --version 0.12.8",
    version_args=(),  # inferno prints no version
)
GCC = _tool("gcc", "compiles the server", "gcc")
GXX = _tool("g++", "compiles the server", "g++", "gcc-c++")
CMAKE = _tool("cmake", "configures the server's build", "cmake")
NINJA = _tool("ninja", "drives the build (or make)", "ninja-build", alternatives=("make",))
BISON = _tool(
    "bison", "the SQL parser, where the source holds no generated one", "bison", required=False
)

ROOT = Need("root", "root", "host layers (sysctl, THP, IRQs, systemd drop-ins) and OS files")
ROOT_OPTIONAL = Need(
    "root", "root", "only for the host layers (os, numa, nic); the server layer needs none",
    required=False,
)  # fmt: skip
PERF_EVENTS = Need(
    "perf events", "kernel", "perf may sample other processes (perf_event_paranoid <= 1, or root)"
)
DEBUGFS = Need(
    "debugfs", "kernel", "scheduler knobs (/sys/kernel/debug/sched) for the os layer",
    required=False,
)  # fmt: skip
SYSTEMD = Need(
    "systemd", "kernel", "restarts through the server's unit, --swap-binary", required=False
)
DISK = Need("disk", "disk", "room under MYACCEL_HOME for sandboxes, datasets and snapshots")


def optional(need: Need, why: str | None = None) -> Need:
    """``need`` as a nice-to-have for a command (``why``: what it adds there)."""
    return replace(need, required=False, why=why or need.why)


BENCH = (SYSBENCH, TASKSET, DISK)
COMMANDS: dict[str, tuple[Need, ...]] = {
    "probe": (FIO, optional(PERF, "PMU facts (which hardware events count)")),
    "plan": (FIO, DEBUGFS),
    "apply": (ROOT_OPTIONAL, SYSTEMCTL, DEBUGFS, SYSTEMD),
    "rollback": (ROOT_OPTIONAL, SYSTEMCTL),
    "bench": BENCH,
    "ab": (*BENCH, FIO),
    "accelerate": (*BENCH, FIO, BACKUP, SYSTEMCTL, SYSTEMD),
    "clone": (BACKUP, DISK),
    "capture": (),
    "tune": (*BENCH, NUMACTL),
    "profile": (
        PERF,
        PERF_EVENTS,
        INFERNO,
        VALGRIND,
        optional(SYSBENCH, "a load of its own (--workload)"),
    ),
    "build": (GCC, GXX, CMAKE, NINJA, BISON, optional(VALGRIND, "verify-build's measures"), DISK),
    "report": (),
}
