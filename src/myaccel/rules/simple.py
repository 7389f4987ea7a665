"""Rules that are rows of data: "set X to V (or raise it to at least N) when C".

The rows live in ``data/simple_rules.json`` (schema ``myaccel.simple-rules/1``), each with
the id, layer, title, source and rationale that ``myaccel explain`` and ``docs/rules.md``
show, the conditions that gate it, the settings it proposes and the texts of its
recommendations. One evaluator runs every row; each row is registered with ``@rule`` like
any rule function, so ids, ordering, explain, docs and plans do not tell them apart.

Why JSON and not a Python table: like the knob catalog (``knobs/data/knobs.json``), the
rows are knowledge with reasons that people add to and review as data; the conditions
they name are code (``conditions.py``), shared with the rules that stay functions.

A row::

    {"id": "server-spin-wait", "layer": "server", "title": ..., "source": ..., "rationale": ...,
     "when": [{"need": "many-core-arm-or-spin", "else": "not a many-core ARM machine ..."}],
     "set": [{"id": "server-spin-wait-delay", "target": "mysql:innodb_spin_wait_delay",
              "current": "{int[innodb_spin_wait_delay]}", "to": "24", "when": "below"}],
     "unchanged": "already raised",
     "recommendation": {"rationale": ..., "evidence": {...}, "expected_effect": ..., ...}}

- ``when``: conditions checked in order (``name`` or ``name:arg``, see ``CONDITIONS``);
  the first that fails skips the rule with its ``else`` reason.
- ``set``: one recommendation per setting. ``proposed`` is a text, ``to`` a formula
  (``knobs/formula.py``: ``min(16, cpus // 2)``, names ``cpus``, ``current`` (the knob's
  value or 0) and ``pool_instances`` (MySQL's buffer pool instances for the planned pool,
  ``server_rules.mysql_pool_layout``)). ``when``: ``always``, ``below`` (the current value is known and
  lower than ``to``) or ``differs`` (the current text is not the proposed one). When no
  setting proposes anything, the rule is skipped with ``unchanged``.
- Texts are ``str.format`` templates over ``_Values``: ``{var[KNOB]}`` (as the server
  reports it), ``{int[KNOB]}``, ``{int0[KNOB]}``, ``{size[KNOB]}``, ``{upper[KNOB]}``,
  ``{lower[KNOB]}``, ``{planned[KNOB]}`` (bytes, as other rules planned it), ``{status[COUNTER]}``, ``{facts.memory.swappiness.value}``,
  ``{cpus}``, ``{cpus_evidence}``, ``{numa_nodes}``, ``{findings}``, ``{storage_kind}``, ``{fs_type}``,
  ``{concurrency}``, ``{uptime}``, ``{opened_per_s}``, ``{ram_gib}``. A ``current`` that
  is one field keeps a missing value missing (``null``), where a longer text says ``None``.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from myaccel import artifacts
from myaccel.artifacts import artifact
from myaccel.errors import MyaccelError
from myaccel.knobs.formula import Formula, compile_formula
from myaccel.model import Frozen
from myaccel.rules.base import RuleContext, Skip, format_plan_size, recommend, rule
from myaccel.rules.conditions import CONDITIONS, concurrency, status_int, storage_kind
from myaccel.rules.model import Layer, Recommendation
from myaccel.rules.server_rules import mysql_pool_layout
from myaccel.units import GiB

SIMPLE_RULES_SCHEMA = "myaccel.simple-rules/1"
DATA_PATH = Path(__file__).parent / "data" / "simple_rules.json"


class SimpleRulesError(MyaccelError, code="rules-data"):
    """The simple rules data file is missing or inconsistent (a bug in myaccel's data)."""


class Condition(Frozen):
    need: str  # a name of CONDITIONS, optionally with ":arg"
    otherwise: str = Field(default="", alias="else")  # the skip reason (a template)

    @property
    def name(self) -> str:
        return self.need.partition(":")[0]

    @property
    def arg(self) -> str:
        return self.need.partition(":")[2]


class Setting(Frozen):
    target: str  # mysql:KNOB, sysctl:NAME, sysfs:PATH
    id: str | None = None  # the recommendation's id when not the rule's
    title: str | None = None
    verify: str | None = None
    current: str | None = None  # template
    proposed: str | None = None  # template
    to: str | None = None  # formula
    when: Literal["always", "below", "differs"] = "always"

    @model_validator(mode="after")
    def _one_value(self) -> Setting:
        if (self.proposed is None) == (self.to is None):
            raise ValueError(f"{self.target}: give exactly one of proposed and to")
        if self.when == "below" and self.to is None:
            raise ValueError(f"{self.target}: 'below' compares with a formula ('to')")
        return self

    @property
    def knob(self) -> str:
        return self.target.removeprefix("mysql:")


# The names a setting's formula (``to``) may use.
_FORMULA_VALUES: dict[str, Callable[[RuleContext, Setting], int]] = {
    "cpus": lambda ctx, _s: ctx.cpus(),
    "current": lambda ctx, s: ctx.var_int(s.knob) or 0,
    "pool_instances": lambda ctx, _s: (
        mysql_pool_layout(ctx, ctx.planned_bytes("innodb_buffer_pool_size"))[1] or 1
    ),
}
FORMULA_NAMES = frozenset(_FORMULA_VALUES)


class SimpleRule(Frozen):
    id: str
    layer: Layer
    title: str
    source: str
    rationale: str
    order: int = 50
    when: list[Condition] = Field(default_factory=list)
    set: list[Setting]
    unchanged: str | None = None  # skip reason when no setting proposes a change
    recommendation: dict[str, Any]  # shared fields of the recommendations (templates)


@artifact(SIMPLE_RULES_SCHEMA)
class SimpleRulesData(Frozen):
    schema_version: str = SIMPLE_RULES_SCHEMA
    rules: list[SimpleRule]

    @model_validator(mode="after")
    def _check(self) -> SimpleRulesData:
        for r in self.rules:
            unknown = [c.name for c in r.when if c.name not in CONDITIONS]
            if unknown:
                raise ValueError(f"{r.id}: unknown conditions {unknown}")
            for s in r.set:
                if s.to is not None and _formula(s.to).names - FORMULA_NAMES:
                    raise ValueError(f"{r.id}: formula {s.to!r} uses names outside {FORMULA_NAMES}")
        return self


@cache
def _formula(text: str) -> Formula:
    return compile_formula(text)


# ------------------------------------------------------------------ template values


class _View(Mapping[str, Any]):
    """``{name[KEY]}`` in a template: one reading of a server variable or counter."""

    def __init__(self, read: Callable[[str], Any]) -> None:
        self._read = read

    def __getitem__(self, key: str) -> Any:
        return self._read(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def _size(ctx: RuleContext, knob: str) -> str | None:
    n = ctx.var_int(knob)
    return None if n is None else format_plan_size(n)


def _uptime(ctx: RuleContext) -> int:
    return max(1, status_int(ctx, "Uptime", "1"))


def _pool_size(ctx: RuleContext) -> str:
    """``thread_pool_size`` for the thread pool: the usable CPUs where the server sees more
    than it may use (a cgroup quota: MariaDB sizes the pool by the CPUs it sees, so 128
    groups for 8 CPUs of quota), else the server's own value (nothing to change)."""
    if ctx.visible_cpus() > ctx.cpus():
        return str(ctx.cpus())
    return ctx.var("thread_pool_size") or ""


_VALUES: dict[str, Callable[[RuleContext], Any]] = {
    "var": lambda ctx: _View(ctx.var),
    "int": lambda ctx: _View(lambda k: str(ctx.var_int(k))),
    "int0": lambda ctx: _View(lambda k: str(ctx.var_int(k) or 0)),
    "size": lambda ctx: _View(lambda k: _size(ctx, k)),
    "upper": lambda ctx: _View(lambda k: (ctx.var(k) or "").upper()),
    "lower": lambda ctx: _View(lambda k: (ctx.var(k) or "").lower()),
    "planned": lambda ctx: _View(lambda k: str(ctx.planned_bytes(k))),
    "status": lambda ctx: _View(lambda k: str(status_int(ctx, k))),
    "facts": lambda ctx: ctx.facts,
    "cpus": lambda ctx: ctx.cpus(),
    "cpus_evidence": lambda ctx: ctx.cpus_evidence(),
    "visible_cpus": lambda ctx: ctx.visible_cpus(),
    "pool_size": _pool_size,
    "numa_nodes": lambda ctx: ctx.numa_nodes(),
    "findings": lambda ctx: ",".join(ctx.hints.findings),
    "storage_kind": storage_kind,
    "fs_type": lambda ctx: ctx.facts.storage.fs_type.value or "",
    "concurrency": concurrency,
    "uptime": _uptime,
    "opened_per_s": lambda ctx: status_int(ctx, "Opened_tables") / _uptime(ctx),
    "ram_gib": lambda ctx: (ctx.facts.memory.total_bytes.value or 0) / GiB,
    "budget_gib": lambda ctx: ctx.memory_budget()[0] / GiB,
    "budget_source": lambda ctx: ctx.memory_budget()[1],
}


class _Values(Mapping[str, Any]):
    """The names a template may use, computed only when a template asks for them."""

    def __init__(self, ctx: RuleContext) -> None:
        self.ctx = ctx

    def __getitem__(self, key: str) -> Any:
        return _VALUES[key](self.ctx)

    def __iter__(self) -> Iterator[str]:
        return iter(_VALUES)

    def __len__(self) -> int:
        return len(_VALUES)


_ONE_FIELD = re.compile(r"^\{([^{}:!]+)\}$")


def _render(template: str, values: _Values) -> str:
    return template.format_map(values)


def _render_current(template: str | None, values: _Values) -> str | None:
    if template is None:
        return None
    one = _ONE_FIELD.match(template)
    if one is None:
        return _render(template, values)
    obj, _ = string.Formatter().get_field(one.group(1), (), values)
    return None if obj is None else str(obj)


# ------------------------------------------------------------------ the evaluator


def evaluate(row: SimpleRule, ctx: RuleContext) -> list[Recommendation]:
    values = _Values(ctx)
    for c in row.when:
        if not CONDITIONS[c.name](ctx, c.arg):
            raise Skip(_render(c.otherwise, values))
    out = [r for s in row.set if (r := _propose(row, s, ctx, values)) is not None]
    if not out and row.unchanged is not None:
        raise Skip(_render(row.unchanged, values))
    return out


def _propose(
    row: SimpleRule, s: Setting, ctx: RuleContext, values: _Values
) -> Recommendation | None:
    current = _render_current(s.current, values)
    if s.to is not None:
        want = _formula(s.to).evaluate(lambda name: _FORMULA_VALUES[name](ctx, s))
        proposed = str(want)
        if s.when == "below":
            cur = ctx.var_int(s.knob)
            if cur is None or cur >= want:
                return None
    else:
        proposed = _render(s.proposed or "", values)
    if s.when == "differs" and current == proposed:
        return None
    fields: dict[str, Any] = {"id": s.id or row.id, "layer": row.layer, "target": s.target}
    for key, template in row.recommendation.items():
        if isinstance(template, dict):
            fields[key] = {k: _render(v, values) for k, v in template.items()}
        else:
            fields[key] = _render(template, values)
    for key in ("title", "verify"):
        if getattr(s, key) is not None:
            fields[key] = _render(getattr(s, key), values)
    fields.update(current=current, proposed=proposed)
    return recommend(ctx, **fields)


# ------------------------------------------------------------------ loading


def load_rows(path: Path = DATA_PATH) -> list[SimpleRule]:
    return artifacts.load(
        path,
        SimpleRulesData,
        what="simple rules",
        hint="this is a bug in myaccel's data; run tests/unit/test_rules.py",
        error=SimpleRulesError,
    ).rules


def _register(row: SimpleRule) -> None:
    def run(ctx: RuleContext) -> list[Recommendation]:
        return evaluate(row, ctx)

    run.__doc__ = row.rationale
    run.__name__ = row.id.replace("-", "_")
    rule(row.id, row.layer, row.title, row.source, order=row.order)(run)


for _row in load_rows():
    _register(_row)
