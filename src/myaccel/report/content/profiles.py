"""The profile sections: each profile with its findings and flame graph, and the
micro-architecture table (PMU counters, else valgrind's simulation, never mixed)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from myaccel.model import Facts
from myaccel.profile.records import Profile
from myaccel.report.load import Artifacts


@dataclass
class ProfileView:
    path: Path
    label: str
    profile: Profile
    folded: Path | None
    flamegraph_file: Path | None
    missing: list[str]
    findings_by_report: bool = False

    @property
    def simulation(self) -> dict[str, Any] | None:
        """``Profile.simulation`` as plain data (valgrind's simulated figures), if any."""
        sim = getattr(self.profile, "simulation", None)
        if sim is None:
            return None
        dump = getattr(sim, "model_dump", None)
        data = dump() if callable(dump) else None
        return data if isinstance(data, dict) else None

    @property
    def samples(self) -> int | None:
        p = self.profile
        if p.recording.samples is not None:
            return p.recording.samples
        return p.stacks.total_samples if p.stacks is not None else None


def _role(path: Path) -> int:
    parts = " ".join(p.lower() for p in path.parts[-3:])
    if any(w in parts for w in ("baseline", "before")):
        return 0
    if any(w in parts for w in ("tuned", "candidate", "after")):
        return 2
    return 1


def profile_views(arts: Artifacts, facts: Facts | None = None) -> list[ProfileView]:
    out: list[ProfileView] = []
    for lp in sorted(arts.profiles, key=lambda p: (_role(p.path), str(p.path))):
        p = lp.doc
        by_report = False
        if not p.findings:
            from myaccel.profile.diagnose import diagnose

            try:
                found = diagnose(p, facts)
            except (ValueError, KeyError, ZeroDivisionError):
                found = []
            if found:
                p = p.model_copy(update={"findings": found})
                by_report = True
        missing: list[str] = []
        folded = None
        if p.recording.folded_path:
            cand = lp.path.parent / p.recording.folded_path
            if cand.is_file():
                folded = cand
            else:
                missing.append(f"folded stacks {p.recording.folded_path} not found: no flame graph")
        else:
            missing.append("no folded stacks recorded: no flame graph")
        fg = None
        if p.recording.flamegraph_path:
            c2 = lp.path.parent / p.recording.flamegraph_path
            fg = c2 if c2.is_file() else None
        if not p.microarch:
            missing.append(
                "no micro-architecture metrics (no PMU: hardware counters unavailable, "
                "e.g. in a VM); only the cpu-clock profile is shown"
                + (
                    ", with valgrind's simulated figures (labelled SIMULATION)"
                    if simulated_metrics(p)
                    else ""
                )
            )
        if p.stacks is None:
            missing.append("no stack summary: top-N tables unavailable")
        rel = lp.path.parent.name or lp.path.name
        out.append(
            ProfileView(
                path=lp.path,
                label=f"{rel}/{lp.path.name}",
                profile=p,
                folded=folded,
                flamegraph_file=fg,
                missing=missing,
                findings_by_report=by_report,
            )
        )
    return out


@dataclass
class MicroRow:
    name: str
    values: list[float | None]  # per profile, in profile order
    pct_of_first: list[float | None]


def simulated_metrics(p: Profile) -> dict[str, float]:
    """valgrind's simulated metrics of a profile (``Profile.simulation``), if any."""
    sim = getattr(p, "simulation", None)
    metrics = getattr(sim, "metrics", None) if sim is not None else None
    if not isinstance(metrics, dict):
        return {}
    return {
        str(k): float(v)
        for k, v in metrics.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    }


def microarch_rows(views: Sequence[ProfileView]) -> tuple[list[MicroRow], list[str], str]:
    """Rows (metric, value per profile, % of the first), the profiles' labels and where the
    numbers come from: PMU counters when any profile has them, else valgrind's simulation
    (never mixed)."""
    source = "PMU counters"
    with_m = [(v, v.profile.microarch) for v in views if v.profile.microarch]
    if not with_m:
        source = "SIMULATION (valgrind cache and branch model, not hardware counters)"
        with_m = [(v, m) for v in views if (m := simulated_metrics(v.profile))]
    if not with_m:
        return [], [], ""
    names: list[str] = []
    for _, metrics in with_m:
        for k in metrics:
            if k not in names:
                names.append(k)
    rows = []
    for n in names:
        vals = [metrics.get(n) for _, metrics in with_m]
        base = vals[0]
        pcts = [
            (x / base * 100.0) if (x is not None and base not in (None, 0)) else None for x in vals
        ]
        rows.append(MicroRow(name=n, values=vals, pct_of_first=pcts))
    return rows, [v.label for v, _ in with_m], source
