"""`myaccel tune` for an hour on a sandbox with a write-heavy sysbench workload, then its
figures: the trials, the rules' plan against the best configuration found (the final
interleaved A/B with its 95% CI), and the ablation of the winner.

Usage:
  .venv/bin/python scripts/tune_bench.py SANDBOX [options]

Options: --minutes M (60), --trials N (none: the time budget decides), --workload W
(wo = oltp_write_only; any `myaccel tune -w` value), --threads N (16), --time S (per run,
10), --warmup S (3), --tables N (8), --table-size N (100000), --knob NAME (repeatable:
search only these), --durability strict|relaxed (strict), --out DIR (a new directory, or
the study to continue with --resume), --resume, --create (make the sandbox if missing).

`tune` runs as a subprocess (its progress goes to the terminal); the tables printed at the
end are read from OUT/tune.json. Not part of `make test`: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from myaccel.artifacts import load
from myaccel.tune.result import TuneResult


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sandbox")
    p.add_argument("--minutes", type=float, default=60.0)
    p.add_argument("--trials", type=int)
    p.add_argument("--workload", default="wo")
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--time", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--tables", type=int, default=8)
    p.add_argument("--table-size", type=int, default=100_000)
    p.add_argument("--knob", action="append", default=[])
    p.add_argument("--durability", choices=["strict", "relaxed"], default="strict")
    p.add_argument("--out", type=Path)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--create", action="store_true")
    return p.parse_args(argv)


def tune_argv(a: argparse.Namespace, out: Path) -> list[str]:
    argv = [sys.executable, "-m", "myaccel", "tune", "--sandbox", a.sandbox, "--out", str(out)]
    argv += ["-w", a.workload, "-t", str(a.threads), "--time", str(a.time)]
    argv += ["--warmup", str(a.warmup), "--tables", str(a.tables)]
    argv += ["--table-size", str(a.table_size), "--durability", a.durability]
    argv += ["--minutes", str(a.minutes)]
    if a.trials:
        argv += ["--trials", str(a.trials)]
    for k in a.knob:
        argv += ["--knob", k]
    if a.resume:
        argv.append("--resume")
    if a.create:
        argv.append("--create")
    return argv


def pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:+.1f}%"


def print_figures(r: TuneResult, wall_s: float) -> None:
    states = Counter((t.stage, t.state.lower()) for t in r.trials)
    print(f"\n## tune on {r.target}: {', '.join(r.workload)}, durability {r.durability}")
    print(
        f"wall time {wall_s / 60:.1f} min; {len(r.trials)} trials; searched: {', '.join(r.searched)}"
    )
    print("\n| stage | state | trials |\n|---|---|---:|")
    for (stage, state), count in sorted(states.items()):
        print(f"| {stage} | {state} | {count} |")
    if r.noise is not None:
        nf = r.noise
        print(
            f"\nnoise floor (A/A): apparent {pct(nf.aa_delta_pct)}, CV {nf.cv_pct:.1f}%, "
            f"screen floor {nf.floor_pct:.1f}%"
        )
    print("\n## the rules' plan vs the best found (final interleaved A/B)\n")
    if r.final is None:
        print("no final A/B: no screened configuration beat the plan by more than the noise floor")
    else:
        f = r.final
        print("| runs/arm | change | 95% CI | MDE | verdicts |\n|---:|---:|---|---:|---|")
        mde = "n/a" if f.mde_pct is None else f"{f.mde_pct:.1f}%"
        verdicts = ", ".join(f"{k}: {v}" for k, v in f.verdicts.items())
        print(
            f"| {f.runs_per_arm} | {pct(f.delta_pct)} | {pct(f.ci_low_pct)} .. "
            f"{pct(f.ci_high_pct)} | {mde} | {verdicts} |"
        )
    print(f"\nverdict: {r.verdict}")
    if r.winner:
        print("\n## ablation: the best found without one change at a time\n")
        print("| knob | plan | best | without it | contribution |\n|---|---|---|---:|---:|")
        abl = {a.knob: a for a in r.ablation}
        for k, v in sorted(r.winner.items()):
            a = abl.get(k)
            without = pct(a.delta_without_pct) if a else "not measured"
            contrib = pct(a.contribution_pct) if a else ""
            print(f"| {k} | {r.winner_plan_values.get(k, '')} | {v} | {without} | {contrib} |")
    print(f"\nstudy: {r.study}\nplan: {r.plan}")


def main(argv: list[str]) -> int:
    a = parse_args(argv)
    out = a.out or Path(f"tune-bench-{time.strftime('%Y%m%d-%H%M%S')}")
    t0 = time.monotonic()
    # tune's own summary goes to stderr with its progress: stdout holds the figures only
    rc = subprocess.run(tune_argv(a, out), check=False, stdout=sys.stderr).returncode
    if rc != 0:
        print(f"myaccel tune exited {rc}; continue with --out {out} --resume", file=sys.stderr)
        return rc
    print_figures(load(out / "tune.json", TuneResult), time.monotonic() - t0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
