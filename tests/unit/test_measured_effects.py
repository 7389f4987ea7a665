"""Rules' measured effects: the data file, the citation in plans and docs/rules.md."""

from __future__ import annotations

from myaccel.rules.engine import load_rules
from myaccel.rules.measured import cite_measured, measured_effects, measured_for
from myaccel.rules.model import Recommendation
from myaccel.rules.render import rules_markdown
from plans import rec


def _rec(rule_id: str) -> Recommendation:
    return rec(rule_id, "mysql:thread_handling", "pool-of-threads", risk="restart")


def test_every_row_names_a_registered_rule_and_a_sane_interval() -> None:
    rules = load_rules()
    rows = measured_effects()
    assert rows, "the data file holds the measured rows"
    for m in rows:
        assert m.rule in rules, m.rule
        assert m.ci_low_pct <= m.delta_pct <= m.ci_high_pct, m
        assert m.runs_per_arm >= 3
        # a verdict that claims a direction has an interval on that side of zero
        if m.verdict == "regressed":
            assert m.ci_high_pct < 0
        if m.verdict == "improved":
            assert m.ci_low_pct > 0


def test_a_plan_cites_rows_only_for_a_server_like_the_measured_one() -> None:
    m = measured_effects()[0]
    rec = _rec(m.rule)
    cited = cite_measured(rec, m.flavor, m.cpus)
    assert cited.effect_source.startswith("s; measured on its own")
    assert f"{m.delta_pct:+.1f}%" in cited.effect_source
    other_flavor = "mysql" if m.flavor == "mariadb" else "mariadb"
    assert cite_measured(rec, other_flavor, m.cpus) == rec
    assert cite_measured(rec, m.flavor, m.cpus * 64) == rec
    assert cite_measured(_rec("no-such-rule"), m.flavor, m.cpus).effect_source == "s"


def test_rules_md_shows_each_row_under_its_rule_and_in_the_table() -> None:
    md = rules_markdown()
    assert "## Measured on their own" in md
    for m in measured_effects():
        section = md.split(f"### `{m.rule}`", 1)[1].split("\n### ", 1)[0]
        assert m.summary() in section
    assert measured_for("no-such-rule") == []


def test_a_row_takes_every_verdict_ab_gives() -> None:
    """The ablation records `ab`'s verdicts as they are (it stopped once on 'no change')."""
    from typing import get_args

    from myaccel.bench.stats.verdicts import Verdict as AbVerdict
    from myaccel.rules.measured import Verdict

    assert set(get_args(AbVerdict)) == set(get_args(Verdict))
