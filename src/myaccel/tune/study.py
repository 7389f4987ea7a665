"""The study: every trial of a `tune` in Optuna's storage (``study.db``, SQLite, in the
results directory), so that it can be resumed, reported and audited.

Why Optuna (pinned in pyproject.toml): its TPE sampler is a well-tested Bayesian optimizer
for mixed int/float/categorical spaces; its RDB storage writes each trial as it starts and
ends (a crash leaves committed trials intact); a study loads by name to resume; and its
trial states (complete, pruned, failed) name what happened to a configuration. It is
imported here only, and only when a study is opened: the CLI does not pay for it.

Each trial carries user attributes: ``stage`` (plan, screen, confirm, ablation, final),
``changes`` (knob -> value against the plan), ``rung``, ``sample`` (TPS of both arms per
cell) and, for a pruned trial, ``infeasible`` (why it was never measured). A trial left
RUNNING or WAITING by a killed process is marked failed on ``--resume``: at most the trial
that was running is lost.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from myaccel.errors import UsageError
from myaccel.tune.halving import Measured
from myaccel.tune.objective import Sample
from myaccel.tune.space import Dim, ParamValue, Space

if TYPE_CHECKING:
    import filelock
    import optuna

STUDY_FILE = "study.db"
STUDY_NAME = "myaccel-tune"
MIN_IMPORTANCE_TRIALS = 5  # measured trials; an importance over fewer says nothing


def config_key(changes: Mapping[str, str]) -> str:
    return json.dumps(dict(sorted(changes.items())), separators=(",", ":"))


@dataclass(frozen=True)
class TrialRecord:
    """A finished trial as the search and the report read it."""

    number: int
    state: str  # COMPLETE, PRUNED, FAIL
    stage: str
    changes: dict[str, str]
    rung: int
    sample: Sample | None
    value: float | None
    note: str  # why pruned or failed
    params: dict[str, ParamValue]

    @property
    def key(self) -> str:
        return config_key(self.changes)


class StudyBusy(UsageError, code="tune-busy"):
    pass


def take_study_lock(out: Path) -> filelock.FileLock:
    """The study's lock in ``out``, taken (``StudyBusy`` when another tune holds it)."""
    import filelock

    lock = filelock.FileLock(str(out / "study.lock"))
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        raise StudyBusy(
            f"another tune is running on '{out}'", hint="wait for it, or stop it first"
        ) from None
    return lock


class Study:
    """One `tune` study in ``out/study.db``."""

    def __init__(self, study: optuna.Study, path: Path) -> None:
        self.optuna = study
        self.path = path

    # ------------------------------------------------------------------ open

    @classmethod
    @contextmanager
    def open(cls, out: Path, *, resume: bool, seed: int, startup_trials: int) -> Iterator[Study]:
        """The study of ``out`` (created, or loaded with ``resume``), locked against a
        second `tune` on the same directory."""
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        optuna.logging.disable_default_handler()
        logging.getLogger("optuna").propagate = False
        path = out / STUDY_FILE
        if path.exists() and not resume:
            raise UsageError(
                f"'{out}' already holds a tune study",
                hint="pass --resume to continue it, or choose a new --out",
            )
        if resume and not path.exists():
            raise UsageError(
                f"no tune study to resume in '{out}'", hint="run without --resume to start one"
            )
        out.mkdir(parents=True, exist_ok=True)
        lock = take_study_lock(out)
        try:
            storage = optuna.storages.RDBStorage(f"sqlite:///{path}")
            sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup_trials)
            study = optuna.create_study(
                storage=storage,
                sampler=sampler,
                study_name=STUDY_NAME,
                direction="maximize",
                load_if_exists=resume,
            )
            s = cls(study, path)
            s.fail_leftovers()
            yield s
        finally:
            lock.release()

    def fail_leftovers(self) -> int:
        """Mark trials a killed process left running (or enqueued) as failed."""
        from optuna.trial import TrialState

        n = 0
        for t in self.optuna.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            self.optuna.tell(t.number, state=TrialState.FAIL)
            n += 1
        while self.optuna.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            waiting = self.optuna.ask()
            self.optuna.tell(waiting, state=TrialState.FAIL)
            n += 1
        return n

    # ------------------------------------------------------------------ attributes

    def set_attr(self, key: str, value: Any) -> None:
        self.optuna.set_user_attr(key, value)

    def attr(self, key: str) -> Any:
        return self.optuna.user_attrs.get(key)

    # ------------------------------------------------------------------ trials

    def ask(
        self, space: Space, stage: str, params: Mapping[str, ParamValue] | None = None
    ) -> tuple[optuna.Trial, dict[str, ParamValue]]:
        """A new running trial: its parameters sampled by TPE, or ``params`` fixed."""
        if params is not None:
            self.optuna.enqueue_trial(dict(params))
        trial = self.optuna.ask()
        trial.set_user_attr("stage", stage)
        return trial, {d.name: suggest(trial, d) for d in space.dims}

    def complete(
        self,
        trial: optuna.Trial,
        changes: Mapping[str, str],
        sample: Sample,
        value: float,
        *,
        rung: int = 0,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        trial.set_user_attr("changes", dict(changes))
        trial.set_user_attr("rung", rung)
        trial.set_user_attr("sample", sample.to_json())
        for k, v in (extra or {}).items():
            trial.set_user_attr(k, v)
        self.optuna.tell(trial, value)

    def prune(self, trial: optuna.Trial, changes: Mapping[str, str], why: str) -> None:
        from optuna.trial import TrialState

        trial.set_user_attr("changes", dict(changes))
        trial.set_user_attr("infeasible", why)
        self.optuna.tell(trial, state=TrialState.PRUNED)

    def fail(self, trial: optuna.Trial, changes: Mapping[str, str], why: str) -> None:
        from optuna.trial import TrialState

        trial.set_user_attr("changes", dict(changes))
        trial.set_user_attr("error", why[:500])
        self.optuna.tell(trial, state=TrialState.FAIL)

    def records(self) -> list[TrialRecord]:
        out: list[TrialRecord] = []
        for t in self.optuna.get_trials(deepcopy=False):
            if t.state.name in ("RUNNING", "WAITING"):
                continue
            a = t.user_attrs
            doc = a.get("sample")
            out.append(
                TrialRecord(
                    number=t.number,
                    state=t.state.name,
                    stage=str(a.get("stage", "?")),
                    changes=dict(a.get("changes") or {}),
                    rung=int(a.get("rung", 0)),
                    sample=Sample.from_json(doc) if doc else None,
                    value=t.value if t.state.name == "COMPLETE" else None,
                    note=str(a.get("infeasible") or a.get("error") or ""),
                    params=dict(t.params),
                )
            )
        return out

    def measured(self, stages: tuple[str, ...] = ("screen", "confirm")) -> list[Measured]:
        return [
            Measured(r.key, r.rung, r.sample)
            for r in self.records()
            if r.state == "COMPLETE" and r.stage in stages and r.sample is not None
        ]

    def importances(self) -> dict[str, float]:
        """Parameter importances (PED-ANOVA) over the completed trials; empty when too few."""
        return self.importance().values

    def importance(self) -> Importance:
        """Optuna's default importance evaluator (PED-ANOVA, no extra dependency) over the
        measured trials of the search (the plan's A/A is not a point the search chose), or
        why not."""
        import optuna

        done = [
            t
            for t in self.optuna.get_trials(deepcopy=False)
            if t.state.name == "COMPLETE" and t.user_attrs.get("stage") != "plan"
        ]
        if len(done) < MIN_IMPORTANCE_TRIALS:
            return Importance(
                {},
                len(done),
                f"not computed: {len(done)} measured trial(s) besides the A/A, the evaluator "
                f"needs at least {MIN_IMPORTANCE_TRIALS}",
            )
        view = optuna.create_study(direction="maximize")  # in memory: these trials only
        view.add_trials(done)
        # a parameter that never was a change (the pool's size while the pool was off) is
        # no explanation of anything
        changed = sorted({k for t in done for k in (t.user_attrs.get("changes") or {})})
        names = [p for p in done[0].params if p in changed]
        if not names:
            return Importance({}, len(done), "not computed: no trial changed a parameter")
        try:
            values = dict(optuna.importance.get_param_importances(view, params=names))
        except (RuntimeError, ValueError, ZeroDivisionError) as exc:
            return Importance({}, len(done), f"not computed: {exc}")
        if not values:
            return Importance({}, len(done), "not computed: no parameter varied over the trials")
        return Importance(values, len(done), "")


@dataclass(frozen=True)
class Importance:
    """Parameter importances (name -> share, summing to 1) over ``trials`` complete trials;
    ``why_not``: why there are none."""

    values: dict[str, float]
    trials: int
    why_not: str


def read_study(path: Path) -> Study:
    """The study in ``path`` (``study.db``) for reading (a report): not locked, nothing
    marked; raises ``UsageError`` when it cannot be read."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    optuna.logging.disable_default_handler()
    if not path.is_file():
        raise UsageError(f"no tune study at '{path}'", hint="pass the directory `tune` wrote")
    try:
        study = optuna.load_study(study_name=STUDY_NAME, storage=f"sqlite:///{path}")
    except Exception as exc:  # a damaged file, another program's database
        raise UsageError(
            f"'{path}' is not a readable tune study: {str(exc).splitlines()[0]}",
            hint="the report shows tune.json without it",
        ) from None
    return Study(study, path)


def suggest(trial: optuna.Trial, d: Dim) -> ParamValue:
    if d.kind == "int":
        return trial.suggest_int(d.name, int(d.low), int(d.high), log=d.log)
    if d.kind == "float":
        return trial.suggest_float(d.name, float(d.low), float(d.high), log=d.log)
    return trial.suggest_categorical(d.name, list(d.choices))
