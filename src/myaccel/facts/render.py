"""Short human views of the facts (text and Markdown). JSON is the model itself."""

from __future__ import annotations

from typing import Any

from myaccel import markdown
from myaccel.model import BinaryFacts, CpuFacts, Fact, Facts, NetworkFacts, ServerFacts
from myaccel.units import format_bytes as human_bytes

Section = tuple[str, list[tuple[str, str]]]


def show(f: Fact[Any], fmt: Any = str, *, none: str = "none") -> str:
    if not f.known:
        return f"unknown ({f.unknown})"
    if f.value is None:
        return none
    return str(fmt(f.value))


def _short(f: Fact[Any]) -> str:
    """The value, or "?" when unknown (the reason is shown once by ``_reasons``)."""
    return "?" if not f.known else str(f.value)


def _reasons(*facts: Fact[Any]) -> str:
    """``; unknown: reason1; reason2`` for the unknown facts of one line, each reason once."""
    why = list(dict.fromkeys(f.unknown for f in facts if f.unknown))
    return f"; unknown: {'; '.join(why)}" if why else ""


def yesno(b: bool) -> str:
    return "yes" if b else "no"


def sections(facts: Facts) -> list[Section]:
    c, m, k, s, n, p = (
        facts.cpu,
        facts.memory,
        facts.kernel,
        facts.storage,
        facts.network,
        facts.perf,
    )
    out: list[Section] = [_cpu_section(c)]
    cg = show(m.cgroup_limit_bytes, human_bytes, none="no limit")
    out.append(
        (
            "Memory",
            [
                (
                    "total",
                    f"{show(m.total_bytes, human_bytes)} (available {show(m.available_bytes, human_bytes)}, swap {show(m.swap_total_bytes, human_bytes)})",
                ),
                (
                    "cgroup",
                    f"{show(m.cgroup_version)} limit {cg}; effective budget {show(m.effective_limit_bytes, human_bytes)}",
                ),
                (
                    "THP",
                    f"enabled={show(m.thp_enabled)} defrag={show(m.thp_defrag)} hugetext={m.thp_hugetext_enabled.value if m.thp_hugetext_enabled.known else 'n/a'}",
                ),
                (
                    "huge pages",
                    f"{show(m.hugepages_total)} x {show(m.hugepage_size_bytes, human_bytes)} ({show(m.hugepages_free)} free); PMD page {show(m.pmd_page_bytes, human_bytes)}",
                ),
                (
                    "vm",
                    f"swappiness={show(m.swappiness)} dirty_ratio={show(m.dirty_ratio)} dirty_background_ratio={show(m.dirty_background_ratio)} numa_balancing={m.numa_balancing.value if m.numa_balancing.known else 'n/a'}",
                ),
            ],
        )
    )
    sched = ", ".join(f"{kk}={v.value}" for kk, v in k.sched_knobs.items() if v.known) or (
        next((v.unknown or "" for v in k.sched_knobs.values() if not v.known), "none found")
    )
    out.append(
        (
            "Kernel",
            [
                ("release", show(k.release)),
                ("container", show(facts.container)),
                ("scheduler knobs", f"{show(k.sched_location)}: {sched}"),
                ("file THP (code huge pages)", show(k.file_thp, yesno)),
                ("MADV_COLLAPSE", show(k.madv_collapse, yesno)),
            ],
        )
    )
    out.append(
        (
            "Storage",
            [
                ("path", show(s.path)),
                ("filesystem", f"{show(s.fs_type)} on {show(s.device)} at {show(s.mount_point)}"),
                (
                    "block device",
                    f"{show(s.block_device)} rotational={show(s.rotational, yesno)} scheduler={show(s.scheduler)} nr_requests={show(s.nr_requests)}",
                ),
            ],
        )
    )
    out.append(("Network", _network_rows(n)))
    evs = p.events.value or {}
    present = [e for e, ok in evs.items() if ok]
    out.append(
        (
            "Perf",
            [
                (
                    "perf",
                    f"{p.perf_path.value} ({show(p.perf_version)})"
                    if p.perf_path.known
                    else show(p.perf_path),
                ),
                (
                    "perf_event_paranoid",
                    f"{show(p.paranoid)} kptr_restrict={show(p.kptr_restrict)}",
                ),
                ("PMUs", show(p.pmus, ", ".join)),
                ("hardware counters", show(p.hardware_counters, yesno)),
                ("metric events present", ", ".join(present) or "none"),
            ],
        )
    )
    if facts.server is not None:
        out.append(_server_section(facts.server))
    if facts.binary is not None:
        out.append(_binary_section(facts.binary))
    return out


def _cpu_section(c: CpuFacts) -> Section:
    model = show(c.model)
    if c.implementer.known or c.part.known:
        model += f" [implementer {_short(c.implementer)}, part {_short(c.part)}]"
    if not c.model.known and c.vendor.known:
        model = f"{c.vendor.value}, model {model}"
    counts = (c.sockets, c.cores_per_socket, c.threads_per_core, c.logical_cpus, c.online_cpus)
    so, co, th, lo, on = (_short(f) for f in counts)
    topo = f"{so} socket(s) x {co} cores x {th} thread(s) = {lo} CPUs (online {on})" + _reasons(
        *counts
    )
    numa = show(c.numa_nodes)
    if c.numa_nodes.known and c.numa_nodes.value is not None:
        numa = f"{len(c.numa_nodes.value)} node(s): " + "; ".join(
            f"node{nd.node} cpus {nd.cpus} mem {human_bytes(nd.memory_total_bytes)}"
            for nd in c.numa_nodes.value
        )
    caches = "unknown"
    if c.caches.known and c.caches.value:
        caches = ", ".join(
            f"L{ch.level}{ch.type[0].lower() if ch.type in ('Data', 'Instruction') else ''} "
            f"{human_bytes(ch.size_bytes)}/{ch.line_size_bytes or '?'}B line"
            + (f" x{ch.instances}" if ch.instances and ch.instances > 1 else "")
            for ch in c.caches.value
        )
    elif c.caches.unknown:
        caches = f"unknown ({c.caches.unknown})"
    feats = []
    for label, f in (
        ("LSE atomics", c.has_lse),
        ("SB", c.has_sb),
        ("SVE", c.has_sve),
        ("CRC32", c.has_crc32),
        ("AVX2", c.has_avx2),
        ("AVX-512", c.has_avx512),
    ):
        if f.known:
            feats.append(f"{label} {yesno(bool(f.value))}")
    return (
        "CPU",
        [
            ("arch", show(c.arch)),
            ("model", model),
            ("topology", topo),
            ("NUMA", numa),
            ("caches", caches),
            ("features", ", ".join(feats) or show(c.features)),
            ("governor", show(c.governor)),
        ],
    )


def _network_rows(n: NetworkFacts) -> list[tuple[str, str]]:
    nets: list[tuple[str, str]] = []
    if n.interfaces.known and n.interfaces.value is not None:
        for i in n.interfaces.value:
            if i.name == "lo":
                continue
            aff = sorted({q.affinity or "?" for q in i.irqs})
            nets.append(
                (
                    i.name,
                    f"driver={i.driver or '?'} mtu={i.mtu} queues rx={i.rx_queues} tx={i.tx_queues} "
                    f"irqs={len(i.irqs)} affinity={','.join(aff) if aff else '-'}",
                )
            )
    nets.append(
        ("irqbalance", show(n.irqbalance_running, lambda b: "running" if b else "not running"))
    )
    return nets


def _server_section(sv: ServerFacts) -> Section:
    vars_ = sv.variables.value or {}
    keyv = [
        f"{name}={vars_[name]}"
        for name in (
            "innodb_buffer_pool_size",
            "innodb_log_file_size",
            "innodb_redo_log_capacity",
            "innodb_flush_log_at_trx_commit",
            "sync_binlog",
            "max_connections",
            "thread_handling",
            "innodb_adaptive_hash_index",
        )
        if name in vars_
    ]
    return (
        "Server",
        [
            ("connection", sv.connection),
            (
                "flavor/version",
                f"{show(sv.flavor)} {show(sv.version)} ({show(sv.version_string)}, {show(sv.version_comment)})",
            ),
            ("uptime", show(sv.uptime_s, lambda v: f"{v} s")),
            (
                "datadir",
                f"{show(sv.datadir)} ({show(sv.data_size_bytes, human_bytes)} in tables)",
            ),
            (
                "process",
                f"pid {show(sv.pid)} binary {show(sv.binary_path)} cpus {show(sv.cpus_allowed)} mems {show(sv.mems_allowed)}",
            ),
            ("key variables", " ".join(keyv)),
        ],
    )


def _binary_section(b: BinaryFacts) -> Section:
    at = b.atomics
    atom = "unknown"
    if at.known and at.value is not None:
        a = at.value
        atom = (
            f"{a.klass}: {max(a.lse_instructions - a.helper_sites, 0)} inline LSE, "
            f"{a.helper_calls} calls to {a.helper_sites} outline helpers, "
            f"{max(a.exclusive_stores - a.helper_sites, 0)} LL/SC loops outside helpers"
        )
        if a.klass == "not-applicable":
            atom = f"not applicable ({a.detail or 'not aarch64'})"
    elif at.unknown:
        atom = f"n/a ({at.unknown})"
    return (
        "Binary",
        [
            ("path", b.path),
            (
                "ELF",
                f"{show(b.machine)} {show(b.elf_class)}-bit PIE={show(b.pie, yesno)} size {show(b.size_bytes, human_bytes)} stripped={show(b.stripped, yesno)}",
            ),
            ("compiler", show(b.compiler, "; ".join)),
            ("atomics", atom),
            (
                "LTO / PGO",
                f"LTO={show(b.lto, yesno)} PGO={show(b.pgo, yesno)} instrumented={show(b.instrumented, yesno)}",
            ),
            (
                "text alignment",
                f"{show(b.text_segment_align, hex)} huge-page ready={show(b.text_huge_page_ready, yesno)}; relocations kept={show(b.relocations, yesno)}",
            ),
        ],
    )


def format_text(facts: Facts) -> str:
    lines = [
        f"myaccel probe of {facts.hostname.value or '?'} ({facts.collected_at}, sysroot {facts.sysroot})"
    ]
    for title, rows in sections(facts):
        lines.append("")
        lines.append(title)
        width = max((len(k) for k, _ in rows), default=0)
        for k, v in rows:
            lines.append(f"  {k.ljust(width)}  {v}")
    for w in facts.warnings:
        lines.append(f"\nwarning: {w}")
    return "\n".join(lines) + "\n"


def format_markdown(facts: Facts) -> str:
    lines = [
        f"# myaccel probe: {facts.hostname.value or '?'}",
        "",
        f"Collected {facts.collected_at}.",
    ]
    for title, rows in sections(facts):
        lines += ["", f"## {title}", "", *markdown.table(["fact", "value"], rows)]
    for w in facts.warnings:
        lines += ["", f"> warning: {w}"]
    return "\n".join(lines) + "\n"
