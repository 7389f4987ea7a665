"""Memory facts: /proc/meminfo, cgroup limits (v1 and v2), huge pages, THP, vm sysctls."""

from __future__ import annotations

import re

from myaccel.facts.cgroup import ancestors, cgroup_paths
from myaccel.facts.sysroot import Sysroot, parse_int, parse_size
from myaccel.model import Fact, MemoryFacts, known, unknown

MEMINFO = "/proc/meminfo"
THP = "/sys/kernel/mm/transparent_hugepage"
UNLIMITED_V1 = 1 << 62  # v1 reports "no limit" as a page-rounded LONG_MAX


def parse_meminfo(text: str) -> dict[str, int]:
    return parse_meminfo_checked(text)[0]


def parse_meminfo_checked(text: str) -> tuple[dict[str, int], dict[str, str]]:
    """(values, why) where ``why`` maps the keys whose value is garbage to the reason."""
    out: dict[str, int] = {}
    bad: dict[str, str] = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        v = v.strip()
        if not v:
            continue
        try:
            out[k.strip()] = parse_size(v) if v.endswith("kB") else parse_int(v.split()[0])
        except ValueError as exc:
            bad[k.strip()] = f"{MEMINFO}: {k.strip()[:40]!r} is {v[:40]!r}: {exc}"
            continue
        if out[k.strip()] < 0:
            bad[k.strip()] = f"{MEMINFO}: {k.strip()[:40]!r} is negative ({v[:40]!r})"
            del out[k.strip()]
    return out, bad


_CHOICE = re.compile(r"[A-Za-z0-9_+-]+")


def selected_choice(text: str) -> str:
    """``always [madvise] never`` -> ``madvise``; a plain value is returned as is.

    Raises ValueError when the text is not such a choice list (garbage)."""
    t = text.strip()
    if "[" in t and "]" in t:
        t = t[t.index("[") + 1 : t.index("]")]
    if not _CHOICE.fullmatch(t):
        raise ValueError(f"unexpected content {text.strip()[:40]!r}")
    return t


def cgroup_memory(sr: Sysroot, cgroup_file: str) -> tuple[Fact[str], Fact[str], Fact[int]]:
    """(version, path, limit) for the process whose /proc/PID/cgroup is ``cgroup_file``.

    The limit is the smallest one on the path from the cgroup up to the root (a parent's
    limit binds its children). Known None means no limit."""
    text = sr.read_text(cgroup_file)
    if text is None:
        r = unknown("cannot read the process's cgroup file", cgroup_file)
        return r, r, r
    v2_path, v1_path = cgroup_paths(text, "memory")
    if v1_path is not None:
        base = "/sys/fs/cgroup/memory"
        limit = _walk_limit(sr, base, v1_path, "memory.limit_in_bytes")
        return known("v1", cgroup_file), known(v1_path, cgroup_file), limit
    if v2_path is not None:
        limit = _walk_limit(sr, "/sys/fs/cgroup", v2_path, "memory.max")
        return known("v2", cgroup_file), known(v2_path, cgroup_file), limit
    r = unknown("no memory controller in the cgroup file", cgroup_file)
    return known("none", cgroup_file), r, r


def _walk_limit(sr: Sysroot, base: str, path: str, fname: str) -> Fact[int]:
    best: int | None = None
    binding = ""
    seen: list[str] = []
    for d in ancestors(base, path):
        got = sr.read_present(f"{d}/{fname}")
        if got is None:
            continue
        if not got.known:  # there but unreadable: the limit is unknown, not "no limit"
            return unknown(f"{d}/{fname}: {got.unknown}", f"{d}/{fname}")
        seen.append(f"{d}/{fname}")
        raw = (got.value or "").strip()
        if raw == "max":
            continue
        try:
            val = parse_int(raw)
        except ValueError:
            return unknown(f"{d}/{fname}: unexpected content {raw[:40]!r}", f"{d}/{fname}")
        if val < 0:
            return unknown(f"{d}/{fname}: negative limit {raw[:40]!r}", f"{d}/{fname}")
        if val >= UNLIMITED_V1:
            continue
        if best is None or val < best:
            best, binding = val, f"{d}/{fname}"
    if not seen:
        return unknown(f"no {fname} readable for {path}", f"{base}{path}/{fname}")
    if best is not None:
        return known(best, binding)
    # None: no limit anywhere on the path (every file on it says so)
    return Fact[int](value=None, source=seen[0] if len(seen) == 1 else f"{seen[0]} and parents")


def _pmd_page(sr: Sysroot, hugepage_size: Fact[int]) -> Fact[int]:
    """THP's PMD page size (``hpage_pmd_size``), else the default hugetlb page size, which
    is the PMD size on the usual kernels."""
    path = f"{THP}/hpage_pmd_size"
    f = sr.read_as(path, parse_int)
    if f.known and f.value and f.value > 0:
        return f
    if hugepage_size.known and hugepage_size.value:
        return known(
            hugepage_size.value, f"{hugepage_size.source} Hugepagesize ({path}: {f.unknown})"
        )
    return unknown(f.unknown or "not a positive size", path)


def collect_memory(sr: Sysroot) -> MemoryFacts:
    text = sr.read_text(MEMINFO)
    mi, bad = parse_meminfo_checked(text) if text else ({}, {})

    def m(key: str) -> Fact[int]:
        if text is None:
            return unknown("cannot read /proc/meminfo", MEMINFO)
        if not text.strip():
            return unknown("/proc/meminfo is empty", MEMINFO)
        if key in bad:
            return unknown(bad[key], MEMINFO)
        if key not in mi:
            return unknown(f"{key} not in /proc/meminfo", MEMINFO)
        return known(mi[key], MEMINFO)

    total = m("MemTotal")
    cg_ver, cg_path, cg_limit = cgroup_memory(sr, "/proc/self/cgroup")
    if total.known and total.value is not None:
        eff_v = total.value
        src = MEMINFO
        if cg_limit.known and cg_limit.value is not None and cg_limit.value < eff_v:
            eff_v, src = cg_limit.value, cg_limit.source
        effective: Fact[int] = known(eff_v, src)
    else:
        effective = unknown(total.unknown or "no MemTotal", MEMINFO)

    hp_size = m("Hugepagesize")

    def thp(name: str) -> Fact[str]:
        f = sr.read(f"{THP}/{name}")
        if not f.known or f.value is None:
            return f
        try:
            return known(selected_choice(f.value), f.source)
        except ValueError as exc:
            return unknown(f"{f.source}: {exc}", f.source)

    hugetext = sr.read(f"{THP}/hugetext_enabled")
    if not hugetext.known:
        hugetext = unknown(
            "no hugetext control (an Alibaba Cloud Linux feature); mainline kernels use "
            "file THP via khugepaged or MADV_COLLAPSE",
            f"{THP}/hugetext_enabled",
        )

    vm = "/proc/sys/vm"
    return MemoryFacts(
        total_bytes=total,
        available_bytes=m("MemAvailable"),
        swap_total_bytes=m("SwapTotal"),
        swap_free_bytes=m("SwapFree"),
        cgroup_version=cg_ver,
        cgroup_path=cg_path,
        cgroup_limit_bytes=cg_limit,
        effective_limit_bytes=effective,
        hugepages_total=m("HugePages_Total"),
        hugepages_free=m("HugePages_Free"),
        hugepage_size_bytes=hp_size,
        pmd_page_bytes=_pmd_page(sr, hp_size),
        thp_enabled=thp("enabled"),
        thp_defrag=thp("defrag"),
        thp_shmem_enabled=thp("shmem_enabled"),
        thp_hugetext_enabled=hugetext,
        swappiness=sr.read_int(f"{vm}/swappiness"),
        dirty_ratio=sr.read_int(f"{vm}/dirty_ratio"),
        dirty_background_ratio=sr.read_int(f"{vm}/dirty_background_ratio"),
        dirty_bytes=sr.read_int(f"{vm}/dirty_bytes"),
        dirty_background_bytes=sr.read_int(f"{vm}/dirty_background_bytes"),
        dirty_expire_centisecs=sr.read_int(f"{vm}/dirty_expire_centisecs"),
        dirty_writeback_centisecs=sr.read_int(f"{vm}/dirty_writeback_centisecs"),
        numa_balancing=_numa_balancing(sr),
    )


def _numa_balancing(sr: Sysroot) -> Fact[int]:
    f = sr.read_int("/proc/sys/kernel/numa_balancing")
    if not f.known:
        return unknown(
            "not present (kernel without NUMA balancing, or a single-node machine)",
            "/proc/sys/kernel/numa_balancing",
        )
    return f
