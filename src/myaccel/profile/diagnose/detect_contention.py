"""Detectors of threads contending: spinning on locks, the adaptive hash index latch, and
threads sleeping and waking too often."""

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
    AHI_HIGH_PCT,
    AHI_PCT,
    CS_HIGH_PER_CPU_S,
    CS_PER_CPU_S,
    KERNEL_NOTE_PCT,
    LLSC_PCT,
    SCHED_HIGH_PCT,
    SCHED_PCT,
    SPIN_HIGH_PCT,
    SPIN_PART_PCT,
    SPIN_PCT,
)
from myaccel.profile.records import Evidence, Finding, RuleEffect


def spin_hot_spot(c: Context) -> Finding | None:
    inn = c.self_pct("innodb-spin")
    ks = c.self_pct("kernel-spin")
    ll = c.self_pct("atomics-llsc")
    total = inn + ks + ll
    if total < SPIN_PCT and ll < LLSC_PCT:
        return None
    src = c.stack_source
    ev = [
        share_evidence(
            "self share of spin and lock-wait code",
            total,
            src,
            SPIN_PCT,
            c.top("innodb-spin", "kernel-spin", "atomics-llsc"),
        )
    ]
    for gid, v, label in (
        ("innodb-spin", inn, "InnoDB mutex/rw-lock spinning"),
        ("kernel-spin", ks, "kernel spin locks"),
        ("atomics-llsc", ll, "aarch64 outline-atomics helpers"),
    ):
        if v > 0:
            ev.append(evidence(f"self share: {label}", v, "%", src, detail=c.top(gid)))
    st = c.profile.stacks
    if st is not None and st.kernel_pct >= KERNEL_NOTE_PCT:
        ev.append(
            evidence(
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
            raise_rule(
                "server-spin-wait",
                "longer spin delays and more loops before sleeping cut cache-line "
                "ping-pong between spinning threads (seed 004)",
            )
        )
    # flavor unknown (no facts): both; each rule skips where it does not apply
    if c.flavor != "mariadb":
        rules.append(
            raise_rule(
                "server-thread-concurrency",
                "fewer threads inside InnoDB at once: seed 004 set it to the core count",
            )
        )
    if c.flavor != "mysql":
        rules.append(
            raise_rule(
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
                lower_rule(
                    "build-lse",
                    "this CPU has no LSE atomics: only less contention helps, not a rebuild",
                )
            )
        elif atomics is not None and atomics.klass == "inline-lse":
            rules.append(lower_rule("build-lse", "the binary already uses inline LSE atomics"))
        elif ll >= SPIN_PART_PCT or (atomics is not None and atomics.klass in ("llsc", "outline")):
            why = (
                f"atomics helpers take {ll:.1f}% of samples"
                if ll >= SPIN_PART_PCT
                else f"binary atomics are {atomics.klass if atomics else '?'}"
            )
            rules.append(
                raise_rule(
                    "build-lse",
                    f"{why}: inline CAS/LDADD do not retry under contention the way LL/SC "
                    "loops do (mysql-server PR #302: up to 4x on 64-core Graviton2)",
                )
            )
    if inn >= SPIN_PART_PCT and facts is not None and facts.cpu.family.value == "kunpeng920":
        rules.append(
            raise_rule(
                "build-cacheline",
                "Kunpeng 920 has 128-byte L3 lines; structures padded for 64 bytes false-share "
                "(seed 004's cache-line fix)",
            )
        )
    return finding("spin-hot-spot", high=total >= SPIN_HIGH_PCT, evidence=ev, rules=rules)


def ahi_hot_spot(c: Context) -> Finding | None:
    incl = c.incl_pct("ahi")
    if incl < AHI_PCT:
        return None
    nodes = c.nodes
    ev = [
        share_evidence(
            "inclusive share of the adaptive hash index (btr_search_*)",
            incl,
            c.stack_source,
            AHI_PCT,
            c.top("ahi"),
        ),
        evidence(
            "self share of the adaptive hash index",
            c.self_pct("ahi"),
            "%",
            c.stack_source,
            detail="seed 002: btr_search_guess_on_hash ~30% on a 4-node Kunpeng, 10x x86",
        ),
    ]
    rules = [
        raise_rule(
            "server-adaptive-hash-index",
            "turning the AHI off removes the latch every lookup takes (dynamic: "
            "SET GLOBAL innodb_adaptive_hash_index=OFF, A/B it)",
        )
    ]
    if len(nodes) >= 2:
        ev.append(evidence("NUMA nodes", len(nodes), "nodes", c.nodes_source))
        rules.append(
            raise_rule(
                "numa-binding",
                "the AHI latch and hash cells bounce between nodes; binding to fewer nodes "
                "keeps them local (seed 002: +40%)",
            )
        )
    return finding(
        "ahi-hot-spot",
        high=incl >= AHI_HIGH_PCT or (len(nodes) >= 2 and incl >= AHI_PCT * 1.5),
        evidence=ev,
        rules=rules,
    )


def scheduler_churn(c: Context) -> Finding | None:
    cs = c.profile.context_switches
    per_cpu = cs.per_cpu_per_s if cs is not None else 0.0
    sched = c.incl_pct("futex-sched")
    if per_cpu < CS_PER_CPU_S and sched < SCHED_PCT:
        return None
    ev: list[Evidence] = []
    if cs is not None:
        ev.append(
            evidence(
                "context switches per second per CPU",
                per_cpu,
                "/s",
                f"{cs.source}, {cs.duration_s:g} s, {cs.cpu_count} CPUs",
                f">= {CS_PER_CPU_S:g}",
            )
        )
    if c.profile.stacks is not None:
        ev.append(
            share_evidence(
                "inclusive share of futex and scheduler code",
                sched,
                c.stack_source,
                SCHED_PCT,
                c.top("futex-sched", "kernel-spin"),
            )
        )
    st = c.profile.status
    ncpu = c.cpu_count
    if st is not None and "Threads_running" in st.gauges and ncpu:
        ev.append(
            evidence(
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
            raise_rule(
                "server-thread-concurrency",
                "myaccel plans no MySQL thread pool (a plugin); innodb_thread_concurrency "
                "caps the threads inside InnoDB",
            )
        )
    if th == "pool-of-threads":
        ev.append(
            evidence(
                "thread_handling is already pool-of-threads",
                1.0,
                "bool",
                "facts server.variables",
                detail="look at thread_pool_size and thread_pool_oversubscribe instead",
            )
        )
    elif c.flavor != "mysql":
        rules.append(
            raise_rule(
                "server-thread-pool",
                "a pool runs about one thread per core: far fewer sleeps, wakeups and "
                "switches than one thread per connection",
            )
        )
    rules.append(
        raise_rule(
            "os-scheduler",
            "longer time slices and a higher migration cost mean fewer preemptions and "
            "migrations of busy threads",
        )
    )
    return finding(
        "scheduler-churn",
        high=per_cpu >= CS_HIGH_PER_CPU_S or sched >= SCHED_HIGH_PCT,
        evidence=ev,
        rules=rules,
    )
