"""Measure the datadir's storage instead of guessing it from the rotational flag.

Virtio and many cloud block devices report ``rotational=1`` whatever backs them, so the I/O
rules (``innodb_io_capacity``, ``innodb_flush_neighbors``) need what the device sustains.
fio (a well-kept tool, Debian package ``fio``) runs three short jobs on a scratch file in the
datadir's filesystem, O_DIRECT, 16 KiB blocks (the InnoDB page): random reads and random
writes at queue depth 32, and writes each followed by ``fdatasync`` at queue depth 1 (what a
redo log commit costs). The scratch file is removed afterwards whatever happens. The result
is cached per device (block device, model, filesystem) so that plan and accelerate do not
measure twice; ``refresh`` measures again.

The probe never runs this (it stays fast and read-only); plan, accelerate and
``probe --measure-storage`` do.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from myaccel import artifacts, proc
from myaccel.errors import MyaccelError, ProcessFailed, UsageError
from myaccel.model import Fact, Facts, StorageFacts, StorageMeasurement, known, unknown
from myaccel.paths import myaccel_home

BLOCK_SIZE_BYTES = 16 * 1024
DEFAULT_FILE_SIZE_BYTES = 256 * 1024 * 1024
DEFAULT_SECONDS_EACH = 4.0
CACHE_MAX_AGE_S = 30 * 24 * 3600.0
SCRATCH_NAME = ".myaccel-iotest"
# filesystems without a block device under them: a measurement there says nothing of a disk
_NOT_A_DISK = frozenset({"tmpfs", "ramfs", "proc", "sysfs", "overlay", "fuse", "nfs", "nfs4"})


class StorageMeasureFailed(MyaccelError):
    """fio could not measure (the caller keeps the storage facts it had)."""


def _jobs(seconds_each: float) -> list[tuple[str, list[str]]]:
    runtime = f"--runtime={seconds_each:g}"
    common = ["--time_based", runtime, "--ioengine=libaio", "--stonewall"]
    return [
        ("randread", ["--rw=randread", "--iodepth=32", *common]),
        ("randwrite", ["--rw=randwrite", "--iodepth=32", *common]),
        ("fsync", ["--rw=randwrite", "--iodepth=1", "--fdatasync=1", *common]),
    ]


def fio_argv(
    fio: str, scratch: Path, *, seconds_each: float, file_size_bytes: int, direct: bool
) -> list[str]:
    """One fio invocation, three stonewalled jobs on one scratch file, JSON output."""
    argv = [
        fio,
        "--output-format=json",
        f"--filename={scratch}",
        f"--size={file_size_bytes}",
        f"--bs={BLOCK_SIZE_BYTES}",
        f"--direct={1 if direct else 0}",
        "--randrepeat=0",
        "--norandommap",
        "--group_reporting=0",
    ]
    for name, opts in _jobs(seconds_each):
        argv += [f"--name={name}", *opts]
    return argv


def _job(report: dict[str, Any], name: str) -> dict[str, Any]:
    for job in report.get("jobs", []):
        if isinstance(job, dict) and job.get("jobname") == name:
            return job
    raise StorageMeasureFailed(
        f"fio output has no job '{name}'", hint="rerun; see fio's output with --debug"
    )


def _percentile_ms(lat: dict[str, Any], pct: str) -> float:
    table = lat.get("percentile") or {}
    for key, value in table.items():
        if abs(float(key) - float(pct)) < 1e-6:
            return float(value) / 1e6
    return float(lat.get("mean", 0.0)) / 1e6


def parse_fio_json(text: str) -> dict[str, float]:
    """The figures myaccel keeps from fio's JSON report (fio 3.x layout)."""
    # fio may print notes ("fio: ...") before the JSON document
    start = text.find("{")
    try:
        report = json.loads(text[start:]) if start >= 0 else None
    except ValueError:
        report = None
    if not isinstance(report, dict):
        raise StorageMeasureFailed(
            "fio printed no JSON report", hint="rerun with --debug to see its output"
        )
    rr, rw, fs = _job(report, "randread"), _job(report, "randwrite"), _job(report, "fsync")
    sync = fs.get("sync") or {}
    lat = sync.get("lat_ns") or fs.get("write", {}).get("clat_ns") or {}
    return {
        "random_read_iops": float(rr["read"]["iops"]),
        "random_write_iops": float(rw["write"]["iops"]),
        "fsync_write_iops": float(fs["write"]["iops"]),
        "fsync_latency_ms_p50": _percentile_ms(lat, "50"),
        "fsync_latency_ms_p99": _percentile_ms(lat, "99"),
    }


def device_key(storage: StorageFacts) -> str:
    """What a measurement is cached by: the disk, its model and the filesystem."""
    parts = [
        storage.block_device.value or storage.device.value or "unknown",
        storage.model.value or "",
        storage.fs_type.value or "",
    ]
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(p.strip() for p in parts if p.strip()))


def scratch_dir_for(path: str) -> Path:
    """A writable directory on the same filesystem as ``path``: the parent of a datadir
    (so nothing is written among the server's files) when it is on the same device and
    writable, else the directory itself."""
    target = Path(path)
    if not target.is_dir():
        raise UsageError(
            f"cannot measure storage at {path}: not a directory",
            hint="pass the server's datadir (or a directory on the same filesystem)",
        )
    parent = target.resolve().parent
    try:
        same_dev = parent.stat().st_dev == target.stat().st_dev
    except OSError:
        same_dev = False
    if same_dev and os.access(parent, os.W_OK):
        return parent
    if os.access(target, os.W_OK):
        return target
    raise UsageError(
        f"cannot measure storage at {path}: no writable directory on that filesystem",
        hint="run as a user who can write there (root), or skip the measurement",
    )


def _cache_path(key: str, cache_dir: Path | None) -> Path:
    return (cache_dir or myaccel_home() / "cache" / "storage") / f"{key}.json"


def read_cached(key: str, cache_dir: Path | None = None) -> StorageMeasurement | None:
    path = _cache_path(key, cache_dir)
    try:
        m = artifacts.load(path, StorageMeasurement)
        age = dt.datetime.now(dt.UTC) - dt.datetime.fromisoformat(m.measured_at)
    except (MyaccelError, ValueError):
        return None
    if age.total_seconds() > CACHE_MAX_AGE_S or m.device_key != key:
        return None
    return m.model_copy(update={"cached": True})


def _write_cache(m: StorageMeasurement, cache_dir: Path | None) -> None:
    path = _cache_path(m.device_key, cache_dir)
    with contextlib.suppress(OSError):  # a cache that cannot be written is only a cache
        path.parent.mkdir(parents=True, exist_ok=True)
        artifacts.save(path, m)


def _check_space(scratch_dir: Path, file_size_bytes: int) -> None:
    free = shutil.disk_usage(scratch_dir).free
    if free < 2 * file_size_bytes:
        raise StorageMeasureFailed(
            f"not enough free space in {scratch_dir} for a {file_size_bytes >> 20} MiB "
            f"scratch file ({free >> 20} MiB free)",
            hint="free some space, or skip the measurement",
        )


def measure_storage(
    storage: StorageFacts,
    *,
    seconds_each: float = DEFAULT_SECONDS_EACH,
    file_size_bytes: int = DEFAULT_FILE_SIZE_BYTES,
    refresh: bool = False,
    cache_dir: Path | None = None,
    say: Callable[[str], None] | None = None,
) -> StorageMeasurement:
    """Measure (or read from the cache) what the device under ``storage.path`` sustains."""
    if storage.fs_type.value in _NOT_A_DISK:
        raise StorageMeasureFailed(
            f"{storage.path.value} is on {storage.fs_type.value}, not on a disk",
            hint="measure a datadir on a block device",
        )
    key = device_key(storage)
    if not refresh:
        cached = read_cached(key, cache_dir)
        if cached is not None:
            return cached
    fio = proc.require("fio")
    scratch_dir = scratch_dir_for(storage.path.value or "/")
    _check_space(scratch_dir, file_size_bytes)
    scratch = scratch_dir / f"{SCRATCH_NAME}.{os.getpid()}"
    version = proc.run([fio, "--version"], timeout_s=10).stdout.strip() or "fio"
    direct = True
    if say is not None:
        say(
            f"measuring storage under {scratch_dir} with {version}: 3 jobs x {seconds_each:g} s "
            f"on a {file_size_bytes >> 20} MiB scratch file (removed afterwards)"
        )
    try:
        argv = fio_argv(
            fio, scratch, seconds_each=seconds_each, file_size_bytes=file_size_bytes, direct=True
        )
        timeout = 120.0 + 3 * seconds_each * 3
        done = proc.run(argv, timeout_s=timeout)
        if not done.ok and "O_DIRECT" in (done.stderr + done.stdout):
            direct = False  # a filesystem without O_DIRECT: buffered, said so in the record
            argv = fio_argv(
                fio,
                scratch,
                seconds_each=seconds_each,
                file_size_bytes=file_size_bytes,
                direct=False,
            )
            done = proc.run(argv, timeout_s=timeout)
        if not done.ok:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
            raise StorageMeasureFailed(
                f"fio failed (exit {done.returncode}): {' '.join(tail) or 'no output'}",
                hint="rerun with --debug for the full command",
            )
        figures = parse_fio_json(done.stdout)
    except ProcessFailed as exc:
        raise StorageMeasureFailed(exc.message, hint=exc.hint) from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            scratch.unlink()
    m = StorageMeasurement(
        tool=version.replace("fio-", "fio "),
        measured_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        scratch_dir=str(scratch_dir),
        device_key=key,
        block_size_bytes=BLOCK_SIZE_BYTES,
        file_size_bytes=file_size_bytes,
        seconds_each=seconds_each,
        direct_io=direct,
        **figures,
    )
    _write_cache(m, cache_dir)
    return m


def facts_with_measured_storage(
    facts: Facts, *, refresh: bool = False, say: Callable[[str], None] | None = None
) -> Facts:
    """``facts`` with the datadir's storage measured (or read from the cache)."""
    if facts.sysroot not in ("/", ""):
        raise UsageError(
            "storage can only be measured on the live machine",
            hint="drop --sysroot, or plan without --measure-storage",
        )
    storage = with_measurement(facts.storage, refresh=refresh, say=say)
    return facts.model_copy(update={"storage": storage})


def facts_with_cached_storage(facts: Facts, say: Callable[[str], None] | None = None) -> Facts:
    """``facts`` with the storage measurement cached for the datadir's device, if any."""
    storage = with_cached_measurement(facts.storage)
    if storage is facts.storage:
        return facts
    if say is not None:
        say(f"storage: {storage.measured.source} (--measure-storage measures again)")
    return facts.model_copy(update={"storage": storage})


def with_cached_measurement(storage: StorageFacts, cache_dir: Path | None = None) -> StorageFacts:
    """``storage`` with the measurement cached for its device, when there is one and it
    has none: never runs fio. A plan made without ``--measure-storage`` then judges the disk
    by what was measured on it, like the ``accelerate`` that measured it (before: the same
    SSD was "spinning" to `plan`, from rotational=1 on a virtio disk, and the two proposed
    different server layers)."""
    if storage.measured.known or storage.fs_type.value in _NOT_A_DISK:
        return storage
    m = read_cached(device_key(storage), cache_dir)
    if m is None:
        return storage
    fact = known(m, f"cached measurement: {m.tool} under {m.scratch_dir} at {m.measured_at}")
    return storage.model_copy(update={"measured": fact})


def with_measurement(
    storage: StorageFacts,
    *,
    refresh: bool = False,
    seconds_each: float = DEFAULT_SECONDS_EACH,
    cache_dir: Path | None = None,
    say: Callable[[str], None] | None = None,
) -> StorageFacts:
    """``storage`` with its ``measured`` fact filled: the measurement, or why there is none
    (a failed measurement never stops a plan: the rules fall back to what they had)."""
    fact: Fact[StorageMeasurement]
    try:
        m = measure_storage(
            storage, refresh=refresh, seconds_each=seconds_each, cache_dir=cache_dir, say=say
        )
    except MyaccelError as exc:
        fact = unknown(f"storage not measured: {exc.message}", "fio")
    else:
        how = "cached measurement" if m.cached else "measured"
        fact = known(m, f"{how}: {m.tool} under {m.scratch_dir} at {m.measured_at}")
    return storage.model_copy(update={"measured": fact})
