"""Server layer: InnoDB memory, redo, I/O, concurrency and the opt-in durability group.

Each rule diffs against the running server's own values (never folklore defaults) and
proposes a change only when it differs meaningfully."""

from __future__ import annotations

from myaccel.rules.base import RuleContext, Skip, fmt_size, parse_size, rule
from myaccel.rules.model import MemoryBudget, Recommendation

GiB = 1024**3
MiB = 1024**2
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
    f = ctx.facts
    budget: int | None = None
    src = ""
    s = ctx.server
    if s.cgroup_limit_bytes.known and s.cgroup_limit_bytes.value:
        budget, src = (
            s.cgroup_limit_bytes.value,
            f"server cgroup limit ({s.cgroup_limit_bytes.source})",
        )
    if f.memory.effective_limit_bytes.known and f.memory.effective_limit_bytes.value:
        eff = f.memory.effective_limit_bytes.value
        if budget is None or eff < budget:
            budget, src = eff, f"min(RAM, cgroup limit) ({f.memory.effective_limit_bytes.source})"
    if budget is None:
        raise Skip("memory size unknown")

    def val(name: str) -> int:
        v = ctx.proposed.get(name) or ctx.var(name)
        return parse_size(v) or 0

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
    bp = (
        parse_size(
            ctx.proposed.get("innodb_buffer_pool_size") or ctx.var("innodb_buffer_pool_size")
        )
        or 0
    )
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


def _rec(ctx: RuleContext, **kw: object) -> Recommendation:
    name = str(kw["target"]).removeprefix("mysql:")
    kw.setdefault("risk", "online" if ctx.is_dynamic(name) else "restart")
    return Recommendation.model_validate(kw)


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
    used = int(ctx.status().get("Max_used_connections", "0") or 0)
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
        _rec(
            ctx,
            id="server-max-connections",
            layer="server",
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
    75% of the budget. Counting the connections is what naive tuners get wrong."""
    budget, src, glob, per_conn, max_conn = memory_inputs(ctx)
    target = buffer_pool_target(budget, glob, per_conn, max_conn)
    target, instances = mysql_pool_layout(ctx, target)
    cur = ctx.var_int("innodb_buffer_pool_size")
    if target < CHUNK:
        raise Skip(
            f"memory budget {budget / GiB:.1f} GiB leaves no room for a buffer pool above 128 MiB"
        )
    if cur is not None and abs(target - cur) <= 0.1 * cur:
        raise Skip(f"buffer pool {fmt_size(cur)} is within 10% of the target {fmt_size(target)}")
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
        _rec(
            ctx,
            id="server-buffer-pool-size",
            layer="server",
            title="Size the buffer pool from the memory budget",
            target="mysql:innodb_buffer_pool_size",
            current=fmt_size(cur) if cur is not None else None,
            proposed=fmt_size(target),
            rationale=f"{fmt_size(target)} = min(0.95 x (budget - OS reserve - global buffers - connections), 75% of budget)"
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
        )
    ]


@rule(
    "server-buffer-pool-instances",
    "server",
    "Buffer pool instances (MySQL)",
    "MySQL manual: innodb_buffer_pool_instances",
    order=90,
)
def buffer_pool_instances(ctx: RuleContext) -> list[Recommendation]:
    """MySQL splits the buffer pool into instances to reduce mutex contention: about one per
    GiB, at most 64 and not more than the CPUs. MariaDB has one pool since 10.5."""
    if not ctx.has("innodb_buffer_pool_instances") or ctx.flavor == "mariadb":
        raise Skip("this server has a single buffer pool (MariaDB 10.5+) or no such knob")
    bp = (
        parse_size(
            ctx.proposed.get("innodb_buffer_pool_size") or ctx.var("innodb_buffer_pool_size")
        )
        or 0
    )
    want = mysql_pool_layout(ctx, bp)[1] or 1
    cur = ctx.var_int("innodb_buffer_pool_instances")
    if cur == want:
        raise Skip(f"already {cur}")
    return [
        _rec(
            ctx,
            id="server-buffer-pool-instances",
            layer="server",
            title="Buffer pool instances",
            target="mysql:innodb_buffer_pool_instances",
            current=str(cur),
            proposed=str(want),
            rationale="about one instance per GiB of buffer pool, at most 64 and the CPU count",
            evidence={"innodb_buffer_pool_size": str(bp), "cpu.logical_cpus": str(ctx.cpus())},
            expected_effect="less buffer pool mutex contention at high concurrency (a few %)",
            effect_source="MySQL manual: innodb_buffer_pool_instances",
            risk="restart",
            verify="SELECT @@innodb_buffer_pool_instances",
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
    when there is no history; the knob depends on the version."""
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
            f"{name} {fmt_size(cur)} is already at least half of the target {fmt_size(want)}"
        )
    return [
        _rec(
            ctx,
            id="server-redo-capacity",
            layer="server",
            title="Larger redo log",
            target=f"mysql:{name}",
            current=fmt_size(cur) if cur is not None else None,
            proposed=fmt_size(want),
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


@rule("server-log-buffer", "server", "Log buffer", "MySQL 8.4 manual (default 64 MiB)")
def log_buffer(ctx: RuleContext) -> list[Recommendation]:
    """A log buffer below 32 MiB makes transactions wait for log writes (Innodb_log_waits);
    MySQL 8.4 raised its default to 64 MiB."""
    cur = ctx.var_int("innodb_log_buffer_size")
    waits = int(ctx.status().get("Innodb_log_waits", "0") or 0)
    if cur is None or (cur >= 32 * MiB and waits == 0):
        raise Skip("log buffer is at least 32 MiB and no log waits")
    return [
        _rec(
            ctx,
            id="server-log-buffer",
            layer="server",
            title="Larger log buffer",
            target="mysql:innodb_log_buffer_size",
            current=fmt_size(cur),
            proposed="64M",
            rationale="64 MiB absorbs large transactions without waiting for the log writer",
            evidence={"innodb_log_buffer_size": str(cur), "Innodb_log_waits": str(waits)},
            expected_effect="no log waits for large transactions (small gain on write workloads)",
            effect_source="MySQL 8.4 changed the default to 64 MiB",
            verify="SELECT @@innodb_log_buffer_size; Innodb_log_waits stays 0",
        )
    ]


def _storage_kind(ctx: RuleContext) -> str:
    s = ctx.facts.storage
    dev = s.block_device.value or ""
    if dev.startswith("nvme"):
        return "nvme"
    if s.rotational.known:
        return "hdd" if s.rotational.value else "ssd"
    raise Skip("storage type unknown")


@rule(
    "server-io-capacity",
    "server",
    "I/O capacity from the storage",
    "MySQL manual: innodb_io_capacity",
)
def io_capacity(ctx: RuleContext) -> list[Recommendation]:
    """Background flushing is paced by innodb_io_capacity: 200 suits one spinning disk;
    SSDs and NVMe sustain far more, and a low value lets dirty pages pile up until an
    aggressive flush stalls foreground work."""
    kind = _storage_kind(ctx)
    cap, cap_max = {"nvme": (10000, 20000), "ssd": (2000, 4000), "hdd": (200, 2000)}[kind]
    cur = ctx.var_int("innodb_io_capacity")
    if cur is not None and cur >= cap:
        raise Skip(f"innodb_io_capacity {cur} already suits {kind} storage")
    recs = [
        _rec(
            ctx,
            id="server-io-capacity",
            layer="server",
            title=f"I/O capacity for {kind.upper()}",
            target="mysql:innodb_io_capacity",
            current=str(cur),
            proposed=str(cap),
            rationale=f"{kind} storage under the datadir sustains about {cap} background IOPS",
            evidence={
                "storage.block_device": str(ctx.facts.storage.block_device.value),
                "storage.rotational": str(ctx.facts.storage.rotational.value),
            },
            expected_effect="smoother flushing, fewer stalls on write workloads",
            effect_source="MySQL manual: innodb_io_capacity (8.4 default 10000)",
            verify="SELECT @@innodb_io_capacity; watch Innodb_buffer_pool_pages_dirty",
        )
    ]
    cur_max = ctx.var_int("innodb_io_capacity_max")
    if cur_max is None or cur_max < cap_max:
        recs.append(
            _rec(
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


@rule(
    "server-flush-neighbors",
    "server",
    "Flush neighbors off on SSD",
    "MySQL manual: innodb_flush_neighbors",
)
def flush_neighbors(ctx: RuleContext) -> list[Recommendation]:
    """Flushing neighbouring pages together helps spinning disks only; on SSD/NVMe it is
    wasted write work (MySQL 8.0 turned it off by default, MariaDB still has it on)."""
    kind = _storage_kind(ctx)
    cur = ctx.var("innodb_flush_neighbors")
    if kind == "hdd" or cur is None or cur == "0":
        raise Skip("spinning disk, or already 0")
    return [
        _rec(
            ctx,
            id="server-flush-neighbors",
            layer="server",
            title="No neighbour flushing on solid-state storage",
            target="mysql:innodb_flush_neighbors",
            current=cur,
            proposed="0",
            rationale="neighbour flushing saves seeks, which SSD/NVMe do not have",
            evidence={"storage.kind": kind},
            expected_effect="less write amplification (small gain on write workloads)",
            effect_source="MySQL manual: innodb_flush_neighbors (8.0 default 0)",
            verify="SELECT @@innodb_flush_neighbors",
        )
    ]


@rule(
    "server-flush-method",
    "server",
    "O_DIRECT for data files",
    "MySQL 8.4 manual (default O_DIRECT on Linux)",
)
def flush_method(ctx: RuleContext) -> list[Recommendation]:
    """Data pages cached twice (buffer pool and page cache) waste memory; O_DIRECT avoids
    it. Not on filesystems without O_DIRECT support (tmpfs). innodb_flush_method is a
    durability knob: proposed only with --durability relaxed."""
    cur = (ctx.var("innodb_flush_method") or "").lower()
    fs = ctx.facts.storage.fs_type.value or ""
    if fs in ("tmpfs", "zfs"):
        raise Skip(f"{fs} does not support O_DIRECT well")
    if not cur or cur.startswith("o_direct"):
        raise Skip("already O_DIRECT (or unknown)")
    return [
        _rec(
            ctx,
            id="server-flush-method",
            layer="server",
            title="Bypass the page cache for data files",
            target="mysql:innodb_flush_method",
            current=cur,
            proposed="O_DIRECT",
            rationale="avoids double caching of data pages; the buffer pool is the cache",
            evidence={"innodb_flush_method": cur, "storage.fs_type": fs},
            expected_effect="more memory for the buffer pool, steadier I/O",
            effect_source="MySQL 8.4 default; MariaDB 10.6 default",
            risk="restart",
            verify="SELECT @@innodb_flush_method",
        )
    ]


@rule(
    "server-io-threads",
    "server",
    "InnoDB I/O threads",
    "MySQL/MariaDB manual: innodb_read_io_threads",
)
def io_threads(ctx: RuleContext) -> list[Recommendation]:
    """With solid-state storage and 16+ CPUs, more background I/O threads keep up with
    read-ahead and flushing (half the CPUs, at most 16 each)."""
    if _storage_kind(ctx) == "hdd" or ctx.cpus() < 16:
        raise Skip("fewer than 16 CPUs or a spinning disk: the default 4 suffices")
    want = min(16, ctx.cpus() // 2)
    out = []
    for n in ("innodb_read_io_threads", "innodb_write_io_threads"):
        cur = ctx.var_int(n)
        if cur is not None and cur < want:
            out.append(
                _rec(
                    ctx,
                    id=f"server-{n.replace('_', '-')[7:]}",
                    layer="server",
                    title=n,
                    target=f"mysql:{n}",
                    current=str(cur),
                    proposed=str(want),
                    rationale="half the CPUs, at most 16",
                    evidence={"cpu.logical_cpus": str(ctx.cpus())},
                    expected_effect="background I/O keeps up on fast storage",
                    effect_source="MySQL/MariaDB manual",
                    risk="restart",
                    verify=f"SELECT @@{n}",
                )
            )
    if not out:
        raise Skip("already high enough")
    return out


@rule(
    "server-thread-pool",
    "server",
    "Thread pool for high concurrency",
    "MariaDB KB: thread pool in MariaDB",
)
def thread_pool(ctx: RuleContext) -> list[Recommendation]:
    """With many more active connections than cores, one thread per connection thrashes on
    context switches and lock convoys; MariaDB's (and Percona's) pool-of-threads caps the
    running threads at about the core count."""
    if ctx.flavor == "mysql" or not ctx.has("thread_handling"):
        raise Skip("MySQL Community has no thread pool (Enterprise and Percona do)")
    conc = ctx.hints.threads or int(ctx.status().get("Max_used_connections", "0") or 0)
    if conc < 4 * ctx.cpus():
        raise Skip(f"concurrency {conc} is below 4 x {ctx.cpus()} CPUs")
    cur = ctx.var("thread_handling")
    if cur == "pool-of-threads":
        raise Skip("already pool-of-threads")
    return [
        _rec(
            ctx,
            id="server-thread-pool",
            layer="server",
            title="Thread pool",
            target="mysql:thread_handling",
            current=cur,
            proposed="pool-of-threads",
            rationale=f"{conc} concurrent clients on {ctx.cpus()} CPUs",
            evidence={"concurrency": str(conc), "cpu.logical_cpus": str(ctx.cpus())},
            expected_effect="steadier throughput and latency above ~4 clients per core",
            effect_source="MariaDB KB: thread pool; KNOWLEDGE.md section 3",
            risk="restart",
            verify="SELECT @@thread_handling; Threadpool_threads",
            confidence="medium",
        )
    ]


def _many_core_arm(ctx: RuleContext) -> bool:
    return ctx.facts.cpu.arch.value == "aarch64" and ctx.cpus() >= 64


@rule(
    "server-thread-concurrency",
    "server",
    "innodb_thread_concurrency = cores on many-core ARM",
    "seeds/004 (Kunpeng 920, MySQL 5.7.21)",
)
def thread_concurrency(ctx: RuleContext) -> list[Recommendation]:
    """On many-core ARM, hundreds of threads spinning on InnoDB mutexes burn CPU in
    MVCC::view_open and PolicyMutex (seed 004); capping InnoDB concurrency at the core
    count was part of the fix. MariaDB ignores this knob since 10.5."""
    spin = "spin-hot-spot" in ctx.hints.findings
    if not (_many_core_arm(ctx) or spin):
        raise Skip("not a many-core ARM machine and no spin hot spot found")
    if ctx.flavor == "mariadb" or not ctx.has("innodb_thread_concurrency"):
        raise Skip("MariaDB 10.5+ ignores innodb_thread_concurrency")
    cur = ctx.var_int("innodb_thread_concurrency")
    want = ctx.cpus()
    if cur == want:
        raise Skip("already the core count")
    return [
        _rec(
            ctx,
            id="server-thread-concurrency",
            layer="server",
            title="Cap InnoDB concurrency at the core count",
            target="mysql:innodb_thread_concurrency",
            current=str(cur),
            proposed=str(want),
            rationale="seed 004: threads spinning in MVCC::view_open / PolicyMutex at 256 clients",
            evidence={
                "cpu.logical_cpus": str(want),
                "cpu.arch": "aarch64",
                "findings": ",".join(ctx.hints.findings),
            },
            expected_effect="seed 004 reached 2.8x TPS together with the spin and cache-line fixes",
            effect_source="seeds/004",
            verify="perf top: MVCC::view_open and PolicyMutex shares fall",
            confidence="medium",
        )
    ]


@rule(
    "server-spin-wait",
    "server",
    "Spin-wait tuning on many-core ARM",
    "seeds/004; MySQL manual: innodb_spin_wait_delay",
)
def spin_wait(ctx: RuleContext) -> list[Recommendation]:
    """Longer spin-wait delays and more spin loops before sleeping cut cache-line ping-pong
    on many-core ARM when spin functions are hot (seed 004 raised both while watching perf).
    Proposed only for many-core ARM or when a profile found a spin hot spot."""
    spin = "spin-hot-spot" in ctx.hints.findings
    if not (_many_core_arm(ctx) or spin):
        raise Skip("not a many-core ARM machine and no spin hot spot found")
    out = []
    for name, want in (("innodb_spin_wait_delay", 24), ("innodb_sync_spin_loops", 100)):
        cur = ctx.var_int(name)
        if cur is not None and cur < want:
            out.append(
                _rec(
                    ctx,
                    id=f"server-{name[7:].replace('_', '-')}",
                    layer="server",
                    title=name,
                    target=f"mysql:{name}",
                    current=str(cur),
                    proposed=str(want),
                    rationale="less cache-line contention from spinning threads on many cores",
                    evidence={
                        "cpu.logical_cpus": str(ctx.cpus()),
                        "findings": ",".join(ctx.hints.findings),
                    },
                    expected_effect="part of seed 004's 2.8x; verify the spin functions' perf share drops",
                    effect_source="seeds/004",
                    verify="perf top: ut_delay / PolicyMutex share falls; TPS does not drop",
                    confidence="low",
                )
            )
    if not out:
        raise Skip("already raised")
    return out


@rule(
    "server-adaptive-hash-index",
    "server",
    "Adaptive hash index off under contention",
    "seeds/002; MySQL 8.4 default OFF",
)
def adaptive_hash_index(ctx: RuleContext) -> list[Recommendation]:
    """btr_search_guess_on_hash took 30% of CPU on a 4-node Kunpeng (seed 002); the AHI
    latch is a hot spot at high concurrency, which is why MySQL 8.4 and MariaDB 10.5 turned
    it off by default. Turned off when it is on and the machine has several NUMA nodes or a
    profile showed it hot."""
    cur = (ctx.var("innodb_adaptive_hash_index") or "").upper()
    if cur not in ("ON", "1"):
        raise Skip("adaptive hash index already off")
    hot = "ahi-hot-spot" in ctx.hints.findings
    if ctx.numa_nodes() < 2 and not hot:
        raise Skip("single NUMA node and no AHI hot spot")
    return [
        _rec(
            ctx,
            id="server-adaptive-hash-index",
            layer="server",
            title="Adaptive hash index off",
            target="mysql:innodb_adaptive_hash_index",
            current=cur,
            proposed="OFF",
            rationale="the AHI latch serializes lookups across nodes at high concurrency",
            evidence={
                "cpu.numa_nodes": str(ctx.numa_nodes()),
                "findings": ",".join(ctx.hints.findings),
            },
            expected_effect="removes a hot spot (seed 002: btr_search_guess_on_hash at 30%)",
            effect_source="seeds/002; MySQL 8.4 changed the default to OFF",
            verify="perf: btr_search_guess_on_hash share falls; benchmark point selects",
            confidence="medium",
        )
    ]


@rule("server-table-open-cache", "server", "Table cache", "MySQL manual: table_open_cache")
def table_open_cache(ctx: RuleContext) -> list[Recommendation]:
    """Tables opened again and again (Opened_tables growing, or cache overflows) cost
    metadata locks and file opens; double the cache when that happens."""
    st = ctx.status()
    uptime = max(1, int(st.get("Uptime", "1") or 1))
    opened = int(st.get("Opened_tables", "0") or 0)
    overflows = int(st.get("Table_open_cache_overflows", "0") or 0)
    cur = ctx.var_int("table_open_cache") or 0
    if uptime < 600 or (opened / uptime < 1 and overflows == 0):
        raise Skip("no sign of table cache pressure (or uptime under 10 minutes)")
    return [
        _rec(
            ctx,
            id="server-table-open-cache",
            layer="server",
            title="Larger table cache",
            target="mysql:table_open_cache",
            current=str(cur),
            proposed=str(max(4000, cur * 2)),
            rationale=f"{opened / uptime:.1f} tables opened per second, {overflows} overflows",
            evidence={
                "Opened_tables": str(opened),
                "Uptime": str(uptime),
                "Table_open_cache_overflows": str(overflows),
            },
            expected_effect="fewer table opens (small gain on many-table workloads)",
            effect_source="MySQL manual (8.0 default 4000)",
            verify="Opened_tables grows slowly",
        )
    ]


@rule(
    "server-performance-schema",
    "server",
    "performance_schema cost",
    "MySQL manual: performance_schema",
)
def performance_schema(ctx: RuleContext) -> list[Recommendation]:
    """performance_schema costs a few percent of throughput on very high QPS; it is also
    what diagnosis needs. myaccel does not turn it off: it reports the choice."""
    cur = (ctx.var("performance_schema") or "").upper()
    if cur not in ("ON", "1"):
        raise Skip("performance_schema is off")
    return [
        _rec(
            ctx,
            id="server-performance-schema",
            layer="server",
            title="performance_schema is on (kept)",
            target="mysql:performance_schema",
            current=cur,
            proposed="ON",
            action="advisory",
            rationale="its cost is small next to its value for diagnosis; measure with `myaccel ab --candidate-set performance_schema=OFF` before deciding",
            evidence={"performance_schema": cur},
            expected_effect="a few % on extreme point-select QPS when turned off",
            effect_source="MySQL manual: performance schema overhead",
            risk="restart",
            verify="A/B with and without",
            confidence="low",
        )
    ]


@rule("server-binlog-durable", "server", "Binary log kept durable", "MySQL manual: sync_binlog")
def binlog_durable(ctx: RuleContext) -> list[Recommendation]:
    """When the binary log is on, sync_binlog=1 keeps it crash-safe. myaccel never lowers
    it under strict durability and points out when it is not durable."""
    if (ctx.var("log_bin") or "OFF").upper() not in ("ON", "1"):
        raise Skip("binary log is off")
    cur = ctx.var("sync_binlog")
    if cur == "1":
        raise Skip("sync_binlog=1 already")
    return [
        _rec(
            ctx,
            id="server-binlog-durable",
            layer="server",
            title="Binary log is not crash-safe",
            target="mysql:sync_binlog",
            current=cur,
            proposed="1",
            action="advisory",
            rationale="a crash can lose committed transactions from the binary log (replicas diverge)",
            evidence={"log_bin": "ON", "sync_binlog": str(cur)},
            expected_effect="durability; costs some write throughput",
            effect_source="MySQL manual: sync_binlog",
            verify="SELECT @@sync_binlog",
            confidence="high",
        )
    ]


@rule(
    "durability-flush-log-at-trx-commit",
    "server",
    "Relaxed redo flushing (opt-in)",
    "MySQL manual: innodb_flush_log_at_trx_commit",
)
def relaxed_flush(ctx: RuleContext) -> list[Recommendation]:
    """Only with --durability relaxed: write the redo log at commit but fsync once a
    second. A crash of the OS (not of mysqld) can lose up to a second of commits."""
    if ctx.durability != "relaxed":
        raise Skip("durability knob: only with --durability relaxed")
    cur = ctx.var("innodb_flush_log_at_trx_commit")
    if cur in ("0", "2"):
        raise Skip("already relaxed")
    return [
        _rec(
            ctx,
            id="durability-flush-log-at-trx-commit",
            layer="server",
            title="fsync the redo log once a second (DURABILITY TRADE-OFF)",
            target="mysql:innodb_flush_log_at_trx_commit",
            current=cur,
            proposed="2",
            group="durability",
            risk="durability",
            rationale="one fsync per second instead of one per commit",
            evidence={"innodb_flush_log_at_trx_commit": str(cur), "durability": "relaxed (opt-in)"},
            expected_effect="large gains on commit-bound write workloads; up to 1 s of commits lost on an OS crash",
            effect_source="MySQL manual",
            verify="SELECT @@innodb_flush_log_at_trx_commit",
            confidence="high",
        )
    ]


@rule(
    "durability-sync-binlog", "server", "Relaxed binlog sync (opt-in)", "MySQL manual: sync_binlog"
)
def relaxed_binlog(ctx: RuleContext) -> list[Recommendation]:
    """Only with --durability relaxed and the binary log on: let the OS flush the binlog."""
    if ctx.durability != "relaxed":
        raise Skip("durability knob: only with --durability relaxed")
    if (ctx.var("log_bin") or "OFF").upper() not in ("ON", "1") or ctx.var("sync_binlog") == "0":
        raise Skip("binary log off or already 0")
    return [
        _rec(
            ctx,
            id="durability-sync-binlog",
            layer="server",
            title="Do not fsync the binlog at commit (DURABILITY TRADE-OFF)",
            target="mysql:sync_binlog",
            current=ctx.var("sync_binlog"),
            proposed="0",
            group="durability",
            risk="durability",
            rationale="the OS flushes the binlog; a crash can lose binlog events",
            evidence={"sync_binlog": str(ctx.var("sync_binlog"))},
            expected_effect="faster commits with the binlog on",
            effect_source="MySQL manual",
            verify="SELECT @@sync_binlog",
            confidence="high",
        )
    ]
