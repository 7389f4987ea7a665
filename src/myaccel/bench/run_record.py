"""The run record: one schema-versioned JSON document per sysbench run, and the campaign
index that lists them. Written as each run finishes, so a crash loses no finished run."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from myaccel.artifacts import artifact
from myaccel.model import Frozen
from myaccel.redact import redact_argv

RUN_SCHEMA = "myaccel.run/1"
CAMPAIGN_SCHEMA = "myaccel.campaign/1"

# Variables that differ between two instances of one configuration (paths, ports,
# identities, clocks) and so must not count as a configuration difference.
VOLATILE_VARIABLES = frozenset(
    {
        "port",
        "socket",
        "pid_file",
        "datadir",
        "log_error",
        "hostname",
        "server_uuid",
        "timestamp",
        "general_log_file",
        "slow_query_log_file",
        "tmpdir",
        "basedir",
        "gtid_binlog_pos",
        "gtid_binlog_state",
        "gtid_current_pos",
        "gtid_slave_pos",
        "gtid_executed",
        "gtid_purged",
        "innodb_version",
        "log_bin_basename",
        "log_bin_index",
        "relay_log_basename",
        "relay_log_index",
        "relay_log_info_file",
        "pseudo_thread_id",
        "rand_seed1",
        "rand_seed2",
        "last_insert_id",
        "insert_id",
        "identity",
        "warning_count",
        "error_count",
        "server_id",
        "report_port",
        "innodb_data_home_dir",
        "innodb_log_group_home_dir",
        "innodb_undo_directory",
        "innodb_tmpdir",
        "aria_log_dir_path",
        "plugin_dir",
        "character_sets_dir",
        "lc_messages_dir",
        "secure_file_priv",
        "wsrep_data_home_dir",
        "system_time_zone",
        "in_transaction",
        "external_user",
        "proxy_user",
        "user",
    }
)


def config_digest(variables: dict[str, str]) -> str:
    stable = {k: v for k, v in sorted(variables.items()) if k.lower() not in VOLATILE_VARIABLES}
    return hashlib.sha256(json.dumps(stable, sort_keys=True).encode()).hexdigest()[:16]


class RunSummary(Frozen):
    tps: float
    qps: float
    reads: int
    writes: int
    other: int
    transactions: int
    queries: int
    ignored_errors: int
    reconnects: int
    latency_ms_min: float
    latency_ms_avg: float
    latency_ms_max: float
    latency_ms_p95: float | None = None
    latency_ms_p99: float | None = None
    window_s: float


class SeriesPoint(Frozen):
    t_s: float
    tps: float
    qps: float
    latency_ms_pct: float
    err_per_s: float
    reconn_per_s: float
    threads: int


class Validity(Frozen):
    valid: bool
    reasons: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    exit_code: int
    failure: str
    error_rate_pct: float | None = None
    reconnects: int = 0
    steady_cv_pct: float | None = None
    buffer_pool_hit_pct: float | None = None
    cache_check: str | None = None  # "holds", "violated: ...", None when not asked
    quiet: bool | None = None
    load1: float | None = None
    steal_pct: float | None = None
    busy_pct_before: float | None = None


@artifact(RUN_SCHEMA)
class RunRecord(Frozen):
    schema_version: str = RUN_SCHEMA
    run_id: str
    campaign_id: str
    index: int
    arm: str | None = None
    workload: str
    threads: int
    seed: int | None = None
    spec: dict[str, Any]
    command: list[str]
    started_at: str
    wall_s: float
    host: dict[str, Any]
    server: dict[str, Any]
    config_digest: str | None = None
    dataset: dict[str, Any]
    summary: RunSummary | None = None
    series: list[SeriesPoint] = Field(default_factory=list)
    validity: Validity
    client_cpu_s: float | None = None
    server_cpu_s: float | None = None
    harness_cpu_s: float | None = None
    # The host's busy CPU time during the run beyond the server, client and harness:
    # other processes and the kernel's threads (bench/work_counters.py).
    others_cpu_s: float | None = None
    # What a transaction cost during the run (bench/work_counters.py): server counters
    # and host context switches per transaction, host CPU shares in %.
    per_txn: dict[str, float] = Field(default_factory=dict)
    output_file: str | None = None
    # a replay of a captured workload (``bench.replay.replay_info`` and ``replay_counts``):
    # the observed concurrency and the pool's size, the statements issued per class,
    # successes and errors apart (duplicate keys among them)
    replay: dict[str, Any] | None = None

    @field_validator("command")
    @classmethod
    def _redacted(cls, v: list[str]) -> list[str]:
        return redact_argv(v)  # written and read: also older files lose their passwords


class QuietGate(Frozen):
    """What the quiet-machine gate (``bench/quiet.py``) measured before a campaign's first
    run: other processes' share of the host's CPU, and how long it waited for a quiet host."""

    verdict: str  # quiet, loud (still above the threshold when the wait ran out), unknown
    others_pct: float | None  # the last sample: other processes' share of all CPU time (%)
    first_pct: float | None = None  # the first sample (before any wait)
    threshold_pct: float
    waited_s: float
    wait_limit_s: float
    samples: int


@artifact(CAMPAIGN_SCHEMA)
class CampaignIndex(Frozen):
    schema_version: str = CAMPAIGN_SCHEMA
    campaign_id: str
    kind: str  # bench, ab
    created_at: str
    profile: dict[str, Any]
    command: list[str]
    arms: dict[str, dict[str, Any]] = Field(default_factory=dict)
    runs: list[str] = Field(default_factory=list)
    finished: bool = False
    notes: list[str] = Field(default_factory=list)
    quiet_gate: QuietGate | None = None  # the host's other load before the first run

    @field_validator("command")
    @classmethod
    def _redacted(cls, v: list[str]) -> list[str]:
        return redact_argv(v)  # myaccel's own argv: -p/--password values never recorded


PRIVATE_DIR_MODE = 0o700


def private_dir(path: Path) -> Path:
    """Create a results directory readable by its owner only (0700); one that exists keeps
    its mode (the files myaccel writes in it are 0600)."""
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    return path
