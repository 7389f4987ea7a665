"""``tune.md``: a tune result as Markdown (what the cli prints and writes next to
``tune.json``): the verdict, the final A/B, the winning diff with the ablation, the noise
floor, the optimization history and the parameter importances."""

from __future__ import annotations

from myaccel import markdown
from myaccel.tune.result import TuneResult


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:+.1f}%"


def changes_text(c: dict[str, str]) -> str:
    """``knob=value, ...`` (sorted), or "(the plan)" when nothing changes."""
    return ", ".join(f"{k}={v}" for k, v in sorted(c.items())) or "(the plan)"


def format_markdown(r: TuneResult, *, history_rows: int = 60) -> str:
    out = [f"# myaccel tune: {r.target}", "", f"**Verdict:** {r.verdict}", ""]
    out += [
        f"- workload: {', '.join(r.workload)}; durability {r.durability}",
        f"- searched ({len(r.searched)}): {', '.join(r.searched)}",
        f"- study: `{r.study}`; plan to apply: `{r.plan}`",
    ]
    if r.noise is not None:
        n = r.noise
        mde = "n/a" if n.mde_pct is None else f"{n.mde_pct:.1f}%"
        out += [
            f"- noise floor (A/A, the plan against itself): apparent change {_pct(n.aa_delta_pct)}, "
            f"run-to-run CV {n.cv_pct:.1f}%, screens must beat the plan by > {n.floor_pct:.1f}% "
            f"({n.screen_pairs} run(s) per arm); A/A MDE {mde}",
        ]
    if r.final is not None:
        f = r.final
        out += [
            "",
            "## Final A/B: best found vs the rules' plan (interleaved)",
            "",
            *markdown.table(
                ["runs per arm", "change", "95% CI", "MDE", "verdicts"],
                [
                    [
                        f.runs_per_arm,
                        _pct(f.delta_pct),
                        f"{_pct(f.ci_low_pct)} .. {_pct(f.ci_high_pct)}",
                        "n/a" if f.mde_pct is None else f"{f.mde_pct:.1f}%",
                        ", ".join(f"{k}: {v}" for k, v in f.verdicts.items()),
                    ]
                ],
                "rrlrl",
            ),
        ]
        if f.comparison:
            out += ["", f"comparison: `{f.comparison}`"]
    if r.winner:
        out += ["", "## Best found: its changes against the plan", ""]
        abl = {a.knob: a for a in r.ablation}
        rows = []
        for k, v in sorted(r.winner.items()):
            a = abl.get(k)
            plan_v = r.winner_plan_values.get(k, a.plan_value if a else "")
            wo = _pct(a.delta_without_pct) if a else "not measured"
            co = _pct(a.contribution_pct) if a else ""
            rows.append([k, plan_v, v, wo, co])
        header = ["knob", "plan", "best", "without it", "contribution"]
        out += markdown.table(header, rows, "lllrr")
    if r.importances:
        out += ["", "## Parameter importances (Optuna's PED-ANOVA over the trials)", ""]
        out += [
            f"- {k}: {v:.2f}" for k, v in sorted(r.importances.items(), key=lambda kv: -kv[1])[:10]
        ]
    trials = []
    for t in r.trials[-history_rows:]:
        what = t.note if t.state != "COMPLETE" and t.note else changes_text(t.changes)
        stage = f"{t.stage}{f' r{t.rung}' if t.stage == 'confirm' else ''}"
        trials.append([t.number, stage, t.state.lower(), t.runs_per_arm, _pct(t.delta_pct), what])
    header = ["#", "stage", "state", "runs/arm", "vs plan", "changes"]
    out += ["", "## Trials", "", *markdown.table(header, trials, "rllrrl")]
    return "\n".join(out) + "\n"
