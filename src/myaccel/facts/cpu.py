"""CPU facts from /proc/cpuinfo and /sys/devices/system/{cpu,node} (never lscpu text,
which is localized in the wild)."""

from __future__ import annotations

from collections import Counter

from myaccel.facts.sysroot import Sysroot, parse_cpu_list, parse_size
from myaccel.model import CacheLevel, CpuFacts, Fact, NumaNode, known, unknown

CPUINFO = "/proc/cpuinfo"
SYS_CPU = "/sys/devices/system/cpu"
SYS_NODE = "/sys/devices/system/node"

# aarch64 MIDR implementer -> vendor, and (implementer, part) -> (model, family id).
# Sources: Arm Technical Reference Manuals (MIDR_EL1 part numbers) and the Linux kernel's
# arch/arm64/include/asm/cputype.h; KNOWLEDGE.md section 7.
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
    0xC0: "Ampere",
}
ARM_PARTS: dict[tuple[int, int], tuple[str, str]] = {
    (0x48, 0xD01): ("Kunpeng 920 (TSV110)", "kunpeng920"),
    (0x41, 0xD08): ("Cortex-A72", "cortex-a72"),
    (0x41, 0xD0C): ("Neoverse N1", "neoverse-n1"),
    (0x41, 0xD40): ("Neoverse V1", "neoverse-v1"),
    (0x41, 0xD49): ("Neoverse N2", "neoverse-n2"),
    (0x41, 0xD4F): ("Neoverse V2", "neoverse-v2"),
    (0x41, 0xD8E): ("Neoverse N3", "neoverse-n3"),
    (0x41, 0xD84): ("Neoverse V3", "neoverse-v3"),
    (0xC0, 0xAC3): ("AmpereOne", "ampereone"),
    (0x50, 0x000): ("X-Gene", "xgene"),
}
# Marketing names of platforms built on those cores, for the human view only.
ARM_PLATFORMS = {
    "kunpeng920": "Huawei Kunpeng 920",
    "neoverse-n1": "e.g. AWS Graviton2, Ampere Altra",
    "neoverse-v1": "e.g. AWS Graviton3",
    "neoverse-n2": "e.g. Alibaba Yitian 710",
    "neoverse-v2": "e.g. AWS Graviton4, NVIDIA Grace",
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


def _int_auto(s: str) -> int:
    return int(s, 0)


def collect_cpu(sr: Sysroot) -> CpuFacts:
    text = sr.read_text(CPUINFO)
    blocks = _cpuinfo_blocks(text) if text else []
    procs = [b for b in blocks if "processor" in b]
    first = procs[0] if procs else (blocks[0] if blocks else {})
    no_cpuinfo = unknown("cannot read /proc/cpuinfo", CPUINFO)

    # --- architecture
    arch: Fact[str]
    arch_file = sr.read("/proc/sys/kernel/arch")
    if arch_file.known and arch_file.value:
        arch = arch_file
    elif "CPU implementer" in first:
        arch = known("aarch64", CPUINFO)
    elif "vendor_id" in first:
        flags = first.get("flags", "").split()
        arch = known("x86_64" if "lm" in flags else "i686", CPUINFO)
    else:
        arch = no_cpuinfo if not text else unknown("unrecognized /proc/cpuinfo layout", CPUINFO)

    vendor: Fact[str] = no_cpuinfo
    model: Fact[str] = no_cpuinfo
    family: Fact[str] = no_cpuinfo
    implementer: Fact[str] = unknown("not an aarch64 CPU", CPUINFO)
    part: Fact[str] = unknown("not an aarch64 CPU", CPUINFO)
    model_name: Fact[str] = unknown("no model name in /proc/cpuinfo", CPUINFO)
    features: Fact[list[str]] = no_cpuinfo

    if "CPU implementer" in first:
        try:
            impl = _int_auto(first["CPU implementer"])
            prt = _int_auto(first.get("CPU part", "-1"))
        except ValueError:
            impl, prt = -1, -1
        implementer = known(f"0x{impl:02x}", CPUINFO)
        part = known(f"0x{prt:03x}", CPUINFO)
        vendor = known(ARM_IMPLEMENTERS.get(impl, f"unknown implementer 0x{impl:02x}"), CPUINFO)
        decoded = ARM_PARTS.get((impl, prt))
        if decoded is None and impl == 0xC0:
            decoded = (f"Ampere part 0x{prt:03x}", "ampere")
        if decoded:
            model = known(decoded[0], CPUINFO)
            family = known(decoded[1], CPUINFO)
        else:
            model = known(f"{vendor.value} part 0x{prt:03x}", CPUINFO)
            family = known("arm-other", CPUINFO)
        if "model name" in first:
            model_name = known(first["model name"], CPUINFO)
        features = known(first.get("Features", "").split(), CPUINFO)
    elif "vendor_id" in first:
        v = first["vendor_id"]
        vendor = known(v, CPUINFO)
        model_name = known(first.get("model name", "?"), CPUINFO)
        model = model_name
        fam = {"GenuineIntel": "x86-intel", "AuthenticAMD": "x86-amd"}.get(v, "x86-other")
        family = known(fam, CPUINFO)
        features = known(first.get("flags", "").split(), CPUINFO)

    feats = set(features.value or [])

    def feat(*names: str) -> Fact[bool]:
        if not features.known:
            return unknown(features.unknown or "no CPU flags", CPUINFO)
        return known(any(n in feats for n in names), CPUINFO)

    is_arm = arch.value == "aarch64"
    is_x86 = (arch.value or "").startswith(("x86", "i686"))
    na_x86 = unknown("not applicable on aarch64", CPUINFO)
    na_arm = unknown("not applicable on x86", CPUINFO)
    has_lse = feat("atomics") if is_arm else na_arm
    has_sve = feat("sve") if is_arm else na_arm
    has_crc32 = feat("crc32") if is_arm else feat("sse4_2")
    has_avx2 = feat("avx2") if is_x86 else na_x86
    has_avx512 = feat("avx512f") if is_x86 else na_x86

    # --- topology
    online = sr.read(f"{SYS_CPU}/online")
    online_list = parse_cpu_list(online.value) if online.known and online.value else []
    if not online_list and procs:
        online_list = [int(b["processor"]) for b in procs if b["processor"].isdigit()]
        online = known(",".join(str(c) for c in online_list), CPUINFO)
    logical: Fact[int] = (
        known(len(online_list), online.source) if online_list else unknown("no CPU list", SYS_CPU)
    )

    packages: dict[int, set[int]] = {}
    cores: set[tuple[int, int, int]] = set()
    siblings_sizes: list[int] = []
    topo_src = f"{SYS_CPU}/cpu*/topology"
    topo_ok = bool(online_list)
    for c in online_list:
        pkg = sr.read_int(f"{SYS_CPU}/cpu{c}/topology/physical_package_id")
        core = sr.read_int(f"{SYS_CPU}/cpu{c}/topology/core_id")
        clus = sr.read_int(f"{SYS_CPU}/cpu{c}/topology/cluster_id")
        sib = sr.read(f"{SYS_CPU}/cpu{c}/topology/thread_siblings_list")
        if not (pkg.known and core.known):
            topo_ok = False
            break
        p = pkg.get(0)
        # Some firmware reports -1 for the package on arm64 (no PPTT): treat as one package.
        p = max(p, 0)
        packages.setdefault(p, set()).add(c)
        cores.add((p, clus.get(0) if clus.known else 0, core.get(0)))
        if sib.known and sib.value:
            siblings_sizes.append(len(parse_cpu_list(sib.value)))
    if topo_ok:
        sockets: Fact[int] = known(len(packages), topo_src)
        tpc = max(Counter(siblings_sizes).most_common(1)[0][0], 1) if siblings_sizes else 1
        threads_per_core: Fact[int] = known(tpc, topo_src)
        physical: Fact[int] = known(len(online_list) // tpc, topo_src)
        cps: Fact[int] = known(len(online_list) // tpc // max(len(packages), 1), topo_src)
    else:
        why = "topology files missing under /sys/devices/system/cpu"
        sockets = unknown(why, topo_src)
        threads_per_core = unknown(why, topo_src)
        physical = unknown(why, topo_src)
        cps = unknown(why, topo_src)

    return CpuFacts(
        arch=arch,
        vendor=vendor,
        model=model,
        family=family,
        implementer=implementer,
        part=part,
        model_name=model_name,
        logical_cpus=logical,
        online_cpus=online,
        sockets=sockets,
        cores_per_socket=cps,
        threads_per_core=threads_per_core,
        physical_cores=physical,
        numa_nodes=collect_numa(sr),
        caches=collect_caches(sr, online_list),
        features=features,
        has_lse=has_lse,
        has_sve=has_sve,
        has_crc32=has_crc32,
        has_avx2=has_avx2,
        has_avx512=has_avx512,
        governor=collect_governor(sr, online_list),
    )


def collect_numa(sr: Sysroot) -> Fact[list[NumaNode]]:
    names = [n for n in sr.listdir(SYS_NODE) if n.startswith("node") and n[4:].isdigit()]
    if not names:
        if sr.exists(SYS_NODE):
            return unknown("no node directories", SYS_NODE)
        return unknown("kernel without NUMA support in sysfs", SYS_NODE)
    nodes: list[NumaNode] = []
    for name in sorted(names, key=lambda n: int(n[4:])):
        nid = int(name[4:])
        cpus = (sr.read_text(f"{SYS_NODE}/{name}/cpulist") or "").strip()
        mem: int | None = None
        for line in (sr.read_text(f"{SYS_NODE}/{name}/meminfo") or "").splitlines():
            if "MemTotal:" in line:
                tail = line.split("MemTotal:", 1)[1]
                try:
                    mem = parse_size(tail)
                except ValueError:
                    mem = None
        nodes.append(
            NumaNode(
                node=nid, cpus=cpus, cpu_count=len(parse_cpu_list(cpus)), memory_total_bytes=mem
            )
        )
    return known(nodes, f"{SYS_NODE}/node*/{{cpulist,meminfo}}")


def collect_caches(sr: Sysroot, online: list[int]) -> Fact[list[CacheLevel]]:
    src = f"{SYS_CPU}/cpu*/cache/index*"
    if not online:
        return unknown("no online CPUs known", src)
    base = f"{SYS_CPU}/cpu{online[0]}/cache"
    indexes = [i for i in sr.listdir(base) if i.startswith("index")]
    if not indexes:
        return unknown("no cache information in sysfs (common in VMs and some arm64 firmware)", src)
    out: list[CacheLevel] = []
    for idx in sorted(indexes, key=lambda i: int(i[5:]) if i[5:].isdigit() else 99):
        d = f"{base}/{idx}"
        level = sr.read_int(f"{d}/level")
        if not level.known:
            continue
        ctype = (sr.read_text(f"{d}/type") or "?").strip()
        size_f = sr.read_as(f"{d}/size", parse_size)
        line = sr.read_int(f"{d}/coherency_line_size")
        shared = (sr.read_text(f"{d}/shared_cpu_list") or "").strip()
        shared_n = len(parse_cpu_list(shared)) if shared else None
        # distinct instances of this cache across online CPUs
        groups: set[str] = set()
        for c in online:
            g = sr.read_text(f"{SYS_CPU}/cpu{c}/cache/{idx}/shared_cpu_list")
            if g is not None:
                groups.add(g.strip())
        line_v = line.value if line.known and line.value and line.value > 0 else None
        out.append(
            CacheLevel(
                level=level.get(0),
                type=ctype,
                size_bytes=size_f.value if size_f.known else None,
                line_size_bytes=line_v,
                shared_cpu_count=shared_n,
                instances=len(groups) or None,
            )
        )
    return known(out, src)


def collect_governor(sr: Sysroot, online: list[int]) -> Fact[str]:
    govs: set[str] = set()
    for c in online:
        g = sr.read_text(f"{SYS_CPU}/cpu{c}/cpufreq/scaling_governor")
        if g is not None:
            govs.add(g.strip())
    if not govs:
        for pol in sr.listdir(f"{SYS_CPU}/cpufreq"):
            g = sr.read_text(f"{SYS_CPU}/cpufreq/{pol}/scaling_governor")
            if g is not None:
                govs.add(g.strip())
    src = f"{SYS_CPU}/cpu*/cpufreq/scaling_governor"
    if not govs:
        return unknown("no cpufreq driver (typical of VMs; frequency is the host's)", src)
    return known(",".join(sorted(govs)), src)
