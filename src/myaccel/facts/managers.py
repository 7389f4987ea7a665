"""Tuning daemons already present (tuned, A-Tune, bpftune) and what they enforce."""

from __future__ import annotations

from myaccel.facts.sysroot import Sysroot
from myaccel.model import Fact, ManagerFacts, known, unknown

TUNED_ACTIVE = "/etc/tuned/active_profile"
TUNED_DIRS = ("/etc/tuned", "/usr/lib/tuned")


def running(sr: Sysroot, names: set[str]) -> dict[str, bool]:
    found = dict.fromkeys(names, False)
    for p in sr.listdir("/proc"):
        if not p.isdigit():
            continue
        comm = sr.read_text(f"/proc/{p}/comm")
        if comm is not None and comm.strip() in found:
            found[comm.strip()] = True
    return found


def tuned_sysctls(sr: Sysroot, profile: str, depth: int = 0) -> dict[str, str]:
    """sysctl entries of a tuned profile, following ``include=`` (parents first)."""
    if depth > 5:
        return {}
    text = None
    for d in TUNED_DIRS:
        text = sr.read_text(f"{d}/{profile}/tuned.conf")
        if text is not None:
            break
    if text is None:
        return {}
    out: dict[str, str] = {}
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            continue
        if "=" not in line:
            continue
        k, _, v = line.partition("=")
        k, v = k.strip(), v.strip()
        if section == "main" and k == "include":
            for parent in v.split(","):
                out = {**tuned_sysctls(sr, parent.strip(), depth + 1), **out}
        elif section == "sysctl":
            out[k] = v
        elif section == "vm" and k == "transparent_hugepages":
            out["sys:kernel/mm/transparent_hugepage/enabled"] = v
        elif section == "scheduler" and k.startswith("sched_"):
            out[f"kernel.{k}"] = v
    return out


def collect_managers(sr: Sysroot) -> ManagerFacts:
    procs = running(sr, {"tuned", "atuned", "bpftune"})
    src = "/proc/*/comm"
    prof_f: Fact[str] = (
        sr.read_line(TUNED_ACTIVE)
        if (sr.read_text(TUNED_ACTIVE) or "").strip()
        else unknown("no active tuned profile", TUNED_ACTIVE)
    )
    sysctls: Fact[dict[str, str]] = (
        known(tuned_sysctls(sr, prof_f.value), f"{TUNED_DIRS[0]}/{prof_f.value}/tuned.conf")
        if prof_f.value and procs["tuned"]
        else unknown("tuned is not active", TUNED_ACTIVE)
    )
    return ManagerFacts(
        tuned_running=known(procs["tuned"], src),
        tuned_profile=prof_f,
        tuned_sysctls=sysctls,
        atune_running=known(procs["atuned"], src),
        bpftune_running=known(procs["bpftune"], src),
    )
