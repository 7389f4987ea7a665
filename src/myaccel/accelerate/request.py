"""What `accelerate` is asked to do, what it gives back, and what it tells the person
waiting (``Progress``, drawn by the cli)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from myaccel.accelerate.build_arm import BuildSpec, BuiltServer
from myaccel.accelerate.candidate import CandidateConfig
from myaccel.accelerate.versions import VersionHeadroom
from myaccel.bench.ab import AbResult
from myaccel.bench.adaptive import AdaptiveOptions
from myaccel.bench.compare import Comparison
from myaccel.bench.instructions import Counting
from myaccel.bench.profiles import Profile
from myaccel.bench.session import BenchProgress
from myaccel.bench.workload import Workload
from myaccel.model import Facts
from myaccel.rules.model import Plan
from myaccel.server.connection import ConnectParams

if TYPE_CHECKING:
    from myaccel.actions.plan_apply import PlannedChanges
    from myaccel.actions.target import ServerTarget
    from myaccel.clone.preflight import RestartMethod
    from myaccel.clone.source import SourceServer


@dataclass(frozen=True)
class SandboxTarget:
    """A myaccel sandbox: baseline = its own configuration, candidate = the plan's server
    layer, measured in an interleaved A/B."""

    name: str = "accelerate"
    explicit: bool = False  # named by the user: created only with ``create``
    create: bool = False
    basedir: Path | None = None  # the server a new sandbox runs (default: the system's)


@dataclass(frozen=True)
class ExistingServer:
    """A running server: the plan is measured on a clone of it (interleaved A/B), then
    applied with a journal and verified with the server's own counters (``live``).
    ``params`` carry its password: it is used to connect, never written anywhere."""

    params: ConnectParams
    unit: str | None = None  # systemd unit to restart for restart-only knobs
    conf_dir: Path | None = None  # for the managed 99-myaccel.cnf
    yes: bool = False  # apply without asking (``Progress.confirm``)
    restart_command: str | None = None  # restarts (and starts) the server
    force: bool = False  # apply even when the clone's A/B shows no improvement
    keep_clone: bool = False  # keep the clone sandbox afterwards
    window_s: float = 30.0  # each guard window on the live server
    settle_s: float = 30.0  # after a restart, before the after window


@dataclass(frozen=True)
class AccelerateRequest:
    target: SandboxTarget | ExistingServer
    profile: Profile  # the bench profile (with --runs/--time/--scale applied)
    command: list[str]  # the myaccel command line, recorded redacted in the campaigns
    durability: str = "strict"
    out_dir: Path | None = None  # new or empty; default $MYACCEL_HOME/results/ID
    measure_storage: bool = True  # fio on the datadir's device for the I/O rules
    workload: Workload | None = None  # a captured workload ``profile`` replays (sandbox only)
    allow_ddl: bool = False  # --allow-ddl: the capture's DDL may create the schemas it lacks
    build: BuildSpec | None = None  # --build: a third arm, the PGO+LTO build with the plan
    # --target: interleaved rounds until a sequential decision (bench/adaptive.py)
    adaptive: AdaptiveOptions | None = None
    instructions: Counting | None = None  # --instructions (bench/instructions.py)
    quiet_wait_s: float | None = None  # --quiet-wait: the quiet gate of the A/B (bench/quiet.py)
    # --versions: the next release line installed here, on an upgraded copy of the data
    # (as it is and with the plan), as two more arms of the campaign (versions.py)
    versions: bool = False


@dataclass(frozen=True)
class AccelerateResult:
    out_dir: Path  # facts.json, plan.json, the runs and comparison.json
    facts: Facts
    plan: Plan
    comparison: Comparison
    candidate: CandidateConfig | None = None  # on a sandbox: the tuned option file
    journal: Path | None = (
        None  # the apply's journal (rollback): an existing server's, or --swap-binary's
    )
    more: dict[str, Comparison] = field(default_factory=dict)  # --build: the other pairs
    build: BuiltServer | None = None  # --build: the optimized build measured
    clone: str | None = None  # on an existing server: the clone the A/B ran on
    live: dict[str, object] | None = None  # the guard's windows and verdict (``live``)
    figures: list[str] = field(default_factory=list)  # which figures came from where
    # on an existing server: the plan as the clone ran it (memory knobs scaled, said so)
    clone_plan: dict[str, object] | None = None
    swap_journal: Path | None = None  # --build --swap-binary on an existing server
    swap_live: dict[str, object] | None = None  # the guard's windows over that swap
    versions: VersionHeadroom | None = None  # --versions: the versions and the advice


class Progress(BenchProgress, Protocol):
    """``BenchProgress`` (notes and runs) and the steps of `accelerate`."""

    def step(self, title: str) -> None:
        """A phase starts (baseline runs, tuned runs)."""

    def confirm(self, question: str) -> bool:
        """Whether to go on (changing an existing server); False stops the command."""

    def ab_done(self, result: AbResult) -> None:
        """The A/B on the sandbox ended."""


class ServerBuildHooks(Protocol):
    """``--build`` on an existing server (``existing_build.ServerBuild``), as the
    existing-server flow calls it: ``check`` after its preflight, ``make`` before the clone,
    ``arms`` for the A/B on the clone, ``measured`` on its result, ``after_apply`` once the
    plan passed its guard."""

    def check(self, src: SourceServer, restart: RestartMethod, progress: Progress) -> None: ...

    def make(self, progress: Progress) -> None: ...

    def arms(
        self, req: AccelerateRequest, clone: str, candidate: Path, out: Path, progress: Progress
    ) -> Comparison: ...

    def measured(self, result: AccelerateResult, progress: Progress) -> AccelerateResult: ...

    def after_apply(
        self,
        result: AccelerateResult,
        server: ServerTarget,
        pc: PlannedChanges,
        progress: Progress,
    ) -> AccelerateResult: ...
