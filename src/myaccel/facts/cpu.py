"""CPU facts from /proc/cpuinfo and /sys/devices/system/{cpu,node} (never lscpu text,
which is localized in the wild)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from myaccel.cpulist import MAX_CPU, format_cpu_list
from myaccel.facts.sysroot import Sysroot, parse_size
from myaccel.facts.virt import collect_hypervisor
from myaccel.model import CacheLevel, CpuFacts, Fact, NumaNode, known, same_named, unknown

CPUINFO = "/proc/cpuinfo"
SYS_CPU = "/sys/devices/system/cpu"
SYS_NODE = "/sys/devices/system/node"
CACHE_TYPES = ("Data", "Instruction", "Unified")
_DIGITS = re.compile(r"[0-9]+")
_ARCH = re.compile(r"[a-z][a-z0-9_]*")
_GOVERNOR = re.compile(r"[A-Za-z0-9_-]+")

# aarch64 MIDR implementer -> vendor, and (implementer, part) -> (model, family id).
# Sources: Arm Technical Reference Manuals (MIDR_EL1 part numbers) and the Linux kernel's
# arch/arm64/include/asm/cputype.h; KNOWLEDGE.md section 7. Phytium (0x70): util-linux's
# lscpu-arm.c part table (whose name FTC310 for part 0x303 is used; Phytium's own kernel
# headers call it FTC303) and QEMU's Phytium CPU definitions (0x662, 0x663, 0x862).
ARM_IMPLEMENTERS = {
    0x41: "ARM",
    0x42: "Broadcom",
    0x43: "Cavium",
    0x46: "Fujitsu",
    0x48: "HiSilicon",
    0x4E: "NVIDIA",
    0x50: "APM",
    0x51: "Qualcomm",
    0x61: "Apple",
    0x70: "Phytium",
    0xC0: "Ampere",
}
ARM_PARTS: dict[tuple[int, int], tuple[str, str]] = {
    (0x48, 0xD01): ("Kunpeng 920 (TSV110)", "kunpeng920"),
    (0x48, 0xD02): ("Kunpeng 920B (HIP09)", "hisilicon-hip09"),
    (0x48, 0xD06): ("HiSilicon HIP12", "hisilicon-hip12"),
    (0x41, 0xD0B): ("Cortex-A76", "cortex-a76"),
    (0x41, 0xD0D): ("Cortex-A77", "cortex-a77"),
    (0x41, 0xD41): ("Cortex-A78", "cortex-a78"),
    (0x41, 0xD44): ("Cortex-X1", "cortex-x1"),
    (0x41, 0xD47): ("Cortex-A710", "cortex-a710"),
    (0x41, 0xD4A): ("Neoverse E1", "neoverse-e1"),
    (0x41, 0xD83): ("Neoverse V3AE", "neoverse-v3"),
    (0x43, 0x0AF): ("ThunderX2", "thunderx2"),
    (0x42, 0x516): ("ThunderX2 (Vulcan)", "thunderx2"),
    (0x46, 0x001): ("A64FX", "a64fx"),
    (0xC0, 0xAC4): ("AmpereOne (AC04)", "ampereone"),
    (0x41, 0xD08): ("Cortex-A72", "cortex-a72"),
    (0x41, 0xD0C): ("Neoverse N1", "neoverse-n1"),
    (0x41, 0xD40): ("Neoverse V1", "neoverse-v1"),
    (0x41, 0xD49): ("Neoverse N2", "neoverse-n2"),
    (0x41, 0xD4F): ("Neoverse V2", "neoverse-v2"),
    (0x41, 0xD8E): ("Neoverse N3", "neoverse-n3"),
    (0x41, 0xD84): ("Neoverse V3", "neoverse-v3"),
    (0xC0, 0xAC3): ("AmpereOne", "ampereone"),
    (0x50, 0x000): ("X-Gene", "xgene"),
    (0x70, 0x303): ("Phytium FTC310", "phytium-ftc310"),
    (0x70, 0x660): ("Phytium FTC660", "phytium-ftc660"),
    (0x70, 0x661): ("Phytium FTC661", "phytium-ftc661"),
    (0x70, 0x662): ("Phytium FTC662", "phytium-ftc662"),
    (0x70, 0x663): ("Phytium FTC663", "phytium-ftc663"),
    (0x70, 0x664): ("Phytium FTC664", "phytium-ftc664"),
    (0x70, 0x862): ("Phytium FTC862", "phytium-ftc862"),
}
# Marketing names of platforms built on those cores, for the human view only.
ARM_PLATFORMS = {
    "kunpeng920": "Huawei Kunpeng 920",
    "neoverse-n1": "e.g. AWS Graviton2, Ampere Altra",
    "neoverse-v1": "e.g. AWS Graviton3",
    "neoverse-n2": "e.g. Alibaba Yitian 710",
    "neoverse-v2": "e.g. AWS Graviton4, NVIDIA Grace",
    "hisilicon-hip09": "Huawei Kunpeng 920 new generation (920B)",
    "ampereone": "Ampere AmpereOne",
    "phytium-ftc662": "e.g. Phytium FT-2000+/64",
}


def _cpuinfo_blocks(text: str) -> list[dict[str, str]]:
    blocks: list[dict[str, str]] = []
    cur: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if cur:
                blocks.append(cur)
                cur = {}
            continue
        if ":" in line:
            k, _, v = line.partition(":")
            cur[k.strip()] = v.strip()
    if cur:
        blocks.append(cur)
    return blocks


_HEX_OR_DEC = re.compile(r"0[xX][0-9a-fA-F]+|[0-9]+")


def _midr_field(block: dict[str, str], key: str, bits: int) -> Fact[int]:
    """A MIDR field of /proc/cpuinfo (``CPU implementer``: 8 bits, ``CPU part``: 12 bits)."""
    raw = block.get(key)
    if raw is None:
        return unknown(f"no {key!r} line in {CPUINFO}", CPUINFO)
    if not _HEX_OR_DEC.fullmatch(raw):
        return unknown(f"{key!r} in {CPUINFO} is {raw[:24]!r}, not a number", CPUINFO)
    v = int(raw, 0)
    if v >= 1 << bits:
        return unknown(f"{key!r} in {CPUINFO} is {raw[:24]!r}, wider than {bits} bits", CPUINFO)
    return known(v, CPUINFO)


class _CpuId:
    """What /proc/cpuinfo says about the CPU model (before topology): the ``FIELDS`` of
    ``CpuFacts`` that carry the same names."""

    FIELDS = ("arch", "vendor", "model", "family", "implementer", "part", "model_name", "features")

    def __init__(self, arch: Fact[str], why: str) -> None:
        self.arch = arch
        self.vendor: Fact[str] = unknown(why, CPUINFO)
        self.model: Fact[str] = unknown(why, CPUINFO)
        self.family: Fact[str] = unknown(why, CPUINFO)
        self.implementer: Fact[str] = unknown(why, CPUINFO)
        self.part: Fact[str] = unknown(why, CPUINFO)
        self.model_name: Fact[str] = unknown(f"no model name in {CPUINFO}", CPUINFO)
        self.features: Fact[list[str]] = unknown(why, CPUINFO)


def _arch(sr: Sysroot, text: str | None, first: dict[str, str]) -> Fact[str]:
    arch_file = sr.read("/proc/sys/kernel/arch")
    if arch_file.known and arch_file.value:
        if not _ARCH.fullmatch(arch_file.value):
            return unknown(
                f"/proc/sys/kernel/arch: unexpected content {arch_file.value[:40]!r}",
                arch_file.source,
            )
        return arch_file
    if "CPU implementer" in first:
        return known("aarch64", CPUINFO)
    if "vendor_id" in first:
        if "flags" not in first:
            return unknown(
                f"no flags line in {CPUINFO} (truncated?): cannot tell x86_64 from i686", CPUINFO
            )
        return known("x86_64" if "lm" in first["flags"].split() else "i686", CPUINFO)
    if not text:
        return unknown(f"cannot read {CPUINFO}" if text is None else f"{CPUINFO} is empty", CPUINFO)
    return unknown(f"unrecognized {CPUINFO} layout (truncated or garbage?)", CPUINFO)


def _features(first: dict[str, str], key: str) -> Fact[list[str]]:
    if key not in first:
        return unknown(f"no {key!r} line in {CPUINFO} (truncated?)", CPUINFO)
    return known(first[key].split(), CPUINFO)


def _arm_id(cid: _CpuId, first: dict[str, str]) -> None:
    impl = _midr_field(first, "CPU implementer", 8)
    prt = _midr_field(first, "CPU part", 12)
    if impl.known and impl.value is not None:
        cid.implementer = known(f"0x{impl.value:02x}", CPUINFO)
        name = ARM_IMPLEMENTERS.get(impl.value, f"unknown implementer 0x{impl.value:02x}")
        cid.vendor = known(name, CPUINFO)
    else:
        cid.implementer = cid.vendor = unknown(impl.unknown or "?", CPUINFO)
    if prt.known and prt.value is not None:
        cid.part = known(f"0x{prt.value:03x}", CPUINFO)
    else:
        cid.part = unknown(prt.unknown or "?", CPUINFO)
    if impl.value is None or prt.value is None:
        why = impl.unknown or prt.unknown or "?"
        cid.model = cid.family = unknown(why, CPUINFO)
    else:
        decoded = ARM_PARTS.get((impl.value, prt.value))
        if decoded is None and impl.value == 0xC0:
            decoded = (f"Ampere part 0x{prt.value:03x}", "ampere")
        if decoded is None and impl.value == 0x70:
            decoded = (f"Phytium part 0x{prt.value:03x}", "phytium")
        if decoded is None:
            decoded = (f"{cid.vendor.value} part 0x{prt.value:03x}", "arm-other")
        cid.model = known(decoded[0], CPUINFO)
        cid.family = known(decoded[1], CPUINFO)
    if "model name" in first:
        cid.model_name = known(first["model name"], CPUINFO)
    cid.features = _features(first, "Features")


def _x86_id(cid: _CpuId, first: dict[str, str]) -> None:
    v = first["vendor_id"]
    cid.vendor = known(v, CPUINFO)
    if "model name" in first:
        cid.model_name = known(first["model name"], CPUINFO)
    cid.model = cid.model_name
    fam = {"GenuineIntel": "x86-intel", "AuthenticAMD": "x86-amd"}.get(v, "x86-other")
    cid.family = known(fam, CPUINFO)
    na = unknown("not an aarch64 CPU", CPUINFO)
    cid.implementer = cid.part = na
    cid.features = _features(first, "flags")


def _cpu_id(sr: Sysroot) -> tuple[_CpuId, list[dict[str, str]]]:
    text = sr.read_text(CPUINFO)
    blocks = _cpuinfo_blocks(text) if text else []
    procs = [b for b in blocks if "processor" in b]
    first = procs[0] if procs else (blocks[0] if blocks else {})
    if not text:
        why = f"cannot read {CPUINFO}" if text is None else f"{CPUINFO} is empty"
    else:
        why = f"unrecognized {CPUINFO} layout (truncated or garbage?)"
    cid = _CpuId(_arch(sr, text, first), why)
    if "CPU implementer" in first:
        _arm_id(cid, first)
    elif "vendor_id" in first:
        _x86_id(cid, first)
    elif cid.arch.known:
        na = unknown(f"not an aarch64 CPU ({cid.arch.value})", CPUINFO)
        if cid.arch.value != "aarch64":
            cid.implementer = cid.part = na
    return cid, procs


class _ArchFeatures:
    """CPU features whose meaning depends on the architecture, with consistent reasons."""

    def __init__(self, arch: Fact[str], features: Fact[list[str]]) -> None:
        self.arch = arch
        self.features = features
        self.names = set(features.value or [])

    def feat(self, *names: str) -> Fact[bool]:
        if not self.features.known:
            return unknown(self.features.unknown or "no CPU flags", CPUINFO)
        return known(any(n in self.names for n in names), CPUINFO)

    def on(self, archs: tuple[str, ...], *names: str) -> Fact[bool]:
        """The feature on one of ``archs``; unknown with the same reason elsewhere."""
        a = self.arch.value
        if not self.arch.known or a is None:
            return unknown(f"architecture unknown ({self.arch.unknown})", self.arch.source)
        if not a.startswith(archs):
            return unknown(f"not applicable on {a}", self.arch.source)
        return self.feat(*names)


def _online(sr: Sysroot, procs: list[dict[str, str]]) -> tuple[Fact[str], list[int], Fact[int]]:
    """(online_cpus, the CPU numbers to read topology for, logical_cpus)."""
    path = f"{SYS_CPU}/online"
    parsed = sr.read_cpu_list(path)
    from_cpuinfo: list[int] = []
    for b in procs:
        n = b["processor"]
        if _DIGITS.fullmatch(n) and int(n) < MAX_CPU:
            from_cpuinfo.append(int(n))
    if parsed.known and parsed.value:
        raw = sr.read(path)
        return known(raw.value or "", path), parsed.value, known(len(parsed.value), path)
    cpus = sorted(set(from_cpuinfo))
    logical: Fact[int] = (
        known(len(cpus), CPUINFO) if cpus else unknown(f"no CPU list ({parsed.unknown})", SYS_CPU)
    )
    if sr.exists(path):
        # present but unreadable or garbage: say so, and go on with /proc/cpuinfo's list
        return unknown(parsed.unknown or "?", path), cpus, logical
    if cpus:
        return known(format_cpu_list(cpus), CPUINFO), cpus, logical
    return unknown(parsed.unknown or "?", path), cpus, logical


def _topology(sr: Sysroot, online_list: list[int]) -> tuple[Fact[int], ...]:
    """(sockets, cores_per_socket, threads_per_core, physical_cores)."""
    topo_src = f"{SYS_CPU}/cpu*/topology"
    packages: dict[int, set[int]] = {}
    cores: set[tuple[int, int, int]] = set()
    siblings_sizes: list[int] = []
    why: str | None = None if online_list else "no online CPU list"
    why_tpc: str | None = None
    for c in online_list if why is None else []:
        d = f"{SYS_CPU}/cpu{c}/topology"
        pkg = sr.read_int(f"{d}/physical_package_id")
        core = sr.read_int(f"{d}/core_id")
        clus = sr.read_int(f"{d}/cluster_id")
        if not (sr.exists(f"{d}/physical_package_id") and sr.exists(f"{d}/core_id")):
            why = "topology files missing under /sys/devices/system/cpu"
            break
        bad = next((f for f in (pkg, core, clus) if not f.known and sr.exists(f.source)), None)
        if bad is not None:
            why = bad.unknown
            break
        # Some firmware reports -1 for the package on arm64 (no PPTT): treat as one package.
        p = max(pkg.get(0), 0)
        packages.setdefault(p, set()).add(c)
        cores.add((p, clus.get(0), core.get(0)))
        sib_path = f"{d}/thread_siblings_list"
        if why_tpc is None and sr.exists(sib_path):
            sib = sr.read_cpu_list(sib_path)
            if not sib.known or not sib.value:
                why_tpc = sib.unknown or f"{sib_path} is empty"
            elif c not in sib.value:
                why_tpc = f"{sib_path} ({format_cpu_list(sib.value)}) does not contain cpu{c}"
            else:
                siblings_sizes.append(len(sib.value))
    if why is not None:
        u = unknown(why, topo_src)
        return u, u, u, u
    sockets: Fact[int] = known(len(packages), topo_src)
    if why_tpc is not None:
        u = unknown(why_tpc, topo_src)
        return sockets, u, u, u
    tpc = max(Counter(siblings_sizes).most_common(1)[0][0], 1) if siblings_sizes else 1
    n = len(online_list)
    return (
        sockets,
        known(n // tpc // max(len(packages), 1), topo_src),
        known(tpc, topo_src),
        known(n // tpc, topo_src),
    )


def collect_cpu(sr: Sysroot) -> CpuFacts:
    cid, procs = _cpu_id(sr)
    af = _ArchFeatures(cid.arch, cid.features)
    crc32 = (
        af.on(("x86", "i386", "i586", "i686"), "sse4_2")
        if (cid.arch.value or "").startswith(("x86", "i386", "i586", "i686"))
        else af.on(("aarch64",), "crc32")
    )
    online, online_list, logical = _online(sr, procs)
    sockets, cps, threads_per_core, physical = _topology(sr, online_list)
    x86 = ("x86", "i386", "i586", "i686")
    return CpuFacts(
        **same_named(cid, _CpuId.FIELDS),
        logical_cpus=logical,
        online_cpus=online,
        sockets=sockets,
        cores_per_socket=cps,
        threads_per_core=threads_per_core,
        physical_cores=physical,
        numa_nodes=collect_numa(sr),
        caches=collect_caches(sr, online_list),
        has_lse=af.on(("aarch64",), "atomics"),
        has_sb=af.on(("aarch64",), "sb"),
        has_sve=af.on(("aarch64",), "sve"),
        has_crc32=crc32,
        has_avx2=af.on(x86, "avx2"),
        has_avx512=af.on(x86, "avx512f"),
        governor=collect_governor(sr, online_list),
        hypervisor=collect_hypervisor(sr, cid.features),
    )


def _node_memtotal(sr: Sysroot, path: str) -> int | None:
    """MemTotal of a node meminfo file; None when absent. Garbage raises ValueError."""
    for line in (sr.read_text(path) or "").splitlines():
        if "MemTotal:" in line:
            tail = line.split("MemTotal:", 1)[1]
            try:
                return parse_size(tail)
            except ValueError as exc:
                raise ValueError(f"{path}: MemTotal {tail.strip()[:24]!r}: {exc}") from None
    return None


def collect_numa(sr: Sysroot) -> Fact[list[NumaNode]]:
    names = [n for n in sr.listdir(SYS_NODE) if n.startswith("node") and _DIGITS.fullmatch(n[4:])]
    if not names:
        if sr.exists(SYS_NODE):
            return unknown("no node directories", SYS_NODE)
        return unknown("kernel without NUMA support in sysfs", SYS_NODE)
    src = f"{SYS_NODE}/node*/{{cpulist,meminfo}}"
    nodes: list[NumaNode] = []
    for name in sorted(names, key=lambda n: int(n[4:])):
        path = f"{SYS_NODE}/{name}/cpulist"
        text = sr.read_text(path)
        cpus = sr.read_cpu_list(path)
        if text is not None and text.strip() and not cpus.known:
            return unknown(cpus.unknown or "?", src)
        try:
            mem = _node_memtotal(sr, f"{SYS_NODE}/{name}/meminfo")
        except ValueError as exc:
            return unknown(str(exc), src)
        nodes.append(
            NumaNode(
                node=int(name[4:]),
                cpus=format_cpu_list(cpus.value or []),
                cpu_count=len(cpus.value or []),
                memory_total_bytes=mem,
            )
        )
    rows = [_distance_row(sr, f"{SYS_NODE}/node{n.node}/distance", len(nodes)) for n in nodes]
    if all(r is not None for r in rows):
        nodes = [n.model_copy(update={"distances": r}) for n, r in zip(nodes, rows, strict=True)]
        src = f"{SYS_NODE}/node*/{{cpulist,meminfo,distance}}"
    return known(nodes, src)


def _distance_row(sr: Sysroot, path: str, count: int) -> list[int] | None:
    """A node's distances to every node (``10 16 32 33``); None when absent, garbage or not
    one entry per node (then no node gets distances: the rules fall back to node order)."""
    text = sr.read_text(path)
    if text is None:
        return None
    fields = text.split()
    if len(fields) != count or not all(_DIGITS.fullmatch(f) and len(f) < 6 for f in fields):
        return None
    row = [int(f) for f in fields]
    return row if all(d > 0 for d in row) else None


def _shared_group(sr: Sysroot, path: str) -> frozenset[int] | None:
    """The CPUs sharing a cache, None when the file is absent; garbage raises ValueError."""
    if not sr.exists(path):
        return None
    f = sr.read_cpu_list(path)
    if not f.known:
        raise ValueError(f.unknown)
    return frozenset(f.value or [])


def _instances(sr: Sysroot, idx: str, online: list[int], notes: list[str]) -> int | None:
    """Distinct groups of CPUs sharing cache ``idx`` among the online CPUs; None when one
    CPU's list is garbage (the count would be wrong, said in ``notes``) or none is listed."""
    groups: set[frozenset[int]] = set()
    for c in online:
        try:
            g = _shared_group(sr, f"{SYS_CPU}/cpu{c}/cache/{idx}/shared_cpu_list")
        except ValueError as exc:
            notes.append(f"{idx} instances unknown: {exc}")
            return None
        if g is not None:
            groups.add(g)
    return len(groups) or None


def _cache_level(
    sr: Sysroot, d: str, idx: str, online: list[int], notes: list[str]
) -> CacheLevel | None:
    """One cache index directory; None if it has no level. A garbage level or type raises
    ValueError (the index is then left out); a garbage size, line size or CPU list makes
    only that field None, said in ``notes``."""

    def present_bad(f: Fact[Any]) -> bool:
        return not f.known and sr.exists(f.source)

    level = sr.read_int(f"{d}/level")
    if not level.known:
        if present_bad(level):
            raise ValueError(level.unknown)
        return None
    if (level.value or 0) < 1:
        raise ValueError(f"{d}/level: cache level {level.value} is not positive")
    raw_type = sr.read_text(f"{d}/type")
    ctype = "?" if raw_type is None else raw_type.strip()
    if raw_type is not None and ctype not in CACHE_TYPES:
        raise ValueError(f"{d}/type: unexpected content {ctype[:40]!r}")
    size_f = sr.read_as(f"{d}/size", parse_size)
    line = sr.read_int(f"{d}/coherency_line_size")
    notes.extend(f"{idx}: {f.unknown}" for f in (size_f, line) if present_bad(f))
    try:
        shared = _shared_group(sr, f"{d}/shared_cpu_list")
    except ValueError as exc:
        notes.append(f"{idx}: {exc}")
        shared = None
    line_v = line.value if line.known and line.value and line.value > 0 else None
    return CacheLevel(
        level=level.get(0),
        type=ctype,
        size_bytes=size_f.value if size_f.known else None,
        line_size_bytes=line_v,
        shared_cpu_count=len(shared) if shared else None,
        instances=_instances(sr, idx, online, notes),
    )


# glibc's _SC_LEVEL1_DCACHE_LINESIZE (bits/confname.h; part of its ABI), which Python's
# os.sysconf does not name: glibc answers from CTR_EL0 on arm64 and CPUID on x86.
_SC_LEVEL1_DCACHE_LINESIZE = 190


def libc_l1d_line_size() -> int | None:
    """The L1 data cache line of the CPU this process runs on, as glibc reads it from the
    CPU itself; None off glibc or when it does not know."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        value = int(ctypes.CDLL(name).sysconf(_SC_LEVEL1_DCACHE_LINESIZE))
    except (OSError, AttributeError):
        return None
    return value if value > 0 and value & (value - 1) == 0 else None


def _with_cpu_line(levels: list[CacheLevel], line: int | None) -> list[CacheLevel]:
    """Level 1 data (or unified) caches the kernel lists without a line size get the CPU's
    own (arm64 kernels take cache sizes from the firmware's tables, which may say nothing:
    qemu's virt board, some ACPI systems)."""
    if line is None:
        return levels
    return [
        lvl.model_copy(update={"line_size_bytes": line})
        if lvl.level == 1 and lvl.type in ("Data", "Unified") and lvl.line_size_bytes is None
        else lvl
        for lvl in levels
    ]


def collect_caches(sr: Sysroot, online: list[int]) -> Fact[list[CacheLevel]]:
    src = f"{SYS_CPU}/cpu*/cache/index*"
    if not online:
        return unknown("no online CPUs known", src)
    base = f"{SYS_CPU}/cpu{online[0]}/cache"
    indexes = [i for i in sr.listdir(base) if i.startswith("index")]
    if not indexes:
        return unknown("no cache information in sysfs (common in VMs and some arm64 firmware)", src)
    out: list[CacheLevel] = []
    skipped: list[str] = []
    notes: list[str] = []
    order = sorted(indexes, key=lambda i: int(i[5:]) if _DIGITS.fullmatch(i[5:]) else 99)
    for idx in order:
        try:
            lvl = _cache_level(sr, f"{base}/{idx}", idx, online, notes)
        except ValueError as exc:
            skipped.append(f"{idx} skipped: {exc}")
            continue
        if lvl is not None:
            out.append(lvl)
    if skipped and not out:
        return unknown("; ".join(skipped), src)
    if skipped or notes:  # one bad file does not hide the other levels: said in the source
        src = "; ".join([src, *skipped, *notes])
    if sr.live and any(lv.level == 1 and lv.line_size_bytes is None for lv in out):
        return known(
            _with_cpu_line(out, libc_l1d_line_size()),
            f"{src}; the L1 data line from the CPU (glibc sysconf: CTR_EL0 on arm64)",
        )
    return known(out, src)


def collect_governor(sr: Sysroot, online: list[int]) -> Fact[str]:
    src = f"{SYS_CPU}/cpu*/cpufreq/scaling_governor"
    paths = [f"{SYS_CPU}/cpu{c}/cpufreq/scaling_governor" for c in online]
    govs: set[str] = set()
    for _ in range(2):
        for path in paths:
            g = sr.read_text(path)
            if g is None:
                continue
            g = g.strip()
            if not _GOVERNOR.fullmatch(g):
                return unknown(f"{path}: unexpected content {g[:40]!r}", src)
            govs.add(g)
        if govs:
            break
        paths = [
            f"{SYS_CPU}/cpufreq/{pol}/scaling_governor" for pol in sr.listdir(f"{SYS_CPU}/cpufreq")
        ]
    if not govs:
        return unknown("no cpufreq driver (typical of VMs; frequency is the host's)", src)
    return known(",".join(sorted(govs)), src)
