"""What each rule's change was measured to do on its own: rows of data
(``rules/data/measured_effects.json``), written by ``scripts/rule_ablation.py --record``
from the interleaved ``myaccel ab`` runs of an ablation (the plan without the rule
against the whole plan, or the plan against the plan plus a rule it skips).

A plan cites a row in a recommendation's effect source when the row was measured on a
server like the one planned for (same flavor, same CPU budget); ``docs/rules.md`` shows
every row under its rule and in one table.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Literal

from pydantic import TypeAdapter

from myaccel import markdown
from myaccel.model import Frozen
from myaccel.rules.model import Recommendation

Verdict = Literal[
    "improved", "regressed", "no change", "inconclusive"
]  # as `ab` says (bench/stats/verdicts.py)


class MeasuredEffect(Frozen):
    """One ablation cell: the rule's change measured against the plan without it."""

    rule: str
    # "without-vs-with": the plan minus the rule (baseline) against the whole plan;
    # "plan-vs-plus": the plan (baseline) against the plan plus a rule it skips here
    comparison: Literal["without-vs-with", "plan-vs-plus"]
    setting: str  # what the rule changed in the measured plan, e.g. "innodb_io_capacity = 5700"
    machine: str  # e.g. "KVM guest, 2 vCPU (x86-64), 24 GB, virtio disk"
    cpus: int  # the server's CPU budget on that machine
    flavor: str  # mariadb | mysql
    server: str  # e.g. "MariaDB 10.11.19"
    workload: str  # sysbench workload, e.g. oltp_write_only
    threads: int
    dataset: str  # e.g. "16 x 100,000 rows"
    runs_per_arm: int
    delta_pct: float  # the change's effect on throughput (with the rule against without)
    ci_low_pct: float
    ci_high_pct: float
    verdict: Verdict
    measured_on: str  # date, YYYY-MM-DD
    command: str  # how to measure it again

    def summary(self) -> str:
        """``wo@16 +4.1% [95% CI -11.2%, +13.3%], inconclusive (6+6 runs)``."""
        short = self.workload.removeprefix("oltp_")
        return (
            f"{short}@{self.threads} {self.delta_pct:+.1f}% "
            f"[95% CI {self.ci_low_pct:+.1f}%, {self.ci_high_pct:+.1f}%], {self.verdict} "
            f"({self.runs_per_arm}+{self.runs_per_arm} runs)"
        )


_ROWS = TypeAdapter(list[MeasuredEffect])


@cache
def measured_effects() -> tuple[MeasuredEffect, ...]:
    """Every recorded row, in the file's order."""
    text = resources.files("myaccel.rules").joinpath("data/measured_effects.json").read_text()
    return tuple(_ROWS.validate_python(json.loads(text)["rows"]))


def measured_for(rule_id: str) -> list[MeasuredEffect]:
    return [m for m in measured_effects() if m.rule == rule_id]


def cite_measured(rec: Recommendation, flavor: str, cpus: int) -> Recommendation:
    """The recommendation with the rows measured on a server like this one (same flavor,
    same CPU budget) added to its effect source."""
    rows = [m for m in measured_for(rec.id) if m.flavor == flavor and m.cpus == cpus]
    if not rows:
        return rec
    cited = "; ".join(f"measured on its own ({m.machine}, {m.server}): {m.summary()}" for m in rows)
    return rec.model_copy(update={"effect_source": f"{rec.effect_source}; {cited}"})


def measured_markdown() -> list[str]:
    """The table of every row, for docs/rules.md."""
    rows = measured_effects()
    if not rows:
        return []
    out = [
        "## Measured on their own",
        "",
        "Each row is one interleaved `myaccel ab` of a rule's change against the plan without",
        "it (or, for a rule the plan skips there, the plan against the plan plus that rule),",
        "recorded by `scripts/rule_ablation.py --record`. A plan cites the rows measured on a",
        "server like the one it plans for (same flavor, same CPU budget).",
        "",
    ]
    header = ["rule", "setting", "machine", "server", "cell", "dataset", "runs/arm", "effect"]
    header += ["95% CI", "verdict", "date"]
    cells = [
        [
            f"`{m.rule}`",
            f"`{m.setting}`",
            m.machine,
            m.server,
            f"{m.workload} @ {m.threads}",
            m.dataset,
            m.runs_per_arm,
            f"{m.delta_pct:+.1f}%",
            f"{m.ci_low_pct:+.1f}% .. {m.ci_high_pct:+.1f}%",
            m.verdict,
            m.measured_on,
        ]
        for m in rows
    ]
    return out + markdown.table(header, cells, "llllllrrlll")
