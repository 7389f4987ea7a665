"""The search loop of `tune`, on any ``Objective``: A/A noise floor, screening by TPE,
confirmation by successive halving, the final interleaved A/B of the winner against the
plan, and the ablation of the winner.

Phases (each resumable from the study, each trial written before and after it runs):

1. **plan** (trial 0): the plan against itself, ``aa_pairs`` runs per arm: the noise floor.
2. **screen**: TPE proposes; a proposal that breaks the memory budget or the durability
   promise is pruned unmeasured; the rest run ``screen_pairs`` runs per arm against the plan.
   Stops at ``trials`` screens or at 60% of ``minutes``.
3. **confirm**: successive halving over the screens above the noise floor (``halving``),
   until one configuration is left (or 85% of ``minutes``).
4. **final**: the winner against the plan, ``final_runs`` (>= 5) runs per arm; it wins only
   when every cell is "improved" with its 95% CI above zero.
5. **ablation**: the winner without one of its changes at a time, each against the plan.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from myaccel.errors import MyaccelError, NoValidRuns, UsageError
from myaccel.model import same_named
from myaccel.tune.constraint import Constraint
from myaccel.tune.halving import Halving
from myaccel.tune.history import incumbent
from myaccel.tune.noise import NoiseFloor, noise_floor
from myaccel.tune.objective import Objective, Score, score
from myaccel.tune.result import AblationRow, FinalAb, TrialRow
from myaccel.tune.space import ParamValue, Space, value_text
from myaccel.tune.study import Study, TrialRecord, config_key

if TYPE_CHECKING:
    import optuna

MIN_FINAL_RUNS = 5
SCREEN_SHARE = 0.6  # of --minutes: screening stops here
CONFIRM_SHARE = 0.85  # confirmation stops here; the final A/B always runs
MAX_PRUNED_IN_A_ROW = 50


class SearchProgress(Protocol):
    def note(self, msg: str) -> None: ...

    def phase(self, title: str) -> None:
        """A phase starts (noise floor, screening, confirmation, final A/B, ablation)."""

    def trial_done(self, row: TrialRow, incumbent: TrialRow | None) -> None:
        """A trial ended; ``incumbent`` is the best configuration so far (None: the plan)."""


@dataclass(frozen=True)
class Budget:
    trials: int | None = 20  # screening trials (measured)
    minutes: float | None = None
    screen_pairs: int = 1
    aa_pairs: int = 3
    final_runs: int = MIN_FINAL_RUNS
    eta: int = 3
    max_pairs: int = 5
    ablation: bool = True

    def __post_init__(self) -> None:
        if self.final_runs < MIN_FINAL_RUNS:
            raise ValueError(f"final_runs must be at least {MIN_FINAL_RUNS}")


@dataclass(frozen=True)
class Outcome:
    noise: NoiseFloor
    trials: list[TrialRow]
    winner: dict[str, str]
    final: FinalAb | None
    improved: bool
    verdict: str
    ablation: list[AblationRow]
    importances: dict[str, float]


@dataclass
class Search:
    study: Study
    space: Space
    constraint: Constraint
    objective: Objective
    progress: SearchProgress
    budget: Budget
    clock: Callable[[], float] = time.monotonic
    final_comparison: Callable[[str], str | None] = lambda label: None
    _t0: float = field(default=0.0, init=False)
    _floor_pct: float | None = field(default=None, init=False)

    # ------------------------------------------------------------------ budget

    def _past(self, share: float) -> bool:
        if self.budget.minutes is None:
            return False
        return self.clock() - self._t0 >= share * self.budget.minutes * 60.0

    # ------------------------------------------------------------------ the phases

    def run(self) -> Outcome:
        self._t0 = self.clock()
        self._check_same_space()
        noise = self._noise()
        self._floor_pct = noise.floor_pct
        self._screen()
        halving = Halving(
            screen_pairs=self.budget.screen_pairs,
            eta=self.budget.eta,
            max_pairs=max(self.budget.max_pairs, self.budget.screen_pairs),
            floor_pct=noise.floor_pct,
        )
        self._confirm(halving)
        win_key = halving.winner(self.study.measured())
        winner: dict[str, str] = json.loads(win_key) if win_key else {}
        final_score, final = self._final(winner)
        improved = final_score is not None and final_score.improved
        # the ablation explains a gain: a winner that did not beat the plan has none (it
        # would cost 2 x 3 runs per changed knob, ~45 min for 22 knobs at 20 s runs)
        ablation = (
            self._ablation(winner, final_score) if final_score is not None and improved else []
        )
        return Outcome(
            noise=noise,
            trials=self.rows(),
            winner=winner,
            final=final,
            improved=improved,
            verdict=_verdict(improved, final_score, noise),
            ablation=ablation,
            importances=self.study.importances(),
        )

    def _check_same_space(self) -> None:
        """A resumed study must search the space it started with."""
        names = self.space.names()
        before = self.study.attr("searched")
        if before is None:
            self.study.set_attr("searched", names)
        elif list(before) != names:
            raise UsageError(
                f"this study searched {', '.join(before) or 'nothing'}; now asked for "
                f"{', '.join(names)}",
                hint="resume with the same --knob and --durability options, or start a new --out",
            )

    def _noise(self) -> NoiseFloor:
        done = self._done("plan")
        if done is None:
            self.progress.phase(
                f"noise floor: the plan against itself, {self.budget.aa_pairs} runs per arm"
            )
            self._measure("plan", self.space.base_params(), self.budget.aa_pairs, force_changes={})
            done = self._done("plan")
        if done is None or done.sample is None:
            raise NoValidRuns(
                "the noise-floor trial (the plan against itself) failed",
                hint="see the notes above and the runs of the first trial; then --resume",
            )
        nf = noise_floor(score(done.sample), self.budget.screen_pairs)
        self.progress.note(
            f"noise: A/A {nf.aa_delta_pct:+.1f}%, run-to-run CV {nf.cv_pct:.1f}%; a screen must "
            f"beat the plan by more than {nf.floor_pct:.1f}% to be confirmed"
        )
        return nf

    def _screen(self) -> None:
        b = self.budget
        screens = sum(
            1 for r in self.study.records() if r.stage == "screen" and r.state == "COMPLETE"
        )
        self.progress.phase(f"screening: {b.screen_pairs} run(s) per arm against the plan")
        pruned = 0
        while (b.trials is None or screens < b.trials) and not self._past(SCREEN_SHARE):
            if b.trials is None and b.minutes is None:
                break
            trial, params = self.study.ask(self.space, "screen")
            changes = self.space.changes(params)
            check = self.constraint.check(changes)
            if not check.ok:
                self.study.prune(trial, changes, check.reason)
                pruned += 1
                if pruned >= MAX_PRUNED_IN_A_ROW:
                    self.progress.note(
                        "warning: the sampler keeps proposing infeasible configurations; screening stops"
                    )
                    break
                continue
            pruned = 0
            if self._run_trial(trial, "screen", changes, b.screen_pairs):
                screens += 1

    def _confirm(self, halving: Halving) -> None:
        told = False
        while not self._past(CONFIRM_SHARE):
            step = halving.next_step(self.study.measured())
            if step is None:
                return
            if not told:
                self.progress.phase(f"confirmation: successive halving (eta {halving.eta})")
                told = True
            self._measure("confirm", self._params_of(step.key), step.pairs, rung=step.rung)

    def _final(self, winner: dict[str, str]) -> tuple[Score | None, FinalAb | None]:
        if not winner:
            self.progress.note(
                "no screened configuration beat the plan by more than the noise floor"
            )
            return None, None
        key = config_key(winner)
        done = self._done("final", key)
        if done is None:
            runs = self.budget.final_runs
            self.progress.phase(
                f"final A/B: the winner against the plan, {runs} runs per arm, interleaved"
            )
            self._measure("final", self._params_of(key), runs, rung=99)
            done = self._done("final", key)
        if done is None or done.sample is None:
            self.progress.note("the final A/B failed: no verdict on the winner (see its trial)")
            return None, None
        sc = score(done.sample)
        final = FinalAb(
            runs_per_arm=done.sample.pairs(),
            delta_pct=sc.delta_pct,
            ci_low_pct=sc.ci_low_pct,
            ci_high_pct=max((c.ci_high_pct or 0.0) for c in sc.cells)
            if sc.ci_low_pct is not None
            else None,
            mde_pct=sc.mde_pct,
            verdicts={c.name: str(c.verdict) for c in sc.cells},
            comparison=self.final_comparison(f"trial-{done.number:03d}"),
        )
        return sc, final

    def _ablation(self, winner: dict[str, str], final: Score) -> list[AblationRow]:
        if not self.budget.ablation or not winner:
            return []
        rows: list[AblationRow] = []
        pairs = min(self.budget.max_pairs, max(self.budget.screen_pairs * self.budget.eta, 3))
        if len(winner) > 1:
            self.progress.phase(
                f"ablation: the winner without one change at a time, {pairs} runs per arm"
            )
        for knob in sorted(winner):
            without = {k: v for k, v in winner.items() if k != knob}
            if not without:
                delta = 0.0  # the winner without its only change is the plan
            else:
                key = config_key(without)
                done = self._done("ablation", key)
                if done is None and not self._past(1.0):
                    self._measure("ablation", self._params_of(key), pairs)
                    done = self._done("ablation", key)
                if done is None or done.sample is None:
                    continue
                delta = score(done.sample).delta_pct
            rows.append(
                AblationRow(
                    knob=knob,
                    value=winner[knob],
                    plan_value=value_text(self.space.base[knob]),
                    delta_without_pct=delta,
                    contribution_pct=final.delta_pct - delta,
                )
            )
        return rows

    # ------------------------------------------------------------------ trials

    def _measure(
        self,
        stage: str,
        params: Mapping[str, ParamValue],
        pairs: int,
        *,
        rung: int = 0,
        force_changes: dict[str, str] | None = None,
    ) -> bool:
        trial, got = self.study.ask(self.space, stage, params)
        changes = force_changes if force_changes is not None else self.space.changes(got)
        check = self.constraint.check(changes)
        if changes and not check.ok:  # the plan itself is the baseline of every trial
            self.study.prune(trial, changes, check.reason)
            return False
        return self._run_trial(trial, stage, changes, pairs, rung=rung)

    def _run_trial(
        self,
        trial: optuna.Trial,
        stage: str,
        changes: dict[str, str],
        pairs: int,
        *,
        rung: int = 0,
    ) -> bool:
        label = f"trial-{trial.number:03d}"
        try:
            sample = self.objective.measure(label, changes, pairs)
            sc = score(sample)
        except MyaccelError as exc:
            self.study.fail(trial, changes, exc.message)
            self.progress.note(f"{label} ({stage}) failed: {exc.message}")
            return False
        except BaseException:
            self.study.fail(trial, changes, "interrupted")
            raise
        self.study.complete(trial, changes, sample, sc.delta_pct, rung=rung)
        rows = self.rows()
        self.progress.trial_done(_row_of(trial.number, rows), self.incumbent(rows))
        return True

    # ------------------------------------------------------------------ reading the study

    def _done(self, stage: str, key: str | None = None) -> TrialRecord | None:
        """The last completed trial of ``stage`` (on the configuration ``key``)."""
        for r in reversed(self.study.records()):
            if r.stage == stage and r.state == "COMPLETE" and (key is None or r.key == key):
                return r
        return None

    def _params_of(self, key: str) -> dict[str, ParamValue]:
        changes: dict[str, str] = json.loads(key)
        params = self.space.base_params()
        for name, value in changes.items():
            d = self.space.dim(name)
            params[name] = d.param_of(_typed(d.kind, value))
        return params

    def rows(self) -> list[TrialRow]:
        out: list[TrialRow] = []
        for r in self.study.records():
            out.append(
                TrialRow(
                    **same_named(r, ("number", "state", "stage", "rung", "changes", "note")),
                    delta_pct=r.value,
                    runs_per_arm=r.sample.pairs() if r.sample else 0,
                )
            )
        return out

    def incumbent(self, rows: list[TrialRow] | None = None) -> TrialRow | None:
        """The configuration with the best score on all its runs (screens, confirmations,
        the final A/B), when that beats the noise floor; None: the plan is still the best
        known (``history.incumbent``)."""
        best = incumbent(self.study.records(), self._floor_pct)
        if best is None:
            return None
        return TrialRow(
            number=-1,
            state="COMPLETE",
            stage="incumbent",
            changes=best.changes,
            delta_pct=best.delta_pct,
            runs_per_arm=best.runs_per_arm,
        )


def _row_of(number: int, rows: list[TrialRow]) -> TrialRow:
    return next(r for r in rows if r.number == number)


def _typed(kind: str, text: str) -> ParamValue:
    if kind == "int":
        return int(text)
    if kind == "float":
        return float(text)
    return text


def _verdict(improved: bool, final: Score | None, noise: NoiseFloor) -> str:
    if improved and final is not None:
        return (
            f"improved: the best configuration beats the plan by {final.delta_pct:+.1f}% "
            f"(95% CI from {final.ci_low_pct:+.1f}%)"
        )
    mde = final.mde_pct if final is not None else noise.mde_pct
    if mde is None:
        mde = noise.floor_pct
    return (
        "no configuration better than the plan by more than the minimum detectable "
        f"effect {mde:.1f}%"
    )
