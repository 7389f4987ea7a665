"""What apply refuses before it prints, journals or changes anything.

The guard judges the configuration a plan would produce, whatever the target kind
(``mysql:`` variables, with ``SET PERSIST`` or not; ``mycnf:`` options in any group the
server reads; option-file text a ``file:`` target writes; server options a ``systemd:``
drop-in or a unit file passes on the server's command line), after ``--layers``/``--only``.
Spellings are read as the server reads them (``server/option_spelling.py``): dashes or
underscores, any case, ``loose-``, ``skip-``/``disable-``/``enable-``, ``--``, quotes and
comments, ``set-variable=``, prefixes of a name. The promises:

- **managed files**: a ``file:`` target may not write one of myaccel's own files
  (``99-myaccel.*``, ``zz-myaccel*``; symbolic links and ``..`` resolved), in any plan.
- **durability**: a change to a knob the knob catalog marks as durability-related
  (``innodb_flush_log_at_trx_commit``, ``sync_binlog``, ``innodb_doublewrite``,
  ``innodb_flush_method``; any value) needs a plan made with ``--durability relaxed`` whose
  content digest still matches: a plan edited to say "relaxed" is refused. Such a plan may
  not add ``!include``/``!includedir`` directives or an ``EnvironmentFile=`` either (they
  pull in files the guard cannot see).
- **values**: each ``mysql:``/``mycnf:`` value must be valid for the knob's catalog type
  and range on the target server's flavor and version; knobs unknown to the catalog, or not
  present in that version, are refused too.
- **memory**: a buffer the server allocates whole (``MEMORY_KNOBS``) may not be larger
  than the host's memory (MemTotal).

Every problem is collected; the error names the first one and counts the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict, Unpack

from myaccel.actions.effective import (
    Assignment,
    HostMemory,
    assignments,
    durability_knobs,
    host_memory,
    managed_file,
    pulled_in,
)
from myaccel.errors import MyaccelError, UsageError
from myaccel.knobs.catalog import FLAVOR_LABELS, Catalog, ResolvedKnob, ServerKnobs
from myaccel.knobs.values import KnobValue, format_size
from myaccel.model import Facts
from myaccel.rules.model import Plan, Recommendation
from myaccel.server.option_spelling import OptionWord
from myaccel.units import format_gib

# Server variables are stored in at most 64 bits: nothing above fits any of them.
U64_MAX = (1 << 64) - 1
CHECKED_SCHEMES = ("mysql:", "mycnf:")
# Buffers the server allocates whole, at start or when set: none can exceed the host's RAM.
MEMORY_KNOBS = (
    "innodb_buffer_pool_size",
    "innodb_log_buffer_size",
    "key_buffer_size",
    "aria_pagecache_buffer_size",
    "query_cache_size",
)
RELAX_HINT = (
    "durability changes need a plan made with `myaccel plan --durability relaxed --out "
    "plan.json`; or leave the recommendation out with --only"
)
REMAKE_HINT = "re-make the plan with `myaccel plan --durability relaxed --out plan.json`"
MANAGED_HINT = (
    "server options go in mysql: or mycnf: targets (apply writes 99-myaccel.cnf itself); "
    "or leave the recommendation out with --only"
)
INCLUDE_HINT = (
    "write the options themselves into the file; a plan that pulls other files in needs "
    "`myaccel plan --durability relaxed --out plan.json`; or leave the recommendation out "
    "with --only"
)
MEMORY_HINT = (
    "the server cannot allocate it: re-make the plan with `myaccel plan` on this host, or "
    "leave the recommendation out with --only"
)


class PlanRefused(UsageError, code="plan-refused"):
    """The plan asks for a change apply must not make (nothing was changed)."""


class DurabilityRefused(PlanRefused, code="plan-durability"):
    pass


class ValueRefused(PlanRefused, code="plan-value"):
    pass


class ManagedFileRefused(PlanRefused, code="plan-managed-file"):
    """A ``file:`` target names one of myaccel's own managed files."""


class IncludeRefused(PlanRefused, code="plan-include"):
    """What a strict plan writes would pull other files in (``!include``, ...)."""


class MemoryRefused(PlanRefused, code="plan-memory"):
    """A buffer larger than the host's memory."""


@dataclass(frozen=True)
class Problem:
    rec_id: str
    target: str
    kind: str  # "managed", "durability", "include", "value" or "memory"
    message: str
    hint: str


_REFUSALS: dict[str, type[PlanRefused]] = {
    "managed": ManagedFileRefused,
    "durability": DurabilityRefused,
    "include": IncludeRefused,
    "value": ValueRefused,
    "memory": MemoryRefused,
}


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
    """``check_plan`` against the server apply targets (the probed one when there is one,
    else the server the plan was made for) and this host's memory."""
    check_plan(plan, server_id(facts, plan), layers=layers, only=only, memory=host_memory(facts))


class Selection(TypedDict, total=False):
    """Which of a plan's recommendations are checked (``--layers``, ``--only``; all by
    default), against which knob catalog (the shipped one by default) and which host
    memory (buffers are not checked against memory when None)."""

    layers: Sequence[str] | None
    only: Sequence[str] | None
    catalog: Catalog | None
    memory: HostMemory | None


def check_plan(plan: Plan, server: ServerId | None, **selection: Unpack[Selection]) -> None:
    """Raise ``PlanRefused`` (one line: the first problem and how many others) when a
    change apply would make breaks the guard's rules; return otherwise."""
    problems = plan_problems(plan, server, **selection)
    if not problems:
        return
    first = problems[0]
    more = len(problems) - 1
    message = first.message
    if more:
        ids = ", ".join(dict.fromkeys(p.rec_id for p in problems[1:]))
        message += f" (and {more} more problem{'s' if more > 1 else ''}: {_short(ids, 120)})"
    raise _REFUSALS[first.kind](
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


def selected_recommendations(
    plan: Plan, *, layers: Sequence[str] | None = None, only: Sequence[str] | None = None
) -> list[Recommendation]:
    """Every recommendation apply would carry out, any target kind (the selection of
    ``plan_apply.build_changes``: action ``apply``, ``--layers``, ``--only``)."""
    return [
        r
        for r in plan.recommendations
        if r.action == "apply" and (not layers or r.layer in layers) and (not only or r.id in only)
    ]


def applied_recommendations(
    plan: Plan, *, layers: Sequence[str] | None = None, only: Sequence[str] | None = None
) -> list[Recommendation]:
    """The server-setting recommendations (``mysql:``, ``mycnf:``) apply would carry out."""
    return [
        r
        for r in selected_recommendations(plan, layers=layers, only=only)
        if r.target.startswith(CHECKED_SCHEMES)
    ]


def plan_problems(
    plan: Plan, server: ServerId | None, **selection: Unpack[Selection]
) -> list[Problem]:
    """Every problem, in this order: managed files, durability, included files, values,
    memory."""
    cat = selection.get("catalog") or Catalog.load()
    layers, only = selection.get("layers"), selection.get("only")
    recs = selected_recommendations(plan, layers=layers, only=only)
    if not recs:
        return []
    names = {s.name for s in cat.specs}
    assigned = [a for r in recs for a in assignments(r, names)]
    problems = [p for r in recs if (p := _managed_problem(r)) is not None]
    problems += _durability_problems(plan, assigned, cat)
    problems += [p for r in recs for p in _include_problems(plan, r, assigned)]
    sk, why = _server_knobs(cat, server)
    server_recs = applied_recommendations(plan, layers=layers, only=only)
    words = {id(a.rec): a.word for a in assigned if a.direct}
    values = [
        p for r in server_recs if (p := _value_problem(sk, why, r, words.get(id(r)))) is not None
    ]
    bad_ids = {p.rec_id for p in values}
    memory = selection.get("memory")
    checked = [a for a in assigned if a.rec.id not in bad_ids]
    return [*problems, *values, *_memory_problems(checked, memory, cat)]


# ------------------------------------------------------------------ managed files


def _managed_problem(r: Recommendation) -> Problem | None:
    if not r.target.startswith("file:"):
        return None
    path = r.target.removeprefix("file:")
    hit = managed_file(path)
    if hit is None:
        return None
    seen = "" if hit == path else f" ({hit} once `..` and symbolic links are resolved)"
    return Problem(
        r.id,
        r.target,
        "managed",
        f"{r.id}: {r.target} writes a file myaccel manages{seen}: a plan may not write "
        "99-myaccel.*/zz-myaccel* files through a file: target",
        MANAGED_HINT,
    )


# ------------------------------------------------------------------ durability


def _durability_problems(plan: Plan, assigned: list[Assignment], cat: Catalog) -> list[Problem]:
    """One problem per recommendation and durability knob it changes."""
    out: dict[tuple[str, str], Problem] = {}
    for a in assigned:
        for knob in durability_knobs(cat, a.word.name):
            key = (a.rec.id, knob)
            if key not in out and (p := _durability_problem(plan, a, knob)) is not None:
                out[key] = p
    return list(out.values())


def _relax_refusal(plan: Plan) -> tuple[str, str] | None:
    """Why the plan may not relax durability (what to add to the message, and the hint),
    or None when it may: made with --durability relaxed and sealed."""
    if plan.durability != "relaxed":
        return ", and the plan was made with --durability strict", RELAX_HINT
    if plan.digest is None:
        return (
            "; the plan says durability relaxed but has no digest to prove it "
            "(made by an older myaccel)",
            REMAKE_HINT,
        )
    if not plan.digest_ok:
        return (
            "; the plan says durability relaxed but its digest does not match its "
            "content (edited after `myaccel plan`)",
            REMAKE_HINT + "; do not edit plan.json by hand",
        )
    return None


def _durability_problem(plan: Plan, a: Assignment, name: str) -> Problem | None:
    refusal = _relax_refusal(plan)
    if refusal is None:
        return None
    why, hint = refusal
    r = a.rec
    what = f"{r.id}: {a.head} changes {name}, a durability knob"
    return Problem(r.id, r.target, "durability", what + why, hint)


def _include_problems(plan: Plan, r: Recommendation, assigned: list[Assignment]) -> list[Problem]:
    found = pulled_in(r, [a.word for a in assigned if a.rec is r])
    refusal = _relax_refusal(plan) if found else None
    if refusal is None:
        return []
    message = (
        f"{r.id}: {r.target} adds `{_short(found[0], 80)}`, which makes the server read "
        f"files the plan does not show{refusal[0]}"
    )
    hint = INCLUDE_HINT if refusal[1] == RELAX_HINT else refusal[1]
    return [Problem(r.id, r.target, "include", message, hint)]


# ------------------------------------------------------------------ memory


def _memory_problems(
    assigned: list[Assignment], memory: HostMemory | None, cat: Catalog
) -> list[Problem]:
    if memory is None:
        return []
    out: dict[str, Problem] = {}
    for a in assigned:
        p = _memory_problem(a, memory, cat)
        if p is not None and a.rec.id not in out:
            out[a.rec.id] = p
    return list(out.values())


def _memory_problem(a: Assignment, memory: HostMemory, cat: Catalog) -> Problem | None:
    w = a.word
    if w.name not in MEMORY_KNOBS or not w.sets_value or w.value is None:
        return None
    if a.runtime and memory.server_remote:
        return None  # SET GLOBAL on another host: this host's RAM says nothing
    try:
        size = cat.parse_value(w.name, w.value)
    except MyaccelError:
        return None  # not a size: the value check says so where it applies
    if isinstance(size, bool) or not isinstance(size, int) or size <= memory.total_bytes:
        return None
    return Problem(
        a.rec.id,
        a.rec.target,
        "memory",
        f"{a.rec.id}: {a.head} sets {w.name} to {size} bytes ({format_size(size)}), more "
        f"than this host's memory (MemTotal {format_gib(memory.total_bytes)}, {memory.source})",
        MEMORY_HINT,
    )


# ------------------------------------------------------------------ values


def _server_knobs(cat: Catalog, server: ServerId | None) -> tuple[ServerKnobs | None, str]:
    if server is None:
        return None, "neither the server nor the plan tells the server's flavor and version"
    try:
        return cat.for_server(server.flavor, server.version), ""
    except MyaccelError as exc:
        return None, f"the {server.source}'s version cannot be used ({exc.message})"


def _value_problem(
    sk: ServerKnobs | None, why: str, r: Recommendation, word: OptionWord | None
) -> Problem | None:
    """``word``: the option ``r`` sets (None: none the server reads)."""
    name = word.name if word is not None else None
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
    value_text = r.proposed if word is None or word.value is None else word.value
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


def _show(value: str) -> str:
    text = value if value.isprintable() else repr(value)
    return _short(text, 60)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
