"""The clone's record, ``clone.json`` in the clone's sandbox directory (schema
``myaccel.clone/1``): where the clone came from, which server runs it, every option of its
configuration with its origin, every variable rewritten and why, how the data was copied,
the fence, and each step taken (saved after every step, so a crash leaves a record)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from myaccel import artifacts
from myaccel.artifacts import artifact
from myaccel.model import Strict
from myaccel.server.sandbox.state import now_iso

CLONE_SCHEMA = "myaccel.clone/1"
RECORD_FILE = "clone.json"

StepState = Literal["started", "done", "undone", "failed"]


class SourceInfo(Strict):
    connection: str
    sandbox: str | None = None
    flavor: str
    version: str
    version_string: str
    pid: int | None = None
    binary: str | None = None
    basedir: str
    datadir: str
    data_bytes: int


class ServerChoice(Strict):
    binary: str
    basedir: str
    same_binary: bool
    note: str


class ConfigEntry(Strict):
    """One line of the clone's option file."""

    key: str
    value: str | None
    origin: str  # "option file F", "command line", "SET PERSIST", "SET GLOBAL", "myaccel"


class Rewrite(Strict):
    """A variable whose value in the clone differs from the source's, and why."""

    variable: str
    source_value: str | None
    clone_value: str | None
    reason: str


class GeneratedTable(Strict):
    """One table of a schema-only clone filled with generated rows."""

    database: str
    table: str
    source_rows: int  # information_schema.TABLES.TABLE_ROWS on the source (an estimate)
    source_bytes: int  # its DATA_LENGTH + INDEX_LENGTH
    target_rows: int  # source_rows times the cap's factor
    rows: int = 0  # rows inserted
    skipped: str | None = None  # why the table stays empty
    # rows the server refused (a CHECK constraint, a duplicate key): the first warning
    refused_because: str | None = None


class GeneratedData(Strict):
    """The rows of the source's shape generated into a schema-only clone."""

    max_bytes: int  # the cap on the generated data (bytes, as the source's tables count)
    max_rows: int  # and on rows
    factor: float  # every table's row count times this (1.0: the cap did not bind)
    duration_s: float = 0.0
    tables: list[GeneratedTable] = Field(default_factory=list)


class DataCopy(Strict):
    method: str  # mariadb-backup, clone-plugin, schema-only
    bytes_copied: int = 0
    duration_s: float = 0.0
    schema_only: bool = False
    note: str = ""
    generated: GeneratedData | None = None  # schema only: the rows of the same shape


class FenceInfo(Strict):
    cpus: list[int] | None
    nice: int
    io_priority: str
    argv_prefix: list[str]
    reason: str


class Step(Strict):
    name: str
    state: StepState
    at: str
    detail: str = ""


@artifact(CLONE_SCHEMA)
class CloneRecord(Strict):
    schema_version: str = CLONE_SCHEMA
    name: str
    created_at: str
    source: SourceInfo
    server: ServerChoice
    config_file: str
    options: list[ConfigEntry] = Field(default_factory=list)
    rewritten: list[Rewrite] = Field(default_factory=list)
    # the factor the big memory buffers were scaled by (1.0: not scaled); a plan A/B'd on
    # the clone has its memory knobs scaled by the same factor
    memory_factor: float = 1.0
    data: DataCopy | None = None
    fence: FenceInfo | None = None
    # after the first start: every variable that differs from the source, with its reason
    variable_diff: list[Rewrite] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def step(self, name: str, state: StepState, detail: str = "") -> None:
        self.steps.append(Step(name=name, state=state, at=now_iso(), detail=detail))


def save_record(sandbox_dir: Path, record: CloneRecord) -> Path:
    path = sandbox_dir / RECORD_FILE
    artifacts.save(path, record, private=True)
    return path


def load_record(sandbox_dir: Path) -> CloneRecord:
    return artifacts.load(sandbox_dir / RECORD_FILE, CloneRecord, what="clone record")
