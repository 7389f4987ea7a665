"""What apply refuses before it prints, journals or changes anything.

Two promises are enforced here, on every server setting a plan would change (``mysql:``
variables and ``mycnf:`` server options, after ``--layers``/``--only``):

- **durability**: a change to a knob the knob catalog marks as durability-related
  (``innodb_flush_log_at_trx_commit``, ``sync_binlog``, ``innodb_doublewrite``,
  ``innodb_flush_method``; any value) needs a plan made with ``--durability relaxed`` whose
  content digest still matches: a plan edited to say "relaxed" is refused.
- **values**: each value must be valid for the knob's catalog type and range on the target
  server's flavor and version; knobs unknown to the catalog, or not present in that
  version, are refused too.

Every problem is collected; the error names the first one and counts the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict, Unpack

from myaccel.errors import MyaccelError, UsageError
from myaccel.knobs.catalog import FLAVOR_LABELS, Catalog, ResolvedKnob, ServerKnobs
from myaccel.knobs.values import KnobValue, format_size
from myaccel.model import Facts
from myaccel.rules.model import Plan, Recommendation, target_knob
from myaccel.server.optionfile import normalize_key

# Server variables are stored in at most 64 bits: nothing above fits any of them.
U64_MAX = (1 << 64) - 1
CHECKED_SCHEMES = ("mysql:", "mycnf:")
RELAX_HINT = (
    "durability changes need a plan made with `myaccel plan --durability relaxed --out "
    "plan.json`; or leave the recommendation out with --only"
)
REMAKE_HINT = "re-make the plan with `myaccel plan --durability relaxed --out plan.json`"


class PlanRefused(UsageError, code="plan-refused"):
    """The plan asks for a change apply must not make (nothing was changed)."""


class DurabilityRefused(PlanRefused, code="plan-durability"):
    pass


class ValueRefused(PlanRefused, code="plan-value"):
    pass


@dataclass(frozen=True)
class Problem:
    rec_id: str
    target: str
    kind: str  # "durability" or "value"
    message: str
    hint: str


@dataclass(frozen=True)
class ServerId:
    flavor: str
    version: str  # x.y.z or a VERSION() string
    source: str  # "server" (probed now) or "plan" (the plan's own server facts)


# ------------------------------------------------------------------ entry points


def check_apply(
    plan: Plan,
    facts: Facts | None,
    *,
    layers: Sequence[str] | None = None,
    only: Sequence[str] | None = None,
) -> None:
    """``check_plan`` against the server apply targets: the probed one when there is one,
    else the server the plan was made for."""
    check_plan(plan, server_id(facts, plan), layers=layers, only=only)


class Selection(TypedDict, total=False):
    """Which of a plan's recommendations are checked (``--layers``, ``--only``; all by
    default) and against which knob catalog (the shipped one by default)."""

    layers: Sequence[str] | None
    only: Sequence[str] | None
    catalog: Catalog | None


def check_plan(plan: Plan, server: ServerId | None, **selection: Unpack[Selection]) -> None:
    """Raise ``PlanRefused`` (one line: the first problem and how many others) when a
    change apply would make breaks the durability or range rules; return otherwise."""
    problems = plan_problems(plan, server, **selection)
    if not problems:
        return
    first = problems[0]
    more = len(problems) - 1
    message = first.message
    if more:
        ids = ", ".join(dict.fromkeys(p.rec_id for p in problems[1:]))
        message += f" (and {more} more problem{'s' if more > 1 else ''}: {_short(ids, 120)})"
    cls = DurabilityRefused if first.kind == "durability" else ValueRefused
    raise cls(
        message,
        hint=first.hint,
        context={"problems": str(len(problems)), "first": first.rec_id},
    )


def server_id(facts: Facts | None, plan: Plan) -> ServerId | None:
    """Flavor and version of the server: from fresh facts, else from the plan."""
    s = facts.server if facts is not None else None
    if s is not None and s.version_string.value:
        return ServerId(s.flavor.value or "mysql", s.version_string.value, "server")
    flavor, version = plan.server.get("flavor"), plan.server.get("version")
    if isinstance(flavor, str) and isinstance(version, str) and flavor and version:
        return ServerId(flavor, version, "plan")
    return None


def applied_recommendations(
    plan: Plan, *, layers: Sequence[str] | None = None, only: Sequence[str] | None = None
) -> list[Recommendation]:
    """The server-setting recommendations apply would carry out (same selection as
    ``plan_apply.build_changes``: action ``apply``, ``--layers``, ``--only``)."""
    return [
        r
        for r in plan.recommendations
        if r.action == "apply"
        and (not layers or r.layer in layers)
        and (not only or r.id in only)
        and r.target.startswith(CHECKED_SCHEMES)
    ]


def plan_problems(
    plan: Plan, server: ServerId | None, **selection: Unpack[Selection]
) -> list[Problem]:
    cat = selection.get("catalog") or Catalog.load()
    recs = applied_recommendations(plan, layers=selection.get("layers"), only=selection.get("only"))
    if not recs:
        return []
    problems: list[Problem] = []
    for r in recs:
        name = target_knob(r.target)
        if name is not None and cat.is_durability(name):
            p = _durability_problem(plan, r, name)
            if p is not None:
                problems.append(p)
    sk, why = _server_knobs(cat, server)
    for r in recs:
        p = _value_problem(sk, why, r)
        if p is not None:
            problems.append(p)
    return problems


# ------------------------------------------------------------------ durability


def _durability_problem(plan: Plan, r: Recommendation, name: str) -> Problem | None:
    what = f"{r.id}: {r.target} = {_show(r.proposed)} changes {name}, a durability knob"
    if plan.durability != "relaxed":
        return Problem(
            r.id,
            r.target,
            "durability",
            f"{what}, and the plan was made with --durability strict",
            RELAX_HINT,
        )
    if plan.digest is None:
        return Problem(
            r.id,
            r.target,
            "durability",
            f"{what}; the plan says durability relaxed but has no digest to prove it "
            "(made by an older myaccel)",
            REMAKE_HINT,
        )
    if not plan.digest_ok:
        return Problem(
            r.id,
            r.target,
            "durability",
            f"{what}; the plan says durability relaxed but its digest does not match its "
            "content (edited after `myaccel plan`)",
            REMAKE_HINT + "; do not edit plan.json by hand",
        )
    return None


# ------------------------------------------------------------------ values


def _server_knobs(cat: Catalog, server: ServerId | None) -> tuple[ServerKnobs | None, str]:
    if server is None:
        return None, "neither the server nor the plan tells the server's flavor and version"
    try:
        return cat.for_server(server.flavor, server.version), ""
    except MyaccelError as exc:
        return None, f"the {server.source}'s version cannot be used ({exc.message})"


def _value_problem(sk: ServerKnobs | None, why: str, r: Recommendation) -> Problem | None:
    name = target_knob(r.target)
    head = f"{r.id}: {r.target} = {_show(r.proposed)}"
    if any(ord(c) < 32 or ord(c) == 127 for c in r.proposed):
        return _value(r, f"{head} contains a control character", "values are one line of text")
    if name is None:
        return None  # an option of another program's group ([client], [mysqldump])
    if sk is None:
        return _value(
            r,
            f"{head} cannot be checked: {why}",
            "pass the server options (or --sandbox) of the server to change, or re-make "
            "the plan with them",
        )
    if sk.catalog.get(name) is None:
        return _value(
            r,
            f"{head}: {name} is not in myaccel's knob catalog, so its type and range "
            f"on {sk.label} are unknown",
            "apply changes only the knobs listed in docs/knobs.md; set others by hand, or "
            "leave the recommendation out with --only",
        )
    k = sk.knob(name)
    if not k.exists:
        return _value(r, f"{head}: {_absence(sk, k)} (source: {_source(k)})", _leave_out_hint())
    value_text = "OFF" if _is_skip(r.target) else r.proposed
    try:
        value = sk.coerce(name, value_text)
    except MyaccelError:
        return _value(r, _bad(head, sk, k, r.target, _NOT_A[k.spec.type]), VALUE_HINT)
    reason = _out_of_range(k, value)
    if reason:
        return _value(r, _bad(head, sk, k, r.target, reason), VALUE_HINT)
    return None


VALUE_HINT = (
    "re-make the plan with `myaccel plan` for this server, or leave the recommendation "
    "out with --only"
)
_NOT_A = {
    "int": "not an integer",
    "size": "not a size in bytes",
    "bool": "not a boolean",
    "enum": "not one of its values",
    "float": "not a number",
    "str": "not a text value",
}


def _value(r: Recommendation, message: str, hint: str) -> Problem:
    return Problem(r.id, r.target, "value", message, hint)


def _bad(head: str, sk: ServerKnobs, k: ResolvedKnob, target: str, reason: str) -> str:
    knob = "" if target == f"mysql:{k.name}" else f" for {k.name}"
    return (
        f"{head} is not valid{knob} on {sk.label}: {reason}; allowed: "
        f"{_allowed(k)} (source: {_source(k)})"
    )


def _out_of_range(k: ResolvedKnob, value: KnobValue) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return ""
    sentinel = k.auto.sentinel if k.auto else None
    if sentinel is not None and not isinstance(sentinel, (bool, str)) and value == sentinel:
        return ""
    lo = k.min if k.min is not None else 0  # no catalog knob takes a negative value
    hi = k.max if k.max is not None else U64_MAX
    if value < lo:
        return f"below the minimum {_num(k, lo)}"
    if value > hi:
        return f"above the maximum {_num(k, hi)}"
    return ""


def _allowed(k: ResolvedKnob) -> str:
    t = k.spec.type
    if t == "enum":
        return "one of " + ", ".join(k.values)
    if t == "bool":
        return "ON or OFF"
    if t == "str":
        return "one line of text"
    lo = k.min if k.min is not None else 0
    hi = k.max if k.max is not None else U64_MAX
    text = f"{_num(k, lo)} to {_num(k, hi)}"
    sentinel = k.auto.sentinel if k.auto else None
    if sentinel is not None and not isinstance(sentinel, (bool, str)):
        text += f", or {sentinel} ({k.auto.text if k.auto else 'automatic'})"
    return text


def _num(k: ResolvedKnob, n: int | float) -> str:
    if k.spec.type == "size" and isinstance(n, int) and n > 0:
        short = format_size(n)
        if short != str(n) and len(short) <= 5:  # 2M, 16E; not 17592186044408M
            return f"{n} ({short})"
    return str(n)


def _absence(sk: ServerKnobs, k: ResolvedKnob) -> str:
    label = FLAVOR_LABELS[sk.flavor]
    if k.removed:
        return f"{k.name} was removed in {label} {k.removed_in} (server: {sk.label})"
    if k.introduced:
        return f"{k.name} only exists from {label} {k.introduced} on (server: {sk.label})"
    return f"{k.name} does not exist in {label} (server: {sk.label})"


def _leave_out_hint() -> str:
    return (
        "make the plan for this server (`myaccel plan` with its server options), or leave "
        "the recommendation out with --only"
    )


def _source(k: ResolvedKnob) -> str:
    return k.source or "myaccel knob catalog"


def _is_skip(target: str) -> bool:
    key = normalize_key(target.rsplit("/", 1)[-1], drop_loose=True)
    return target.startswith("mycnf:") and key.startswith(("skip_", "disable_"))


def _show(value: str) -> str:
    text = value if value.isprintable() else repr(value)
    return _short(text, 60)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
