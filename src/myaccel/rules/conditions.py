"""What rules test about a machine: helpers the rule functions share, and the named
conditions that the rows of ``data/simple_rules.json`` gate on.

A condition is ``(ctx, arg) -> bool``: False skips the row with the reason the row gives;
a condition may also raise ``Skip`` itself when it cannot be decided (storage type or CPU
count unknown, no server facts, a setting owned by tuned). ``arg`` is the text after the
condition's name in the row: a knob (``on:log_bin``), a knob with values
(``var-is-not:sync_binlog=0``) or a fact path with a number (``fact-above:memory.swappiness=10``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from myaccel.rules.base import RuleContext, Skip
from myaccel.units import MiB, parse_size

# The smallest server (in CPUs it may use) that gets a thread pool; see the condition.
THREAD_POOL_MIN_CPUS = 8

# A spinning disk seeks: about 100-400 random 16 KiB reads per second even at queue depth
# 32; anything solid-state does thousands. The line between them, for measured storage.
SOLID_STATE_MIN_READ_IOPS = 2000.0


def storage_kind(ctx: RuleContext) -> str:
    """``nvme``, ``ssd`` or ``hdd`` for the storage under the datadir: from the measured
    random-read IOPS when storage was measured (virtio and cloud disks report
    ``rotational=1`` whatever backs them), else from the device name and rotational flag."""
    s = ctx.facts.storage
    dev = s.block_device.value or ""
    m = s.measured.value if s.measured.known else None
    if m is not None:
        if m.random_read_iops < SOLID_STATE_MIN_READ_IOPS:
            return "hdd"
        return "nvme" if dev.startswith("nvme") else "ssd"
    if dev.startswith("nvme"):
        return "nvme"
    if s.rotational.known:
        return "hdd" if s.rotational.value else "ssd"
    raise Skip("storage type unknown")


def storage_evidence(ctx: RuleContext) -> dict[str, str]:
    """What ``storage_kind`` rests on, for a recommendation's evidence."""
    s = ctx.facts.storage
    m = s.measured.value if s.measured.known else None
    if m is None:
        return {
            "storage.block_device": str(s.block_device.value),
            "storage.rotational": str(s.rotational.value),
        }
    return {
        "storage.block_device": str(s.block_device.value),
        "storage.measured": s.measured.source,
        "storage.random_read_iops": f"{m.random_read_iops:.0f}",
        "storage.random_write_iops": f"{m.random_write_iops:.0f}",
        "storage.fsync_latency_ms_p50": f"{m.fsync_latency_ms_p50:.2f}",
    }


def many_core_arm(ctx: RuleContext) -> bool:
    return ctx.facts.cpu.arch.value == "aarch64" and ctx.cpus() >= 64


def status_int(ctx: RuleContext, name: str, default: str = "0") -> int:
    """A status counter as an integer (``default`` when absent or empty)."""
    return int(ctx.status().get(name, default) or default)


def concurrency(ctx: RuleContext) -> int:
    """The expected client concurrency: the benchmark's threads, else the observed peak."""
    return ctx.hints.threads or status_int(ctx, "Max_used_connections")


def managed(ctx: RuleContext, key: str) -> str | None:
    """The tuned profile that enforces ``key`` (sysctl name), if any."""
    m = ctx.facts.managers
    if m is None or not m.tuned_sysctls.known:
        return None
    if key in (m.tuned_sysctls.value or {}):
        return m.tuned_profile.value
    return None


def check_managed(ctx: RuleContext, key: str) -> None:
    prof = managed(ctx, key)
    if prof:
        raise Skip(f"{key} is enforced by the active tuned profile '{prof}': change it there")


def fact(ctx: RuleContext, path: str) -> Any:
    """The ``Fact`` at a dotted path of the facts (``memory.swappiness``)."""
    obj: Any = ctx.facts
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _split(arg: str) -> tuple[str, str]:
    name, _, value = arg.partition("=")
    return name, value


def _fact_above(ctx: RuleContext, arg: str) -> bool:
    path, number = _split(arg)
    value = fact(ctx, path).value
    return value is not None and value > parse_size(number)


def _fact_at_least(ctx: RuleContext, arg: str) -> bool:
    path, number = _split(arg)
    return (fact(ctx, path).value or 0) >= parse_size(number)


def _var_is_not(ctx: RuleContext, arg: str) -> bool:
    knob, values = _split(arg)
    return ctx.var(knob) not in values.split(",")


def _not_o_direct(ctx: RuleContext, knob: str) -> bool:
    cur = (ctx.var(knob) or "").lower()
    return bool(cur) and not cur.startswith("o_direct")


def _not_managed(ctx: RuleContext, key: str) -> bool:
    check_managed(ctx, key)
    return True


def _variables(ctx: RuleContext, _arg: str) -> bool:
    ctx.variables()  # the rule reads server variables first: their absence is the reason
    return True


def _log_buffer_short(ctx: RuleContext, _arg: str) -> bool:
    cur = ctx.var_int("innodb_log_buffer_size")
    waits = status_int(ctx, "Innodb_log_waits")
    return cur is not None and (cur < 32 * MiB or waits != 0)


def _ssd_and_nonzero(ctx: RuleContext, knob: str) -> bool:
    kind = storage_kind(ctx)
    cur = ctx.var(knob)
    return kind != "hdd" and cur is not None and cur != "0"


def _table_cache_pressure(ctx: RuleContext, _arg: str) -> bool:
    uptime = max(1, status_int(ctx, "Uptime", "1"))
    opened = status_int(ctx, "Opened_tables")
    overflows = status_int(ctx, "Table_open_cache_overflows")
    return uptime >= 600 and (opened / uptime >= 1 or overflows != 0)


CONDITIONS: dict[str, Callable[[RuleContext, str], bool]] = {
    # durability and server
    "relaxed": lambda ctx, _: ctx.durability == "relaxed",
    "variables": _variables,
    "on": lambda ctx, knob: (ctx.var(knob) or "").upper() in ("ON", "1"),
    "var-is-not": _var_is_not,
    "not-flavor": lambda ctx, flavor: ctx.flavor != flavor,
    "has": lambda ctx, knob: ctx.has(knob),
    "log-buffer-short": _log_buffer_short,
    "table-cache-pressure": _table_cache_pressure,
    "oversubscribed": lambda ctx, _: concurrency(ctx) >= 4 * ctx.cpus(),
    # Measured on a 2-vCPU VM (MariaDB 10.11, oltp_read_write at 128 threads, 6+6
    # interleaved runs): the plan with pool-of-threads lost 26.5% (95% CI -31.9% to
    # -20.4%) against the same plan without it. Below this many CPUs the pool's few
    # worker groups serialize work the kernel scheduler would have overlapped.
    "cpus-for-thread-pool": lambda ctx, _: ctx.cpus() >= THREAD_POOL_MIN_CPUS,
    # machine
    "many-core-arm-or-spin": lambda ctx, _: (
        many_core_arm(ctx) or "spin-hot-spot" in ctx.hints.findings
    ),
    "numa-or-ahi-hot": lambda ctx, _: ctx.numa_nodes() >= 2 or "ahi-hot-spot" in ctx.hints.findings,
    "ssd-and-nonzero": _ssd_and_nonzero,
    "ssd-and-16-cpus": lambda ctx, _: storage_kind(ctx) != "hdd" and ctx.cpus() >= 16,
    "o-direct-fs": lambda ctx, _: (ctx.facts.storage.fs_type.value or "") not in ("tmpfs", "zfs"),
    "not-o-direct": _not_o_direct,
    # facts by dotted path
    "known": lambda ctx, path: bool(fact(ctx, path).known),
    "fact-is": lambda ctx, arg: fact(ctx, _split(arg)[0]).value == _split(arg)[1],
    "fact-is-not": lambda ctx, arg: fact(ctx, _split(arg)[0]).value != _split(arg)[1],
    "fact-set": lambda ctx, path: bool(fact(ctx, path).value),
    "fact-unset": lambda ctx, path: not fact(ctx, path).value,
    "fact-above": _fact_above,
    # the server's memory budget (its cgroup, the container's, or the RAM) at least a size
    "budget-at-least": lambda ctx, size: ctx.memory_budget()[0] >= (parse_size(size) or 0),
    "fact-at-least": _fact_at_least,
    "not-managed": _not_managed,
}
