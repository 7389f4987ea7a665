"""Detectors of where CPU time goes astray: uneven NUMA nodes, a frontend-bound core,
network interrupt and softirq work."""

from __future__ import annotations

from myaccel.profile.diagnose.context import Context
from myaccel.profile.diagnose.evidence import (
    evidence,
    finding,
    lower_rule,
    raise_rule,
    share_evidence,
)
from myaccel.profile.diagnose.thresholds import (
    FRONTEND_HIGH_PCT,
    FRONTEND_PCT,
    ITLB_HIGH_MPKI,
    ITLB_MPKI,
    L1I_HIGH_MPKI,
    L1I_MPKI,
    NET_STACK_MIN_PCT,
    NET_STACK_PCT,
    NUMA_MIN_BUSY_PCT,
    NUMA_RATIO,
    NUMA_SPREAD_HIGH_POINTS,
    NUMA_SPREAD_POINTS,
    SOFTIRQ_BUSY_PCT,
    SOFTIRQ_CPU_HIGH_PCT,
    SOFTIRQ_CPU_PCT,
)
from myaccel.profile.records import Evidence, Finding, NodeLoad, RuleEffect, derive_microarch


def numa_imbalance(c: Context) -> Finding | None:
    cpu = c.cpu
    if cpu is None or len(cpu.nodes) < 2:
        return None
    loads: list[NodeLoad] = list(cpu.nodes)
    allowed = c.allowed_cpus()
    scope = "all nodes"
    if allowed is not None:
        node_cpus = {n.node: set(n.cpus) for n in c.nodes}
        loads = [ld for ld in loads if node_cpus.get(ld.node, set()) & allowed]
        scope = "nodes in the server's Cpus_allowed"
    if len(loads) < 2:
        return None
    busiest = max(loads, key=lambda ld: ld.busy_pct)
    idlest = min(loads, key=lambda ld: ld.busy_pct)
    spread = busiest.busy_pct - idlest.busy_pct
    ratio = busiest.busy_pct / max(idlest.busy_pct, 1.0)
    if spread < NUMA_SPREAD_POINTS or busiest.busy_pct < NUMA_MIN_BUSY_PCT or ratio < NUMA_RATIO:
        return None
    detail = ", ".join(f"node{ld.node} {ld.busy_pct:.0f}%" for ld in loads)
    ev = [
        evidence(
            f"busy share spread between NUMA nodes ({scope})",
            spread,
            "points",
            c.cpu_source,
            f">= {NUMA_SPREAD_POINTS:g} points, busiest >= {NUMA_MIN_BUSY_PCT:g}% and "
            f">= {NUMA_RATIO:g}x the least busy",
            detail,
        ),
        evidence("busiest / least busy node", ratio, "x", c.cpu_source),
    ]
    f = c.facts
    if f is not None and f.memory.numa_balancing.value is not None:
        ev.append(
            evidence(
                "kernel.numa_balancing",
                f.memory.numa_balancing.value,
                "",
                f.memory.numa_balancing.source or "facts memory.numa_balancing",
            )
        )
    return finding(
        "numa-imbalance",
        high=spread >= NUMA_SPREAD_HIGH_POINTS,
        evidence=ev,
        rules=[
            raise_rule(
                "numa-binding",
                "bind the server's CPUs and memory to the nodes its buffer pool fits in",
            )
        ],
    )


def frontend_bound(c: Context) -> Finding | None:
    m = derive_microarch(c.profile.microarch)
    fe = m.get("frontend_bound_pct")
    l1i = m.get("l1i_mpki")
    itlb = m.get("itlb_mpki")
    src = "profile microarch (perf stat over the recording)"
    ev: list[Evidence] = []
    code_layout = False
    tlb = False
    if fe is not None and fe >= FRONTEND_PCT:
        ev.append(share_evidence("frontend-bound share of cycles/slots", fe, src, FRONTEND_PCT))
        code_layout = True
    if l1i is not None and l1i >= L1I_MPKI:
        ev.append(
            evidence("L1i misses per 1000 instructions", l1i, "MPKI", src, f">= {L1I_MPKI:g}")
        )
        code_layout = True
    if itlb is not None and itlb >= ITLB_MPKI:
        ev.append(
            evidence("iTLB misses per 1000 instructions", itlb, "MPKI", src, f">= {ITLB_MPKI:g}")
        )
        tlb = True
    if not ev:
        return None
    b = c.facts.binary if c.facts else None
    rules: list[RuleEffect] = []
    if code_layout or tlb:
        if b is not None and b.pgo.value and b.lto.value:
            rules.append(
                lower_rule(
                    "build-pgo-lto",
                    "the binary already shows PGO and LTO: what remains is code layout "
                    "beyond PGO (BOLT) or huge pages",
                )
            )
        else:
            rules.append(
                raise_rule(
                    "build-pgo-lto",
                    "PGO+LTO packs the hot path together and inlines across files: fewer "
                    "i-cache and iTLB misses (seed 003: +27-31% QPS)",
                )
            )
    if tlb or (fe is not None and fe >= FRONTEND_HIGH_PCT):
        rules.append(
            raise_rule(
                "os-code-huge-pages",
                "2 MiB pages map the text with a few iTLB entries (seed 000: iTLB misses -43.9%)",
            )
        )
        if b is not None and b.text_huge_page_ready.value:
            rules.append(lower_rule("build-text-alignment", "text is already 2 MiB aligned"))
        else:
            rules.append(
                raise_rule(
                    "build-text-alignment",
                    "code huge pages need the text segment aligned to 2 MiB",
                )
            )
    high = (
        (fe is not None and fe >= FRONTEND_HIGH_PCT)
        or (l1i is not None and l1i >= L1I_HIGH_MPKI)
        or (itlb is not None and itlb >= ITLB_HIGH_MPKI)
    )
    return finding("frontend-bound", high=high, evidence=ev, rules=rules)


def network_softirq(c: Context) -> Finding | None:
    net = c.incl_pct("net-rx")
    cpu = c.cpu
    ev: list[Evidence] = []
    stack_signal = c.profile.stacks is not None and net >= NET_STACK_PCT
    if stack_signal:
        ev.append(
            share_evidence(
                "inclusive share of the network softirq path",
                net,
                c.stack_source,
                NET_STACK_PCT,
                c.top("net-rx", "softirq"),
            )
        )
    busy_share = 0.0
    max_cpu = 0.0
    if cpu is not None and cpu.mean.busy_pct > 0:
        busy_share = 100.0 * cpu.mean.softirq_pct / cpu.mean.busy_pct
        max_cpu = cpu.max_cpu_softirq_pct
    proc_signal = busy_share >= SOFTIRQ_BUSY_PCT or max_cpu >= SOFTIRQ_CPU_PCT
    st = c.profile.stacks
    if (
        proc_signal
        and not stack_signal
        and st is not None
        and c.profile.recording.system_wide
        and net < NET_STACK_MIN_PCT
    ):
        proc_signal = False  # softirq time, but not the network's
    if proc_signal and cpu is not None:
        ev.append(
            share_evidence(
                "softirq share of busy CPU time",
                busy_share,
                c.cpu_source,
                SOFTIRQ_BUSY_PCT,
            )
        )
        ev.append(
            share_evidence(
                f"softirq share of the busiest softirq CPU (cpu{cpu.max_softirq_cpu})",
                max_cpu,
                c.cpu_source,
                SOFTIRQ_CPU_PCT,
            )
        )
    if not (stack_signal or proc_signal):
        return None
    f = c.facts
    if f is not None and f.network.irqbalance_running.value is not None:
        ev.append(
            evidence(
                "irqbalance running",
                1.0 if f.network.irqbalance_running.value else 0.0,
                "bool",
                f.network.irqbalance_running.source or "facts network.irqbalance_running",
            )
        )
    return finding(
        "network-softirq",
        high=max_cpu >= SOFTIRQ_CPU_HIGH_PCT or busy_share >= 2 * SOFTIRQ_BUSY_PCT,
        evidence=ev,
        rules=[
            raise_rule(
                "nic-irq-affinity",
                "pin NIC queue IRQs to chosen cores (off the server's hottest ones) and "
                "keep irqbalance from moving them",
            )
        ],
    )
