"""A `myaccel tune` study in a report: the verdict, the noise floor and the MDE, the final
interleaved A/B, the winning diff against the rules' plan with each change's measured
contribution (the ablation), the optimization history with the incumbent, and the parameter
importances (Optuna's evaluator over the study, when it has enough complete trials).

``tune.json`` says what the study concluded; ``study.db`` next to it (read, never written)
gives every trial's runs, from which the incumbent line is computed exactly as the search
computed it, and the importances. Without ``study.db`` the report says so and uses what
``tune.json`` holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from myaccel.errors import UsageError
from myaccel.report import fmt
from myaccel.report.load import Artifacts, Loaded
from myaccel.tune.result import TrialRow, TuneResult
from myaccel.tune.study import TrialRecord
from myaccel.tune.summary import changes_text

STUDY_FILE = "study.db"


@dataclass(frozen=True)
class HistoryPoint:
    number: int
    stage: str
    state: str  # COMPLETE, PRUNED, FAIL
    delta_pct: float | None  # vs the plan (None: not measured)
    incumbent_pct: float  # the incumbent after this trial (0: the plan)


@dataclass
class TuneView:
    path: Path
    result: TuneResult
    lines: list[tuple[str, str]]  # label, text: what was searched, on what, where
    noise: list[tuple[str, str]]  # label, value: the A/A
    final: tuple[str, str, str, str, str, str] | None  # runs, change, CI, MDE, verdicts, path
    diff: list[tuple[str, str, str, str, str]]  # knob, plan, best, without it, contribution
    importances: list[tuple[str, float]]
    importance_note: str  # what the importances are over, or why there are none
    history: list[HistoryPoint]
    floor_pct: float | None
    counts: str  # trials by state
    trials: list[tuple[str, str, str, str, str, str]]  # #, stage, state, runs, vs plan, what
    notes: list[str] = field(default_factory=list)  # what could not be shown, and why

    @property
    def improved(self) -> bool:
        return self.result.improved


def tune_views(arts: Artifacts) -> list[TuneView]:
    return [tune_view(lt) for lt in arts.tunes]


def tune_view(lt: Loaded[TuneResult]) -> TuneView:
    r = lt.doc
    notes: list[str] = []
    records, importance, why_not = _from_study(lt.path.parent / STUDY_FILE, notes)
    floor = r.noise.floor_pct if r.noise is not None else None
    if records is None:
        records = [_record_of(t) for t in r.trials]
        importance = dict(r.importances)
        why_not = (
            "as tune.json has them (study.db not read)"
            if importance
            else "not in tune.json (too few complete trials)"
        )
        notes.append(
            "the incumbent line is the runs-weighted mean of each configuration's changes "
            "(study.db holds the runs that give the exact score)"
        )
    return TuneView(
        path=lt.path,
        result=r,
        lines=_lines(r),
        noise=_noise(r),
        final=_final(r),
        diff=_diff(r),
        importances=sorted(importance.items(), key=lambda kv: -kv[1]),
        importance_note=why_not,
        history=_history(records, floor, {t.number: t.runs_per_arm for t in r.trials}),
        floor_pct=floor,
        counts=_counts(r.trials),
        trials=[_trial_row(t) for t in r.trials],
        notes=notes,
    )


def _from_study(
    path: Path, notes: list[str]
) -> tuple[list[TrialRecord] | None, dict[str, float], str]:
    """The study's trials and importances; (None, {}, "") when ``study.db`` is missing or
    unreadable (said in ``notes``)."""
    from myaccel.tune.study import read_study

    if not path.is_file():
        notes.append(f"{path.name} not found next to tune.json: the history is tune.json's")
        return None, {}, ""
    try:
        study = read_study(path)
        imp = study.importance()
        said = imp.why_not or (
            f"Optuna's PED-ANOVA over the {imp.trials} measured trials (the A/A left out)"
        )
        return study.records(), imp.values, said
    except UsageError as exc:
        notes.append(f"{exc.message}: the history is tune.json's")
        return None, {}, ""


def _record_of(t: TrialRow) -> TrialRecord:
    return TrialRecord(
        number=t.number,
        state=t.state,
        stage=t.stage,
        changes=dict(t.changes),
        rung=t.rung,
        sample=None,
        value=t.delta_pct,
        note=t.note,
        params={},
    )


def _history(
    records: list[TrialRecord], floor: float | None, runs: dict[int, int]
) -> list[HistoryPoint]:
    from myaccel.tune.history import incumbent_history

    inc = incumbent_history(records, floor, runs)
    return [
        HistoryPoint(
            number=rec.number,
            stage=rec.stage,
            state=rec.state,
            delta_pct=rec.value,
            incumbent_pct=best.delta_pct if best is not None else 0.0,
        )
        for rec, best in zip(records, inc, strict=True)
    ]


def _lines(r: TuneResult) -> list[tuple[str, str]]:
    out = [
        ("target", f"{r.target} (durability {r.durability})"),
        ("workload", ", ".join(r.workload)),
        ("layers", ", ".join(r.layers)),
        ("searched", f"{len(r.searched)}: {', '.join(r.searched) or '-'}"),
    ]
    if r.left_out:
        out.append(("left out", f"{len(r.left_out)} knob(s), reasons below"))
    out += [("study", r.study), ("plan to apply", r.plan)]
    return out


def _noise(r: TuneResult) -> list[tuple[str, str]]:
    n = r.noise
    if n is None:
        return []
    return [
        ("A/A apparent change (the plan against itself)", fmt.pct(n.aa_delta_pct)),
        ("run-to-run CV", f"{n.cv_pct:.1f}%"),
        (
            f"noise floor a screen must clear ({n.screen_pairs} run(s) per arm)",
            f"{n.floor_pct:.1f}%",
        ),
        ("minimum detectable effect of the A/A", _plain(n.mde_pct)),
    ]


def _plain(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f}%"


def _final(r: TuneResult) -> tuple[str, str, str, str, str, str] | None:
    f = r.final
    if f is None:
        return None
    return (
        str(f.runs_per_arm),
        fmt.pct(f.delta_pct),
        fmt.ci(f.ci_low_pct, f.ci_high_pct),
        _plain(f.mde_pct),
        ", ".join(f"{k}: {v}" for k, v in f.verdicts.items()),
        f.comparison or "",
    )


def _diff(r: TuneResult) -> list[tuple[str, str, str, str, str]]:
    abl = {a.knob: a for a in r.ablation}
    rows = []
    for knob, best in sorted(r.winner.items()):
        a = abl.get(knob)
        plan = r.winner_plan_values.get(knob, a.plan_value if a else "")
        without = fmt.pct(a.delta_without_pct) if a else "not measured"
        contribution = fmt.pct(a.contribution_pct) if a else "-"
        rows.append((knob, plan, best, without, contribution))
    return rows


def _counts(trials: list[TrialRow]) -> str:
    by: dict[str, int] = {}
    for t in trials:
        by[t.state.lower()] = by.get(t.state.lower(), 0) + 1
    parts = ", ".join(f"{n} {s}" for s, n in sorted(by.items()))
    return f"{len(trials)} trial(s): {parts}" if trials else "no trials"


def _trial_row(t: TrialRow) -> tuple[str, str, str, str, str, str]:
    what = t.note if t.state != "COMPLETE" and t.note else changes_text(t.changes)
    stage = f"{t.stage} r{t.rung}" if t.stage == "confirm" else t.stage
    return (str(t.number), stage, t.state.lower(), str(t.runs_per_arm), fmt.pct(t.delta_pct), what)


def tune_done(v: TuneView) -> str:
    """The "what was done" line of a study."""
    return f"tune study on {v.result.target}: {v.counts}; {v.result.verdict}"
