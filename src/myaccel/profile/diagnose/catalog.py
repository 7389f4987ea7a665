"""The findings catalogue: each finding's title, likely cause and how to confirm it by
hand, and the rule ids a finding may raise or lower."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FindingText:
    """What a finding says whatever its numbers: shown with its evidence."""

    title: str
    likely_cause: str
    confirm: str


FINDINGS: dict[str, FindingText] = {
    "spin-hot-spot": FindingText(
        title="Threads burn CPU spinning on locks",
        likely_cause="More threads than cores contend for the same InnoDB mutexes and rw-locks "
        "(trx_sys for read views in MVCC::view_open, lock_sys, buffer pool, redo); "
        "waiters spin in ut_delay/PolicyMutex instead of working, and on aarch64 each "
        "attempt moves the cache line between cores (seed 004: 256 clients on Kunpeng "
        "920, MVCC::view_open and PolicyMutex spinning, high system time).",
        confirm="perf top -p $(pidof mariadbd || pidof mysqld) at the same concurrency: the "
        "self share of ut_delay, PolicyMutex/TTASEventMutex, srw/ssux lock waits and "
        "__aarch64_* helpers; SHOW ENGINE INNODB STATUS (SEMAPHORES) for the hot latch. "
        "After raising innodb_spin_wait_delay/innodb_sync_spin_loops or capping "
        "concurrency, the share falls and TPS does not.",
    ),
    "ahi-hot-spot": FindingText(
        title="Adaptive hash index is a hot spot",
        likely_cause="Every point lookup goes through the adaptive hash index and its partition "
        "latch; with many threads on several NUMA nodes the latch's and the hash "
        "table's cache lines move between sockets on each access, so a lookup that "
        "costs ~3% on x86 took ~30% on a 4-node Kunpeng (seed 002).",
        confirm="SHOW ENGINE INNODB STATUS: 'hash searches/s' vs 'non-hash searches/s' and "
        "semaphore waits in btr0sea.cc; perf top share of btr_search_guess_on_hash; A/B "
        "the workload with innodb_adaptive_hash_index=OFF (dynamic) and with numactl "
        "binding.",
    ),
    "numa-imbalance": FindingText(
        title="Load is uneven across NUMA nodes",
        likely_cause="The server's threads crowd some nodes while their memory (and the buffer "
        "pool) is spread over all, so many accesses are remote and the busy nodes "
        "saturate first; interrupts or other processes on some nodes make it worse. "
        "Seed 002 saw very uneven per-CPU load across the 4 nodes of a Kunpeng and "
        "gained +40% by binding mysqld with numactl.",
        confirm="mpstat -P ALL 1 (or sar -P ALL) per CPU grouped by node; numastat -p "
        "$(pidof mariadbd || pidof mysqld) for memory per node; /proc/PID/status Cpus_allowed_list. "
        "After binding, load is even inside the bound nodes and QPS rises.",
    ),
    "frontend-bound": FindingText(
        title="The CPU waits for instructions (frontend bound)",
        likely_cause="The server's hot code (SQL layer plus InnoDB, megabytes) does not fit in the "
        "L1 instruction cache and iTLB, so the core stalls fetching instructions; "
        "PGO/LTO lay the hot path out densely (seed 003) and code huge pages cover it "
        "with few TLB entries (seed 000).",
        confirm="perf stat -e CPU_CYCLES,INST_RETIRED,STALL_FRONTEND,L1I_CACHE_REFILL,"
        "L1I_TLB_REFILL -p PID (Arm) or perf stat --topdown -a (x86) over the same "
        "workload; after the change compare normalized to this baseline (seed 000 "
        "reports iTLB/L1i misses as % of before).",
    ),
    "network-softirq": FindingText(
        title="Network interrupt and softirq work is heavy or concentrated",
        likely_cause="Receive processing (IRQs, NAPI polling, protocol input) for many small "
        "client packets takes CPU from the cores the server runs on, or all NIC queues "
        "interrupt the same few CPUs. Seed 001 coalesced interrupts with fewer queues "
        "and bound the IRQs to fixed cores.",
        confirm="/proc/softirqs NET_RX per CPU and /proc/interrupts for the NIC queues, twice "
        "10 s apart; mpstat -P ALL 1 (%soft); ethtool -l <nic>. After pinning, %soft "
        "stays on the chosen CPUs.",
    ),
    "io-wait": FindingText(
        title="Threads wait for the disk",
        likely_cause="Queries wait on page reads because the working set is larger than the buffer "
        "pool, and/or on flushing of dirty pages and redo that does not keep up with "
        "the write rate (io_capacity far below what the device does).",
        confirm="iostat -x 1 on the data device (r/s, w/s, r_await, %util); SHOW GLOBAL STATUS "
        "LIKE 'Innodb_buffer_pool_read%' twice, Innodb_buffer_pool_wait_free, "
        "Innodb_data_fsyncs; compare the data size with innodb_buffer_pool_size.",
    ),
    "buffer-pool-misses": FindingText(
        title="Buffer pool misses send reads to disk",
        likely_cause="The working set does not fit in innodb_buffer_pool_size, so a share of page "
        "requests becomes disk reads (a hit costs ~100 ns, a read ~100 us on SSD).",
        confirm="SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_read%' at the start and end of a "
        "steady window; the ratio should fall under 1% after resizing (near 0 for a "
        "CPU-bound benchmark).",
    ),
    "scheduler-churn": FindingText(
        title="Threads sleep and wake too often (futex and scheduler heavy)",
        likely_cause="Many more runnable connection threads than cores block on contended mutexes "
        "and condition variables (futex) and get switched in and out; the CPU goes "
        "to wakeups, switches and cold caches instead of queries.",
        confirm="pidstat -w -t -p $(pidof mariadbd || pidof mysqld) 1 (cswch/s, nvcswch/s per thread); "
        "vmstat 1 (cs column); perf top share of futex_wait/__schedule. After the "
        "change, switches per second drop and throughput holds or rises.",
    ),
}


# Stable ids, in the order ties between equally severe findings are listed.
FINDING_IDS = tuple(FINDINGS)


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
