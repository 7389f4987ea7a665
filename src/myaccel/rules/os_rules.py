"""OS, NUMA, NIC/IRQ and hardware layers."""

from __future__ import annotations

from myaccel.cpulist import format_cpu_list, parse_cpu_list
from myaccel.model import NetInterface
from myaccel.rules.base import RuleContext, Skip, recommend, rule
from myaccel.rules.conditions import managed
from myaccel.rules.model import Recommendation
from myaccel.rules.numa import Placement, place, table

THP = "/sys/kernel/mm/transparent_hugepage"


@rule(
    "os-scheduler",
    "os",
    "CFS/EEVDF time slices for throughput",
    "seeds/000 and seeds/001 (scheduler tuning); kernel docs",
)
def scheduler(ctx: RuleContext) -> list[Recommendation]:
    """Longer time slices and a higher migration cost reduce preemption and task migration
    of busy database threads (the articles tune the scheduler). The knob's place depends
    on the kernel: /proc/sys/kernel before 5.13, debugfs after, base_slice_ns from 6.6."""
    k = ctx.facts.kernel
    loc = k.sched_location.value
    if loc is None:
        raise Skip(f"scheduler knobs not found: {k.sched_location.unknown}")
    if "*" in k.sched_knobs:
        raise Skip(k.sched_knobs["*"].unknown or "debugfs not mounted")
    wants = {"migration_cost_ns": 5_000_000}
    if "base_slice_ns" in k.sched_knobs:
        wants["base_slice_ns"] = 3_000_000
    elif "min_granularity_ns" in k.sched_knobs:
        wants["min_granularity_ns"] = 10_000_000
        wants["wakeup_granularity_ns"] = 15_000_000
    out = []
    for name, want in wants.items():
        f = k.sched_knobs.get(name)
        if f is None or not f.known or f.value is None:
            continue
        try:
            cur = int(f.value.split()[0])
        except ValueError:
            continue
        if cur >= want:
            continue
        target = (
            f"sysctl:kernel.sched_{name}"
            if loc == "procfs"
            else f"debugfs:/sys/kernel/debug/sched/{name}"
        )
        if managed(ctx, f"kernel.sched_{name}"):
            continue
        out.append(
            recommend(
                ctx,
                id=f"os-sched-{name.replace('_', '-')}",
                title=f"scheduler {name}",
                target=target,
                current=str(cur),
                proposed=str(want),
                rationale="fewer preemptions and migrations of busy server threads",
                evidence={f"kernel.sched_knobs.{name}": str(cur), "kernel.sched_location": loc},
                expected_effect="a few % on CPU-bound workloads with many threads",
                effect_source="seeds/000, seeds/001 (scheduler parameters tuned)",
                risk="online",
                verify=f"read {f.source}",
                confidence="low",
            )
        )
    if not out:
        raise Skip("scheduler knobs already at or above the targets")
    return out


@rule(
    "os-code-huge-pages",
    "os",
    "Code huge pages for the server's text",
    "seeds/000, seeds/001; KNOWLEDGE.md section 4",
)
def code_huge_pages(ctx: RuleContext) -> list[Recommendation]:
    """Mapping mysqld's code with 2 MiB pages cuts iTLB misses (the articles report
    +5-11%). Needs file THP in the kernel (CONFIG_READ_ONLY_THP_FOR_FS or Alibaba's
    hugetext) and text aligned to 2 MiB in the binary."""
    k, m, b = ctx.facts.kernel, ctx.facts.memory, ctx.facts.binary
    if not k.file_thp.value:
        raise Skip(f"kernel without file THP / hugetext ({k.file_thp.unknown or 'not enabled'})")
    ctx.require_2mib_pmd()
    if b is None:
        raise Skip("no binary facts (probe the server or pass --binary)")
    if not b.text_huge_page_ready.value:
        raise Skip("the binary's text is not 2 MiB aligned (see build-text-alignment)")
    # both ways of mapping the text with huge pages promise and are checked alike
    same = {
        "expected_effect": "+5-11% (fewer iTLB misses)",
        "effect_source": "seeds/000, seeds/001",
        "risk": "restart",
        "verify": "FilePmdMapped > 0 for mysqld text in /proc/PID/smaps",
    }
    if m.thp_hugetext_enabled.known:
        return [
            recommend(
                ctx,
                title="hugetext for the server's code",
                target=f"sysfs:{THP}/hugetext_enabled",
                current=m.thp_hugetext_enabled.value,
                proposed="1",
                rationale="Alibaba Cloud Linux maps aligned text with huge pages when enabled",
                evidence={"memory.thp_hugetext_enabled": str(m.thp_hugetext_enabled.value)},
                **same,
            )
        ]
    return [
        recommend(
            ctx,
            title="Collapse the server's text into huge pages",
            target="advice:madv-collapse",
            current=None,
            proposed="MADV_COLLAPSE on the text mapping (kernel >= 6.1) or khugepaged with THP madvise",
            action="advisory",
            rationale="mainline file THP needs the text collapsed by khugepaged or MADV_COLLAPSE",
            evidence={"kernel.file_thp": "yes", "binary.text_huge_page_ready": "yes"},
            confidence="medium",
            **same,
        )
    ]


def _buffer_pool_for_numa(ctx: RuleContext) -> tuple[int, str]:
    """The buffer pool the placement must hold, and where that figure comes from. Without
    server facts there is none to read: assume a dedicated server's pool, 75% of the memory
    budget (MySQL's innodb_dedicated_server rule), rather than 0 bytes, which would bind a
    many-node machine to its first node."""
    if ctx.facts.server is not None:
        return ctx.planned_bytes("innodb_buffer_pool_size"), "the planned buffer pool"
    mem = ctx.facts.memory.effective_limit_bytes.value or ctx.facts.memory.total_bytes.value
    if not mem:
        raise Skip("no server facts and memory size unknown: cannot size the buffer pool")
    return int(mem * 0.75), "no server facts: a dedicated server's pool, 75% of memory"


def numa_placement(ctx: RuleContext) -> tuple[Placement, int, str]:
    """Where the server's memory and threads go (``numa.place``), with the buffer pool it
    must hold and where that figure comes from; the plan shows its table too."""
    nodes = ctx.facts.cpu.numa_nodes.value or []
    if len(nodes) < 2:
        raise Skip("single NUMA node")
    bp, bp_why = _buffer_pool_for_numa(ctx)
    res = ctx.resources
    cpus = res.cpus if res.cpus is not None else res.online  # never an offline CPU
    return place(nodes, cpus, res.mems, bp), bp, bp_why


def placement(
    ctx: RuleContext,
    rec_id: str,
    title: str,
    *,
    policy: str,
    nodes: list[int],
    cpus: list[int] | None = None,
    **fields: str | dict[str, str],
) -> list[Recommendation]:
    """A NUMA placement as systemd spells it in the server unit's drop-in: ``NUMAPolicy=``
    (bind, interleave), ``NUMAMask=`` (its nodes: without them systemd cannot start the
    unit, "Failed to set NUMA memory policy") and, for a binding, ``CPUAffinity=`` (the
    nodes' CPUs). Three keys of one decision: one id, so ``--only`` takes them together.
    The nodes are listed, not ``all`` (systemd reads ``all`` from v247 only)."""
    cur = None  # the server's CPUs now; its memory policy is not among the facts
    if ctx.facts.server is not None and ctx.facts.server.cpus_allowed.value:
        cur = ctx.facts.server.cpus_allowed.value
    # The policy last: each key is a journal entry of its own, and a crash between two
    # of them must leave a unit systemd can start (NUMAPolicy=bind without its NUMAMask
    # cannot: the lab's OS-crash matrix found it). Rollback undoes them in reverse.
    keys: list[tuple[str, str, str | None, str]] = [
        (
            "NUMAMask",
            format_cpu_list(nodes),
            None,
            "systemctl show -P NUMAMask UNIT; numastat -p mysqld",
        )
    ]
    if cpus is not None:
        keys.append(
            ("CPUAffinity", format_cpu_list(cpus), cur, "/proc/PID/status Cpus_allowed_list")
        )
    keys.append(
        (
            "NUMAPolicy",
            policy,
            None,
            "the policy column of /proc/PID/numa_maps (bind:N, interleave:N)",
        )
    )
    return [
        recommend(
            ctx,
            id=rec_id,
            title=f"{title}: {key}",
            target=f"systemd:server/{key}",
            current=current,
            proposed=value,
            verify=verify,
            risk="restart",
            confidence="medium",
            **fields,
        )
        for key, value, current, verify in keys
    ]


@rule(
    "numa-binding",
    "numa",
    "NUMA placement of the server",
    "seeds/002 (Kunpeng 920, +40% point select)",
)
def numa_binding(ctx: RuleContext) -> list[Recommendation]:
    """On several NUMA nodes, threads and memory scattered across nodes pay remote access
    on every page (seed 002: uneven per-CPU load, +40% after binding). Only the nodes that
    hold the server's own CPUs and memory count (its affinity, cpuset, Mems_allowed_list;
    never a memory-only node). Bind to the nearest of them whose memory holds the buffer
    pool with 30% headroom, within one socket and short of all of them, on the server's
    own CPUs there; otherwise interleave over them, or leave the placement alone."""
    nodes = ctx.facts.cpu.numa_nodes.value or []
    p, bp, bp_why = numa_placement(ctx)
    if p.policy == "none":
        raise Skip(p.reason)
    evidence = {
        "cpu.numa_nodes": str(len(nodes)),
        "innodb_buffer_pool_size": f"{bp} ({bp_why})",
        "placement": "; ".join(table(p)),
    }
    node_list = format_cpu_list(list(p.nodes))
    if p.policy == "bind":
        recs = placement(
            ctx,
            "numa-binding",
            f"Bind the server to NUMA node(s) {node_list}",
            policy="bind",
            nodes=list(p.nodes),
            cpus=list(p.cpus),
            rationale=p.reason,
            expected_effect="seed 002: +40% point-select QPS on a 4-node Kunpeng 920; ~+10% typical",
            effect_source="seeds/002",
            evidence=evidence,
        )
    else:
        recs = placement(
            ctx,
            "numa-interleave",
            f"Interleave the server's memory over its nodes {node_list}",
            policy="interleave",
            nodes=list(p.nodes),
            rationale=p.reason,
            expected_effect="even memory bandwidth, no remote-allocation hot spot",
            effect_source="seeds/002; MySQL innodb_numa_interleave",
            evidence=evidence,
        )
    nb = ctx.facts.memory.numa_balancing.value
    if nb == 1 and p.policy == "bind":
        recs.append(
            recommend(
                ctx,
                id="numa-balancing-off",
                title="Automatic NUMA balancing off when bound",
                target="sysctl:kernel.numa_balancing",
                current="1",
                proposed="0",
                rationale="a bound server gains nothing from page migration scans, which cost CPU",
                evidence={"memory.numa_balancing": "1"},
                expected_effect="no page-migration overhead",
                effect_source="kernel documentation: numa_balancing",
                risk="online",
                verify="sysctl kernel.numa_balancing",
                confidence="medium",
            )
        )
    return recs


# Seed 001 bound the NIC's interrupts on 8-vCPU instances (8c64g): 4 CPUs is the least
# where one core can be set aside for them and three left to the server.
IRQ_MIN_CPUS = 4


def irq_cores(ctx: RuleContext, nic: NetInterface) -> tuple[list[int], str]:
    """The cores a NIC's interrupts go to, and a note on them: one per 8 CPUs of the
    machine, the highest numbered online CPUs of the NIC's own NUMA node (the kernel puts a
    device's memory there), or of the whole machine when its node is unknown (a guest's
    virtio NIC): away from CPU 0, where the kernel's own housekeeping runs, and from the
    low CPUs a server's threads fill first. A server pinned to some CPUs keeps them: the
    cores are taken outside its CPUs where the node has enough, else the note says they
    are shared."""
    want = max(1, ctx.host_cpus() // 8)
    on = ctx.facts.cpu.online_cpus
    online = parse_cpu_list(on.value) if on.known and on.value else list(range(ctx.host_cpus()))
    pool: list[int] = []
    up = set(online)
    for nd in ctx.facts.cpu.numa_nodes.value or []:
        if nic.numa_node is not None and nd.node == nic.numa_node:
            pool = [c for c in parse_cpu_list(nd.cpus) if c in up]
    if not pool:
        pool = online
    cpus = ctx.resources.cpus
    if cpus is None or set(online) <= cpus:
        return pool[-want:], ""  # the server runs everywhere: every core is shared alike
    free = [c for c in pool if c not in cpus]
    if len(free) >= want:
        return free[-want:], "outside the server's CPUs"
    return pool[-want:], f"shared with the server's CPUs ({format_cpu_list(sorted(cpus))})"


@rule(
    "nic-irq-affinity",
    "nic",
    "NIC interrupts on fixed cores",
    "seeds/001 (PolarDB on 8-vCPU instances: fewer queues, IRQs bound to fixed cores)",
)
def irq_affinity(ctx: RuleContext) -> list[Recommendation]:
    """NIC queue interrupts spread over every core (by the kernel or irqbalance) preempt
    the server's threads wherever they run; seed 001 coalesced them on fewer queues and
    bound them to fixed cores. Applied through /proc/irq/N/smp_affinity_list (runtime
    only: the kernel resets it at boot) when irqbalance does not run; with irqbalance it is
    advice, since irqbalance would move them back."""
    if ctx.host_cpus() < IRQ_MIN_CPUS:
        raise Skip(f"fewer than {IRQ_MIN_CPUS} CPUs: no core to set aside for interrupts")
    ifs = [i for i in ctx.facts.network.interfaces.value or [] if i.name != "lo" and i.irqs]
    if not ifs:
        raise Skip("no NIC with queue IRQs found")
    balancing = bool(ctx.facts.network.irqbalance_running.value)
    recs = []
    for i in ifs:
        spread = {q.affinity for q in i.irqs}
        cpus = set()
        for q in i.irqs:
            cpus.update(parse_cpu_list(q.affinity or ""))
        queues = i.rx_queues or len(i.irqs)
        chosen, note = irq_cores(ctx, i)
        cores = format_cpu_list(chosen)
        where = f"node {i.numa_node}" if i.numa_node is not None else "the machine (node unknown)"
        if note:
            where += f", {note}"
        recs.append(
            recommend(
                ctx,
                id=f"nic-irq-affinity-{i.name}",
                title=f"{i.name}: its {len(i.irqs)} interrupts on CPU {cores}",
                target=f"irq:{i.name}",
                current=format_cpu_list(sorted(cpus)) if cpus else None,
                proposed=cores,
                rationale=(
                    f"interrupts stop preempting server threads and coalesce better; CPU "
                    f"{cores}: the last of {where}, one core per 8 CPUs"
                    + (
                        f"; {queues} queues: fewer (ethtool -L {i.name} combined N) coalesce more"
                        if queues > 2
                        else ""
                    )
                ),
                evidence={
                    "network.irqs": str(len(i.irqs)),
                    "affinities": ",".join(sorted(a or "?" for a in spread))[:200],
                    "irqbalance": "running" if balancing else "not running",
                },
                expected_effect="lower tail latency and a few % throughput at high QPS",
                effect_source="seeds/001",
                risk="online",
                action="advisory" if balancing else "apply",
                verify=(
                    "stop irqbalance (systemctl disable --now irqbalance), then plan again"
                    if balancing
                    else f"/proc/irq/N/smp_affinity_list of {i.name}'s IRQs reads {cores}; "
                    "/proc/interrupts counts grow only there (runtime only: apply after a boot)"
                ),
                confidence="low",
            )
        )
    return recs


@rule(
    "hardware-prefetch",
    "hardware",
    "Hardware prefetch policy",
    "seeds/000, seeds/001; KNOWLEDGE.md section 4",
)
def prefetch(ctx: RuleContext) -> list[Recommendation]:
    """Database access is random; aggressive hardware prefetchers waste memory bandwidth.
    Kunpeng has a prefetch policy control (openEuler module or BIOS), Intel an MSR; on
    other CPUs it is a firmware matter. All of these belong to the host: a guest (a cloud
    instance, a VM) cannot carry them out, so it gets no such advice."""
    hv = ctx.facts.cpu.hypervisor  # a guest's or container's: skipped by rules/ownership.py
    fam = ctx.facts.cpu.family.value or ""
    if fam in ("kunpeng920", "hisilicon-hip09", "hisilicon-hip12"):
        how = "openEuler prefetch_tuning module (/sys/class/misc/prefetch/policy) or the BIOS"
    elif fam == "x86-intel":
        how = "MSR 0x1A4 (wrmsr) or the BIOS"
    elif fam.startswith("neoverse"):
        how = "a vendor kernel module or the platform firmware"
    else:
        raise Skip("no known prefetch control for this CPU")
    return [
        recommend(
            ctx,
            title="Evaluate a less aggressive prefetch policy",
            target="advice:prefetch",
            current=None,
            proposed=f"A/B a random-access-friendly prefetch policy via {how}",
            action="advisory",
            rationale="sysbench-like random access gains little from stream prefetchers",
            evidence={
                "cpu.family": fam,
                "cpu.hypervisor": str(hv.value) if hv.known else f"unknown ({hv.unknown})",
            },
            expected_effect="a few % (seeds/000 and seeds/001 tune the chip's prefetch policy)",
            effect_source="seeds/000, seeds/001",
            risk="reboot",
            verify="benchmark before and after with myaccel ab",
            confidence="low",
        )
    ]
