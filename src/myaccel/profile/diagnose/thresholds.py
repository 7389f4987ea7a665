"""The thresholds of the findings, each with its reasoning (percentages of profile
samples unless noted)."""

from __future__ import annotations

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
