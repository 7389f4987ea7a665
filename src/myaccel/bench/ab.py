"""Interleaved A/B campaigns on a sandbox: two configurations (or two server builds), one
prepared dataset restored from a snapshot before every write-workload run, arms in ABBA
order, paired seeds, identical client placement."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from myaccel import proc
from myaccel.bench.campaign import BenchContext, measure_run
from myaccel.bench.profiles import WRITE_WORKLOADS, Profile
from myaccel.bench.run_record import RunRecord
from myaccel.bench.runner import RunSpec, connection_args, run_sysbench
from myaccel.errors import UsageError
from myaccel.server.sandbox import Sandbox

SNAPSHOT = "myaccel-ab-dataset"


@dataclass(frozen=True)
class Arm:
    name: str  # "baseline" or "candidate"
    config: Path | None = None
    sets: dict[str, str] = field(default_factory=dict)
    basedir: Path | None = None

    def describe(self) -> dict[str, Any]:
        digest = None
        if self.config is not None:
            digest = hashlib.sha256(self.config.read_bytes()).hexdigest()[:16]
        return {
            "config": str(self.config) if self.config else None,
            "config_sha256": digest,
            "sets": dict(self.sets),
            "basedir": str(self.basedir) if self.basedir else None,
        }

    def key(self) -> tuple[str | None, tuple[tuple[str, str], ...], str | None]:
        return (
            str(self.config) if self.config else None,
            tuple(sorted(self.sets.items())),
            str(self.basedir) if self.basedir else None,
        )


def check_arm(arm: Arm) -> None:
    if arm.config is not None and not arm.config.is_file():
        raise UsageError(
            f"{arm.name} config '{arm.config}' does not exist",
            hint="pass an option file (my.cnf style) or omit it for the sandbox's default",
        )
    if arm.basedir is not None and not arm.basedir.is_dir():
        raise UsageError(
            f"{arm.name} basedir '{arm.basedir}' is not a directory",
            hint="pass an install tree holding bin/ or sbin/ with mariadbd or mysqld",
        )


def abba_order(rounds: int) -> list[str]:
    """A B B A A B B A ...: each arm equally often first, drift cancels to first order."""
    order: list[str] = []
    for r in range(rounds):
        order += ["baseline", "candidate"] if r % 2 == 0 else ["candidate", "baseline"]
    return order


def prewarm(sb: Sandbox, prof: Profile) -> None:
    """Load the dataset into the buffer pool after a restart (sysbench's prewarm command),
    so that both arms start every visit from a warm cache."""
    sysbench = proc.require("sysbench")
    target = sb.bench_params(tcp=False)
    argv = [
        sysbench,
        "oltp_common",
        *connection_args(target),
        "--mysql-db=sbtest",
        f"--tables={prof.tables}",
        f"--table-size={prof.table_size}",
        f"--threads={min(prof.tables, 2)}",
        "prewarm",
    ]
    run_sysbench(argv, target.password, timeout_s=600)


@dataclass
class AbPlan:
    sandbox: Sandbox
    profile: Profile
    arms: dict[str, Arm]
    seed_base: int = 1000
    ps_mode: str = "auto"
    client_cpus: str | None = None
    on_event: Callable[[str], None] | None = None

    def event(self, msg: str) -> None:
        if self.on_event:
            self.on_event(msg)


def run_campaign(
    plan: AbPlan,
    ctx: BenchContext,
    *,
    before_run: Callable[[int, int, RunSpec, str], None] | None = None,
    after_run: Callable[[RunRecord], None] | None = None,
) -> list[RunRecord]:
    sb, prof = plan.sandbox, plan.profile
    current: tuple[Any, ...] | None = None
    total = prof.runs_per_arm * 2 * len(prof.cells)
    n = 0
    order = abba_order(prof.runs_per_arm)
    for visit, arm_name in enumerate(order):
        arm = plan.arms[arm_name]
        rnd = visit // 2
        for w, t in prof.cells:
            spec = RunSpec(
                workload=w,
                threads=t,
                duration_s=prof.duration_s,
                warmup_s=prof.warmup_s,
                tables=prof.tables,
                table_size=prof.table_size,
                report_interval_s=prof.report_interval_s,
                rand_type=prof.rand_type,
                seed=plan.seed_base + rnd,  # paired: both arms of a round share the seed
                ps_mode=plan.ps_mode,
                client_cpus=plan.client_cpus,
            )
            writes = w in WRITE_WORKLOADS or w.endswith(".lua")
            if writes or current != arm.key():
                sb.stop()
                if writes:
                    sb.snapshot_restore(SNAPSHOT)
                sb.start(config=arm.config, sets=arm.sets, basedir=arm.basedir)
                current = arm.key()
                ctx.server_pid = sb.pid
                prewarm(sb, prof)
            n += 1
            if before_run:
                before_run(n, total, spec, arm_name)
            rec = measure_run(ctx, replace(spec), index=n, arm=arm_name)
            if after_run:
                after_run(rec)
    return ctx.records
