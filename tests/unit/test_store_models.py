"""Artifacts that used to be untyped dicts read by string keys, now models through the store
(issue 32): a sandbox snapshot's snapshot.json and the build manifest. Files written
before keep loading."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from myaccel import artifacts
from myaccel.builder.manifest import (
    BuildManifest,
    Callgrind,
    MissingProfile,
    PgoInfo,
    load_manifest,
)
from myaccel.errors import SandboxError
from myaccel.server.sandbox.snapshots import SandboxSnapshots
from myaccel.server.sandbox.state import SnapshotInfo, SnapshotRecord

FIXTURE = Path(__file__).parents[1] / "fixtures" / "report" / "build-kvlab" / "manifest.json"

# snapshot.json as `sandbox snapshot save` wrote it before it was a model
OLD_SNAPSHOT = {
    "schema_version": "myaccel.sandbox-snapshot/1",
    "name": "base",
    "path": "/old/home/sandboxes/demo/snapshots/base",
    "size_bytes": 123456,
    "created_at": "2026-11-20T10:00:00+00:00",
    "version": "10.11.19-MariaDB-0+deb12u1",
    "active_config": "base config",
    "flavor": "mariadb",
}


def _snapshot_dir(tmp_path: Path, doc: object | None) -> Path:
    snap = tmp_path / "snapshots" / "base"
    (snap / "data").mkdir(parents=True)
    (snap / "data" / "ibdata1").write_bytes(b"x" * 10)
    if doc is not None:
        (snap / "snapshot.json").write_text(json.dumps(doc))
    return snap


def test_an_old_snapshot_json_loads_as_the_model(tmp_path: Path) -> None:
    snap = _snapshot_dir(tmp_path, OLD_SNAPSHOT)
    rec = artifacts.load(snap / "snapshot.json", SnapshotRecord, error=SandboxError)
    assert rec.flavor == "mariadb" and rec.size_bytes == 123456
    info = SandboxSnapshots._snapshot_info(snap)
    assert info == SnapshotInfo(
        name="base",
        path=str(snap),  # where it is now, not where it was taken
        size_bytes=123456,
        created_at="2026-11-20T10:00:00+00:00",
        version="10.11.19-MariaDB-0+deb12u1",
        active_config="base config",
    )


@pytest.mark.parametrize(
    "doc",
    [None, "not an object", {"schema_version": "other/1"}, {**OLD_SNAPSHOT, "size_bytes": -1}],
)
def test_a_snapshot_without_a_readable_record_is_described_from_its_directory(
    tmp_path: Path, doc: object | None
) -> None:
    snap = _snapshot_dir(tmp_path, doc)
    info = SandboxSnapshots._snapshot_info(snap)
    assert info is not None and info.name == "base" and info.size_bytes == 10
    assert info.version == "" and info.created_at


def test_a_snapshot_record_round_trips(tmp_path: Path) -> None:
    info = SnapshotInfo("s", "/p", 1, "2026-01-01T00:00:00+00:00", "9.7.4", "base config")
    artifacts.save(tmp_path / "snapshot.json", SnapshotRecord.of(info, "mysql"))
    doc = json.loads((tmp_path / "snapshot.json").read_text())
    assert doc == {
        "schema_version": "myaccel.sandbox-snapshot/1",
        **info.to_dict(),
        "flavor": "mysql",
    }


def test_the_fixture_manifest_loads_typed_and_writes_back_the_same() -> None:
    m = load_manifest(FIXTURE)
    assert m.source.label == "kvlab fixture 1.2.0" and m.request.opts == ["lto", "pgo"]
    assert m.compiler.generator == "Ninja" and m.target.arch == "x86_64"
    assert m.flags["final"].cxx_flags and m.dependencies[0].name == "cmake"
    assert m.pgo.missing_profile == MissingProfile(
        warnings=0, hot=[], other=[], server_sources_from="ninja -t inputs kvlabd"
    )
    cg = m.measurements.callgrind
    assert cg is not None and cg.this_build is not None and cg.baseline is not None
    assert cg.this_build.ir_per_op == 243.89 and cg.run("baseline") is cg.baseline
    old = json.loads(FIXTURE.read_text())
    new = json.loads(m.model_dump_json())
    # the two request fields added since the fixture was written read as their defaults
    assert new["request"].pop("train_workload") is None and new["request"].pop("holdout") is False
    assert new == old


def test_parts_filled_as_the_build_goes_leave_out_what_is_not_known() -> None:
    doc = json.loads(BuildManifest().model_dump_json())
    assert doc["pgo"] == {} and doc["bolt"] == {} and doc["measurements"] == {}
    assert "from_installed" not in doc["source"] and "target_runner" not in doc["compiler"]
    pgo = PgoInfo(training_started=1.5)
    assert json.loads(pgo.model_dump_json()) == {"training_started": 1.5}
    cg = Callgrind.model_validate({"workload": "w", "this_build": {"ir_total": 5, "events": {}}})
    assert cg.this_build is not None and cg.this_build.model_extra == {"events": {}}


def test_a_key_of_another_version_is_kept(tmp_path: Path) -> None:
    doc = json.loads(FIXTURE.read_text())
    doc["bolt"] = {"applied": False, "skipped": "no perf", "perf_version": "6.1"}
    (tmp_path / "manifest.json").write_text(json.dumps(doc))
    m = load_manifest(tmp_path / "manifest.json")
    assert m.bolt.skipped == "no perf" and m.bolt.model_extra == {"perf_version": "6.1"}
    m.save(tmp_path)
    assert json.loads((tmp_path / "manifest.json").read_text())["bolt"]["perf_version"] == "6.1"
