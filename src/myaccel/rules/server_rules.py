"""Server layer: InnoDB memory, redo, I/O, concurrency and the opt-in durability group.

Each rule diffs against the running server's own values (never folklore defaults) and
proposes a change only when it differs meaningfully."""

from __future__ import annotations

from myaccel.rules.base import RuleContext, Skip, format_plan_size, recommend, rule
from myaccel.rules.conditions import status_int, storage_evidence, storage_kind
from myaccel.rules.model import MemoryBudget, Recommendation
from myaccel.units import GiB, MiB

IO_CAPACITY_FLOOR = 200  # one spinning disk (the MariaDB default)
IO_CAPACITY_CEILING = 10000  # MySQL 8.4's default, for NVMe

CHUNK = 128 * MiB
PERF_SCHEMA_BYTES = 256 * MiB  # typical performance_schema footprint with default sizing

PER_CONNECTION_VARS = (
    "thread_stack",
    "read_buffer_size",
    "read_rnd_buffer_size",
    "sort_buffer_size",
    "join_buffer_size",
    "binlog_cache_size",
)
GLOBAL_VARS = (
    "innodb_log_buffer_size",
    "key_buffer_size",
    "aria_pagecache_buffer_size",
    "query_cache_size",
)


def os_reserve(budget: int) -> int:
    """Memory left to the OS, page cache for logs and binlogs, and tools."""
    if budget <= 4 * GiB:
        return max(512 * MiB, budget // 4)
    return max(1 * GiB, min(8 * GiB, budget // 10))


def memory_inputs(ctx: RuleContext) -> tuple[int, str, int, int, int]:
    """(budget, source, global bytes, per-connection bytes, max_connections) using proposed
    values where a rule already changed them."""
    _ = ctx.server  # without server facts: Skip, as before
    budget, src = ctx.memory_budget()

    val = ctx.planned_bytes
    glob = sum(val(n) for n in GLOBAL_VARS if ctx.var(n) is not None)
    if (ctx.var("performance_schema") or "OFF").upper() in ("ON", "1"):
        glob += PERF_SCHEMA_BYTES
    per_conn = sum(val(n) for n in PER_CONNECTION_VARS) + 2 * val("net_buffer_length")
    max_conn = val("max_connections") or 151
    return budget, src, glob, per_conn, max_conn


def buffer_pool_target(budget: int, glob: int, per_conn: int, max_conn: int) -> int:
    """Largest buffer pool (in 128 MiB chunks) that leaves the OS reserve, global buffers
    and every connection's buffers inside the budget, and at most 75% of it (the share
    MySQL's innodb_dedicated_server uses above 4 GB)."""
    free = budget - os_reserve(budget) - glob - per_conn * max_conn
    target = min(int(free * 0.95), int(budget * 0.75))
    return (target // CHUNK) * CHUNK


def pool_instances(pool_bytes: int, cpus: int) -> int:
    """MySQL buffer pool instances: about one per GiB, at most 64 and the CPU count."""
    return max(1, min(64, pool_bytes // GiB, cpus))


def pool_layout(pool_bytes: int, cpus: int, chunk: int = CHUNK) -> tuple[int, int]:
    """A MySQL buffer pool (size, instances) the server keeps as set: the size must be a
    multiple of chunk x instances, or MySQL rounds it up past the plan (measured on MySQL
    9.7.4: 18048M with 2 instances became 18176M). Keeps the size (in whole chunks) with the
    largest instance count from 3/4 of the wanted one up that divides it (75G: 60 instances
    of 10 chunks, not 64); else rounds the size down to a multiple of chunk x wanted."""
    want = pool_instances(pool_bytes, cpus)
    chunks = pool_bytes // chunk
    for n in range(want, max(1, (3 * want + 3) // 4) - 1, -1):
        if chunks % n == 0:
            return chunks * chunk, n
    return chunks // want * want * chunk, want


def mysql_pool_layout(ctx: RuleContext, pool_bytes: int) -> tuple[int, int | None]:
    """``pool_layout`` for MySQL; MariaDB (one pool since 10.5) only rounds to a chunk."""
    if ctx.flavor == "mariadb" or not ctx.has("innodb_buffer_pool_instances"):
        return pool_bytes // CHUNK * CHUNK, None
    chunk = ctx.var_int("innodb_buffer_pool_chunk_size") or CHUNK
    return pool_layout(pool_bytes, ctx.cpus(), chunk)


def memory_budget(ctx: RuleContext) -> MemoryBudget:
    budget, src, glob, per_conn, max_conn = memory_inputs(ctx)
    bp = ctx.planned_bytes("innodb_buffer_pool_size")
    reserve = os_reserve(budget)
    total = reserve + glob + per_conn * max_conn + bp
    return MemoryBudget(
        budget_bytes=budget,
        budget_source=src,
        os_reserve_bytes=reserve,
        global_buffers_bytes=glob,
        per_connection_bytes=per_conn,
        max_connections=max_conn,
        connections_bytes=per_conn * max_conn,
        buffer_pool_bytes=bp,
        total_bytes=total,
    )


@rule(
    "server-max-connections",
    "server",
    "Connections for the expected concurrency",
    "MySQL/MariaDB manual: max_connections",
)
def max_connections(ctx: RuleContext) -> list[Recommendation]:
    """Allow the expected client concurrency plus headroom for admin and monitoring. Raised
    only: from a benchmark's thread count, or when Max_used_connections came within 15% of
    the limit."""
    cur = ctx.var_int("max_connections") or 151
    used = status_int(ctx, "Max_used_connections")
    want = cur
    ev = {
        "server.variables.max_connections": str(cur),
        "server.status.Max_used_connections": str(used),
    }
    if ctx.hints.threads:
        want = max(want, ctx.hints.threads + 50)
        ev["hints.threads"] = str(ctx.hints.threads)
    if used >= 0.85 * cur:
        want = max(want, int(cur * 1.5))
    if want <= cur:
        raise Skip(f"max_connections {cur} fits the observed/expected concurrency")
    return [
        recommend(
            ctx,
            title="Raise max_connections",
            target="mysql:max_connections",
            current=str(cur),
            proposed=str(want),
            rationale="clients above the limit get 'Too many connections'; headroom of 50 for admin and monitoring",
            evidence=ev,
            expected_effect="no connection errors at the expected concurrency",
            effect_source="MySQL/MariaDB manual",
            verify="SELECT @@max_connections; watch Connection_errors_max_connections",
            confidence="high",
        )
    ]


def leave_to_dedicated_server(ctx: RuleContext, what: str) -> None:
    """Skip when MySQL's innodb_dedicated_server=ON sizes ``what`` from the machine: an
    explicit value would override the server's own sizing (MySQL manual:
    innodb_dedicated_server), which is what the rule would compute anyway."""
    if (ctx.var("innodb_dedicated_server") or "").upper() == "ON":
        raise Skip(f"innodb_dedicated_server=ON: the server sizes {what} itself")


@rule(
    "server-buffer-pool-size",
    "server",
    "Buffer pool from the memory budget",
    "MySQL manual: innodb_dedicated_server; KNOWLEDGE.md section 3",
    order=80,
)
def buffer_pool_size(ctx: RuleContext) -> list[Recommendation]:
    """Size the InnoDB buffer pool from the memory budget: min(RAM, cgroup limit), minus an
    OS reserve, global buffers and per-connection buffers times max_connections, capped at
    75% of the budget. Counting the connections is what naive tuners get wrong. A MySQL
    server with innodb_dedicated_server=ON sizes its pool itself and is left to do so. On a
    MariaDB whose innodb_buffer_pool_size_max is below the target (10.11.12+, 11.4.6+, 11.8.2+
    before its 8 TiB default), that ceiling is raised too (server-buffer-pool-size-max)."""
    leave_to_dedicated_server(ctx, "innodb_buffer_pool_size")
    budget, src, glob, per_conn, max_conn = memory_inputs(ctx)
    target = buffer_pool_target(budget, glob, per_conn, max_conn)
    target, instances = mysql_pool_layout(ctx, target)
    cur = ctx.var_int("innodb_buffer_pool_size")
    if target < CHUNK:
        raise Skip(
            f"memory budget {budget / GiB:.1f} GiB leaves no room for a buffer pool above 128 MiB"
        )
    if cur is not None and abs(target - cur) <= 0.1 * cur:
        raise Skip(
            f"buffer pool {format_plan_size(cur)} is within 10% of the target {format_plan_size(target)}"
        )
    data = ctx.server.data_size_bytes.value
    ev = {
        "memory.budget": f"{budget} ({src})",
        "memory.os_reserve": str(os_reserve(budget)),
        "server.global_buffers": str(glob),
        "server.per_connection_buffers": f"{per_conn} x {max_conn} connections",
        "server.variables.innodb_buffer_pool_size": str(cur),
    }
    if data is not None:
        ev["server.data_size_bytes"] = str(data)
    effect = "fewer page reads: IO-bound workloads gain most (several times), CPU-bound ones little"
    if cur is not None and target < cur:
        effect = "keeps the server inside its memory budget (no swapping or OOM kills)"
    return [
        *pool_ceiling(ctx, target),
        recommend(
            ctx,
            title="Size the buffer pool from the memory budget",
            target="mysql:innodb_buffer_pool_size",
            current=format_plan_size(cur) if cur is not None else None,
            proposed=format_plan_size(target),
            rationale=f"{format_plan_size(target)} = min(0.95 x (budget - OS reserve - global buffers - connections), 75% of budget)"
            + (
                f", a multiple of chunk x {instances} instances so MySQL keeps it as set"
                if instances is not None
                else ""
            ),
            evidence=ev,
            expected_effect=effect,
            effect_source="MySQL manual (innodb_dedicated_server: 75% of RAM above 4 GB); seeds/000 sizes buffers from RAM",
            verify="SELECT @@innodb_buffer_pool_size; SHOW STATUS LIKE 'Innodb_buffer_pool_resize_status'; hit ratio from Innodb_buffer_pool_reads",
            confidence="high",
        ),
    ]


def pool_ceiling(ctx: RuleContext, target: int) -> list[Recommendation]:
    """MariaDB 10.11.12+, 11.4.6+, 11.8.2+ (MDEV-29445) refuse ``SET GLOBAL
    innodb_buffer_pool_size`` above the read-only ``innodb_buffer_pool_size_max`` (a warning,
    and the pool stays as it was). Until 10.11.17/11.4.11/11.8.7 (MDEV-38671, 8 TiB) that
    ceiling defaults to the size the server started with, so a grown pool needs the ceiling
    raised too (a restart); a server whose ceiling already fits gets nothing here."""
    ceiling = ctx.var_int("innodb_buffer_pool_size_max")
    if ceiling is None or ceiling == 0 or target <= ceiling:
        return []
    return [
        recommend(
            ctx,
            id="server-buffer-pool-size-max",
            layer="server",
            title="Raise the buffer pool ceiling",
            target="mysql:innodb_buffer_pool_size_max",
            current=format_plan_size(ceiling),
            proposed=format_plan_size(target),
            rationale=f"innodb_buffer_pool_size {format_plan_size(target)} is above the "
            f"ceiling {format_plan_size(ceiling)}: SET GLOBAL would be refused (MDEV-29445)",
            evidence={"server.variables.innodb_buffer_pool_size_max": str(ceiling)},
            expected_effect="the buffer pool takes the planned size",
            effect_source="MariaDB MDEV-29445, MDEV-38671",
            verify="SELECT @@innodb_buffer_pool_size_max, @@innodb_buffer_pool_size",
            confidence="high",
        )
    ]


def redo_target(ctx: RuleContext) -> tuple[int, str]:
    st = ctx.status()
    uptime = int(st.get("Uptime", "0") or 0)
    written = int(
        st.get("Innodb_os_log_written", "0") or st.get("Innodb_redo_log_current_lsn", "0") or 0
    )
    if uptime >= 600 and written > 0:
        rate = written / uptime
        target = int(min(64 * GiB, max(1 * GiB, rate * 3600)))
        why = f"one hour of redo at the observed {rate / MiB:.2f} MiB/s, kept within 1..64 GiB"
        return target, why
    cpus = ctx.cpus()
    return int(
        min(16 * GiB, max(1 * GiB, cpus // 2 * GiB))
    ), f"{cpus} CPUs / 2 GiB (MySQL 8.4 innodb_dedicated_server), 1..16 GiB"


@rule(
    "server-redo-capacity",
    "server",
    "Redo log capacity",
    "MySQL manual: innodb_redo_log_capacity; MariaDB KB: innodb_log_file_size",
)
def redo_capacity(ctx: RuleContext) -> list[Recommendation]:
    """A small redo log forces frequent checkpoints and stalls write workloads. Target about
    an hour of redo at the observed write rate, or MySQL 8.4's dedicated-server formula
    when there is no history; the knob depends on the version. innodb_dedicated_server=ON
    sizes the redo log itself (MySQL 8.0.30+) and is left to do so."""
    leave_to_dedicated_server(ctx, "the redo log")
    target, why = redo_target(ctx)
    sv = ctx.version
    if ctx.has("innodb_redo_log_capacity") and sv.flavor != "mariadb" and sv.at_least(8, 0, 30):
        name, cur = "innodb_redo_log_capacity", ctx.var_int("innodb_redo_log_capacity")
        want = target
    else:
        name, cur = "innodb_log_file_size", ctx.var_int("innodb_log_file_size")
        files = ctx.var_int("innodb_log_files_in_group") or 1
        want = target // files
        want = (want // MiB) * MiB
    if cur is not None and cur >= 0.5 * want:
        raise Skip(
            f"{name} {format_plan_size(cur)} is already at least half of the target {format_plan_size(want)}"
        )
    return [
        recommend(
            ctx,
            title="Larger redo log",
            target=f"mysql:{name}",
            current=format_plan_size(cur) if cur is not None else None,
            proposed=format_plan_size(want),
            rationale=why,
            evidence={
                f"server.variables.{name}": str(cur),
                "server.status.Uptime": ctx.status().get("Uptime", "?"),
            },
            expected_effect="fewer checkpoint stalls: write workloads gain, often 10-50% on small defaults",
            effect_source="MySQL manual (innodb_dedicated_server redo sizing); seeds/000 (log files from RAM)",
            verify=f"SELECT @@{name}; watch Innodb_checkpoint_age / Innodb_log_waits",
            confidence="high",
        )
    ]


def io_capacity_targets(ctx: RuleContext) -> tuple[int, int, str]:
    """(io_capacity, io_capacity_max, why) from the measured device when there is a
    measurement, else from the kind of storage."""
    kind = storage_kind(ctx)
    s = ctx.facts.storage
    m = s.measured.value if s.measured.known else None
    if m is None:
        cap, cap_max = {"nvme": (10000, 20000), "ssd": (2000, 4000), "hdd": (200, 2000)}[kind]
        return (
            cap,
            cap_max,
            f"{kind} storage under the datadir sustains about {cap} background IOPS",
        )
    # Background flushing gets a tenth of what the device sustains for random 16 KiB
    # writes at queue depth 32 (foreground reads, redo and doublewrite keep the rest),
    # within the servers' range of sensible values: 200 (one disk) to 10000 (8.4 default).
    cap = int(min(IO_CAPACITY_CEILING, max(IO_CAPACITY_FLOOR, m.random_write_iops * 0.1)))
    cap = max(IO_CAPACITY_FLOOR, cap // 100 * 100)
    cap_max = int(min(2 * IO_CAPACITY_CEILING, max(2000, 2 * cap)))
    why = (
        f"the datadir's device did {m.random_write_iops:,.0f} random 16 KiB writes/s at "
        f"queue depth 32 ({s.measured.source}); a tenth of that for background flushing"
    )
    return cap, cap_max, why


@rule(
    "server-io-capacity",
    "server",
    "I/O capacity from the storage",
    "MySQL manual: innodb_io_capacity",
)
def io_capacity(ctx: RuleContext) -> list[Recommendation]:
    """Background flushing is paced by innodb_io_capacity: 200 suits one spinning disk;
    SSDs and NVMe sustain far more, and a low value lets dirty pages pile up until an
    aggressive flush stalls foreground work. With storage measured (plan --measure-storage,
    accelerate), the value follows what the device sustained, not its rotational flag."""
    kind = storage_kind(ctx)
    cap, cap_max, why = io_capacity_targets(ctx)
    cur = ctx.var_int("innodb_io_capacity")
    if cur is not None and cur >= cap:
        raise Skip(f"innodb_io_capacity {cur} already suits {kind} storage")
    recs = [
        recommend(
            ctx,
            title=f"I/O capacity for {kind.upper()}",
            target="mysql:innodb_io_capacity",
            current=str(cur),
            proposed=str(cap),
            rationale=why,
            evidence=storage_evidence(ctx),
            expected_effect="smoother flushing, fewer stalls on write workloads",
            effect_source="MySQL manual: innodb_io_capacity (8.4 default 10000)",
            verify="SELECT @@innodb_io_capacity; watch Innodb_buffer_pool_pages_dirty",
        )
    ]
    cur_max = ctx.var_int("innodb_io_capacity_max")
    if cur_max is None or cur_max < cap_max:
        recs.append(
            recommend(
                ctx,
                id="server-io-capacity-max",
                layer="server",
                title="I/O capacity ceiling",
                target="mysql:innodb_io_capacity_max",
                current=str(cur_max),
                proposed=str(cap_max),
                rationale="twice innodb_io_capacity for emergency flushing",
                evidence={"innodb_io_capacity": str(cap)},
                expected_effect="faster recovery from dirty page pile-ups",
                effect_source="MySQL manual: innodb_io_capacity_max",
                verify="SELECT @@innodb_io_capacity_max",
            )
        )
    return recs
