"""Every server rule's effect measured on its own, and the plan against an expert's
configuration: interleaved `myaccel ab` runs on one sandbox, printed as tables.

Usage:
  .venv/bin/python scripts/rule_ablation.py SANDBOX ablate  [options]
  .venv/bin/python scripts/rule_ablation.py SANDBOX expert  [options]
  .venv/bin/python scripts/rule_ablation.py SANDBOX mysqltuner  [options]

`ablate`: the sandbox is probed (storage measured) and planned; for each applicable
server recommendation (a rule with its `-max` companion counts as one), `myaccel ab` runs
the plan without it (baseline) against the whole plan (candidate) at the concurrency and on
the workload the rule's rationale names (`CELLS`). A rule the plan skips on this machine
can be measured too (`--include server-thread-pool`): then the plan is the baseline and
the plan plus that rule's setting the candidate, which shows whether the skip is right.

`expert`: the plan with storage measured (candidate) against an expert's configuration
(`innodb_io_capacity=2000`, 2 GiB redo, 4 GiB buffer pool, thread pool) and against the
plan made without the measurement (the rotational flag only), on write-only and
read-write (`--workloads`, `--vs expert,flag`).

`mysqltuner`: the plan (candidate) against MySQLTuner's advice (baseline), read from
MySQLTuner run on the sandbox after one `myaccel bench` run of the first workload
(scripts/vs_mysqltuner.py translates it).

Options: --runs N (per arm, default 6), --time S (20), --warmup S (10), --tables N (16),
--table-size N (100000), --threads N (16, for cells without their own), --out DIR,
--include ID[,ID], --only ID[,ID], --skip ID[,ID] (already measured), --record FILE,
--workloads W[,W] (expert, mysqltuner; default wo,rw), --vs expert,flag (expert).

`--record FILE` (with `ablate`) writes each measured cell as a row of
`src/myaccel/rules/data/measured_effects.json` (FILE), replacing a row of the same rule,
cell and machine where it stands; `docs/rules.md` and the plans cite those rows
(`rules/measured.py`). `record --from DIR --record FILE` records an earlier `ablate` run's
results directory (the sandbox must be running: its facts name the machine).

Each `myaccel ab` leaves its results directory (runs, comparison.json, report.md) under
--out; the tables printed at the end are read from those comparison.json files.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from myaccel import artifacts
from myaccel.accelerate.candidate import server_option_lines
from myaccel.bench.compare import CellResult, Comparison
from myaccel.errors import MyaccelError
from myaccel.facts.collect import collect_facts
from myaccel.facts.iomeasure import facts_with_measured_storage
from myaccel.facts.resources import server_resources
from myaccel.model import Facts
from myaccel.rules.engine import Hints, make_plan
from myaccel.rules.measured import MeasuredEffect
from myaccel.rules.model import Plan
from myaccel.server.sandbox import Sandbox

# The cell each rule's rationale names: (workload, threads).
CELLS: dict[str, tuple[str, int]] = {
    "server-buffer-pool-size": ("ro", 16),
    "server-buffer-pool-instances": ("ro", 16),
    "server-redo-capacity": ("wo", 16),
    "server-log-buffer": ("wo", 16),
    "server-io-capacity": ("wo", 16),
    "server-flush-neighbors": ("wo", 16),
    "server-flush-method": ("wo", 16),
    "server-io-threads": ("wo", 16),
    "server-thread-pool": ("rw", 128),
    "server-max-connections": ("rw", 128),
}
# What a rule the plan skips here would set, to measure that skip (--include).
FORCED: dict[str, list[str]] = {
    "server-thread-pool": ["thread_handling = pool-of-threads"],
}
EXPERT = [
    "innodb_io_capacity = 2000",
    "innodb_log_file_size = 2G",
    "innodb_buffer_pool_size = 4G",
    "thread_handling = pool-of-threads",
]


@dataclass
class Arm:
    label: str
    lines: list[str]


def _facts(sb: Sandbox, measure: bool) -> Facts:
    facts = collect_facts(server=sb.connect_params(), server_required=True)
    if measure:
        facts = facts_with_measured_storage(facts, say=lambda m: print(f"# {m}", flush=True))
    return facts


def _plan(facts: Facts, threads: int) -> tuple[Plan, dict[str, str]]:
    plan = make_plan(facts, layers=["server"], hints=Hints(threads=threads))
    lines, applied, _left = server_option_lines(plan, facts)
    return plan, {r.id: line for r, line in zip(applied, lines, strict=True)}


def _groups(by_id: dict[str, str]) -> dict[str, list[str]]:
    """Recommendation ids grouped by rule (``server-io-capacity-max`` goes with
    ``server-io-capacity``)."""
    groups: dict[str, list[str]] = {}
    for rid in by_id:
        owner = next((g for g in groups if rid.startswith(g + "-")), rid)
        groups.setdefault(owner, []).append(rid)
    return groups


# Harness settings both arms share at high concurrency: sysbench prepares ~9 statements
# per table and thread, beyond the server's default max_prepared_stmt_count (16382).
BOTH_ARMS_FROM_64_THREADS = ["max_prepared_stmt_count = 1048576"]


def _write(path: Path, label: str, lines: list[str]) -> Path:
    path.write_text(
        f"# {label} (scripts/rule_ablation.py)\n[mysqld]\n" + "".join(f"{x}\n" for x in lines)
    )
    return path


def _ab(
    sandbox: str,
    base: Arm,
    cand: Arm,
    workload: str,
    threads: int,
    out: Path,
    a: argparse.Namespace,
) -> Comparison:
    out.parent.mkdir(parents=True, exist_ok=True)
    both = BOTH_ARMS_FROM_64_THREADS if threads >= 64 else []
    bcnf = _write(out.parent / f"{out.name}.baseline.cnf", base.label, base.lines + both)
    ccnf = _write(out.parent / f"{out.name}.candidate.cnf", cand.label, cand.lines + both)
    exe = str(Path(sys.executable).with_name("myaccel"))
    cmd = [
        exe, "ab", "--sandbox", sandbox, "--baseline", str(bcnf), "--candidate", str(ccnf),
        *[x for w in workload.split(",") for x in ("-w", w)], "-t", str(threads), "--tables", str(a.tables), "--table-size", str(a.table_size),
        "--runs", str(a.runs), "--time", str(a.time), "--warmup", str(a.warmup), "--out", str(out),
    ]  # fmt: skip
    print("$", " ".join(cmd), flush=True)
    t0 = time.monotonic()
    rc = subprocess.call(cmd)
    print(f"# exit {rc} after {time.monotonic() - t0:.0f} s", flush=True)
    if not (out / "comparison.json").exists():
        sys.exit(f"error: myaccel ab exited {rc} without a comparison (see its output above)")
    return artifacts.load(out / "comparison.json", Comparison)


def _row(label: str, setting: str, c: CellResult) -> str:
    def pct(v: float | None) -> str:
        return "n/a" if v is None else f"{v:+.1f}%"

    ci = f"[{pct(c.ci_low_pct)}, {pct(c.ci_high_pct)}]"
    p = "n/a" if c.p_adjusted is None else f"{c.p_adjusted:.3f}"
    med = lambda v: "n/a" if v is None else f"{v:,.1f}"  # noqa: E731
    return (
        f"| {label} | {setting} | {c.workload} x {c.threads} | {med(c.baseline_tps_median)} | "
        f"{med(c.candidate_tps_median)} | {pct(c.delta_pct)} | {ci} | {p} | {c.verdict} |"
    )


def _machine(facts: Facts) -> str:
    """``KVM guest, 2 vCPU (x86_64), 24 GB, virtio disk vda``: enough to tell machines apart."""
    cpu = facts.cpu
    hv = cpu.hypervisor.value
    guest = (
        "bare metal" if hv in (None, "", "none") else "VM guest" if hv == "guest" else f"{hv} guest"
    )
    mem = (facts.memory.total_bytes.value or 0) / 1e9
    dev = facts.storage.block_device.value or "?"
    return f"{guest}, {cpu.logical_cpus.value} CPUs ({cpu.arch.value}), {mem:.0f} GB, disk {dev}"


def _record_rows(file: Path, rows: list[MeasuredEffect]) -> None:
    """Add rows to the data file; a row of the same rule, cell and machine is replaced where
    it stands, so the file and the tables made from it keep their order."""
    doc = json.loads(file.read_text()) if file.exists() else {"rows": []}
    key = lambda r: (r["rule"], r["workload"], r["threads"], r["machine"], r["flavor"])  # noqa: E731
    new = {key(d): d for d in (r.model_dump(mode="json") for r in rows)}
    count = len(new)
    kept = [new.pop(key(r), r) for r in doc["rows"]]
    doc["rows"] = kept + list(new.values())
    artifacts.save_document(file, doc)  # atomic: whole or not at all
    print(f"# recorded {count} row(s) in {file}", flush=True)


def _effects(
    rule: str, kind: str, setting: str, cmp_: Comparison, facts: Facts, a: argparse.Namespace
) -> list[MeasuredEffect]:
    srv = facts.server
    assert srv is not None
    flavor = str(srv.flavor.value)
    return [
        MeasuredEffect(
            rule=rule,
            comparison="plan-vs-plus" if kind == "plus" else "without-vs-with",
            setting=setting,
            machine=_machine(facts),
            cpus=int(server_resources(facts).usable_cpus.value or 0),
            flavor=flavor,
            server=f"{'MariaDB' if flavor == 'mariadb' else 'MySQL'} {srv.version.value}",
            workload=c.workload,
            threads=c.threads,
            dataset=f"{a.tables} x {a.table_size:,} rows",
            runs_per_arm=min(c.n_baseline, c.n_candidate),
            delta_pct=round(c.delta_pct or 0.0, 2),
            ci_low_pct=round(c.ci_low_pct or 0.0, 2),
            ci_high_pct=round(c.ci_high_pct or 0.0, 2),
            verdict=c.verdict,  # type: ignore[arg-type]
            measured_on=cmp_.created_at[:10],
            command=f"scripts/rule_ablation.py SANDBOX ablate --only {rule}"
            + (f" --include {rule}" if kind == "plus" else "")
            + f" --runs {min(c.n_baseline, c.n_candidate)} --record FILE",
        )
        for c in cmp_.cells
        if c.delta_pct is not None
    ]


def _cnf_lines(path: Path) -> list[str]:
    return [x for x in path.read_text().splitlines() if x and not x.startswith(("#", "["))]


def record(a: argparse.Namespace) -> None:
    """Record an earlier ablate run: each RULE/comparison.json with its RULE.*.cnf."""
    sb = Sandbox.load(a.sandbox)
    facts = _facts(sb, measure=False)
    rows: list[MeasuredEffect] = []
    for cmp_file in sorted(a.source.glob("*/comparison.json")):
        rule = cmp_file.parent.name
        base, cand = (
            _cnf_lines(a.source / f"{rule}.{arm}.cnf") for arm in ("baseline", "candidate")
        )
        extra = [x for x in cand if x not in base]
        kind = "plus" if rule in FORCED and extra == FORCED[rule] else "without"
        setting = "; ".join(extra) + (" (skipped by the plan)" if kind == "plus" else "")
        cmp_ = artifacts.load(cmp_file, Comparison)
        rows += _effects(rule, kind, setting, cmp_, facts, a)
    _record_rows(a.record, rows)


def ablate(a: argparse.Namespace) -> None:
    sb = Sandbox.load(a.sandbox)
    facts = _facts(sb, measure=True)
    include = {x for x in (a.include or "").split(",") if x}
    only = {x for x in (a.only or "").split(",") if x}
    skip = {x for x in (a.skip or "").split(",") if x}
    rows: list[str] = []
    for threads in sorted({t for _, t in CELLS.values()} | {a.threads}):
        plan, by_id = _plan(facts, threads)
        groups = _groups(by_id)
        todo = {
            g: ids for g, ids in groups.items() if CELLS.get(g, ("rw", a.threads))[1] == threads
        }
        todo.update(
            {g: [] for g in include if g not in groups and CELLS.get(g, ("rw", 0))[1] == threads}
        )
        for rule, ids in todo.items():
            if (only and rule not in only) or rule in skip:
                continue
            workload, t = CELLS.get(rule, ("rw", a.threads))
            full = list(by_id.values())
            if ids:
                without = [line for rid, line in by_id.items() if rid not in ids]
                base, cand = Arm(f"plan without {rule}", without), Arm("plan", full)
                setting = "; ".join(by_id[i] for i in ids)
            else:
                skipped = next((s.reason for s in plan.skipped if s.id == rule), "skipped")
                print(f"# {rule} is skipped by the plan here ({skipped}): measuring the skip")
                base, cand = Arm("plan", full), Arm(f"plan with {rule}", full + FORCED[rule])
                setting = "; ".join(FORCED[rule]) + " (skipped by the plan)"
            cmp_ = _ab(a.sandbox, base, cand, workload, t, a.out / rule, a)
            rows += [_row(rule, setting, c) for c in cmp_.cells]
            if a.record:
                kind = "without" if ids else "plus"
                _record_rows(a.record, _effects(rule, kind, setting, cmp_, facts, a))
    print()
    print(
        "| rule | setting | cell | without (TPS) | with (TPS) | with vs without | 95% CI | p (Holm) | verdict |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


def _table(new: Arm, rows: list[str]) -> None:
    print()
    print("new plan: " + "; ".join(new.lines))
    print(
        "| comparison | baseline settings | cell | baseline (TPS) | plan (TPS) | plan vs baseline | 95% CI | p (Holm) | verdict |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


def _versus(a: argparse.Namespace, new: Arm, others: list[tuple[str, str, Arm]]) -> None:
    """The plan (candidate) against each other arm (baseline), then one table."""
    rows: list[str] = []
    for tag, label, other in others:
        cmp_ = _ab(a.sandbox, other, new, a.workloads, a.threads, a.out / f"vs-{tag}", a)
        setting = "; ".join(other.lines) or "(defaults)"
        rows += [_row(f"plan vs {label}", setting, c) for c in cmp_.cells]
    _table(new, rows)


def expert(a: argparse.Namespace) -> None:
    sb = Sandbox.load(a.sandbox)
    measured_plan = _plan(_facts(sb, measure=True), a.threads)[1]
    new = Arm("plan (storage measured)", list(measured_plan.values()))
    others: list[tuple[str, str, Arm]] = []
    if "expert" in a.vs:
        others.append(("expert", "expert", Arm("expert", EXPERT)))
    if "flag" in a.vs:
        flag_plan = _plan(_facts(sb, measure=False), a.threads)[1]
        others.append(
            (
                "flag-plan",
                "plan from the rotational flag",
                Arm("plan (rotational flag)", list(flag_plan.values())),
            )
        )
    _versus(a, new, others)


def mysqltuner(a: argparse.Namespace) -> None:
    """MySQLTuner reads status counters, so a `myaccel bench` run of the first workload
    comes first (on the base configuration, with the explicit chunk size MySQLTuner 1.9.9
    needs on MariaDB 10.8+: scripts/vs_mysqltuner.py); then its advice is the baseline arm."""
    from vs_mysqltuner import prepare_server, tuner_advice

    sb = Sandbox.load(a.sandbox)
    new = Arm(
        "plan (storage measured)", list(_plan(_facts(sb, measure=True), a.threads)[1].values())
    )
    exe = str(Path(sys.executable).with_name("myaccel"))
    warm = [
        exe, "bench", "--sandbox", a.sandbox, "-w", a.workloads.split(",")[0], "-t", str(a.threads),
        "--tables", str(a.tables), "--table-size", str(a.table_size), "--runs", "1",
        "--time", str(a.time), "--warmup", "0", "--out", str(a.out / "warm"),
        "--ps-mode", "disable",  # counters only; 128 threads exceed the default statement limit
    ]  # fmt: skip
    prepare_server(sb)
    print("$", " ".join(warm), flush=True)
    if subprocess.call(warm) != 0:
        sys.exit("error: the warm-up `myaccel bench` failed (see its output above)")
    adv = tuner_advice(sb, save=a.out / "mysqltuner.out")
    sb.restart(reset=True)
    tuner = Arm("MySQLTuner", [f"{k} = {v}" for k, v in adv.items()])
    _versus(a, new, [("mysqltuner", "MySQLTuner", tuner)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sandbox")
    ap.add_argument("mode", choices=["ablate", "expert", "mysqltuner", "record"])
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--time", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--tables", type=int, default=16)
    ap.add_argument("--table-size", type=int, default=100_000)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--out", type=Path, default=Path("ablation-results"))
    ap.add_argument("--include", default="")
    ap.add_argument("--only", default="")
    ap.add_argument("--skip", default="")
    ap.add_argument("--record", type=Path)
    ap.add_argument("--workloads", default="wo,rw")
    ap.add_argument("--vs", default="expert,flag")
    ap.add_argument("--from", dest="source", type=Path)
    a = ap.parse_args()
    if a.mode == "record":
        if a.source is None or a.record is None:
            sys.exit("error: record needs --from DIR and --record FILE")
    else:
        a.vs = set(filter(None, a.vs.split(",")))
        if not a.vs or a.vs - {"expert", "flag"}:
            sys.exit("error: --vs takes expert, flag or both (hint: --vs expert,flag)")
        a.out = a.out.resolve()
        if a.out.exists() and any(a.out.iterdir()):
            sys.exit(f"error: {a.out} is not empty (hint: pass a new --out DIR)")
    try:
        sb = Sandbox.load(a.sandbox)
    except MyaccelError as e:
        sys.exit(f"error: {e} (hint: `myaccel sandbox list` shows the sandboxes of $MYACCEL_HOME)")
    if not sb.is_running():
        sys.exit(
            f"error: sandbox {a.sandbox!r} is not running; it is probed first"
            f" (hint: `myaccel sandbox start {a.sandbox}`)"
        )
    {"ablate": ablate, "expert": expert, "mysqltuner": mysqltuner, "record": record}[a.mode](a)


if __name__ == "__main__":
    main()
