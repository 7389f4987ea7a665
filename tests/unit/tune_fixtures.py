"""A deterministic stand-in for a server in `tune` tests: fixture facts and plan (this VM's
sysroot with MariaDB 10.11), and an objective whose TPS is a fixed function of the
configuration times seeded noise. Run as a script, it runs one search (the crash test kills
it in the middle of a trial)."""

from __future__ import annotations

import hashlib
import math
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from test_rules import MARIADB_1011, host, server, with_memory

from myaccel.knobs.catalog import Catalog
from myaccel.knobs.server_knobs import ServerKnobs
from myaccel.model import Facts
from myaccel.rules.engine import Hints, make_plan
from myaccel.rules.knobview import knob_view_for
from myaccel.rules.model import Plan
from myaccel.tune.constraint import Constraint, plan_values
from myaccel.tune.objective import Sample
from myaccel.tune.process import with_layers
from myaccel.tune.result import TrialRow
from myaccel.tune.search import Budget, Outcome, Search
from myaccel.tune.space import Space, build_space, cap_dim
from myaccel.tune.study import Study, TrialRecord
from myaccel.units import GiB

VERSION = "10.11.19-MariaDB-0+deb12u1"


def fixture_facts(ram: int = 8 * GiB) -> Facts:
    f = host("this-vm").model_copy(update={"server": server(VERSION, "Debian 12", MARIADB_1011)})
    return with_memory(f, ram)


def fixture_plan(facts: Facts, durability: str = "strict") -> Plan:
    return make_plan(
        facts, durability=durability, hints=Hints(threads=8), knobs=knob_view_for(facts)
    )


def server_knobs() -> ServerKnobs:
    return Catalog.load().for_server("mariadb", VERSION)


def fixture_space(
    facts: Facts,
    plan: Plan,
    durability: str = "strict",
    only: tuple[str, ...] = (),
    layers: tuple[str, ...] = ("server",),
) -> tuple[Space, Constraint]:
    assert facts.server is not None
    base = {**(facts.server.variables.value or {}), **plan_values(plan)}
    space = build_space(server_knobs(), base, durability=durability, only=only)
    space = with_layers(space, layers, facts, server_knobs(), base)
    constraint = Constraint(facts=facts, plan=plan, durability=durability)
    top = constraint.largest_buffer_pool()
    if top is not None:
        space = cap_dim(space, "innodb_buffer_pool_size", top)
    return space, constraint


def gain(changes: Mapping[str, str]) -> float:
    """The true effect of a configuration: +8% for innodb_io_capacity >= 2000, +4% for the
    adaptive hash index off, nothing else."""
    g = 1.0
    if int(changes.get("innodb_io_capacity", "0")) >= 2000:
        g *= 1.08
    if changes.get("innodb_adaptive_hash_index") == "OFF":
        g *= 1.04
    return g


@dataclass
class FakeObjective:
    effect: Callable[[Mapping[str, str]], float] = gain
    sigma: float = 0.01
    seen: list[dict[str, str]] = field(default_factory=list)
    sleep_at: int | None = None  # trial number that hangs (the crash test kills it there)
    marker: Path | None = None

    def _noise(self, label: str, arm: str, i: int) -> float:
        h = hashlib.sha256(f"{label}/{arm}/{i}".encode()).digest()
        u1 = (int.from_bytes(h[:8], "big") + 1) / 2**64
        u2 = int.from_bytes(h[8:16], "big") / 2**64
        z = math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)
        return math.exp(self.sigma * z)

    def measure(self, label: str, changes: Mapping[str, str], pairs: int) -> Sample:
        self.seen.append(dict(changes))
        if self.sleep_at is not None and label == f"trial-{self.sleep_at:03d}":
            assert self.marker is not None
            self.marker.write_text(label)
            time.sleep(600)
        base = [1000.0 * self._noise(label, "plan", i) for i in range(pairs)]
        cand = [1000.0 * self.effect(changes) * self._noise(label, "cand", i) for i in range(pairs)]
        return Sample({"oltp_read_write@8": (base, cand)})


@dataclass
class Recorder:
    notes: list[str] = field(default_factory=list)
    phases: list[str] = field(default_factory=list)
    trials: list[tuple[TrialRow, TrialRow | None]] = field(default_factory=list)

    def note(self, msg: str) -> None:
        self.notes.append(msg)

    def phase(self, title: str) -> None:
        self.phases.append(title)

    def trial_done(self, row: TrialRow, incumbent: TrialRow | None) -> None:
        self.trials.append((row, incumbent))


@dataclass
class Ran:
    outcome: Outcome
    records: list[TrialRecord]
    progress: Recorder
    space: Space
    constraint: Constraint


def search(
    out: Path,
    objective: FakeObjective,
    budget: Budget,
    *,
    resume: bool = False,
    seed: int = 0,
    facts: Facts | None = None,
    durability: str = "strict",
    only: tuple[str, ...] = (),
    layers: tuple[str, ...] = ("server",),
) -> Ran:
    """One search: opened, run, closed."""
    f = facts or fixture_facts()
    plan = fixture_plan(f, durability)
    space, constraint = fixture_space(f, plan, durability, only, layers)
    rec = Recorder()
    with Study.open(out, resume=resume, seed=seed, startup_trials=3) as study:
        s = Search(
            study=study,
            space=space,
            constraint=constraint,
            objective=objective,
            progress=rec,
            budget=budget,
        )
        outcome = s.run()
        return Ran(outcome, study.records(), rec, space, constraint)


if __name__ == "__main__":  # the crash test's victim: OUT SLEEP_AT
    out, at = Path(sys.argv[1]), int(sys.argv[2])
    obj = FakeObjective(sleep_at=at, marker=out.parent / "running")
    search(out, obj, Budget(trials=6, ablation=False), only=("innodb_io_capacity",))
