"""Kernel facts: version, where the scheduler knobs live on this kernel, file THP support."""

from __future__ import annotations

import gzip
import re

from myaccel.facts.sysroot import Sysroot
from myaccel.model import Fact, KernelFacts, known, unknown

PROC_SCHED = "/proc/sys/kernel"
DEBUG_SCHED = "/sys/kernel/debug/sched"
# Knob names (without the procfs "sched_" prefix). 6.6 (EEVDF) replaced min_granularity_ns
# by base_slice_ns and dropped latency_ns / wakeup_granularity_ns.
SCHED_KNOBS = (
    "base_slice_ns",
    "min_granularity_ns",
    "wakeup_granularity_ns",
    "latency_ns",
    "migration_cost_ns",
    "nr_migrate",
    "tunable_scaling",
    "child_runs_first",
    "preempt",
)


_RELEASE = re.compile(r"([0-9]{1,5})\.([0-9]{1,5})[A-Za-z0-9._+~-]*")


def parse_release(release: str) -> list[int] | None:
    m = re.match(r"([0-9]{1,5})\.([0-9]{1,5})", release)
    return [int(m.group(1)), int(m.group(2))] if m else None


def _release(sr: Sysroot) -> Fact[str]:
    release = sr.read("/proc/sys/kernel/osrelease")
    if release.known and not _RELEASE.fullmatch(release.value or ""):
        why = f"{release.source}: unexpected content {(release.value or '')[:40]!r}"
        return unknown(why, release.source)
    return release


def kernel_config(sr: Sysroot, release: str | None) -> tuple[str | None, str]:
    """The kernel build config text and where it came from."""
    if release:
        path = f"/boot/config-{release}"
        text = sr.read_text(path)
        if text is not None:
            return text, path
    p = sr.path("/proc/config.gz")
    try:
        return gzip.decompress(p.read_bytes()).decode(errors="replace"), "/proc/config.gz"
    except (OSError, EOFError):
        return None, f"/boot/config-{release or '?'}"


def config_option(text: str, name: str) -> bool | None:
    if re.search(rf"^{name}=[ym]$", text, re.M):
        return True
    if re.search(rf"^# {name} is not set$", text, re.M):
        return False
    return None


def collect_kernel(sr: Sysroot) -> KernelFacts:
    release = _release(sr)
    ver = sr.read_line("/proc/version")
    mm = parse_release(release.value) if release.known and release.value else None
    no_release = (
        f"no kernel release ({release.unknown})" if release.unknown else "no kernel release"
    )
    mm_f: Fact[list[int]] = known(mm, release.source) if mm else unknown(no_release, release.source)

    knobs: dict[str, Fact[str]] = {}
    proc_names = [n for n in sr.listdir(PROC_SCHED) if n.startswith("sched_")]
    debug_names = sr.listdir(DEBUG_SCHED)
    location: Fact[str]
    # sched_child_runs_first stays in procfs on new kernels: it proves nothing.
    moved = set(SCHED_KNOBS) - {"child_runs_first", "preempt"}
    if any(n[len("sched_") :] in moved for n in proc_names):
        location = known("procfs", PROC_SCHED)
        for n in SCHED_KNOBS:
            f = sr.read_line(f"{PROC_SCHED}/sched_{n}")
            if f.known or sr.exists(f.source):  # garbage: unknown with the reason
                knobs[n] = f
    elif debug_names:
        location = known("debugfs", DEBUG_SCHED)
        for n in SCHED_KNOBS:
            f = sr.read_line(f"{DEBUG_SCHED}/{n}")
            if f.known or sr.exists(f.source):  # garbage: unknown with the reason
                knobs[n] = f
    elif mm and mm >= [5, 13]:
        location = known("debugfs", f"kernel {release.value} >= 5.13")
        knobs["*"] = unknown(
            "debugfs is not mounted or not readable: mount -t debugfs none /sys/kernel/debug",
            DEBUG_SCHED,
        )
    else:
        location = unknown("no scheduler knobs found in procfs or debugfs", PROC_SCHED)

    cfg, cfg_src = kernel_config(sr, release.value if release.known else None)
    hugetext = sr.exists("/sys/kernel/mm/transparent_hugepage/hugetext_enabled")
    file_thp: Fact[bool]
    if hugetext:
        file_thp = known(True, "/sys/kernel/mm/transparent_hugepage/hugetext_enabled")
    elif cfg is not None:
        v = config_option(cfg, "CONFIG_READ_ONLY_THP_FOR_FS")
        file_thp = (
            known(v, cfg_src)
            if v is not None
            else unknown("CONFIG_READ_ONLY_THP_FOR_FS not in the kernel config", cfg_src)
        )
    else:
        file_thp = unknown("kernel config not available (/boot/config-*, /proc/config.gz)", cfg_src)

    madv: Fact[bool] = (
        known(mm >= [6, 1], release.source) if mm else unknown(no_release, release.source)
    )
    return KernelFacts(
        release=release,
        version_major_minor=mm_f,
        version=ver,
        sched_location=location,
        sched_knobs=knobs,
        sched_autogroup_enabled=sr.read_int(f"{PROC_SCHED}/sched_autogroup_enabled"),
        file_thp=file_thp,
        madv_collapse=madv,
    )
