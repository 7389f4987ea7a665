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

    def estimated_run_s(self) -> int:
        return self.duration_s + self.warmup_s


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile(
            name="quick",
            description=(
                "Read-only and read-write at 8 threads, 10 s runs, on 8 x 100,000 rows (~185 MiB: "
                "more than the 128 MiB default buffer pool, as any real database)."
            ),
            source="myaccel",
            workloads=("oltp_read_only", "oltp_read_write"),
            threads=(8,),
            tables=8,
            table_size=100_000,
            duration_s=10,
            warmup_s=3,
            runs_per_arm=5,
        ),
        Profile(
            name="standard",
            description="RO, RW, WO and point select at 1, 8 and 32 threads, 30 s runs.",
            source="myaccel",
            workloads=("oltp_read_only", "oltp_read_write", "oltp_write_only", "oltp_point_select"),
            threads=(1, 8, 32),
            tables=8,
            table_size=100_000,
            duration_s=30,
            warmup_s=10,
            runs_per_arm=5,
        ),
        Profile(
            name="full",
            description="Six workloads over a thread sweep, 60 s runs, 16 x 1M rows.",
            source="myaccel",
            workloads=(
                "oltp_read_only",
                "oltp_read_write",
                "oltp_write_only",
                "oltp_point_select",
                "oltp_update_index",
                "oltp_insert",
            ),
            threads=(1, 4, 8, 16, 32, 64),
            tables=16,
            table_size=1_000_000,
            duration_s=60,
            warmup_s=15,
            runs_per_arm=5,
        ),
        Profile(
            name="yitian",
            description="MySQL 8.0.34 on Yitian 710 (ECS g8y): RO/RW/WO, 64 threads, 32 x 25,000 rows, 1200 s.",
            source="seeds/000 (one-click tuning of self-built MySQL on Yitian 710)",
            workloads=("oltp_read_only", "oltp_read_write", "oltp_write_only"),
            threads=(64,),
            tables=32,
            table_size=25_000,
            duration_s=1200,
            warmup_s=60,
            runs_per_arm=3,
        ),
        Profile(
            name="polardb-cpu",
            description="PolarDB on Yitian, CPU-bound: 10 x 10M rows (~24 GB), threads 1..256, 300 s, uniform, report every 20 s.",
            source="seeds/001 (PolarDB full-path optimization on Yitian)",
            workloads=("oltp_read_write", "oltp_read_only", "oltp_write_only"),
            threads=(1, 8, 32, 64, 128, 256),
            tables=10,
            table_size=10_000_000,
            duration_s=300,
            warmup_s=30,
            report_interval_s=20,
            runs_per_arm=3,
        ),
        Profile(
            name="polardb-io",
            description="PolarDB on Yitian, IO-bound: 10 x 40M rows (~100 GB), threads 1..256, 300 s, uniform.",
            source="seeds/001 (PolarDB full-path optimization on Yitian)",
            workloads=("oltp_read_write", "oltp_read_only", "oltp_write_only"),
            threads=(1, 8, 32, 64, 128, 256),
            tables=10,
            table_size=40_000_000,
            duration_s=300,
            warmup_s=30,
            report_interval_s=20,
            runs_per_arm=3,
        ),
        Profile(
            name="tdsql",
            description="TDSQL-C compile-optimized kernel: point select and RW at 256 threads, 300 tables x 800,000 rows (the 8c32g row).",
            source="seeds/003 (TDSQL-C PGO+LTO)",
            workloads=("oltp_point_select", "oltp_read_write"),
            threads=(256,),
            tables=300,
            table_size=800_000,
            duration_s=300,
            warmup_s=30,
            runs_per_arm=3,
        ),
        Profile(
            name="kunpeng",
            description="MySQL 5.7.21 on Kunpeng 920: read-write at 256 threads (table layout not published; 32 x 1M used).",
            source="seeds/004 (sysbench tuning on Kunpeng 920)",
            workloads=("oltp_read_write",),
            threads=(256,),
            tables=32,
            table_size=1_000_000,
            duration_s=300,
            warmup_s=30,
            runs_per_arm=3,
        ),
    )
}


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
    for option, name, least in _OVERRIDES:
        v = getattr(opts, name)
        if v is not None:
            if v < least:
                raise UsageError(f"--{option} must be positive", hint="see myaccel bench --help")
            prof = replace(prof, **{name: v})
    if opts.scale is not None:
        prof = prof.scaled(opts.scale)
    for w in prof.workloads:
        if w.endswith(".lua") and not Path(w).is_file():
            raise UsageError(
                f"Lua script '{w}' does not exist", hint="pass the path of a sysbench Lua script"
            )
    return prof
