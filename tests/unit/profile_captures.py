"""Shared by the profile tests: recorded profiles and fixture hosts, built the way the
recorder and the probe build them (not a test module: no tests here)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from myaccel.facts.collect import collect_facts
from myaccel.model import Facts
from myaccel.profile.folded import parse_folded, summarize
from myaccel.profile.records import NodeCpus, Profile, Recording, build_profile, status_window

FIXTURES = Path(__file__).parent.parent / "fixtures"
PROFILES = FIXTURES / "profiles"
ROOTS = FIXTURES / "sysroots"


@cache
def capture(name: str) -> Profile:
    """Build the profile the way a recorder would: folded file + capture JSON."""
    doc = json.loads((PROFILES / f"{name}.capture.json").read_text())
    folded = parse_folded((PROFILES / f"{name}.folded").read_text(), source=name)
    status = (
        status_window(doc["status_before"], doc["status_after"], doc["recording"]["duration_s"])
        if doc["status_after"]
        else None
    )
    return build_profile(
        Recording(**doc["recording"]),
        stacks=summarize(folded),
        proc_stat=[(s["t_s"], s["text"]) for s in doc["proc_stat"]],
        numa_nodes=[NodeCpus(**n) for n in doc["numa_nodes"]],
        microarch=doc["microarch"],
        status=status,
        created_at="2026-11-20T10:00:00+00:00",
    )


@cache
def host(name: str) -> Facts:
    return collect_facts(ROOTS / name, perf_live_test=False)
