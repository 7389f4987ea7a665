"""What a sandbox is and what its commands return: ``state.json`` (``SandboxState``, schema
``myaccel.sandbox/1``) with its active configuration, and the status/start/stop/snapshot
results."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from myaccel.artifacts import artifact
from myaccel.model import Strict
from myaccel.owner import ProcessOwner
from myaccel.server.flavors import Flavor
from myaccel.server.sandbox.options import Override

SANDBOX_SCHEMA = "myaccel.sandbox/1"
SNAPSHOT_SCHEMA = "myaccel.sandbox-snapshot/1"
BENCH_USER = "sbtest"
BENCH_DATABASE = "sbtest"
ADMIN_USER = "root"

RunState = Literal["running", "stopped", "crashed"]


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class ServerOptions:
    """What a start or restart asks the server to run with: an option file (``--config``)
    and ``--set`` values on top of the base config, and the basedir of another install of
    the same version. Left empty: the base config (``start``), what is active (``restart``).
    ``newer``: the basedir may be a newer release line of the same flavor, started on a
    copy of the data it upgrades (the version headroom, ``accelerate --versions``); an
    older one is refused all the same."""

    config: Path | str | None = None
    sets: Mapping[str, str] | None = None
    basedir: Path | str | None = None
    newer: bool = False

    @property
    def given(self) -> bool:
        """Whether any option is asked for (an empty ``sets`` asks for nothing)."""
        return self.config is not None or bool(self.sets) or self.basedir is not None


NO_OPTIONS = ServerOptions()


class ActiveConfig(Strict):
    """The configuration the server runs (or last ran) with; empty = the base config."""

    config_file: str | None = None
    sets: dict[str, str] = Field(default_factory=dict)
    basedir: str | None = None  # another build of the same version (A/B of builds)
    binary: str | None = None
    version: str | None = None  # version string of the binary that runs it
    overridden: list[str] = Field(default_factory=list)
    started_at: str | None = None
    wrapper: list[str] = Field(
        default_factory=list
    )  # argv prefix the server runs under (valgrind), [] = none
    # the command that started it this way for a measurement (an A/B arm) and puts it back
    # on its base configuration when it ends; None: a configuration chosen to stay
    owner: ProcessOwner | None = None

    @property
    def is_base(self) -> bool:
        return self.config_file is None and not self.sets and self.basedir is None

    def options(self) -> ServerOptions:
        """The options that start the server this way again."""
        return ServerOptions(self.config_file, self.sets, self.basedir)

    def describe(self) -> str:
        if self.is_base:
            return "base"
        parts = []
        if self.basedir:
            parts.append(f"basedir {self.basedir}")
        if self.config_file:
            parts.append(self.config_file)
        parts += [f"{k}={v}" for k, v in self.sets.items()]
        if self.wrapper:
            parts.append(f"under {Path(self.wrapper[0]).name}")
        return ", ".join(parts)


@artifact(SANDBOX_SCHEMA)
class SandboxState(Strict):
    """``state.json``: everything needed to run the sandbox again."""

    schema_version: str = SANDBOX_SCHEMA
    name: str
    flavor: Flavor
    version: str  # x.y.z of the server that created the datadir
    version_string: str
    binary: str
    basedir: str
    custom_basedir: bool = False
    install_db: str | None = None
    port: int
    socket: str
    socket_fallback: bool = False
    datadir: str
    created_at: str
    bench_user: str = BENCH_USER
    bench_password: str
    bench_database: str = BENCH_DATABASE
    active_config: ActiveConfig = ActiveConfig()
    # An option file whose server options join the base configuration, before --config and
    # --set (a clone's copy of its source server's configuration; myaccel.clone).
    base_config: str | None = None
    # An argv prefix of every start (a clone's fence: taskset, nice, ionice; myaccel.clone).
    launch_prefix: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class SandboxStatus:
    name: str
    state: RunState
    pid: int | None
    port: int
    socket: str
    version: str
    datadir: str
    active_config: ActiveConfig
    flavor: str = ""
    binary: str = ""
    error_log: str = ""
    option_file: str = ""

    @property
    def running(self) -> bool:
        return self.state == "running"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state,
            "pid": self.pid,
            "flavor": self.flavor,
            "version": self.version,
            "port": self.port,
            "socket": self.socket,
            "datadir": self.datadir,
            "binary": self.binary,
            "error_log": self.error_log,
            "option_file": self.option_file,
            "active_config": self.active_config.model_dump(),
        }


@dataclass(frozen=True)
class StartResult:
    already_running: bool
    pid: int
    port: int
    socket: str
    duration_s: float
    overridden: tuple[Override, ...] = ()
    cleaned: tuple[str, ...] = ()  # stale files of a crashed server we removed
    message: str = ""
    config_has_server_options: bool = True


@dataclass(frozen=True)
class StopResult:
    was_running: bool
    killed: bool
    message: str


@dataclass(frozen=True)
class SnapshotInfo:
    name: str
    path: str
    size_bytes: int
    created_at: str
    version: str = ""
    active_config: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@artifact(SNAPSHOT_SCHEMA)
class SnapshotRecord(Strict):
    """``snapshots/SNAP/snapshot.json``: what a snapshot holds, written when it is taken."""

    schema_version: str = SNAPSHOT_SCHEMA
    name: str
    path: str
    size_bytes: int = Field(ge=0)
    created_at: str
    version: str = ""
    active_config: str = ""  # ActiveConfig.describe() of the server it was taken from
    flavor: Flavor | None = None

    @classmethod
    def of(cls, info: SnapshotInfo, flavor: Flavor) -> SnapshotRecord:
        return cls(**info.to_dict(), flavor=flavor)

    def info(self) -> SnapshotInfo:
        return SnapshotInfo(
            name=self.name,
            path=self.path,
            size_bytes=self.size_bytes,
            created_at=self.created_at,
            version=self.version,
            active_config=self.active_config,
        )
