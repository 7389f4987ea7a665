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

The package: ``thresholds`` (the numbers and why), ``catalog`` (what each finding says),
``context`` (what the detectors read), ``detect_*`` (one detector per finding), ``evidence``
(building and showing findings).
"""

from __future__ import annotations

from collections.abc import Iterable

from myaccel.model import Facts
from myaccel.profile.diagnose.catalog import FINDING_IDS, FINDINGS, RULE_IDS
from myaccel.profile.diagnose.context import Context
from myaccel.profile.diagnose.detect_contention import ahi_hot_spot, scheduler_churn, spin_hot_spot
from myaccel.profile.diagnose.detect_cpu import frontend_bound, network_softirq, numa_imbalance
from myaccel.profile.diagnose.detect_io import buffer_pool_misses, io_wait
from myaccel.profile.diagnose.evidence import format_findings
from myaccel.profile.records import Finding, Profile

DETECTORS = (
    spin_hot_spot,
    ahi_hot_spot,
    numa_imbalance,
    frontend_bound,
    network_softirq,
    io_wait,
    buffer_pool_misses,
    scheduler_churn,
)
_SEVERITY_ORDER = {"high": 0, "medium": 1, "low": 2}


def diagnose(profile: Profile, facts: Facts | None = None) -> list[Finding]:
    """Findings, most severe first (ties in a stable order by id)."""
    c = Context(profile=profile, facts=facts)
    found = [f for f in (d(c) for d in DETECTORS) if f is not None]
    return sorted(found, key=lambda f: (_SEVERITY_ORDER[f.severity], FINDING_IDS.index(f.id)))


def finding_ids(findings: Iterable[Finding]) -> tuple[str, ...]:
    """The ids for ``Hints(findings=...)``."""
    return tuple(f.id for f in findings)


__all__ = ["FINDINGS", "FINDING_IDS", "RULE_IDS", "diagnose", "finding_ids", "format_findings"]
