"""The guarded rollout on an existing server: the before window of its own counters, the
journaled apply (``actions.protocol.apply_with_restart``: the restart, which rolls back
itself when the server does not come back healthy, with the journal open until it
passed), the after window, and the verdict (``live.judge``); a breach rolls the journal
back (``rollback_with_restart``, restarting again when the apply restarted) and raises
``GuardrailBreach``."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from myaccel.accelerate.live import Verdict, judge, safe_window
from myaccel.actions import ApplyError
from myaccel.actions.plan_apply import PlannedChanges, health_check
from myaccel.actions.protocol import apply_with_restart, rollback_with_restart
from myaccel.actions.target import ServerTarget
from myaccel.rules.model import Plan

LIVE_FIGURES = "from the live server: its own counters before and after the apply, observational"


class GuardrailBreach(ApplyError):
    """The live server did worse after the apply: rolled back."""


@dataclass(frozen=True)
class Rollout:
    journal: Path
    verdict: Verdict


def guarded_apply(
    plan: Plan,
    pc: PlannedChanges,
    target: ServerTarget,
    *,
    window_s: float,
    settle_s: float,
    say: Callable[[str], None],
    record: Callable[[Verdict, Path], None] = lambda v, j: None,
    before_s: float | None = None,
) -> Rollout:
    """Apply ``pc`` to ``target``'s server between two windows of its counters (the
    before window ``before_s`` long, ``window_s`` unless given); ``record`` sees the
    verdict before a rollback."""
    assert target.params is not None
    params = target.params
    before_s = window_s if before_s is None else before_s
    say(f"live server: the before window ({before_s:.0f} s)")
    before, problems = safe_window(params, "before", before_s)
    if problems:
        raise ApplyError(
            "the server is not healthy before the apply: " + "; ".join(problems),
            hint="nothing was changed; check the server",
        )
    res = apply_with_restart(  # a failed restart rolls back itself (ApplyError)
        target,
        pc.changes,
        restart=pc.restart_needed,
        expected=pc.server_values,
        note=say,
        plan_id=plan.created_at,
        facts_digest=plan.facts_digest,
    )
    jpath = Path(res.journal_path or "")
    # the after window is due now (after the settle): a host too busy to start it on time
    # makes it late, and the verdict says so
    due = time.monotonic()
    if pc.restart_needed and settle_s > 0:
        say(f"letting the server warm up for {settle_s:.0f} s")
        due += settle_s
        time.sleep(settle_s)
    say(f"live server: the after window ({window_s:.0f} s)")
    after, problems = safe_window(params, "after", window_s, due=due)
    if not problems:
        problems = health_check(target, pc.server_values)
    verdict = judge(before, after, problems)
    for n in verdict.notes:
        say(f"guard: {n}")
    record(verdict, jpath)
    if verdict.ok:
        say("guard: no breach, the changes stay (undo with: myaccel rollback)")
        return Rollout(jpath, verdict)
    say("guard: " + verdict.line() + ": rolling back")
    rollback_with_restart(target, jpath, restart=pc.restart_needed, note=say)
    raise GuardrailBreach(
        "guardrail breach on the live server (" + verdict.line()[:300] + "): "
        "rolled back, it runs on its old configuration again",
        hint=f"the journal {jpath} records what was tried",
    )
