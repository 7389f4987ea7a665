"""Named benchmark profiles: the products' own (quick, standard, full) and the methods of
the source articles (KNOWLEDGE.md section 1), as data with their source.

``--scale F`` shrinks rows and time for small machines (0 < F <= 1); the scale is recorded
in every result so that a scaled run is never mistaken for the article's method.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from myaccel.errors import UsageError

WORKLOADS = (
    "oltp_read_only",
    "oltp_read_write",
    "oltp_write_only",
    "oltp_point_select",
    "oltp_update_index",
    "oltp_update_non_index",
    "oltp_insert",
    "select_random_points",
    "select_random_ranges",
)
# Workloads that change the data: comparisons restore a snapshot before each run.
WRITE_WORKLOADS = frozenset(
    {
        "oltp_read_write",
        "oltp_write_only",
        "oltp_update_index",
        "oltp_update_non_index",
        "oltp_insert",
    }
)
# Statements per event (transaction) of the built-in workloads at sysbench 1.0.20's default
# options, read from its Lua scripts: BEGIN and COMMIT, 10 point selects, 4 range selects,
# 1 indexed and 1 non-indexed UPDATE, 1 DELETE + 1 INSERT. A run whose client ran another
# number did not run the workload it was asked for (seen here once in a while on
# oltp_write_only with sysbench 1.0.20: 3 or 4 statements per event for a whole run, at
# twice the throughput).
STATEMENTS_PER_EVENT = {
    "oltp_read_only": 16,
    "oltp_read_write": 20,
    "oltp_write_only": 6,
    "oltp_point_select": 1,
    "oltp_update_index": 1,
    "oltp_update_non_index": 1,
    "oltp_insert": 1,
}
SHORT_NAMES = {
    "ro": "oltp_read_only",
    "rw": "oltp_read_write",
    "wo": "oltp_write_only",
    "ps": "oltp_point_select",
    "point_select": "oltp_point_select",
    "read_only": "oltp_read_only",
    "read_write": "oltp_read_write",
    "write_only": "oltp_write_only",
}


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    source: str
    workloads: tuple[str, ...]
    threads: tuple[int, ...]
    tables: int
    table_size: int
    duration_s: int
    warmup_s: int
    report_interval_s: int = 1
    runs_per_arm: int = 5
    rand_type: str = "uniform"
    scale: float = 1.0
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def cells(self) -> list[tuple[str, int]]:
        return [(w, t) for w in self.workloads for t in self.threads]

    def scaled(self, scale: float) -> Profile:
        if not 0 < scale <= 1:
            raise UsageError(
                f"--scale {scale} is out of range", hint="use a factor in (0, 1], e.g. --scale 0.01"
            )
        if scale == 1:
            return self
        return replace(
            self,
            table_size=max(1000, int(self.table_size * scale)),
            duration_s=max(10, int(self.duration_s * scale)),
            warmup_s=max(2, int(self.warmup_s * scale)),
            scale=self.scale * scale,
        )


_RO, _RW, _WO, _PS = "oltp_read_only", "oltp_read_write", "oltp_write_only", "oltp_point_select"
_POLARDB = "seeds/001 (PolarDB full-path optimization on Yitian)"
# name, workloads, threads, tables, rows per table, run s, warm-up s, runs per arm,
# report interval s; then the source and the description.
_Row = tuple[str, tuple[str, ...], tuple[int, ...], int, int, int, int, int, int, str, str]
# fmt: off
_ROWS: tuple[_Row, ...] = (
    ("quick", (_RO, _RW), (8,), 8, 100_000, 10, 3, 5, 1,
     "myaccel",
     "Read-only and read-write at 8 threads, 10 s runs, on 8 x 100,000 rows (~185 MiB: "
     "more than the 128 MiB default buffer pool, as any real database)."),
    ("standard", (_RO, _RW, _WO, _PS), (1, 8, 32), 8, 100_000, 30, 10, 5, 1,
     "myaccel",
     "RO, RW, WO and point select at 1, 8 and 32 threads, 30 s runs."),
    ("full", (_RO, _RW, _WO, _PS, "oltp_update_index", "oltp_insert"), (1, 4, 8, 16, 32, 64),
     16, 1_000_000, 60, 15, 5, 1,
     "myaccel",
     "Six workloads over a thread sweep, 60 s runs, 16 x 1M rows."),
    ("yitian", (_RO, _RW, _WO), (64,), 32, 25_000, 1200, 60, 3, 1,
     "seeds/000 (one-click tuning of self-built MySQL on Yitian 710)",
     "MySQL 8.0.34 on Yitian 710 (ECS g8y): RO/RW/WO, 64 threads, 32 x 25,000 rows, 1200 s."),
    ("polardb-cpu", (_RW, _RO, _WO), (1, 8, 32, 64, 128, 256), 10, 10_000_000, 300, 30, 3, 20,
     _POLARDB,
     "PolarDB on Yitian, CPU-bound: 10 x 10M rows (~24 GB), threads 1..256, 300 s, uniform, "
     "report every 20 s."),
    ("polardb-io", (_RW, _RO, _WO), (1, 8, 32, 64, 128, 256), 10, 40_000_000, 300, 30, 3, 20,
     _POLARDB,
     "PolarDB on Yitian, IO-bound: 10 x 40M rows (~100 GB), threads 1..256, 300 s, uniform."),
    ("tdsql", (_PS, _RW), (256,), 300, 800_000, 300, 30, 3, 1,
     "seeds/003 (TDSQL-C PGO+LTO)",
     "TDSQL-C compile-optimized kernel: point select and RW at 256 threads, 300 tables x "
     "800,000 rows (the 8c32g row)."),
    ("kunpeng", (_RW,), (256,), 32, 1_000_000, 300, 30, 3, 1,
     "seeds/004 (sysbench tuning on Kunpeng 920)",
     "MySQL 5.7.21 on Kunpeng 920: read-write at 256 threads (table layout not published; "
     "32 x 1M used)."),
)
# fmt: on


def _profile(row: _Row) -> Profile:
    name, workloads, threads, tables, rows, run_s, warmup_s, runs, interval_s, source, about = row
    return Profile(
        name=name,
        description=about,
        source=source,
        workloads=workloads,
        threads=threads,
        tables=tables,
        table_size=rows,
        duration_s=run_s,
        warmup_s=warmup_s,
        report_interval_s=interval_s,
        runs_per_arm=runs,
    )


PROFILES: dict[str, Profile] = {row[0]: _profile(row) for row in _ROWS}


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise UsageError(
            f"unknown profile '{name}'", hint="choose one of: " + ", ".join(PROFILES)
        ) from None


def normalize_workload(name: str) -> str:
    """Accept short names (ro, rw, wo, ps), built-in names, or a path to a Lua script."""
    if name.endswith(".lua"):
        return name
    n = SHORT_NAMES.get(name, name)
    if n not in WORKLOADS:
        raise UsageError(
            f"unknown workload '{name}'",
            hint="use one of "
            + ", ".join(WORKLOADS)
            + " (or ro/rw/wo/ps), or a path to a .lua script",
        )
    return n


@dataclass(frozen=True)
class ProfileOptions:
    """What the command line changes in a named profile (None: the profile's own)."""

    name: str = "quick"
    workloads: tuple[str, ...] = ()
    threads: tuple[int, ...] | None = None
    duration_s: int | None = None  # --time
    warmup_s: int | None = None  # --warmup
    tables: int | None = None
    table_size: int | None = None
    runs_per_arm: int | None = None  # --runs
    report_interval_s: int | None = None
    scale: float | None = None


# option name, field of ProfileOptions and Profile, smallest value
_OVERRIDES = (
    ("time", "duration_s", 1),
    ("warmup", "warmup_s", 0),
    ("tables", "tables", 1),
    ("table-size", "table_size", 1),
    ("runs", "runs_per_arm", 1),
    ("report-interval", "report_interval_s", 1),
)


def build_profile(opts: ProfileOptions) -> Profile:
    """The named profile with the options applied, every workload checked (a Lua script
    must exist)."""
    prof = get_profile(opts.name)
    if opts.workloads:
        prof = replace(prof, workloads=tuple(normalize_workload(w) for w in opts.workloads))
    else:
        for w in prof.workloads:
            normalize_workload(w)
    if opts.threads:
        prof = replace(prof, threads=opts.threads)
    # --scale shrinks the profile's own sizes; an option given explicitly (--time 2) wins
    # over it: scaled first, then the overrides
    if opts.scale is not None:
        prof = prof.scaled(opts.scale)
    for option, name, least in _OVERRIDES:
        v = getattr(opts, name)
        if v is not None:
            if v < least:
                raise UsageError(f"--{option} must be positive", hint="see myaccel bench --help")
            prof = replace(prof, **{name: v})
    for w in prof.workloads:
        if w.endswith(".lua") and not Path(w).is_file():
            raise UsageError(
                f"Lua script '{w}' does not exist", hint="pass the path of a sysbench Lua script"
            )
    return prof
