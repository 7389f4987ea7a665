"""The build manifest (``myaccel.build/1``): what was built, how, and what was verified.

Every part is a typed model (``SourceInfo``, ``RequestInfo``, ``PgoInfo``, ...); parts
filled in as the build goes leave out what is not known yet, so files of earlier versions
and new ones read alike (tests/fixtures/report/build-kvlab/manifest.json is one).

Written next to the install tree (``OUT/manifest.json``) after every stage, atomically, so
an interrupted build leaves a readable record and ``--resume`` knows what is done.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from myaccel import __version__
from myaccel.artifacts import artifact, load, save
from myaccel.builder.errors import TreeError
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


class Part(BaseModel):
    """A part of the manifest: the fields myaccel writes, typed. A key another version
    of myaccel wrote is kept as it is (read, and written back on ``--resume``)."""

    model_config = ConfigDict(extra="allow")


class SparsePart(Part):
    """A part filled in as the build goes (or only in some builds): a field not set yet
    is left out of the file, as before these parts were typed."""

    @model_serializer(mode="wrap")
    def _without_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if v is not None}


class SourceInfo(SparsePart):
    """The source tree: where, what, and the copy compiled when it was patched."""

    path: str = ""
    flavor: str = ""
    version: str = ""
    label: str = ""
    markers: list[str] = Field(default_factory=list)
    config_headers: list[str] = Field(default_factory=list)
    patched: bool = False
    compiled_from: str = ""
    notes: list[str] = Field(default_factory=list)
    from_installed: dict[str, Any] | None = None  # --from-installed: that server


class RequestInfo(Part):
    """What was asked for (``BuildRequest``)."""

    opts: list[str] = Field(default_factory=list)
    atomics: str = "auto"
    atomics_expected: str | None = None  # the atomics class verify-build expects
    target_cpu: str | None = None
    cross: str | None = None  # the target architecture of a cross build
    jobs: int = 2
    train_profile: str = "quick"
    train_workload: str | None = None  # build --train W.json
    holdout: bool = False
    train_ops: int = 300_000
    cacheline_bytes: int | None = None  # asked for with the cacheline option only
    allow_patch: bool = False
    extra_cmake: list[str] = Field(default_factory=list)
    compare_with: str | None = None  # the install tree measured against
    sysroot: str = "/"


class CompilerInfo(SparsePart):
    cc: str = ""
    cxx: str = ""
    version: str = ""
    triplet: str = ""
    cross: bool = False
    generator: str = ""
    target_runner: list[str] | None = None  # cross builds: how target programs run here
    build_env: dict[str, str] | None = None


class TargetInfo(Part):
    """The CPU the build is tuned for, and why."""

    arch: str = ""
    cpu: str | None = None
    has_lse: bool | None = None
    source: str = ""
    arch_flags: list[str] = Field(default_factory=list)
    why: str = ""


class PhaseFlags(Part):
    """The compiler and linker flags of one phase (``flags.PhaseFlags.to_dict``)."""

    c_flags: list[str] = Field(default_factory=list)
    cxx_flags: list[str] = Field(default_factory=list)
    exe_linker_flags: list[str] = Field(default_factory=list)
    shared_linker_flags: list[str] = Field(default_factory=list)
    cmake_defs: dict[str, str] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)


class Dependency(Part):
    name: str
    package: str | None = None
    found: bool = False
    where: str | None = None


class PatchRecord(Part):
    files: list[str] = Field(default_factory=list)
    patch: str = ""
    applied: bool = False


class MissingProfile(Part):
    """-Wmissing-profile warnings of the PGO use build, split by server sources."""

    warnings: int = 0
    hot: list[str] = Field(default_factory=list)
    other: list[str] = Field(default_factory=list)
    server_sources_from: str = ""


class PgoInfo(SparsePart):
    training_started: float | None = None  # time.time() when training began
    profile_dir: str | None = None
    profiles: int | None = None
    hot_found: list[str] | None = None
    hot_missing: list[str] | None = None
    missing_profile: MissingProfile | None = None
    use_build_done: bool | None = None


class BoltInfo(SparsePart):
    """The BOLT stage: skipped (and why), or the rewrite with its input, tool and profile."""

    applied: bool | None = None
    skipped: str | None = None  # why BOLT was not applied
    input: str | None = None  # the linked binary before the rewrite, kept under OUT/bolt
    input_sha256: str | None = None
    input_relocations: bool | None = None  # .rela.text kept by -Wl,--emit-relocs

    tool: str | None = None  # llvm-bolt
    version: str | None = None
    profile: str | None = None  # perf.data of the training workload
    mode: str | None = None
    output_sha256: str | None = None


class CallgrindRun(Part):
    """Instructions per operation of one server under callgrind."""

    binary: str = ""
    ir_total: int = 0
    ops: int = 0
    ir_per_op: float = 0.0
    mispredicts_per_op: float | None = None


class Callgrind(SparsePart):
    tool: str | None = None
    workload: str | None = None
    this_build: CallgrindRun | None = None
    baseline: CallgrindRun | None = None
    delta_pct: float | None = None

    def run(self, label: str) -> CallgrindRun | None:
        return self.this_build if label == "this_build" else self.baseline


class Measurements(SparsePart):
    callgrind: Callgrind | None = None
    smoke: dict[str, Any] | None = None  # smoke.SmokeResult.to_dict()
    holdout: dict[str, Any] | None = None  # holdout.HoldoutStage's two replays


@artifact(BUILD_SCHEMA)
class BuildManifest(Strict):
    schema_version: str = BUILD_SCHEMA
    myaccel_version: str = __version__
    created_at: str = Field(default_factory=now_iso)
    updated_at: str = Field(default_factory=now_iso)
    status: Literal["running", "complete", "failed"] = "running"
    error: str = ""
    source: SourceInfo = Field(default_factory=SourceInfo)
    out_dir: str = ""
    build_dir: str = ""
    install_dir: str = ""
    request: RequestInfo = Field(default_factory=RequestInfo)
    compiler: CompilerInfo = Field(default_factory=CompilerInfo)
    target: TargetInfo = Field(default_factory=TargetInfo)
    flags: dict[str, PhaseFlags] = Field(default_factory=dict)  # phase -> its flags
    left_out: list[str] = Field(default_factory=list)
    dependencies: list[Dependency] = Field(default_factory=list)
    stages: list[StageRecord] = Field(default_factory=list)
    pgo: PgoInfo = Field(default_factory=PgoInfo)
    bolt: BoltInfo = Field(default_factory=BoltInfo)
    patches: list[PatchRecord] = Field(default_factory=list)
    verification: list[CheckResult] = Field(default_factory=list)
    measurements: Measurements = Field(default_factory=Measurements)
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
