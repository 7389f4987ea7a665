"""What one transaction cost the server and the host during a run: InnoDB's status
counters (pages flushed, data writes and fsyncs, redo bytes and writes, lock and log
waits, buffer pool reads) and the host's context switches and CPU shares (psutil), read
before and after the run and divided by the run's transactions.

An A/B verdict says which arm was faster; these say why: an arm that flushes pages or
fsyncs more often per transaction, switches context more or waits on the log shows it
here, next to the throughput (`compare.counter_rows`)."""

from __future__ import annotations

from collections.abc import Mapping

import psutil
import pymysql

from myaccel.errors import MyaccelError
from myaccel.model import Frozen
from myaccel.server.connection import ConnectParams, connect, query_rows

# Per-transaction figure -> the global status counter it is read from. Every counter
# exists under this name in MariaDB 10.6+ and MySQL 8.0+.
SERVER_COUNTERS: dict[str, str] = {
    "pages_flushed": "Innodb_buffer_pool_pages_flushed",
    "data_writes": "Innodb_data_writes",
    "data_fsyncs": "Innodb_data_fsyncs",
    "redo_bytes": "Innodb_os_log_written",
    "redo_writes": "Innodb_log_writes",
    "log_waits": "Innodb_log_waits",
    "row_lock_waits": "Innodb_row_lock_waits",
    "page_reads": "Innodb_buffer_pool_reads",
    "page_requests": "Innodb_buffer_pool_read_requests",
    "data_reads": "Innodb_data_reads",
    # rows the server changed, counted by the server itself: beside the client's own count
    # of write statements, a run whose client says 2 writes per transaction where the
    # workload does 4 (issue 35, defect 3) shows whether the server saw them
    "rows_inserted": "Handler_write",
    "rows_updated": "Handler_update",
    "rows_deleted": "Handler_delete",
}

# The host's figures: context switches per transaction, and CPU shares (% of all CPU
# time during the run) where a difference between arms shows kernel or I/O work.
HOST_SHARES = ("system", "iowait", "softirq")

# Labels for reports, in the order they are shown.
LABELS: dict[str, str] = {
    "pages_flushed": "pages flushed",
    "data_writes": "data file writes",
    "data_fsyncs": "fsyncs",
    "redo_bytes": "redo bytes",
    "redo_writes": "redo writes",
    "log_waits": "redo log waits",
    "row_lock_waits": "row lock waits",
    "page_reads": "pages read from disk",
    "data_reads": "data file reads",
    "rows_inserted": "rows written (server, with temporary tables)",
    "rows_updated": "rows updated (server)",
    "rows_deleted": "rows deleted (server)",
    "ctx_switches": "context switches (host)",
    "system_pct": "system CPU % (host)",
    "iowait_pct": "iowait % (host)",
    "softirq_pct": "softirq % (host)",
}


def server_counters(target: ConnectParams) -> dict[str, int]:
    """The global status counters of `SERVER_COUNTERS`; {} when the server cannot be read
    (the run is then recorded without them)."""
    names = ",".join(f"'{n}'" for n in SERVER_COUNTERS.values())
    try:
        conn = connect(target)
    except MyaccelError:
        return {}
    try:
        rows = query_rows(conn, f"SHOW GLOBAL STATUS WHERE Variable_name IN ({names})")
        return {str(k): int(v) for k, v in rows}
    except (pymysql.err.MySQLError, ValueError):
        return {}
    finally:
        conn.close()


def host_counters() -> dict[str, float]:
    """Context switches since boot and the CPU time of each `HOST_SHARES` state, idle
    (with iowait) and the total, summed over all CPUs (seconds)."""
    t = psutil.cpu_times()
    out = {s: float(getattr(t, s, 0.0)) for s in HOST_SHARES}
    out["total"] = float(sum(t))
    out["idle"] = float(t.idle) + float(getattr(t, "iowait", 0.0))
    out["ctx_switches"] = float(psutil.cpu_stats().ctx_switches)
    return out


def per_transaction(
    server0: Mapping[str, int],
    server1: Mapping[str, int],
    host0: Mapping[str, float],
    host1: Mapping[str, float],
    transactions: int,
) -> dict[str, float]:
    """Each counter's increase during the run per transaction, and the host's CPU shares
    (%); a counter missing from either snapshot is left out."""
    if transactions <= 0:
        return {}
    out: dict[str, float] = {}
    for key, name in SERVER_COUNTERS.items():
        if name in server0 and name in server1:
            out[key] = (server1[name] - server0[name]) / transactions
    if "ctx_switches" in host0 and "ctx_switches" in host1:
        out["ctx_switches"] = (host1["ctx_switches"] - host0["ctx_switches"]) / transactions
    total = host1.get("total", 0.0) - host0.get("total", 0.0)
    if total > 0:
        for s in HOST_SHARES:
            if s in host0 and s in host1:
                out[f"{s}_pct"] = 100.0 * (host1[s] - host0[s]) / total
    return out


# Other processes (and the kernel's own threads) using more than this share of all the
# host's CPU time during a run make the run's figure doubtful: it is flagged, and a
# comparison says how many runs of each arm were.
OTHERS_SHARE_WARN = 0.10


def others_cpu_s(
    host0: Mapping[str, float], host1: Mapping[str, float], own_s: float
) -> float | None:
    """CPU seconds the host was busy during the run beyond `own_s` (the server's, the
    client's and the harness's own); None without both snapshots."""
    if not all(k in h for h in (host0, host1) for k in ("total", "idle")):
        return None
    busy = (host1["total"] - host1["idle"]) - (host0["total"] - host0["idle"])
    return max(0.0, busy - own_s)


def others_warning(
    others_s: float | None, host0: Mapping[str, float], host1: Mapping[str, float]
) -> str | None:
    """The run's warning when others used more than `OTHERS_SHARE_WARN` of the CPU time."""
    total = host1.get("total", 0.0) - host0.get("total", 0.0)
    if others_s is None or total <= 0 or others_s / total <= OTHERS_SHARE_WARN:
        return None
    return (
        f"{OTHERS_WARNING_PREFIX} {100.0 * others_s / total:.0f}% of the host's CPU time "
        "during the run: the figure may be disturbed"
    )


OTHERS_WARNING_PREFIX = "other processes used"


def hit_ratio(c0: Mapping[str, int], c1: Mapping[str, int]) -> float | None:
    """The buffer pool hit ratio (%) between two counter snapshots; None without reads."""
    rr = c1.get("Innodb_buffer_pool_read_requests", 0) - c0.get(
        "Innodb_buffer_pool_read_requests", 0
    )
    rd = c1.get("Innodb_buffer_pool_reads", 0) - c0.get("Innodb_buffer_pool_reads", 0)
    return 100.0 * (1 - rd / rr) if rr > 0 else None


class CounterMedians(Frozen):
    """One per-transaction figure's median in each arm of a comparison."""

    baseline: float
    candidate: float


# A per-transaction figure is reported as different when the arms' medians differ by
# this share (or one arm is zero and the other is not); smaller differences are noise
# at the run counts `ab` uses.
DIFFERENCE_SHARE = 0.10


def counter_differences(medians: Mapping[str, CounterMedians]) -> str:
    """The figures whose medians differ between the arms, as "fsyncs 0.36 -> 0.22 (-38%)",
    in `LABELS` order; "" when none does."""
    parts = []
    for key, label in LABELS.items():
        m = medians.get(key)
        if m is None:
            continue
        a, b = m.baseline, m.candidate
        if a == b or max(abs(a), abs(b)) < 1e-3:
            continue
        if a != 0 and abs(b - a) / abs(a) < DIFFERENCE_SHARE:
            continue
        change = f" ({100.0 * (b - a) / a:+.0f}%)" if a else ""
        parts.append(f"{label} {_num(a)} -> {_num(b)}{change}")
    return "; ".join(parts)


def _num(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"
