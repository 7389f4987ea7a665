"""The build manifest (``myaccel.build/1``): what was built, how, and what was verified.

Written next to the install tree (``OUT/manifest.json``) after every stage, atomically, so
an interrupted build leaves a readable record and ``--resume`` knows what is done.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from myaccel import __version__
from myaccel.artifacts import artifact, load, save
from myaccel.build.errors import TreeError
from myaccel.model import Strict

BUILD_SCHEMA = "myaccel.build/1"
MANIFEST = "manifest.json"

StageStatus = Literal["pending", "running", "done", "failed", "skipped"]
CheckStatus = Literal["pass", "fail", "unknown", "skip"]


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class StageRecord(Strict):
    name: str
    title: str = ""
    status: StageStatus = "pending"
    inputs_digest: str = ""
    started_at: str | None = None
    duration_s: float | None = None
    log: str | None = None
    reason: str = ""  # why skipped / why failed
    resumed: bool = False  # done in an earlier run, inputs unchanged
    detail: dict[str, Any] = Field(default_factory=dict)


class CheckResult(Strict):
    id: str
    title: str
    status: CheckStatus
    evidence: str
    expected: str = ""


@artifact(BUILD_SCHEMA)
class BuildManifest(Strict):
    schema_version: str = BUILD_SCHEMA
    myaccel_version: str = __version__
    created_at: str = Field(default_factory=now_iso)
    updated_at: str = Field(default_factory=now_iso)
    status: Literal["running", "complete", "failed"] = "running"
    error: str = ""
    source: dict[str, Any] = Field(default_factory=dict)
    out_dir: str = ""
    build_dir: str = ""
    install_dir: str = ""
    request: dict[str, Any] = Field(default_factory=dict)
    compiler: dict[str, Any] = Field(default_factory=dict)
    target: dict[str, Any] = Field(default_factory=dict)
    flags: dict[str, Any] = Field(default_factory=dict)
    left_out: list[str] = Field(default_factory=list)
    dependencies: list[dict[str, Any]] = Field(default_factory=list)
    stages: list[StageRecord] = Field(default_factory=list)
    pgo: dict[str, Any] = Field(default_factory=dict)
    bolt: dict[str, Any] = Field(default_factory=dict)
    patches: list[dict[str, Any]] = Field(default_factory=list)
    verification: list[CheckResult] = Field(default_factory=list)
    measurements: dict[str, Any] = Field(default_factory=dict)
    binaries: dict[str, str] = Field(default_factory=dict)  # path -> sha256

    def stage(self, name: str) -> StageRecord | None:
        return next((s for s in self.stages if s.name == name), None)

    def upsert(self, rec: StageRecord) -> None:
        for i, s in enumerate(self.stages):
            if s.name == rec.name:
                self.stages[i] = rec
                return
        self.stages.append(rec)

    def save(self, out_dir: Path) -> Path:
        self.updated_at = now_iso()
        return save(out_dir / MANIFEST, self)


def load_manifest(path: Path) -> BuildManifest:
    return load(
        path,
        BuildManifest,
        what="build manifest",
        hint="pass the manifest.json written by `myaccel build` (next to install/); one of "
        "another myaccel version: build again into a new --out (without --resume)",
        error=TreeError,
    )


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def digest_of(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:20]
