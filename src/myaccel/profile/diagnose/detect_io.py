"""Detectors of waiting for the disk: iowait and I/O paths in the stacks, buffer pool
misses."""

from __future__ import annotations

from myaccel.profile.diagnose.context import Context
from myaccel.profile.diagnose.evidence import evidence, finding, raise_rule, share_evidence
from myaccel.profile.diagnose.thresholds import (
    BP_MIN_REQUESTS,
    BP_MISS_HIGH_PCT,
    BP_MISS_PCT,
    IO_PART_PCT,
    IO_STACK_PCT,
    IOWAIT_HIGH_PCT,
    IOWAIT_PCT,
)
from myaccel.profile.records import Evidence, Finding, RuleEffect


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _bp_ratio(c: Context) -> tuple[float, float, float, str] | None:
    counters, src = c.status_counters()
    reads = counters.get("Innodb_buffer_pool_reads")
    reqs = counters.get("Innodb_buffer_pool_read_requests")
    if reads is None or reqs is None or reqs < BP_MIN_REQUESTS:
        return None
    return 100.0 * reads / reqs, reads, reqs, src


def io_wait(c: Context) -> Finding | None:
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
        ev.append(share_evidence("iowait share of CPU time", iowait, c.cpu_source, IOWAIT_PCT))
    src = c.stack_source
    for gid, v, label in (
        ("innodb-read-io", rd, "InnoDB page reads (buf_read_page, fil_io, os_aio)"),
        ("innodb-flush-io", fl, "InnoDB flushing and syncs (buf_flush_*, fil_flush, log)"),
        ("kernel-io", kio, "kernel block I/O (io_schedule, blk_mq_*, submit_bio)"),
    ):
        if v > 0:
            ev.append(
                evidence(
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
        ev.append(evidence("buffer pool miss ratio (reads / read_requests)", bp[0], "%", bp[3]))
    rules: list[RuleEffect] = []
    if read_side or not write_side:
        rules.append(
            raise_rule(
                "server-buffer-pool-size",
                "page reads on misses: a larger pool keeps more of the working set in memory"
                if read_side
                else "iowait alone cannot tell reads from writes: check the pool first",
            )
        )
    if write_side or not read_side:
        rules.append(
            raise_rule(
                "server-io-capacity",
                "flushing must match the device: innodb_io_capacity sets the background flush rate"
                if write_side
                else "iowait alone cannot tell reads from writes: check flushing too",
            )
        )
    return finding(
        "io-wait",
        high=iowait >= IOWAIT_HIGH_PCT or max(rd, fl, kio) >= 2 * IO_STACK_PCT,
        evidence=ev,
        rules=rules,
    )


def buffer_pool_misses(c: Context) -> Finding | None:
    bp = _bp_ratio(c)
    if bp is None or bp[0] < BP_MISS_PCT:
        return None
    ratio, reads, reqs, src = bp
    ev = [
        evidence(
            "buffer pool miss ratio (Innodb_buffer_pool_reads / read_requests)",
            ratio,
            "%",
            src,
            f">= {BP_MISS_PCT:g}% over >= {BP_MIN_REQUESTS} requests",
            f"{reads:.0f} reads of {reqs:.0f} requests",
        )
    ]
    rules = [
        raise_rule(
            "server-buffer-pool-size",
            "every miss is a disk read; a pool holding the working set removes them",
        )
    ]
    counters, csrc = c.status_counters()
    wait_free = counters.get("Innodb_buffer_pool_wait_free", 0.0)
    if wait_free > 0:
        ev.append(evidence("Innodb_buffer_pool_wait_free", wait_free, "waits", csrc))
        rules.append(
            raise_rule(
                "server-io-capacity",
                "threads waited for free pages: page cleaning does not keep up",
            )
        )
    f = c.facts
    pool = _float(c.variable("innodb_buffer_pool_size"))
    if f is not None and f.server is not None and f.server.data_size_bytes.value and pool:
        ev.append(
            evidence(
                "data size / buffer pool size",
                f.server.data_size_bytes.value / pool,
                "x",
                "facts server.data_size_bytes, innodb_buffer_pool_size",
            )
        )
    return finding("buffer-pool-misses", high=ratio >= BP_MISS_HIGH_PCT, evidence=ev, rules=rules)
