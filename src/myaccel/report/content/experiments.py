"""The results sections: each comparison (or campaign of runs) with its arms, the
per-arm medians with their confidence intervals, and the headline of each compared cell."""

from __future__ import annotations

import math
import shlex
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from myaccel.bench.compare import CellResult, Comparison
from myaccel.bench.run_record import CampaignIndex, RunRecord
from myaccel.errors import UsageError
from myaccel.redact import redact_argv
from myaccel.report.load import Artifacts


@dataclass
class Experiment:
    """One comparison (or one campaign of runs without a comparison) and its runs."""

    title: str
    source: Path
    comparison: Comparison | None
    provisional: bool  # comparison computed here from an unfinished campaign
    arms: list[str]  # display labels, baseline first
    runs: dict[str, list[RunRecord]]  # label -> runs (all, valid or not)
    campaign: CampaignIndex | None
    missing: list[str] = field(default_factory=list)

    @property
    def all_runs(self) -> list[RunRecord]:
        return [r for a in self.arms for r in self.runs.get(a, [])]

    @property
    def cells(self) -> list[tuple[str, int]]:
        keys = {(r.workload, r.threads) for r in self.all_runs}
        if self.comparison is not None:
            keys |= {(c.workload, c.threads) for c in self.comparison.cells}
        return sorted(keys)

    @property
    def workloads(self) -> list[str]:
        return sorted({w for w, _ in self.cells})


def _usable(r: RunRecord) -> bool:
    return r.validity.valid and r.summary is not None and r.summary.tps > 0


def _campaign_total(c: CampaignIndex) -> int | None:
    p = c.profile
    try:
        n = len(p["workloads"]) * len(p["threads"]) * int(p["runs_per_arm"])
    except (KeyError, TypeError, ValueError):
        return None
    return n * max(1, len(c.arms) or 1)


def collect_experiments(arts: Artifacts) -> list[Experiment]:
    by_id: dict[str, RunRecord] = {}
    run_paths: dict[str, Path] = {}
    for lr in arts.runs:
        by_id.setdefault(lr.doc.run_id, lr.doc)
        run_paths.setdefault(lr.doc.run_id, lr.path)
    campaigns = {lc.doc.campaign_id: lc for lc in arts.campaigns}
    used: set[str] = set()
    out: list[Experiment] = []
    for lc in arts.comparisons:
        cmp = lc.doc
        ids = [*cmp.baseline_runs, *cmp.candidate_runs]
        base = [by_id[i] for i in cmp.baseline_runs if i in by_id]
        cand = [by_id[i] for i in cmp.candidate_runs if i in by_id]
        used.update(ids)
        missing: list[str] = []
        lost = [i for i in ids if i not in by_id]
        if lost:
            missing.append(
                f"{len(lost)} of {len(ids)} run record(s) named by the comparison were not found "
                "(strip plot and time series show the others)"
            )
        cids = {r.campaign_id for r in base + cand}
        # before/after on a live server: two bench campaigns; the first names the command
        camp = next((campaigns[c].doc for c in sorted(cids) if c in campaigns), None)
        arms = [cmp.baseline_label, cmp.candidate_label]
        if arms[0] == arms[1]:
            arms = [f"{arms[0]} (A)", f"{arms[1]} (B)"]
        out.append(
            Experiment(
                title=_title(lc.path, camp),
                source=lc.path,
                comparison=cmp,
                provisional=False,
                arms=arms,
                runs={arms[0]: base, arms[1]: cand},
                campaign=camp,
                missing=missing,
            )
        )
    _name_shared_campaigns(out)
    rest: dict[str, list[RunRecord]] = {}
    for rid, r in by_id.items():
        if rid not in used:
            rest.setdefault(r.campaign_id, []).append(r)
    for cid, runs in sorted(rest.items()):
        runs.sort(key=lambda r: r.index)
        lc_opt = campaigns.get(cid)
        camp = lc_opt.doc if lc_opt else None
        src = lc_opt.path if lc_opt else run_paths[runs[0].run_id]
        missing = []
        if camp is not None and not camp.finished:
            total = _campaign_total(camp)
            missing.append(
                f"campaign {cid} did not finish: {len(runs)}"
                + (f" of {total}" if total else "")
                + " run(s) recorded"
            )
        elif camp is None:
            missing.append(f"campaign index (campaign.json) of {cid} not found")
        arm_names = sorted({r.arm for r in runs if r.arm}, key=lambda a: (a != "baseline", a))
        if len(arm_names) >= 2:
            a, b = arm_names[0], arm_names[1]
            ra = [r for r in runs if r.arm == a]
            rb = [r for r in runs if r.arm == b]
            cmp_opt: Comparison | None = None
            try:
                from myaccel.bench.compare import compare_runs

                cmp_opt = compare_runs(ra, rb, baseline_label=a, candidate_label=b)
                missing.append(
                    "no comparison.json: the comparison below was computed by the report "
                    "from the runs found (provisional)"
                )
            except (UsageError, ValueError) as exc:
                missing.append(f"no comparison.json, and the runs cannot be compared: {exc}")
            out.append(
                Experiment(
                    title=_title(src, camp),
                    source=src,
                    comparison=cmp_opt,
                    provisional=cmp_opt is not None,
                    arms=[a, b],
                    runs={a: ra, b: rb},
                    campaign=camp,
                    missing=missing,
                )
            )
        else:
            label = arm_names[0] if arm_names else (src.parent.name or "runs")
            out.append(
                Experiment(
                    title=_title(src, camp),
                    source=src,
                    comparison=None,
                    provisional=False,
                    arms=[label],
                    runs={label: runs},
                    campaign=camp,
                    missing=missing,
                )
            )
    return out


def _name_shared_campaigns(exps: list[Experiment]) -> None:
    """Comparisons of one campaign of three or more arms: each title names its two arms."""
    ids = [e.campaign.campaign_id for e in exps if e.campaign is not None]
    for e in exps:
        if e.campaign is not None and ids.count(e.campaign.campaign_id) > 1:
            e.title = f"{e.arms[1]} vs {e.arms[0]}, {e.title}"


def _title(path: Path, camp: CampaignIndex | None) -> str:
    if camp is not None:
        return f"{camp.kind} campaign {camp.campaign_id}"
    return f"{path.parent.name}/{path.name}"


# ---------------------------------------------------------------- per-arm statistics


def median_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """Distribution-free CI of the median from order statistics: (low, high, coverage).

    The interval [x(k), x(n-k+1)] covers the median with probability 1 - 2 P(B <= k-1),
    B ~ Binomial(n, 1/2); the narrowest one reaching ``confidence`` is taken, or [min, max]
    when n is too small for it (coverage 1 - 2^(1-n): 93.75% for n = 5).
    """
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        raise ValueError("no values")
    if n == 1:
        return xs[0], xs[0], 0.0

    def coverage(k: int) -> float:
        tail = sum(math.comb(n, i) for i in range(k)) / (1 << n)
        return 1.0 - 2.0 * tail

    best = 1
    for k in range(1, n // 2 + 1):
        if coverage(k) >= confidence:
            best = k
    return xs[best - 1], xs[n - best], coverage(best)


@dataclass
class ArmPoint:
    arm: str
    workload: str
    threads: int
    n: int
    tps_median: float | None
    tps_low: float | None
    tps_high: float | None
    coverage: float | None
    p95_median: float | None
    p95_low: float | None
    p95_high: float | None


def arm_points(exp: Experiment) -> list[ArmPoint]:
    pts: list[ArmPoint] = []
    for arm in exp.arms:
        for w, t in exp.cells:
            ok = [r for r in exp.runs.get(arm, []) if r.workload == w and r.threads == t]
            ok = [r for r in ok if _usable(r)]
            tps = [r.summary.tps for r in ok if r.summary]
            p95 = [r.summary.latency_ms_p95 for r in ok if r.summary and r.summary.latency_ms_p95]
            tl = th = cov = None
            pl = ph = None
            if tps:
                tl, th, cov = median_ci(tps)
            if p95:
                pl, ph, _ = median_ci(p95)
            pts.append(
                ArmPoint(
                    arm=arm,
                    workload=w,
                    threads=t,
                    n=len(tps),
                    tps_median=statistics.median(tps) if tps else None,
                    tps_low=tl,
                    tps_high=th,
                    coverage=cov,
                    p95_median=statistics.median(p95) if p95 else None,
                    p95_low=pl,
                    p95_high=ph,
                )
            )
    return pts


def representative_run(runs: Sequence[RunRecord]) -> RunRecord | None:
    """The valid run whose TPS is closest to the arm's median (its time series is typical)."""
    ok = [r for r in runs if _usable(r) and r.series]
    if not ok:
        ok = [r for r in runs if r.series]
        if not ok:
            return None
        return ok[0]
    med = statistics.median(r.summary.tps for r in ok if r.summary)
    return min(ok, key=lambda r: (abs((r.summary.tps if r.summary else 0) - med), r.index))


# ---------------------------------------------------------------- headlines


@dataclass
class Headline:
    text: str
    verdict: str


def describe_arm(spec: dict[str, Any]) -> str:
    """One line for an A/B arm as ``campaign.json`` records it."""
    parts = []
    cfg = spec.get("config")
    parts.append(f"option file {Path(str(cfg)).name}" if cfg else "the server's own configuration")
    sets = spec.get("sets") or {}
    if sets:
        parts.append("with " + ", ".join(f"{k}={v}" for k, v in sets.items()))
    if spec.get("basedir"):
        parts.append(f"server build {spec['basedir']}")
    return " ".join(parts)


def cell_headline(c: CellResult, exp: Experiment) -> Headline:
    from myaccel.report.fmt import ci, pct, pval

    if c.delta_pct is None:
        return Headline(
            f"{c.workload} @ {c.threads} threads: no gain measured ({c.reason})", c.verdict
        )
    text = (
        f"{c.workload} @ {c.threads} threads: {pct(c.delta_pct)} TPS "
        f"(95% CI {ci(c.ci_low_pct, c.ci_high_pct)}, p {pval(c.p_adjusted)})"
    )
    cmp = exp.comparison
    figure = next((f for f in (cmp.instructions if cmp else []) if f.workload == c.workload), None)
    if figure is not None:
        text += (
            f"; instructions per transaction {figure.delta_pct:+.2f}% ({figure.verdict}, "
            f"{figure.tool})"
        )
    if c.decided_by == "instructions":
        text += ": the instruction count decided, the TPS was inconclusive"
    return Headline(text, c.verdict)


def cell_headlines(exps: list[Experiment]) -> tuple[list[Headline], str | None]:
    """One headline per compared cell, and the geometric mean of the last comparison
    that has one."""
    from myaccel.report.fmt import pct

    headlines: list[Headline] = []
    geomean = None
    for e in exps:
        if e.comparison is None:
            continue
        for cell in e.comparison.cells:
            headlines.append(cell_headline(cell, e))
        g = e.comparison
        if g.geomean_delta_pct is not None:
            geomean = (
                f"Geometric mean over {len(g.cells)} cell(s): {pct(g.geomean_delta_pct)} "
                f"(95% CI {pct(g.geomean_ci_low_pct)} to {pct(g.geomean_ci_high_pct)})"
            )
    return headlines, geomean


# what a campaign records of its profile, as the report names each when it differs
_PROFILE_FIELDS = (
    ("duration_s", "{} s runs"),
    ("warmup_s", "{} s warm-up"),
    ("runs_per_arm", "{} runs per arm"),
    ("tables", "{} tables"),
    ("table_size", "{:,} rows per table"),
    ("threads", "threads {}"),
    ("workloads", "workloads {}"),
)


def profile_label(recorded: dict[str, Any]) -> str | None:
    """``profile quick`` as run; when options changed it, what they changed (before: a
    report said "profile quick" of 2 s runs on 5,000 rows, where quick is 10 s on 100,000)."""
    from myaccel.bench.profiles import PROFILES

    name = recorded.get("name")
    if not name:
        return None
    named = PROFILES.get(str(name))
    if named is None:
        return f"profile {name}"
    changed = []
    for key, fmt in _PROFILE_FIELDS:
        ran, default = recorded.get(key), getattr(named, key)
        ran = list(ran) if isinstance(ran, tuple) else ran
        default = list(default) if isinstance(default, tuple) else default
        if ran is not None and ran != default:
            shown = ", ".join(map(str, ran)) if isinstance(ran, list) else ran
            changed.append(fmt.format(shown))
    if not changed:
        return f"profile {name}"
    return f"profile {name} changed by options: {'; '.join(changed)}"


def experiment_done(e: Experiment) -> list[str]:
    c = e.campaign
    n = len(e.all_runs)
    prof = profile_label(c.profile) if c else None
    kind = c.kind if c else "runs"
    if e.comparison is not None:
        line = (
            f"{kind}: {e.arms[0]} vs {e.arms[1]}, {n} run(s) over {len(e.cells)} cell(s)"
            + (f", {prof}" if prof else "")
            + (" (comparison computed by the report)" if e.provisional else "")
        )
    else:
        line = f"{kind}: {n} run(s) over {len(e.cells)} cell(s)" + (f", {prof}" if prof else "")
    lines = [line]
    if c is not None:
        lines += [f"arm {name}: {describe_arm(spec)}" for name, spec in c.arms.items()]
    return lines


def campaign_command(exps: list[Experiment]) -> str | None:
    """The first recorded campaign command line, secrets redacted."""
    for e in exps:
        if e.campaign is not None and e.campaign.command:
            return shlex.join(redact_argv(e.campaign.command))
    return None


# ---------------------------------------------------------------- campaigns of three or more arms


@dataclass
class ArmsRow:
    workload: str
    threads: int
    medians: list[float | None]  # TPS per arm, in ``ArmsTable.arms`` order
    gains: list[CellResult | None]  # per column (comparison), None when it lacks the cell


@dataclass
class ArmsTable:
    """One campaign with three or more arms (`accelerate --build`: distro defaults, distro +
    plan, build + plan): every arm's median TPS and each of its comparisons, side by side."""

    title: str
    arms: list[str]
    columns: list[str]  # "candidate vs baseline", one per comparison
    rows: list[ArmsRow]


def arms_tables(exps: Sequence[Experiment]) -> list[ArmsTable]:
    """A table for each campaign whose saved comparisons name three or more arms."""
    groups: dict[str, list[Experiment]] = {}
    for e in exps:
        if e.comparison is not None and not e.provisional and e.campaign is not None:
            groups.setdefault(e.campaign.campaign_id, []).append(e)
    out: list[ArmsTable] = []
    for group in groups.values():
        labels = list(dict.fromkeys(a for e in group for a in e.arms))
        if len(labels) < 3:
            continue
        # the arm only ever compared against comes first, the one only ever compared last
        rank = {a: sum((e.arms[1] == a) - (e.arms[0] == a) for e in group) for a in labels}
        arms = sorted(labels, key=lambda a: (rank[a], labels.index(a)))
        es = sorted(group, key=lambda e: (arms.index(e.arms[0]), arms.index(e.arms[1])))
        runs: dict[str, list[RunRecord]] = {}
        for e in es:
            for a in e.arms:
                runs.setdefault(a, e.runs.get(a, []))
        rows = []
        for w, t in sorted({c for e in es for c in e.cells}):
            medians: list[float | None] = []
            for a in arms:
                tps = [
                    r.summary.tps
                    for r in runs[a]
                    if r.workload == w and r.threads == t and _usable(r) and r.summary
                ]
                medians.append(statistics.median(tps) if tps else None)
            gains = [
                next(
                    (c for c in e.comparison.cells if (c.workload, c.threads) == (w, t)),
                    None,
                )
                if e.comparison
                else None
                for e in es
            ]
            rows.append(ArmsRow(w, t, medians, gains))
        columns = [f"{e.arms[1]} vs {e.arms[0]}" for e in es]
        out.append(ArmsTable(_title(es[0].source, es[0].campaign), arms, columns, rows))
    return out
