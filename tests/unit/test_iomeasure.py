"""Storage measurement: fio's JSON report, argv, scratch placement, cache."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from myaccel.facts import iomeasure
from myaccel.facts.iomeasure import (
    StorageMeasureFailed,
    device_key,
    fio_argv,
    parse_fio_json,
    read_cached,
    scratch_dir_for,
    with_measurement,
)
from myaccel.model import StorageFacts, StorageMeasurement, known, unknown

FIXTURE = Path(__file__).parent.parent / "fixtures" / "fio" / "vda-ext4-direct.json"


def _storage(path: str, fs: str = "ext4", disk: str | None = "vda") -> StorageFacts:
    u = unknown("n/a")
    return StorageFacts(
        path=known(path, "argument"),
        mount_point=known("/", "mountinfo"),
        fs_type=known(fs, "mountinfo"),
        mount_options=u,
        device=known("/dev/vda1", "mountinfo"),
        block_device=known(disk, "sys") if disk else u,
        rotational=known(True, "sys"),
        scheduler=u,
        schedulers_available=u,
        nr_requests=u,
        model=u,
    )


def test_parse_the_recorded_report() -> None:
    figures = parse_fio_json(FIXTURE.read_text())
    assert figures["random_read_iops"] > 1000
    assert figures["random_write_iops"] > 1000
    assert figures["fsync_write_iops"] > 0
    assert 0 < figures["fsync_latency_ms_p50"] <= figures["fsync_latency_ms_p99"]


def test_notes_before_the_json_are_skipped() -> None:
    figures = parse_fio_json(
        "fio: note: both iodepth >= 1 and synchronous I/O\n" + FIXTURE.read_text()
    )
    assert figures["random_read_iops"] > 0


@pytest.mark.parametrize(
    "text", ["", "garbage", '{"jobs": []}', '{"jobs": [{"jobname": "randread"}]}']
)
def test_broken_reports_are_clear_errors(text: str) -> None:
    with pytest.raises((StorageMeasureFailed, KeyError)):
        parse_fio_json(text)


def test_argv_runs_three_stonewalled_jobs_with_direct_io(tmp_path: Path) -> None:
    argv = fio_argv("fio", tmp_path / "x", seconds_each=2, file_size_bytes=1 << 26, direct=True)
    assert "--direct=1" in argv and "--output-format=json" in argv
    assert [a for a in argv if a.startswith("--name=")] == [
        "--name=randread",
        "--name=randwrite",
        "--name=fsync",
    ]
    assert argv.count("--stonewall") == 3 and "--fdatasync=1" in argv
    assert f"--bs={16 * 1024}" in argv


def test_scratch_goes_next_to_the_datadir_not_into_it(tmp_path: Path) -> None:
    datadir = tmp_path / "mysql"
    datadir.mkdir()
    assert scratch_dir_for(str(datadir)) == tmp_path.resolve()


def test_scratch_of_a_missing_dir_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="not a directory"):
        scratch_dir_for(str(tmp_path / "nope"))


def test_device_key_names_disk_and_filesystem() -> None:
    assert device_key(_storage("/var/lib/mysql")) == "vda-ext4"


def _measurement(key: str, when: dt.datetime) -> StorageMeasurement:
    return StorageMeasurement(
        tool="fio 3.33",
        measured_at=when.isoformat(timespec="seconds"),
        scratch_dir="/var/lib",
        device_key=key,
        block_size_bytes=16384,
        file_size_bytes=1 << 28,
        seconds_each=4,
        direct_io=True,
        random_read_iops=40000,
        random_write_iops=30000,
        fsync_write_iops=3000,
        fsync_latency_ms_p50=0.2,
        fsync_latency_ms_p99=3.0,
    )


def test_cache_is_used_until_it_is_old(tmp_path: Path) -> None:
    now = dt.datetime.now(dt.UTC)
    (tmp_path / "vda-ext4.json").write_text(_measurement("vda-ext4", now).model_dump_json())
    got = read_cached("vda-ext4", tmp_path)
    assert got is not None and got.cached
    old = now - dt.timedelta(days=40)
    (tmp_path / "vda-ext4.json").write_text(_measurement("vda-ext4", old).model_dump_json())
    assert read_cached("vda-ext4", tmp_path) is None
    (tmp_path / "vda-ext4.json").write_text("{broken")
    assert read_cached("vda-ext4", tmp_path) is None


def test_a_cached_measurement_fills_the_fact_without_fio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = dt.datetime.now(dt.UTC)
    (tmp_path / "vda-ext4.json").write_text(_measurement("vda-ext4", now).model_dump_json())
    monkeypatch.setattr(iomeasure.proc, "require", lambda name: pytest.fail("fio must not run"))
    s = with_measurement(_storage(str(tmp_path)), cache_dir=tmp_path)
    assert s.measured.known and s.measured.value is not None
    assert s.measured.value.fsync_write_iops == 3000
    assert s.measured.source.startswith("cached measurement")


def test_tmpfs_is_not_measured_and_says_why(tmp_path: Path) -> None:
    s = with_measurement(_storage(str(tmp_path), fs="tmpfs"), cache_dir=tmp_path)
    assert not s.measured.known and "tmpfs" in (s.measured.unknown or "")


def test_facts_without_a_measurement_still_load() -> None:
    s = _storage("/x")
    again = StorageFacts.model_validate_json(s.model_dump_json())
    assert not again.measured.known and "measure" in (again.measured.unknown or "")


@pytest.mark.integration
def test_a_real_measurement_removes_its_scratch_file(tmp_path: Path) -> None:
    datadir = tmp_path / "data"
    datadir.mkdir()
    m = iomeasure.measure_storage(
        _storage(str(datadir), disk="test"),
        seconds_each=1,
        file_size_bytes=16 << 20,
        cache_dir=tmp_path / "cache",
    )
    assert m.random_read_iops > 0 and m.random_write_iops > 0 and m.fsync_write_iops > 0
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".myaccel-iotest")]
    assert read_cached(m.device_key, tmp_path / "cache") is not None


def test_a_plan_without_measure_storage_uses_the_cached_measurement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35 defect 4: `plan` without --measure-storage ignored the fio figures cached
    for the datadir's disk, took rotational=1 (a virtio disk) for a spinning disk, and
    proposed another server layer than the `accelerate` that had measured it."""
    from click.testing import CliRunner
    from test_rules import MYSQL_80, host, server

    from myaccel.cli.main import cli

    home = tmp_path / "home"
    monkeypatch.setenv("MYACCEL_HOME", str(home))
    f = host("kunpeng920-2s")
    f = f.model_copy(
        update={
            "storage": _storage(str(tmp_path)),
            "server": server("8.0.34", "MySQL Community Server - GPL", MYSQL_80),
        }
    )
    monkeypatch.setattr("myaccel.facts.collect.collect_facts", lambda *a, **k: f)
    monkeypatch.setattr("myaccel.cli.plan.resolve", lambda conn: None)

    def io_capacity() -> str:
        r = CliRunner().invoke(cli, ["plan", "--json"])
        assert r.exit_code == 0, r.output
        import json

        recs = json.loads(r.stdout)["recommendations"]
        got = {x["target"]: x["proposed"] for x in recs}
        return str(got.get("mysql:innodb_io_capacity"))

    spinning = io_capacity()
    cache = home / "cache" / "storage"
    cache.mkdir(parents=True)
    now = dt.datetime.now(dt.UTC)
    (cache / "vda-ext4.json").write_text(_measurement("vda-ext4", now).model_dump_json())
    monkeypatch.setattr(iomeasure.proc, "require", lambda name: pytest.fail("fio must not run"))
    measured = io_capacity()
    assert spinning != measured, (spinning, measured)
    r = CliRunner().invoke(cli, ["plan"])
    assert "storage: cached measurement" in r.stderr, r.stderr
