"""Diagnosis: a profile (and optionally the machine's facts) -> findings -> plan rules.

Each finding carries its evidence (numbers with where they come from and the threshold
they crossed), a likely cause, the rule ids it raises or lowers, a severity and how to
confirm it by hand. Finding ids are stable kebab-case; rules read them through
``Hints.findings`` (``finding_ids(diagnose(...))``). "Lower" means the evidence says that
rule is not the fix here (or is already applied), so a report can rank it down.

Findings and thresholds (percentages of profile samples unless noted; the reasoning is at
each constant below). "MySQL"/"MariaDB" name the server flavor from the facts; without
facts both rules are listed and each skips where it does not apply.

- ``spin-hot-spot``: self share of spin code >= 10% (InnoDB mutex/rw-lock spinning +
  kernel spin locks + aarch64 outline-atomics helpers), or the helpers alone >= 5%.
  Raises server-spin-wait (InnoDB or kernel spin >= 3%), server-thread-concurrency (not
  MariaDB), server-thread-pool (not MySQL), build-lse (helpers >= 3% or an LL/SC or outline
  binary; lowered when the binary is inline LSE or the CPU has no LSE), build-cacheline
  (Kunpeng 920). High at >= 25%.
- ``ahi-hot-spot``: adaptive hash index (``btr_search_*``) inclusive share >= 10%. Raises
  server-adaptive-hash-index, and numa-binding on >= 2 NUMA nodes. High at >= 20% (>= 15%
  on several nodes).
- ``numa-imbalance``: on >= 2 nodes the server may run on, node busy shares spread >= 20
  points with the busiest >= 30% busy and >= 1.5x the least busy. Raises numa-binding.
  High at >= 40 points.
- ``frontend-bound``: frontend stalls >= 30% of cycles/slots, L1i >= 10 MPKI or iTLB >= 1
  MPKI (micro-architecture metrics, when the profile has them). Raises build-pgo-lto
  (lowered when the binary already has PGO and LTO), and for iTLB (or >= 40% frontend)
  os-code-huge-pages and build-text-alignment (lowered when already aligned).
- ``network-softirq``: network receive path >= 10% of samples, or softirq >= 10% of busy
  CPU time, or one CPU >= 30% in softirq (unless a system-wide recording shows < 2% in the
  network path). Raises nic-irq-affinity. High when one CPU is >= 50% softirq.
- ``io-wait``: iowait >= 10% of CPU time, or InnoDB read, InnoDB flush or kernel block I/O
  path >= 10% of samples. Raises server-buffer-pool-size (read side) and
  server-io-capacity (write side); both when the side is unknown. High at >= 25% iowait.
- ``buffer-pool-misses``: Innodb_buffer_pool_reads / Innodb_buffer_pool_read_requests >= 1%
  over >= 10,000 requests (window deltas, else cumulative counters from the facts). Raises
  server-buffer-pool-size, and server-io-capacity when threads waited for free pages.
  High at >= 5%.
- ``scheduler-churn``: context switches >= 10,000 /s per CPU, or futex + scheduler path
  >= 15% of samples. Raises server-thread-pool (not MySQL; not when already
  pool-of-threads), server-thread-concurrency (not MariaDB), os-scheduler. High at
  >= 30,000 /s or >= 30%.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

from myaccel.model import Facts
from myaccel.profile.folded import SYMBOL_GROUPS
from myaccel.profile.records import (
    CpuSummary,
    Evidence,
    Finding,
    GroupShare,
    NodeCpus,
    NodeLoad,
    Profile,
    RuleEffect,
    Severity,
    derive_microarch,
    parse_cpulist,
    summarize_cpu,
)

# ---------------------------------------------------------------- thresholds
# Spin: a healthy OLTP profile spends a few percent in spin-wait code (ut_delay is 1-3% on
# x86 at moderate concurrency). At 10% the spinning costs as much as one of the real work
# consumers (row search, B-tree descent); seed 004's flame graph was dominated by it and
# 25% means a quarter of all CPU buys nothing.
SPIN_PCT = 10.0
SPIN_HIGH_PCT = 25.0
# A component of the spin share counts as evidence for its specific rule from 3% up.
SPIN_PART_PCT = 3.0
# aarch64 outline-atomics helpers: each call is a few instructions; 5% self share means
# atomics on contended lines are hot, where LL/SC retries (or the helper call) matter.
LLSC_PCT = 5.0
# AHI: x86 profiles show btr_search_guess_on_hash around 3% at point-select load; seed 002
# measured ~30% (10x) on a 4-node Kunpeng. 10% (the brief's figure) is 3x normal.
AHI_PCT = 10.0
AHI_HIGH_PCT = 20.0
# NUMA: a spread of 20 points between node busy shares (with the busiest >= 30% busy and
# 1.5x the least) is far outside what the load balancer leaves on a uniformly loaded box
# (a few points); below 30% busy there is spare capacity everywhere and nothing to win.
NUMA_SPREAD_POINTS = 20.0
NUMA_SPREAD_HIGH_POINTS = 40.0
NUMA_MIN_BUSY_PCT = 30.0
NUMA_RATIO = 1.5
# Frontend: top-down puts typical compute code under 20% frontend bound; OLTP servers sit at
# 30-50% because their hot code is megabytes. L1i: SPEC-like code misses < 5 per thousand
# instructions, OLTP 20-60; 10 MPKI means the hot path no longer fits in L1i. iTLB: one
# L1 iTLB refill per thousand instructions (about a percent of cycles at tens of cycles
# each, more on page walks) is what code huge pages remove (seed 000: iTLB -43.9%).
FRONTEND_PCT = 30.0
FRONTEND_HIGH_PCT = 40.0
L1I_MPKI = 10.0
L1I_HIGH_MPKI = 20.0
ITLB_MPKI = 1.0
ITLB_HIGH_MPKI = 2.0
# Network softirq: NET_RX work for a database's small packets is a few percent of CPU; at
# 10% of busy time (or 10% of samples in the receive path) it competes with query work,
# and one CPU >= 30% in softirq means interrupts pile onto few cores (seed 001 bound NIC
# IRQs to fixed cores). Stacks recorded system wide with < 2% in the network path mean the
# softirq time is something else (block completions, timers, RCU).
NET_STACK_PCT = 10.0
SOFTIRQ_BUSY_PCT = 10.0
SOFTIRQ_CPU_PCT = 30.0
SOFTIRQ_CPU_HIGH_PCT = 50.0
NET_STACK_MIN_PCT = 2.0
# I/O: iowait is idle time with I/O outstanding; 10% of all CPU time waiting on a database
# host means CPUs sit idle for reads a larger pool would serve from memory, or for
# flushing that cannot keep up. 5% of samples in one side of the I/O path names that side.
IOWAIT_PCT = 10.0
IOWAIT_HIGH_PCT = 25.0
IO_STACK_PCT = 10.0
IO_PART_PCT = 5.0
# Buffer pool: a hit costs ~100 ns, a miss a disk read (~100 us on SSD); at 1% misses the
# misses already cost ~10x the hits. Under 10,000 requests the ratio is noise.
BP_MISS_PCT = 1.0
BP_MISS_HIGH_PCT = 5.0
BP_MIN_REQUESTS = 10_000
# Scheduler: a switch costs 2-5 us directly plus cache refill; 10,000 /s per CPU is 2-5% of
# each CPU in switches alone (more with cache effects), 30,000 is a lock convoy. 15% of
# samples in futex/scheduler code says the same from the stacks.
CS_PER_CPU_S = 10_000.0
CS_HIGH_PER_CPU_S = 30_000.0
SCHED_PCT = 15.0
SCHED_HIGH_PCT = 30.0
# Kernel share reported as supporting evidence (seed 004: "high system time").
KERNEL_NOTE_PCT = 20.0

# Rule ids a finding may raise or lower (checked against the registry in the tests).
RULE_IDS = frozenset(
    {
        "server-spin-wait",
        "server-thread-concurrency",
        "server-thread-pool",
        "server-adaptive-hash-index",
        "server-buffer-pool-size",
        "server-io-capacity",
        "build-lse",
        "build-cacheline",
        "build-pgo-lto",
        "build-text-alignment",
        "os-code-huge-pages",
        "os-scheduler",
        "numa-binding",
        "nic-irq-affinity",
    }
)
FINDING_IDS = (
    "spin-hot-spot",
    "ahi-hot-spot",
    "numa-imbalance",
    "frontend-bound",
    "network-softirq",
    "io-wait",
    "buffer-pool-misses",
    "scheduler-churn",
)
_SEVERITY_ORDER = {"high": 0, "medium": 1, "low": 2}


# ---------------------------------------------------------------- context


@dataclass(frozen=True)
class _Ctx:
    profile: Profile
    facts: Facts | None

    # ---- stacks
    @property
    def stack_source(self) -> str:
        r = self.profile.recording
        st = self.profile.stacks
        n = st.total_samples if st else 0
        who = f"pid {r.pid}" if r.pid else ("system wide" if r.system_wide else "")
        return f"perf record -e {r.event} {who}, {r.duration_s:g} s, {n} samples".replace("  ", " ")

    def group(self, gid: str) -> GroupShare | None:
        """The group's share; estimated from the symbol list when the summary lacks it."""
        st = self.profile.stacks
        if st is None or st.total_samples <= 0:
            return None
        if gid in st.groups:
            return st.groups[gid]
        g = SYMBOL_GROUPS.get(gid)
        if g is None:
            return None
        members = [s for s in st.symbols if g.matches(s.symbol)]
        # self shares are disjoint (one leaf per stack); the inclusive union is at least
        # the largest member's inclusive share.
        return GroupShare(
            group=gid,
            description=g.description + " (estimated from the symbol list)",
            self_pct=round(sum(s.self_pct for s in members), 3),
            inclusive_pct=max((s.inclusive_pct for s in members), default=0.0),
            top_self={
                s.symbol: s.self_pct
                for s in sorted(members, key=lambda s: -s.self_pct)[:5]
                if s.self_pct
            },
        )

    def self_pct(self, gid: str) -> float:
        g = self.group(gid)
        return g.self_pct if g else 0.0

    def incl_pct(self, gid: str) -> float:
        g = self.group(gid)
        return g.inclusive_pct if g else 0.0

    def top(self, *gids: str) -> str:
        items: list[tuple[str, float]] = []
        for gid in gids:
            g = self.group(gid)
            if g:
                items += list(g.top_self.items())
        items.sort(key=lambda kv: -kv[1])
        return ", ".join(f"{s} {v:.1f}%" for s, v in items[:5])

    # ---- CPU and topology
    @cached_property
    def nodes(self) -> list[NodeCpus]:
        if self.profile.numa_nodes:
            return list(self.profile.numa_nodes)
        if self.facts is not None and self.facts.cpu.numa_nodes.value:
            out = []
            for n in self.facts.cpu.numa_nodes.value:
                try:
                    out.append(NodeCpus(node=n.node, cpus=parse_cpulist(n.cpus)))
                except ValueError:
                    continue
            return out
        return []

    @property
    def nodes_source(self) -> str:
        if self.profile.numa_nodes:
            return "profile numa_nodes (/sys/devices/system/node)"
        return "facts cpu.numa_nodes"

    @cached_property
    def cpu(self) -> CpuSummary | None:
        p = self.profile
        if p.cpu is not None and (p.cpu.nodes or not self.nodes):
            return p.cpu
        if p.cpu_series:
            return summarize_cpu(p.cpu_series, self.nodes)
        return p.cpu

    @property
    def cpu_source(self) -> str:
        c = self.cpu
        n = c.intervals + 1 if c else 0
        d = c.duration_s if c else 0.0
        return f"/proc/stat, {n} samples over {d:g} s"

    @property
    def cpu_count(self) -> int | None:
        if self.cpu is not None and self.cpu.cpu_count:
            return self.cpu.cpu_count
        if self.facts is not None:
            return self.facts.cpu.logical_cpus.value
        return None

    def allowed_cpus(self) -> set[int] | None:
        f = self.facts
        if f is None or f.server is None or not f.server.cpus_allowed.value:
            return None
        try:
            return set(parse_cpulist(f.server.cpus_allowed.value))
        except ValueError:
            return None

    # ---- facts
    @property
    def arch(self) -> str | None:
        return self.facts.cpu.arch.value if self.facts else None

    @property
    def flavor(self) -> str | None:
        f = self.facts
        return f.server.flavor.value if f and f.server else None

    def variable(self, name: str) -> str | None:
        f = self.facts
        if f is None or f.server is None or not f.server.variables.value:
            return None
        return f.server.variables.value.get(name)

    def status_counters(self) -> tuple[dict[str, float], str]:
        """Status deltas over the window, else cumulative counters since server start."""
        st = self.profile.status
        if st is not None and st.deltas:
            return dict(st.deltas), f"{st.source} delta over {st.duration_s:g} s"
        f = self.facts
        if f is not None and f.server is not None and f.server.status.value:
            out: dict[str, float] = {}
            for k, v in f.server.status.value.items():
                try:
                    out[k] = float(v)
                except ValueError:
                    continue
            return out, "facts server.status (cumulative since server start)"
        return {}, ""


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _sev(high: bool) -> Severity:
    return "high" if high else "medium"


def _ev(
    metric: str,
    value: float,
    unit: str,
    source: str,
    threshold: str = "",
    detail: str = "",
) -> Evidence:
    return Evidence(
        metric=metric,
        value=round(value, 3),
        unit=unit,
        source=source,
        threshold=threshold,
        detail=detail,
    )


def _raise(rule: str, reason: str) -> RuleEffect:
    return RuleEffect(rule=rule, direction="raise", reason=reason)


def _lower(rule: str, reason: str) -> RuleEffect:
    return RuleEffect(rule=rule, direction="lower", reason=reason)


# ---------------------------------------------------------------- findings


def _spin(c: _Ctx) -> Finding | None:
    inn = c.self_pct("innodb-spin")
    ks = c.self_pct("kernel-spin")
    ll = c.self_pct("atomics-llsc")
    total = inn + ks + ll
    if total < SPIN_PCT and ll < LLSC_PCT:
        return None
    src = c.stack_source
    ev = [
        _ev(
            "self share of spin and lock-wait code",
            total,
            "%",
            src,
            f">= {SPIN_PCT:g}%",
            c.top("innodb-spin", "kernel-spin", "atomics-llsc"),
        )
    ]
    for gid, v, label in (
        ("innodb-spin", inn, "InnoDB mutex/rw-lock spinning"),
        ("kernel-spin", ks, "kernel spin locks"),
        ("atomics-llsc", ll, "aarch64 outline-atomics helpers"),
    ):
        if v > 0:
            ev.append(_ev(f"self share: {label}", v, "%", src, detail=c.top(gid)))
    st = c.profile.stacks
    if st is not None and st.kernel_pct >= KERNEL_NOTE_PCT:
        ev.append(
            _ev(
                "kernel share of samples (system time)",
                st.kernel_pct,
                "%",
                src,
                detail="seed 004 saw high system time next to the spinning",
            )
        )
    rules: list[RuleEffect] = []
    if inn >= SPIN_PART_PCT or ks >= SPIN_PART_PCT:
        rules.append(
            _raise(
                "server-spin-wait",
                "longer spin delays and more loops before sleeping cut cache-line "
                "ping-pong between spinning threads (seed 004)",
            )
        )
    # flavor unknown (no facts): both; each rule skips where it does not apply
    if c.flavor != "mariadb":
        rules.append(
            _raise(
                "server-thread-concurrency",
                "fewer threads inside InnoDB at once: seed 004 set it to the core count",
            )
        )
    if c.flavor != "mysql":
        rules.append(
            _raise(
                "server-thread-pool",
                "MariaDB ignores innodb_thread_concurrency; its thread pool caps the threads "
                "running at once",
            )
        )
    facts = c.facts
    binary = facts.binary if facts else None
    atomics = binary.atomics.value if binary else None
    has_lse = facts.cpu.has_lse.value if facts else None
    if c.arch in (None, "aarch64"):
        if c.arch == "aarch64" and has_lse is False:
            rules.append(
                _lower(
                    "build-lse",
                    "this CPU has no LSE atomics: only less contention helps, not a rebuild",
                )
            )
        elif atomics is not None and atomics.klass == "inline-lse":
            rules.append(_lower("build-lse", "the binary already uses inline LSE atomics"))
        elif ll >= SPIN_PART_PCT or (atomics is not None and atomics.klass in ("llsc", "outline")):
            why = (
                f"atomics helpers take {ll:.1f}% of samples"
                if ll >= SPIN_PART_PCT
                else f"binary atomics are {atomics.klass if atomics else '?'}"
            )
            rules.append(
                _raise(
                    "build-lse",
                    f"{why}: inline CAS/LDADD do not retry under contention the way LL/SC "
                    "loops do (mysql-server PR #302: up to 4x on 64-core Graviton2)",
                )
            )
    if inn >= SPIN_PART_PCT and facts is not None and facts.cpu.family.value == "kunpeng920":
        rules.append(
            _raise(
                "build-cacheline",
                "Kunpeng 920 has 128-byte L3 lines; structures padded for 64 bytes false-share "
                "(seed 004's cache-line fix)",
            )
        )
    return Finding(
        id="spin-hot-spot",
        title="Threads burn CPU spinning on locks",
        severity=_sev(total >= SPIN_HIGH_PCT),
        evidence=ev,
        likely_cause=(
            "More threads than cores contend for the same InnoDB mutexes and rw-locks "
            "(trx_sys for read views in MVCC::view_open, lock_sys, buffer pool, redo); "
            "waiters spin in ut_delay/PolicyMutex instead of working, and on aarch64 each "
            "attempt moves the cache line between cores (seed 004: 256 clients on Kunpeng "
            "920, MVCC::view_open and PolicyMutex spinning, high system time)."
        ),
        rules=rules,
        confirm=(
            "perf top -p $(pidof mariadbd || pidof mysqld) at the same concurrency: the "
            "self share of ut_delay, PolicyMutex/TTASEventMutex, srw/ssux lock waits and "
            "__aarch64_* helpers; SHOW ENGINE INNODB STATUS (SEMAPHORES) for the hot latch. "
            "After raising innodb_spin_wait_delay/innodb_sync_spin_loops or capping "
            "concurrency, the share falls and TPS does not."
        ),
    )


def _ahi(c: _Ctx) -> Finding | None:
    incl = c.incl_pct("ahi")
    if incl < AHI_PCT:
        return None
    nodes = c.nodes
    ev = [
        _ev(
            "inclusive share of the adaptive hash index (btr_search_*)",
            incl,
            "%",
            c.stack_source,
            f">= {AHI_PCT:g}%",
            c.top("ahi"),
        ),
        _ev(
            "self share of the adaptive hash index",
            c.self_pct("ahi"),
            "%",
            c.stack_source,
            detail="seed 002: btr_search_guess_on_hash ~30% on a 4-node Kunpeng, 10x x86",
        ),
    ]
    rules = [
        _raise(
            "server-adaptive-hash-index",
            "turning the AHI off removes the latch every lookup takes (dynamic: "
            "SET GLOBAL innodb_adaptive_hash_index=OFF, A/B it)",
        )
    ]
    if len(nodes) >= 2:
        ev.append(_ev("NUMA nodes", len(nodes), "nodes", c.nodes_source))
        rules.append(
            _raise(
                "numa-binding",
                "the AHI latch and hash cells bounce between nodes; binding to fewer nodes "
                "keeps them local (seed 002: +40%)",
            )
        )
    return Finding(
        id="ahi-hot-spot",
        title="Adaptive hash index is a hot spot",
        severity=_sev(incl >= AHI_HIGH_PCT or (len(nodes) >= 2 and incl >= AHI_PCT * 1.5)),
        evidence=ev,
        likely_cause=(
            "Every point lookup goes through the adaptive hash index and its partition "
            "latch; with many threads on several NUMA nodes the latch's and the hash "
            "table's cache lines move between sockets on each access, so a lookup that "
            "costs ~3% on x86 took ~30% on a 4-node Kunpeng (seed 002)."
        ),
        rules=rules,
        confirm=(
            "SHOW ENGINE INNODB STATUS: 'hash searches/s' vs 'non-hash searches/s' and "
            "semaphore waits in btr0sea.cc; perf top share of btr_search_guess_on_hash; A/B "
            "the workload with innodb_adaptive_hash_index=OFF (dynamic) and with numactl "
            "binding."
        ),
    )


def _numa(c: _Ctx) -> Finding | None:
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
        _ev(
            f"busy share spread between NUMA nodes ({scope})",
            spread,
            "points",
            c.cpu_source,
            f">= {NUMA_SPREAD_POINTS:g} points, busiest >= {NUMA_MIN_BUSY_PCT:g}% and "
            f">= {NUMA_RATIO:g}x the least busy",
            detail,
        ),
        _ev("busiest / least busy node", ratio, "x", c.cpu_source),
    ]
    f = c.facts
    if f is not None and f.memory.numa_balancing.value is not None:
        ev.append(
            _ev(
                "kernel.numa_balancing",
                f.memory.numa_balancing.value,
                "",
                f.memory.numa_balancing.source or "facts memory.numa_balancing",
            )
        )
    return Finding(
        id="numa-imbalance",
        title="Load is uneven across NUMA nodes",
        severity=_sev(spread >= NUMA_SPREAD_HIGH_POINTS),
        evidence=ev,
        likely_cause=(
            "The server's threads crowd some nodes while their memory (and the buffer "
            "pool) is spread over all, so many accesses are remote and the busy nodes "
            "saturate first; interrupts or other processes on some nodes make it worse. "
            "Seed 002 saw very uneven per-CPU load across the 4 nodes of a Kunpeng and "
            "gained +40% by binding mysqld with numactl."
        ),
        rules=[
            _raise(
                "numa-binding",
                "bind the server's CPUs and memory to the nodes its buffer pool fits in",
            )
        ],
        confirm=(
            "mpstat -P ALL 1 (or sar -P ALL) per CPU grouped by node; numastat -p "
            "$(pidof mariadbd) for memory per node; /proc/PID/status Cpus_allowed_list. "
            "After binding, load is even inside the bound nodes and QPS rises."
        ),
    )


def _frontend(c: _Ctx) -> Finding | None:
    m = derive_microarch(c.profile.microarch)
    fe = m.get("frontend_bound_pct")
    l1i = m.get("l1i_mpki")
    itlb = m.get("itlb_mpki")
    src = "profile microarch (perf stat over the recording)"
    ev: list[Evidence] = []
    code_layout = False
    tlb = False
    if fe is not None and fe >= FRONTEND_PCT:
        ev.append(
            _ev("frontend-bound share of cycles/slots", fe, "%", src, f">= {FRONTEND_PCT:g}%")
        )
        code_layout = True
    if l1i is not None and l1i >= L1I_MPKI:
        ev.append(_ev("L1i misses per 1000 instructions", l1i, "MPKI", src, f">= {L1I_MPKI:g}"))
        code_layout = True
    if itlb is not None and itlb >= ITLB_MPKI:
        ev.append(_ev("iTLB misses per 1000 instructions", itlb, "MPKI", src, f">= {ITLB_MPKI:g}"))
        tlb = True
    if not ev:
        return None
    b = c.facts.binary if c.facts else None
    rules: list[RuleEffect] = []
    if code_layout or tlb:
        if b is not None and b.pgo.value and b.lto.value:
            rules.append(
                _lower(
                    "build-pgo-lto",
                    "the binary already shows PGO and LTO: what remains is code layout "
                    "beyond PGO (BOLT) or huge pages",
                )
            )
        else:
            rules.append(
                _raise(
                    "build-pgo-lto",
                    "PGO+LTO packs the hot path together and inlines across files: fewer "
                    "i-cache and iTLB misses (seed 003: +27-31% QPS)",
                )
            )
    if tlb or (fe is not None and fe >= FRONTEND_HIGH_PCT):
        rules.append(
            _raise(
                "os-code-huge-pages",
                "2 MiB pages map the text with a few iTLB entries (seed 000: iTLB misses -43.9%)",
            )
        )
        if b is not None and b.text_huge_page_ready.value:
            rules.append(_lower("build-text-alignment", "text is already 2 MiB aligned"))
        else:
            rules.append(
                _raise(
                    "build-text-alignment",
                    "code huge pages need the text segment aligned to 2 MiB",
                )
            )
    high = (
        (fe is not None and fe >= FRONTEND_HIGH_PCT)
        or (l1i is not None and l1i >= L1I_HIGH_MPKI)
        or (itlb is not None and itlb >= ITLB_HIGH_MPKI)
    )
    return Finding(
        id="frontend-bound",
        title="The CPU waits for instructions (frontend bound)",
        severity=_sev(high),
        evidence=ev,
        likely_cause=(
            "The server's hot code (SQL layer plus InnoDB, megabytes) does not fit in the "
            "L1 instruction cache and iTLB, so the core stalls fetching instructions; "
            "PGO/LTO lay the hot path out densely (seed 003) and code huge pages cover it "
            "with few TLB entries (seed 000)."
        ),
        rules=rules,
        confirm=(
            "perf stat -e CPU_CYCLES,INST_RETIRED,STALL_FRONTEND,L1I_CACHE_REFILL,"
            "L1I_TLB_REFILL -p PID (Arm) or perf stat --topdown -a (x86) over the same "
            "workload; after the change compare normalized to this baseline (seed 000 "
            "reports iTLB/L1i misses as % of before)."
        ),
    )


def _network(c: _Ctx) -> Finding | None:
    net = c.incl_pct("net-rx")
    cpu = c.cpu
    ev: list[Evidence] = []
    stack_signal = c.profile.stacks is not None and net >= NET_STACK_PCT
    if stack_signal:
        ev.append(
            _ev(
                "inclusive share of the network softirq path",
                net,
                "%",
                c.stack_source,
                f">= {NET_STACK_PCT:g}%",
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
            _ev(
                "softirq share of busy CPU time",
                busy_share,
                "%",
                c.cpu_source,
                f">= {SOFTIRQ_BUSY_PCT:g}%",
            )
        )
        ev.append(
            _ev(
                f"softirq share of the busiest softirq CPU (cpu{cpu.max_softirq_cpu})",
                max_cpu,
                "%",
                c.cpu_source,
                f">= {SOFTIRQ_CPU_PCT:g}%",
            )
        )
    if not (stack_signal or proc_signal):
        return None
    f = c.facts
    if f is not None and f.network.irqbalance_running.value is not None:
        ev.append(
            _ev(
                "irqbalance running",
                1.0 if f.network.irqbalance_running.value else 0.0,
                "bool",
                f.network.irqbalance_running.source or "facts network.irqbalance_running",
            )
        )
    return Finding(
        id="network-softirq",
        title="Network interrupt and softirq work is heavy or concentrated",
        severity=_sev(max_cpu >= SOFTIRQ_CPU_HIGH_PCT or busy_share >= 2 * SOFTIRQ_BUSY_PCT),
        evidence=ev,
        likely_cause=(
            "Receive processing (IRQs, NAPI polling, protocol input) for many small "
            "client packets takes CPU from the cores the server runs on, or all NIC queues "
            "interrupt the same few CPUs. Seed 001 coalesced interrupts with fewer queues "
            "and bound the IRQs to fixed cores."
        ),
        rules=[
            _raise(
                "nic-irq-affinity",
                "pin NIC queue IRQs to chosen cores (off the server's hottest ones) and "
                "keep irqbalance from moving them",
            )
        ],
        confirm=(
            "/proc/softirqs NET_RX per CPU and /proc/interrupts for the NIC queues, twice "
            "10 s apart; mpstat -P ALL 1 (%soft); ethtool -l <nic>. After pinning, %soft "
            "stays on the chosen CPUs."
        ),
    )


def _bp_ratio(c: _Ctx) -> tuple[float, float, float, str] | None:
    counters, src = c.status_counters()
    reads = counters.get("Innodb_buffer_pool_reads")
    reqs = counters.get("Innodb_buffer_pool_read_requests")
    if reads is None or reqs is None or reqs < BP_MIN_REQUESTS:
        return None
    return 100.0 * reads / reqs, reads, reqs, src


def _io(c: _Ctx) -> Finding | None:
    cpu = c.cpu
    iowait = cpu.mean.iowait_pct if cpu is not None else 0.0
    rd = c.incl_pct("innodb-read-io")
    fl = c.incl_pct("innodb-flush-io")
    kio = c.incl_pct("kernel-io")
    stack_hit = max(rd, fl, kio) >= IO_STACK_PCT
    if iowait < IOWAIT_PCT and not stack_hit:
        return None
    ev: list[Evidence] = []
    if cpu is not None:
        ev.append(
            _ev(
                "iowait share of CPU time",
                iowait,
                "%",
                c.cpu_source,
                f">= {IOWAIT_PCT:g}%",
            )
        )
    src = c.stack_source
    for gid, v, label in (
        ("innodb-read-io", rd, "InnoDB page reads (buf_read_page, fil_io, os_aio)"),
        ("innodb-flush-io", fl, "InnoDB flushing and syncs (buf_flush_*, fil_flush, log)"),
        ("kernel-io", kio, "kernel block I/O (io_schedule, blk_mq_*, submit_bio)"),
    ):
        if v > 0:
            ev.append(
                _ev(
                    f"inclusive share: {label}",
                    v,
                    "%",
                    src,
                    f">= {IO_STACK_PCT:g}% (any path)",
                    c.top(gid),
                )
            )
    bp = _bp_ratio(c)
    read_side = rd >= IO_PART_PCT or (bp is not None and bp[0] >= BP_MISS_PCT)
    write_side = fl >= IO_PART_PCT
    if bp is not None:
        ev.append(_ev("buffer pool miss ratio (reads / read_requests)", bp[0], "%", bp[3]))
    rules: list[RuleEffect] = []
    if read_side or not write_side:
        rules.append(
            _raise(
                "server-buffer-pool-size",
                "page reads on misses: a larger pool keeps more of the working set in memory"
                if read_side
                else "iowait alone cannot tell reads from writes: check the pool first",
            )
        )
    if write_side or not read_side:
        rules.append(
            _raise(
                "server-io-capacity",
                "flushing must match the device: innodb_io_capacity sets the background flush rate"
                if write_side
                else "iowait alone cannot tell reads from writes: check flushing too",
            )
        )
    return Finding(
        id="io-wait",
        title="Threads wait for the disk",
        severity=_sev(iowait >= IOWAIT_HIGH_PCT or max(rd, fl, kio) >= 2 * IO_STACK_PCT),
        evidence=ev,
        likely_cause=(
            "Queries wait on page reads because the working set is larger than the buffer "
            "pool, and/or on flushing of dirty pages and redo that does not keep up with "
            "the write rate (io_capacity far below what the device does)."
        ),
        rules=rules,
        confirm=(
            "iostat -x 1 on the data device (r/s, w/s, r_await, %util); SHOW GLOBAL STATUS "
            "LIKE 'Innodb_buffer_pool_read%' twice, Innodb_buffer_pool_wait_free, "
            "Innodb_data_fsyncs; compare the data size with innodb_buffer_pool_size."
        ),
    )


def _bp_misses(c: _Ctx) -> Finding | None:
    bp = _bp_ratio(c)
    if bp is None or bp[0] < BP_MISS_PCT:
        return None
    ratio, reads, reqs, src = bp
    ev = [
        _ev(
            "buffer pool miss ratio (Innodb_buffer_pool_reads / read_requests)",
            ratio,
            "%",
            src,
            f">= {BP_MISS_PCT:g}% over >= {BP_MIN_REQUESTS} requests",
            f"{reads:.0f} reads of {reqs:.0f} requests",
        )
    ]
    rules = [
        _raise(
            "server-buffer-pool-size",
            "every miss is a disk read; a pool holding the working set removes them",
        )
    ]
    counters, csrc = c.status_counters()
    wait_free = counters.get("Innodb_buffer_pool_wait_free", 0.0)
    if wait_free > 0:
        ev.append(_ev("Innodb_buffer_pool_wait_free", wait_free, "waits", csrc))
        rules.append(
            _raise(
                "server-io-capacity",
                "threads waited for free pages: page cleaning does not keep up",
            )
        )
    f = c.facts
    pool = _float(c.variable("innodb_buffer_pool_size"))
    if f is not None and f.server is not None and f.server.data_size_bytes.value and pool:
        ev.append(
            _ev(
                "data size / buffer pool size",
                f.server.data_size_bytes.value / pool,
                "x",
                "facts server.data_size_bytes, innodb_buffer_pool_size",
            )
        )
    return Finding(
        id="buffer-pool-misses",
        title="Buffer pool misses send reads to disk",
        severity=_sev(ratio >= BP_MISS_HIGH_PCT),
        evidence=ev,
        likely_cause=(
            "The working set does not fit in innodb_buffer_pool_size, so a share of page "
            "requests becomes disk reads (a hit costs ~100 ns, a read ~100 us on SSD)."
        ),
        rules=rules,
        confirm=(
            "SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_read%' at the start and end of a "
            "steady window; the ratio should fall under 1% after resizing (near 0 for a "
            "CPU-bound benchmark)."
        ),
    )


def _scheduler(c: _Ctx) -> Finding | None:
    cs = c.profile.context_switches
    per_cpu = cs.per_cpu_per_s if cs is not None else 0.0
    sched = c.incl_pct("futex-sched")
    if per_cpu < CS_PER_CPU_S and sched < SCHED_PCT:
        return None
    ev: list[Evidence] = []
    if cs is not None:
        ev.append(
            _ev(
                "context switches per second per CPU",
                per_cpu,
                "/s",
                f"{cs.source}, {cs.duration_s:g} s, {cs.cpu_count} CPUs",
                f">= {CS_PER_CPU_S:g}",
            )
        )
    if c.profile.stacks is not None:
        ev.append(
            _ev(
                "inclusive share of futex and scheduler code",
                sched,
                "%",
                c.stack_source,
                f">= {SCHED_PCT:g}%",
                c.top("futex-sched", "kernel-spin"),
            )
        )
    st = c.profile.status
    ncpu = c.cpu_count
    if st is not None and "Threads_running" in st.gauges and ncpu:
        ev.append(
            _ev(
                "Threads_running per CPU",
                st.gauges["Threads_running"] / ncpu,
                "threads",
                f"{st.source} at the end of the window",
            )
        )
    rules: list[RuleEffect] = []
    th = c.variable("thread_handling")
    if c.flavor != "mariadb":
        rules.append(
            _raise(
                "server-thread-concurrency",
                "MySQL Community has no thread pool; innodb_thread_concurrency caps the "
                "threads inside InnoDB",
            )
        )
    if th == "pool-of-threads":
        ev.append(
            _ev(
                "thread_handling is already pool-of-threads",
                1.0,
                "bool",
                "facts server.variables",
                detail="look at thread_pool_size and thread_pool_oversubscribe instead",
            )
        )
    elif c.flavor != "mysql":
        rules.append(
            _raise(
                "server-thread-pool",
                "a pool runs about one thread per core: far fewer sleeps, wakeups and "
                "switches than one thread per connection",
            )
        )
    rules.append(
        _raise(
            "os-scheduler",
            "longer time slices and a higher migration cost mean fewer preemptions and "
            "migrations of busy threads",
        )
    )
    return Finding(
        id="scheduler-churn",
        title="Threads sleep and wake too often (futex and scheduler heavy)",
        severity=_sev(per_cpu >= CS_HIGH_PER_CPU_S or sched >= SCHED_HIGH_PCT),
        evidence=ev,
        likely_cause=(
            "Many more runnable connection threads than cores block on contended mutexes "
            "and condition variables (futex) and get switched in and out; the CPU goes "
            "to wakeups, switches and cold caches instead of queries."
        ),
        rules=rules,
        confirm=(
            "pidstat -w -t -p $(pidof mariadbd) 1 (cswch/s, nvcswch/s per thread); "
            "vmstat 1 (cs column); perf top share of futex_wait/__schedule. After the "
            "change, switches per second drop and throughput holds or rises."
        ),
    )


_DETECTORS = (_spin, _ahi, _numa, _frontend, _network, _io, _bp_misses, _scheduler)


def diagnose(profile: Profile, facts: Facts | None = None) -> list[Finding]:
    """Findings, most severe first (ties in a stable order by id)."""
    c = _Ctx(profile=profile, facts=facts)
    found = [f for f in (d(c) for d in _DETECTORS) if f is not None]
    return sorted(found, key=lambda f: (_SEVERITY_ORDER[f.severity], FINDING_IDS.index(f.id)))


def finding_ids(findings: Iterable[Finding]) -> tuple[str, ...]:
    """The ids for ``Hints(findings=...)``."""
    return tuple(f.id for f in findings)


def format_findings(findings: Sequence[Finding]) -> str:
    """Plain text for a terminal or a report section."""
    if not findings:
        return "no findings: nothing in this profile crossed a threshold"
    out: list[str] = []
    for f in findings:
        out.append(f"[{f.severity}] {f.id}: {f.title}")
        for e in f.evidence:
            thr = f" (threshold {e.threshold})" if e.threshold else ""
            det = f" [{e.detail}]" if e.detail else ""
            unit = e.unit if e.unit in ("%", "x", "") else f" {e.unit}"
            out.append(f"  evidence: {e.metric} = {e.value:g}{unit}{thr}; {e.source}{det}")
        out.append(f"  likely cause: {f.likely_cause}")
        for r in f.rules:
            out.append(f"  {r.direction}s {r.rule}: {r.reason}")
        out.append(f"  confirm: {f.confirm}")
    return "\n".join(out)
