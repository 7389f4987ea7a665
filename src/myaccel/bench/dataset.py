"""The benchmark dataset: sized from the buffer pool, prepared once, verified and reused."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from myaccel.bench.profiles import Profile
from myaccel.bench.runner import ROW_BYTES, cleanup_dataset, prepare_dataset, verify_dataset
from myaccel.errors import UsageError
from myaccel.server.connection import ConnectParams


def size_dataset(prof: Profile, kind: str | None, buffer_pool_bytes: int) -> Profile:
    """Rows per table for a ``cpu-bound`` (half the buffer pool) or ``io-bound`` (4.5
    times it) dataset; ``None`` keeps the profile's."""
    if kind is None:
        return prof
    if buffer_pool_bytes <= 0:
        raise UsageError(
            "cannot size the dataset: innodb_buffer_pool_size unknown",
            hint="use --tables/--table-size",
        )
    if kind == "cpu-bound":
        rows = int(0.5 * buffer_pool_bytes / ROW_BYTES / prof.tables)
    else:
        rows = int(4.5 * buffer_pool_bytes / ROW_BYTES / prof.tables)
    return replace(prof, table_size=max(1000, rows))


def ensure_dataset(
    admin: ConnectParams,
    bench_p: ConnectParams,
    prof: Profile,
    *,
    cleanup: bool,
    note: Callable[[str], None],
) -> None:
    """Prepare the dataset, or verify and reuse the one that is there (never drop one of
    another size unless ``cleanup``)."""
    if cleanup:
        note("dropping the existing dataset (--cleanup)")
        cleanup_dataset(admin)
    if verify_dataset(admin, prof.tables, prof.table_size) == "empty":
        secs = prepare_dataset(bench_p, prof.tables, prof.table_size, log=note)
        note(f"dataset prepared in {secs:.0f} s")
    else:
        note(f"reusing the prepared dataset ({prof.tables} x {prof.table_size:,} rows, verified)")
