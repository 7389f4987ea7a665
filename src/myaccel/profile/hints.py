"""A profile as plan hints (``myaccel plan --profile``): its findings, re-derived with the
facts, raise or lower the rules each finding names."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from myaccel.errors import UsageError
from myaccel.model import Facts
from myaccel.paths import myaccel_home
from myaccel.profile.diagnose import diagnose, finding_ids
from myaccel.profile.record import latest_profile, resolve_profile_path
from myaccel.profile.records import load_profile
from myaccel.rules.base import FindingEffect, Hints


def find_profile(arg: str | None) -> Path:
    """The profile ``arg`` names (a profile.json or its directory), else the newest one
    under ``$MYACCEL_HOME/profiles``."""
    if arg:
        return resolve_profile_path(arg)
    root = myaccel_home() / "profiles"
    found = latest_profile(root)
    if found is None:
        raise UsageError(
            f"no profile given and none under {root}",
            hint="record one with `myaccel profile --sandbox NAME --workload quick`, or pass "
            "the profile.json (or its directory)",
        )
    return found


def plan_hints(
    profile_arg: str,
    facts: Facts | None,
    *,
    threads: int | None,
    note: Callable[[str], None] = lambda _msg: None,
) -> Hints:
    """The profile's findings as ``Hints``; ``note`` hears one line per finding."""
    found = diagnose(load_profile(find_profile(profile_arg)), facts)
    for f in found:
        rules = ", ".join(f"{r.direction}s {r.rule}" for r in f.rules)
        note(f"profile finding {f.id} ({f.severity}): {rules}")
    if not found:
        note("profile: no findings (the plan is the same as without --profile)")
    return Hints(
        threads=threads,
        findings=finding_ids(found),
        effects=tuple(
            FindingEffect(finding=f.id, rule=r.rule, direction=r.direction, reason=r.reason)
            for f in found
            for r in f.rules
        ),
    )
