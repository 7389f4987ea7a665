"""What a report says, independent of its format: experiments (a comparison with its runs),
the plan with the status of each recommendation, journal changes, environment, profiles,
build manifests and everything that is missing or doubtful.

The HTML and Markdown templates render these objects; numbers are formatted by
:mod:`myaccel.report.fmt` in both, so the two always agree.
"""

from __future__ import annotations

import base64
import difflib
import itertools
import math
import shlex
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from myaccel import __version__
from myaccel.actions.journal import JournalData, JournalEntry
from myaccel.bench.compare import CellResult, Comparison
from myaccel.bench.run_record import CampaignIndex, RunRecord
from myaccel.errors import UsageError
from myaccel.model import Facts
from myaccel.profile.records import Profile
from myaccel.redact import redact_argv
from myaccel.report.load import Artifacts, Loaded
from myaccel.rules.model import LAYERS, Plan, Recommendation
from myaccel.units import format_gib as _gib

# ---------------------------------------------------------------- experiments


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


def _experiments(arts: Artifacts) -> list[Experiment]:
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


# ---------------------------------------------------------------- plan and journal


@dataclass
class PlanRow:
    id: str
    layer: str
    title: str
    target: str
    current: str
    proposed: str
    status: str  # applied, measured, rolled back, failed, not applied, advisory, skipped
    why: str  # rationale, or the reason it was not applied / skipped
    source: str
    expected: str
    risk: str


@dataclass
class PlanView:
    path: Path
    plan: Plan
    rows: list[PlanRow]
    never_applied: bool
    counts: dict[str, int]

    def by_layer(self) -> list[tuple[str, list[PlanRow]]]:
        """Recommendations per layer (in the plan's layer order); skipped rules apart."""
        order = {lay: i for i, lay in enumerate(LAYERS)}
        rows = [r for r in self.rows if r.status != "skipped"]
        layers = sorted({r.layer for r in rows}, key=lambda x: (order.get(x, 99), x))
        return [(lay, [r for r in rows if r.layer == lay]) for lay in layers]

    @property
    def skipped(self) -> list[PlanRow]:
        return [r for r in self.rows if r.status == "skipped"]


def _journal_targets(journals: Sequence[Loaded[JournalData]]) -> dict[str, str]:
    """Setting name or target -> entry state, over all journals (later ones win)."""
    out: dict[str, str] = {}
    for lj in sorted(journals, key=lambda j: j.doc.created_at):
        for e in lj.doc.entries:
            out[e.target] = e.state
            if e.target.startswith("mycnf:"):
                key = e.target.split("/", 1)[-1]
                out.setdefault(f"mysql:{key}", e.state)
    return out


def _cnf_ids(paths: Sequence[Path]) -> set[str]:
    ids: set[str] = set()
    for p in paths:
        try:
            text = p.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("# ") and ": " in line:
                head = line[2:].split(": ", 1)[0]
                if head and " " not in head:
                    ids.add(head)
    return ids


def _not_applied_reason(r: Recommendation, sandbox_run: bool) -> str:
    if r.action == "advisory":
        return "advisory: needs a human (rebuild, firmware or a decision)"
    if sandbox_run and not r.target.startswith("mysql:"):
        return (
            f"{r.layer} layer: host-wide, applied with `myaccel apply` on a server, "
            "not to a sandbox benchmark"
        )
    if sandbox_run:
        return "not in the candidate configuration (rejected by the knob catalog or not applicable)"
    return "no journal entry for this target (the apply left it out or was not run for it)"


def plan_view(
    lp: Loaded[Plan], journals: Sequence[Loaded[JournalData]], cnfs: Sequence[Path]
) -> PlanView:
    plan = lp.doc
    jt = _journal_targets([j for j in journals if j.doc.plan_id in (None, plan.created_at)])
    cnf = _cnf_ids(cnfs)
    never = not jt and not cnf
    rows: list[PlanRow] = []
    for r in plan.recommendations:
        state = jt.get(r.target)
        if state is None and r.target.startswith("mysql:"):
            state = jt.get(f"mycnf:mysqld/{r.target.removeprefix('mysql:')}")
        if state is not None:
            status = {
                "applied": "applied",
                "reverted": "rolled back",
                "failed": "failed",
                "pending": "pending (interrupted)",
            }.get(state, state)
            why = r.rationale
        elif r.id in cnf:
            status, why = "measured", r.rationale
        elif r.action == "advisory":
            status, why = "advisory", r.rationale
        elif never:
            status, why = "not applied", "the plan was never applied (no journal, no A/B)"
        else:
            status, why = "not applied", _not_applied_reason(r, bool(cnf))
        rows.append(
            PlanRow(
                id=r.id,
                layer=r.layer,
                title=r.title,
                target=r.target,
                current="-" if r.current is None else str(r.current),
                proposed=str(r.proposed),
                status=status,
                why=why,
                source=r.effect_source,
                expected=r.expected_effect,
                risk=r.risk,
            )
        )
    for s in plan.skipped:
        rows.append(
            PlanRow(
                id=s.id,
                layer=s.layer,
                title="",
                target="-",
                current="-",
                proposed="-",
                status="skipped",
                why=s.reason,
                source="",
                expected="",
                risk="",
            )
        )
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    return PlanView(path=lp.path, plan=plan, rows=rows, never_applied=never, counts=counts)


@dataclass
class Change:
    index: int
    target: str
    kind: str
    statement: str  # the exact change: SET, sysctl, file line
    old: str
    new: str
    state: str
    read_back: str
    diff: str  # unified diff of a file change, when both sides are known


def _statement(e: JournalEntry) -> str:
    sp = e.spec
    if e.kind == "mysql":
        verb = "SET PERSIST" if sp.get("persist") else "SET GLOBAL"
        return f"{verb} {sp.get('name', e.target.split(':', 1)[-1])} = {e.new_value}"
    if e.kind == "mycnf":
        path = Path(str(sp.get("conf_dir", ""))) / str(sp.get("filename", ""))
        return f"{path}: [{sp.get('group', 'mysqld')}] {sp.get('key', '')} = {e.new_value}"
    if e.target.startswith("sysctl:"):
        return f"sysctl -w {e.target.removeprefix('sysctl:')}={e.new_value}"
    if e.target.startswith("sysfs:"):
        return f"echo {e.new_value} > {e.target.removeprefix('sysfs:')}"
    return f"{e.target} = {e.new_value}"


def journal_changes(j: JournalData) -> list[Change]:
    """Entries in apply order; file diffs between consecutive recorded states of a file."""
    snapshots: dict[str, list[tuple[int, bytes | None]]] = {}
    for e in j.entries:
        for f in e.old.files:
            content = f.content if f.existed else b""
            snapshots.setdefault(f.path, []).append((e.index, content))
    diffs: dict[int, str] = {}
    for path, snaps in snapshots.items():
        for (idx, a), (_, b) in itertools.pairwise(snaps):
            if a is None or b is None:
                continue
            d = difflib.unified_diff(
                a.decode(errors="replace").splitlines(),
                b.decode(errors="replace").splitlines(),
                fromfile=f"{path} (before)",
                tofile=f"{path} (after)",
                lineterm="",
                n=1,
            )
            diffs[idx] = "\n".join(d)
    out: list[Change] = []
    for e in j.entries:
        old = e.old.value
        if old is None and e.old.files:
            old = "(file did not exist)" if not e.old.files[0].existed else "(file content)"
        out.append(
            Change(
                index=e.index,
                target=e.target,
                kind=e.kind,
                statement=_statement(e),
                old="-" if old is None else old,
                new=e.new_value,
                state=e.state,
                read_back=e.read_back or "-",
                diff=diffs.get(e.index, ""),
            )
        )
    return out


def _b64_text(b64: str | None) -> str:
    return "" if b64 is None else base64.b64decode(b64).decode(errors="replace")


# ---------------------------------------------------------------- environment


def _v(fact: Any) -> Any:
    return getattr(fact, "value", None)


def _yn(fact: Any) -> str:
    v = _v(fact)
    if v is None:
        return "unknown"
    return "yes" if v else "no"


def environment(facts: Facts | None, runs: Sequence[RunRecord]) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    if facts is not None:
        c, m, k, st = facts.cpu, facts.memory, facts.kernel, facts.storage
        rows.append(("Host", str(_v(facts.hostname) or "?")))
        rows.append(
            (
                "CPU",
                f"{_v(c.model) or '?'} ({_v(c.arch) or '?'}, family {_v(c.family) or '?'}), "
                f"{_v(c.logical_cpus) or '?'} logical CPUs, {_v(c.sockets) or '?'} socket(s), "
                f"{len(_v(c.numa_nodes) or [])} NUMA node(s)",
            )
        )
        feats = [
            name
            for name, f in (
                ("LSE", c.has_lse),
                ("SVE", c.has_sve),
                ("AVX2", c.has_avx2),
                ("AVX-512", c.has_avx512),
            )
            if _v(f)
        ]
        if feats:
            rows.append(("CPU features", ", ".join(feats)))
        rows.append(
            (
                "Memory",
                f"{_gib(_v(m.total_bytes))}, budget {_gib(_v(m.effective_limit_bytes))}; "
                f"THP {_v(m.thp_enabled) or '?'}; swappiness {_v(m.swappiness)}",
            )
        )
        rows.append(("Kernel", f"{_v(k.release) or '?'}"))
        rows.append(
            (
                "Storage",
                f"{_v(st.fs_type) or '?'} on {_v(st.block_device) or '?'} "
                f"(rotational {_v(st.rotational)}, scheduler {_v(st.scheduler) or '?'})",
            )
        )
        s = facts.server
        if s is not None:
            rows.append(
                (
                    "Server",
                    f"{_v(s.flavor) or '?'} {_v(s.version) or '?'}: {_v(s.version_string) or '?'} "
                    f"({_v(s.version_comment) or '?'})",
                )
            )
            rows.append(("Server binary", str(_v(s.binary_path) or "?")))
        b = facts.binary
        if b is not None:
            at = _v(b.atomics)
            rows.append(
                (
                    "Binary facts",
                    f"atomics {at.klass if at else '?'}; LTO {_yn(b.lto)}; PGO {_yn(b.pgo)}; "
                    f"stripped {_yn(b.stripped)}; text 2 MiB aligned {_yn(b.text_huge_page_ready)}; "
                    f"compiler {', '.join(_v(b.compiler) or []) or '?'}",
                )
            )
        perf = _v(facts.perf.perf_version)
        rows.append(
            ("perf", f"{perf or 'not found'}; hardware counters {_v(facts.perf.hardware_counters)}")
        )
        rows.append(("Facts", f"collected {facts.collected_at} by myaccel {facts.myaccel_version}"))
    elif runs:
        h, sv = runs[0].host, runs[0].server
        rows.append(("Host", str(h.get("hostname", "?"))))
        rows.append(
            (
                "CPU",
                f"{h.get('cpu_model', '?')} ({h.get('arch', '?')}), {h.get('logical_cpus', '?')} logical CPUs",
            )
        )
        rows.append(("Kernel", str(h.get("kernel", "?"))))
        rows.append(("Server", f"{sv.get('flavor', '?')} {sv.get('version_string', '?')}"))
    if runs:
        d = runs[0].dataset
        rows.append(
            (
                "Dataset",
                f"{d.get('tables', '?')} tables x {d.get('table_size', '?'):,} rows"
                if isinstance(d.get("table_size"), int)
                else f"{d.get('tables', '?')} tables x {d.get('table_size', '?')} rows",
            )
        )
        sp = runs[0].spec
        rows.append(
            (
                "Benchmark",
                f"sysbench ({runs[0].command[0] if runs[0].command else '?'}), "
                f"{sp.get('duration_s', '?')} s measured after {sp.get('warmup_s', '?')} s warm-up, "
                f"--rand-type={sp.get('rand_type', '?')}, ps-mode {sp.get('ps_mode', '?')}, "
                f"client CPUs {sp.get('client_cpus') or 'unpinned'}",
            )
        )
    rows.append(("Report", f"myaccel {__version__}"))
    return rows


def logical_cpus(facts: Facts | None, runs: Sequence[RunRecord]) -> int | None:
    if facts is not None and isinstance(_v(facts.cpu.logical_cpus), int):
        return int(facts.cpu.logical_cpus.value or 0) or None
    for r in runs:
        n = r.host.get("logical_cpus")
        if isinstance(n, int) and n > 0:
            return n
    return None


# ---------------------------------------------------------------- validity


def validity_warnings(
    exps: Sequence[Experiment], arts: Artifacts, facts: Facts | None, plans: Sequence[PlanView]
) -> list[str]:
    out: list[str] = []
    for e in exps:
        for r in e.all_runs:
            if not r.validity.valid:
                why = "; ".join(r.validity.reasons) or r.validity.failure
                out.append(
                    f"run {r.run_id} ({r.arm or '-'}, {r.workload} @ {r.threads}) is invalid: {why}"
                )
            for w in r.validity.warnings:
                out.append(f"run {r.run_id} ({r.arm or '-'}, {r.workload} @ {r.threads}): {w}")
        if e.comparison is not None:
            out += [f"comparison: {w}" for w in e.comparison.warnings]
            for c in e.comparison.cells:
                out += [f"{c.workload} @ {c.threads}: {a}" for a in c.advice]
    if facts is not None:
        out += [f"facts: {w}" for w in facts.warnings]
    for pv in plans:
        out += [f"plan: {w}" for w in pv.plan.warnings]
    for lp in arts.profiles:
        out += [f"profile {lp.path.name}: {w}" for w in lp.doc.warnings]
    out += arts.notes
    seen: set[str] = set()
    uniq = []
    for w in out:
        if w not in seen:
            seen.add(w)
            uniq.append(w)
    return uniq


# ---------------------------------------------------------------- profiles and builds


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


@dataclass
class BuildSummary:
    """What a DBA reads in a `myaccel build` manifest: flags next to what they bought."""

    label: str
    opts: str
    status: str
    error: str
    compiler: str
    target: str
    install_dir: str
    flags: list[tuple[str, str]]  # phase, flags line
    left_out: int
    stages: list[tuple[str, str, str, str]]  # name, status, seconds, note
    checks: list[tuple[str, str, str]]  # id, status, evidence
    callgrind: list[tuple[str, str, str, str]]  # build, Ir, operations, Ir per operation
    callgrind_workload: str
    callgrind_delta: str | None


@dataclass
class BuildView:
    path: Path
    schema: str
    scalars: list[tuple[str, str]]
    sections: list[tuple[str, list[tuple[str, str]]]]  # flags, stages, verification, ...
    summary: BuildSummary | None = None  # a manifest of `myaccel build` (myaccel.build/1)


def _short(v: Any, limit: int = 240) -> str:
    if isinstance(v, str):
        s = v
    elif isinstance(v, list) and all(isinstance(x, str | int | float) for x in v):
        s = " ".join(str(x) for x in v)
    else:
        import json

        s = json.dumps(v, sort_keys=True, default=str)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _pairs(v: Any) -> list[tuple[str, str]]:
    if isinstance(v, dict):
        return [(str(k), _short(x)) for k, x in v.items()]
    if isinstance(v, list):
        out = []
        for i, x in enumerate(v):
            if isinstance(x, dict):
                name = str(x.get("name") or x.get("id") or x.get("stage") or i)
                rest = {k: y for k, y in x.items() if k not in ("name", "id", "stage")}
                out.append((name, _short(rest)))
            else:
                out.append((str(i), _short(x)))
        return out
    return [("", _short(v))]


def build_view(lb: Loaded[dict[str, Any]]) -> BuildView:
    doc = lb.doc
    schema = str(doc.get("schema") or doc.get("schema_version"))
    scalars = [
        (k, _short(v))
        for k, v in doc.items()
        if k not in ("schema", "schema_version") and isinstance(v, str | int | float | bool)
    ]
    sections: list[tuple[str, list[tuple[str, str]]]] = []
    keys = ["flags", "stages", "verification"]
    keys += [k for k, v in doc.items() if isinstance(v, dict | list) and k not in keys]
    for k in keys:
        if k in doc:
            sections.append((k, _pairs(doc[k])))
    return BuildView(
        path=lb.path,
        schema=schema,
        scalars=scalars,
        sections=sections,
        summary=build_summary(doc) if schema == "myaccel.build/1" else None,
    )


def build_summary(doc: dict[str, Any]) -> BuildSummary | None:
    """The structured view of a `myaccel build` manifest; None (generic view) when the
    document does not validate, e.g. a manifest cut short or written by hand."""
    from pydantic import ValidationError

    from myaccel.build.manifest import BuildManifest
    from myaccel.build.report import flags_line

    try:
        m = BuildManifest.model_validate(doc)
    except ValidationError:
        return None
    stages = []
    for st in m.stages:
        note = st.reason or str(st.detail.get("summary", ""))
        dur = f"{st.duration_s:.1f}" if st.duration_s is not None else ""
        stages.append((st.name, st.status + (" (resumed)" if st.resumed else ""), dur, note))
    cg = m.measurements.get("callgrind") or {}
    rows = []
    for label in ("baseline", "this_build"):
        r = cg.get(label)
        if isinstance(r, dict) and r.get("ir_total") is not None:
            rows.append(
                (
                    label.replace("_", " "),
                    f"{int(r['ir_total']):,}",
                    f"{int(r.get('ops') or 0):,}",
                    f"{float(r.get('ir_per_op') or 0):,.1f}",
                )
            )
    delta = cg.get("delta_pct")
    return BuildSummary(
        label=str(m.source.get("label") or m.source.get("path") or "?"),
        opts=", ".join(m.request.get("opts") or []) or "plain",
        status=m.status,
        error=m.error or "",
        compiler=f"GCC {m.compiler.get('version', '?')} ({m.compiler.get('triplet', '?')})",
        target=str(m.target.get("why") or ""),
        install_dir=m.install_dir,
        flags=[(phase, flags_line(f)) for phase, f in m.flags.items()],
        left_out=len(m.left_out),
        stages=stages,
        checks=[(c.id, c.status, c.evidence) for c in m.verification],
        callgrind=rows,
        callgrind_workload=str(cg.get("workload") or ""),
        callgrind_delta=f"{float(delta):+.2f}%" if delta is not None else None,
    )


# ---------------------------------------------------------------- the whole report


@dataclass
class Headline:
    text: str
    verdict: str


@dataclass
class ReportContent:
    title: str
    created_at: str
    done: list[str]  # what was done, one line each
    headlines: list[Headline]
    geomean: str | None
    not_applied: list[tuple[str, str]]  # id/target, why
    command: str | None
    experiments: list[Experiment]
    plans: list[PlanView]
    journals: list[tuple[Path, JournalData, list[Change]]]
    facts: Facts | None
    env: list[tuple[str, str]]
    cpus: int | None
    profiles: list[ProfileView]
    micro: list[MicroRow]
    micro_labels: list[str]
    micro_source: str
    builds: list[BuildView]
    warnings: list[str]
    missing: list[str]
    sources: list[str]


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
    return Headline(
        f"{c.workload} @ {c.threads} threads: {pct(c.delta_pct)} TPS "
        f"(95% CI {ci(c.ci_low_pct, c.ci_high_pct)}, p {pval(c.p_adjusted)})",
        c.verdict,
    )


def build_content(arts: Artifacts) -> ReportContent:
    exps = _experiments(arts)
    facts = arts.facts[-1].doc if arts.facts else None
    plans = [plan_view(lp, arts.journals, arts.candidate_configs) for lp in arts.plans]
    journals = [(lj.path, lj.doc, journal_changes(lj.doc)) for lj in arts.journals]
    runs_all = [r for e in exps for r in e.all_runs]
    profs = profile_views(arts, facts)
    builds = [build_view(b) for b in arts.builds]
    headlines, geomean = _headlines(exps)

    import datetime as dt

    micro_rows, micro_labels, micro_source = microarch_rows(profs)
    return ReportContent(
        title=_report_title(exps, profs, builds),
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        done=_done(exps, facts, plans, journals, profs, builds),
        headlines=headlines,
        geomean=geomean,
        not_applied=_not_applied(plans),
        command=_command(exps),
        experiments=exps,
        plans=plans,
        journals=journals,
        facts=facts,
        env=environment(facts, runs_all),
        cpus=logical_cpus(facts, runs_all),
        profiles=profs,
        micro=micro_rows,
        micro_labels=micro_labels,
        micro_source=micro_source,
        builds=builds,
        warnings=validity_warnings(exps, arts, facts, plans),
        missing=_missing(exps, facts, plans, profs, builds, runs_all),
        sources=[str(p) for p in arts.roots],
    )


def _done(
    exps: list[Experiment],
    facts: Facts | None,
    plans: list[PlanView],
    journals: list[tuple[Path, JournalData, list[Change]]],
    profs: list[ProfileView],
    builds: list[BuildView],
) -> list[str]:
    """ "What was done": one line per probe, experiment (and its arms), plan, journal,
    profile and build."""
    done: list[str] = []
    for e in exps:
        done += _experiment_done(e)
    if facts is not None:
        done.insert(0, f"probed {facts.hostname.value or 'the host'} at {facts.collected_at}")
    for pv in plans:
        done.append(
            f"plan of {pv.plan.created_at}: {len(pv.plan.recommendations)} recommendation(s), "
            f"{len(pv.plan.skipped)} rule(s) skipped"
            + (", never applied" if pv.never_applied else "")
        )
    for path, j, ch in journals:
        done.append(f"journal {j.id} ({j.status}): {len(ch)} change(s), {path.name}")
    for pv_ in profs:
        r = pv_.profile.recording
        done.append(
            f"profile {pv_.label}: {r.tool} -e {r.event}, {r.duration_s:g} s, "
            f"{pv_.samples if pv_.samples is not None else '?'} samples"
        )
    for b in builds:
        if b.summary:
            m = b.summary
            done.append(f"build of {m.label} ({m.opts}): {m.status}, install tree {m.install_dir}")
        else:
            done.append(f"build manifest {b.path.name} ({b.schema})")
    return done


def _experiment_done(e: Experiment) -> list[str]:
    c = e.campaign
    n = len(e.all_runs)
    prof = c.profile.get("name") if c else None
    kind = c.kind if c else "runs"
    if e.comparison is not None:
        line = (
            f"{kind}: {e.arms[0]} vs {e.arms[1]}, {n} run(s) over {len(e.cells)} cell(s)"
            + (f", profile {prof}" if prof else "")
            + (" (comparison computed by the report)" if e.provisional else "")
        )
    else:
        line = f"{kind}: {n} run(s) over {len(e.cells)} cell(s)" + (
            f", profile {prof}" if prof else ""
        )
    lines = [line]
    if c is not None:
        lines += [f"arm {name}: {describe_arm(spec)}" for name, spec in c.arms.items()]
    return lines


def _headlines(exps: list[Experiment]) -> tuple[list[Headline], str | None]:
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


def _not_applied(plans: list[PlanView]) -> list[tuple[str, str]]:
    return [
        (f"{r.id} ({r.target})" if r.target != "-" else r.id, f"{r.status}: {r.why}")
        for pv in plans
        for r in pv.rows
        if r.status in ("not applied", "advisory", "failed", "pending (interrupted)")
    ]


def _command(exps: list[Experiment]) -> str | None:
    """The first recorded campaign command line, secrets redacted."""
    for e in exps:
        if e.campaign is not None and e.campaign.command:
            return shlex.join(redact_argv(e.campaign.command))
    return None


def _missing(
    exps: list[Experiment],
    facts: Facts | None,
    plans: list[PlanView],
    profs: list[ProfileView],
    builds: list[BuildView],
    runs_all: list[RunRecord],
) -> list[str]:
    """What the report cannot show, and why."""
    missing: list[str] = []
    for e in exps:
        missing += [f"{e.title}: {m}" for m in e.missing]
    for pv_ in profs:
        missing += [f"profile {pv_.label}: {m}" for m in pv_.missing]
    if not exps:
        missing.append("no benchmark runs: no results table or plots")
    elif not any(e.comparison for e in exps):
        missing.append("no comparison: runs are shown without gains")
    if facts is None:
        missing.append(
            "no facts.json: environment taken from the run records"
            if runs_all
            else "no facts.json: no environment details"
        )
    if not plans and not profs and not builds:
        # a profile or a build is complete without a plan: say so only where one belongs
        missing.append("no plan.json: no recommendations to show")
    for pv in plans:
        if pv.never_applied:
            missing.append(
                f"plan {pv.path.name} was never applied: no journal and no A/B candidate "
                "configuration next to it"
            )
    if profs and len([p for p in profs if p.profile.microarch]) < 2:
        n_sim = len([p for p in profs if simulated_metrics(p.profile)])
        if n_sim < 2 or any(p.profile.microarch for p in profs):
            missing.append(
                "micro-architecture metrics normalized to a baseline need two profiles with "
                "PMU metrics (baseline and tuned), or two valgrind simulations"
            )
    return missing


def _report_title(exps: list[Experiment], profs: list[ProfileView], builds: list[BuildView]) -> str:
    if any(e.campaign is not None and "accelerate" in e.campaign.command for e in exps):
        return "myaccel accelerate report"
    if exps:
        c = exps[0].campaign
        return f"myaccel {c.kind if c else 'runs'} report"
    if profs:
        return "myaccel profile report"
    if builds:
        return "myaccel build report"
    return "myaccel report"
