"""The artifact store: registry, durable save, load with one-line errors, migrations."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

from myaccel import artifacts
from myaccel.artifacts import artifact, load, load_any, model_for, save, write_text
from myaccel.errors import DataError, ExitCode, UsageError
from myaccel.model import Frozen


def _v1_to_v2(doc: dict[str, Any]) -> dict[str, Any]:
    """Version 1 had the size in KiB under ``size_kib``."""
    doc = dict(doc)
    doc["size_bytes"] = doc.pop("size_kib") * 1024
    doc["schema_version"] = "myaccel.test-thing/2"
    return doc


@artifact("myaccel.test-thing/2", migrations={"myaccel.test-thing/1": _v1_to_v2})
class Thing(Frozen):
    schema_version: str = "myaccel.test-thing/2"
    name: str
    size_bytes: int
    tags: list[str] = Field(default_factory=list)


def files(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def test_round_trip(tmp_path: Path) -> None:
    t = Thing(name="a", size_bytes=5, tags=["x"])
    p = save(tmp_path / "thing.json", t)
    assert p == tmp_path / "thing.json"
    assert load(p, Thing) == t
    assert load_any(p) == t
    assert p.read_text().endswith("}\n")
    assert files(tmp_path) == ["thing.json"]  # no temporary left


def test_private_file_is_0600_and_replaces_a_readable_one(tmp_path: Path) -> None:
    p = tmp_path / "run.json"
    p.write_text("{}")
    p.chmod(0o644)
    save(p, Thing(name="a", size_bytes=1), private=True)
    assert stat.S_IMODE(p.stat().st_mode) == 0o600
    shared = save(tmp_path / "shared.json", Thing(name="a", size_bytes=1))
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(shared.stat().st_mode) == 0o666 & ~umask


@pytest.mark.parametrize("step", ["write", "fsync", "replace"])
def test_a_failed_write_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    p = save(tmp_path / "thing.json", Thing(name="old", size_bytes=1))
    before = p.read_bytes()

    def full(*_a: object, **_k: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(f"os.{step}", full)
    with pytest.raises(OSError) as exc:
        save(p, Thing(name="new", size_bytes=2))
    monkeypatch.undo()
    assert exc.value.errno == errno.ENOSPC
    assert exc.value.filename == str(p)  # the target, not the temporary, is named
    assert p.read_bytes() == before
    assert files(tmp_path) == ["thing.json"]


def test_a_missing_directory_names_the_target(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as exc:
        write_text(tmp_path / "nope" / "x.json", "{}")
    assert exc.value.filename == str(tmp_path / "nope" / "x.json")


def test_remove_temporaries(tmp_path: Path) -> None:
    (tmp_path / ".j.json.tmp").write_text('{"half": ')
    (tmp_path / ".j.json.0a1b2c3d.tmp").write_text("")
    (tmp_path / "j.json").write_text("{}")
    (tmp_path / ".lock").write_text("")
    assert len(artifacts.remove_temporaries(tmp_path)) == 2
    assert files(tmp_path) == [".lock", "j.json"]


def test_missing_and_not_json(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^thing '.*nope\.json' does not exist$") as exc:
        load(tmp_path / "nope.json", Thing, what="thing", hint="make one", error=UsageError)
    assert exc.value.hint == "make one"
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": ')
    with pytest.raises(DataError, match="is not readable JSON: Expecting value") as dexc:
        load(bad, Thing)
    assert dexc.value.exit_code == ExitCode.DATA_ERROR  # a damaged file: exit 9
    assert "\n" not in dexc.value.message


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        pytest.param(
            {"schema_version": "myaccel.run/1", "name": "a"},
            "has schema 'myaccel.run/1', expected 'myaccel.test-thing/2'",
            id="other-schema",
        ),
        pytest.param([1, 2], "has schema None, expected 'myaccel.test-thing/2'", id="a-list"),
        pytest.param(
            {"schema_version": "myaccel.test-thing/2", "name": "a"},
            "does not match myaccel.test-thing/2: field 'size_bytes': Field required",
            id="field-missing",
        ),
        pytest.param(
            {"schema_version": "myaccel.test-thing/2", "name": "a", "size_bytes": "big"},
            "does not match myaccel.test-thing/2: field 'size_bytes': "
            "Input should be a valid integer, unable to parse string as an integer",
            id="field-invalid",
        ),
    ],
)
def test_schema_and_field_errors_are_one_line(tmp_path: Path, doc: Any, problem: str) -> None:
    p = tmp_path / "x.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(DataError) as exc:
        load(p, Thing, what="thing")
    assert exc.value.message == f"thing '{p}' {problem}"
    assert exc.value.context["file"] == str(p)


def test_migration_is_applied(tmp_path: Path) -> None:
    p = tmp_path / "old.json"
    p.write_text(json.dumps({"schema_version": "myaccel.test-thing/1", "name": "a", "size_kib": 2}))
    t = load(p, Thing)
    assert t.schema_version == "myaccel.test-thing/2" and t.size_bytes == 2048
    assert model_for("myaccel.test-thing/1") is Thing
    assert load_any(p) == t


def test_verify_sees_the_document_as_written(tmp_path: Path) -> None:
    p = tmp_path / "old.json"
    p.write_text(json.dumps({"schema_version": "myaccel.test-thing/1", "name": "a", "size_kib": 1}))
    seen: list[dict[str, Any]] = []
    load(p, Thing, verify=seen.append)
    assert seen == [{"schema_version": "myaccel.test-thing/1", "name": "a", "size_kib": 1}]


def test_registry_knows_every_artifact_of_the_package() -> None:
    import myaccel.report.load  # noqa: F401  (imports every artifact model)
    from myaccel.builder.manifest import BuildManifest

    for schema in (
        "myaccel.facts/1",
        "myaccel.plan/1",
        "myaccel.journal/1",
        "myaccel.run/1",
        "myaccel.campaign/1",
        "myaccel.comparison/1",
        "myaccel.profile/1",
    ):
        assert schema in artifacts.known_schemas(), schema
    assert model_for("myaccel.build/1") is BuildManifest
    assert model_for("myaccel.nothing/1") is None


def test_unknown_schema_for_load_any(tmp_path: Path) -> None:
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"schema_version": "myaccel.nothing/1"}))
    with pytest.raises(DataError, match=r"has schema 'myaccel\.nothing/1', which is none of"):
        load_any(p)


def test_registration_checks_the_schema_default() -> None:
    with pytest.raises(TypeError, match="must default to"):

        @artifact("myaccel.test-other/1")
        class Other(BaseModel):
            schema_version: str = "myaccel.test-other/2"

    with pytest.raises(TypeError, match="already"):

        @artifact("myaccel.test-thing/2")
        class Impostor(BaseModel):
            schema_version: str = "myaccel.test-thing/2"
