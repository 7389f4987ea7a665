"""What `tune` is asked to do and what it tells the person waiting (``TuneProgress``, drawn
by the cli)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from myaccel.bench.profiles import Profile
from myaccel.bench.session import BenchProgress
from myaccel.tune.result import TrialRow
from myaccel.tune.search import Budget

# What --layers may search: the plan's server layer (``rules.model.LAYERS``) and the
# process (CPU affinity, NUMA policy, thread pool: tune.process).
SEARCH_LAYERS = ("server", "process")


@dataclass(frozen=True)
class TuneRequest:
    sandbox: str  # the sandbox both arms run on
    profile: Profile  # the workload of every trial (runs per arm set by the phases)
    command: list[str]  # the myaccel command line, recorded redacted in the campaigns
    budget: Budget = field(default_factory=Budget)
    durability: str = "strict"  # strict: durability knobs are never searched
    out_dir: Path | None = None  # default $MYACCEL_HOME/results/ID; the study to resume
    resume: bool = False
    create: bool = False  # make the sandbox first
    basedir: Path | None = None  # server build for the sandbox and both arms
    knobs: tuple[str, ...] = ()  # search only these knobs (default: every searchable one)
    layers: tuple[str, ...] = ("server",)
    seed: int = 0  # the TPE sampler's
    measure_storage: bool = False  # fio on the datadir's device for the I/O rules
    dataset: str | None = None
    ps_mode: str = "auto"
    pin_client: str | None = None
    cleanup: bool = False  # drop an existing dataset of another size and prepare anew


class TuneProgress(BenchProgress, Protocol):
    """``BenchProgress`` (notes and runs), the phases and every trial with the incumbent."""

    def phase(self, title: str) -> None: ...

    def trial_done(self, row: TrialRow, incumbent: TrialRow | None) -> None: ...
