"""The noise guard measured: A/A campaigns (the same configuration in both arms) with
`myaccel ab`, counting how many said "improved" or "regressed". The statistics promise a
false-alarm rate of at most alpha = 5% per campaign (Holm across its cells): at most 1 of 20.

Usage:
  .venv/bin/python scripts/aa_noise.py SANDBOX [options]

Options: --campaigns N (20), --profile NAME (quick), --runs N (per arm, the profile's),
--time S, --tables N, --table-size N, --workload W (repeatable), --out DIR.

Each campaign is `myaccel ab --sandbox SANDBOX` with both arms on the sandbox's own
configuration (no --baseline, no --candidate); its comparison.json gives the verdicts.
Not part of `make test`: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sandbox")
    p.add_argument("--campaigns", type=int, default=20)
    p.add_argument("--profile", default="quick")
    p.add_argument("--runs", type=int)
    p.add_argument("--time", type=int)
    p.add_argument("--warmup", type=int)
    p.add_argument("--tables", type=int)
    p.add_argument("--table-size", type=int)
    p.add_argument("--threads")
    p.add_argument("--workload", action="append", default=[])
    p.add_argument("--out", type=Path)
    return p.parse_args(argv)


def ab_argv(a: argparse.Namespace, out: Path) -> list[str]:
    argv = [sys.executable, "-m", "myaccel", "ab", "--sandbox", a.sandbox]
    argv += ["--profile", a.profile, "--out", str(out)]
    for opt, value in (
        ("--runs", a.runs),
        ("--time", a.time),
        ("--warmup", a.warmup),
        ("--tables", a.tables),
        ("--table-size", a.table_size),
        ("--threads", a.threads),
    ):
        if value is not None:
            argv += [opt, str(value)]
    for w in a.workload:
        argv += ["-w", w]
    return argv


def campaign_verdict(cmp: dict[str, object]) -> tuple[str, str]:
    """(campaign verdict, the cells' line): "improved"/"regressed" when any cell says so."""
    cells = cmp.get("cells")
    assert isinstance(cells, list)
    verdicts = [str(c["verdict"]) for c in cells]
    line = ", ".join(
        f"{c['workload']}@{c['threads']} {c['verdict']} ({c['delta_pct']:+.1f}%)"
        if c.get("delta_pct") is not None
        else f"{c['workload']}@{c['threads']} {c['verdict']}"
        for c in cells
    )
    for v in ("improved", "regressed"):
        if v in verdicts:
            return v, line
    return "no alarm", line


def main(argv: list[str]) -> int:
    a = parse_args(argv)
    root = a.out or Path(f"aa-noise-{time.strftime('%Y%m%d-%H%M%S')}")
    root.mkdir(parents=True, exist_ok=True)
    rows: list[tuple[int, str, str]] = []
    t0 = time.monotonic()
    for i in range(1, a.campaigns + 1):
        out = root / f"aa-{i:02d}"
        r = subprocess.run(ab_argv(a, out), check=False, stdout=subprocess.DEVNULL)
        if r.returncode != 0:
            rows.append((i, "failed", f"myaccel ab exited {r.returncode} (see {out})"))
            continue
        verdict, line = campaign_verdict(json.loads((out / "comparison.json").read_text()))
        rows.append((i, verdict, line))
        print(f"A/A {i}/{a.campaigns}: {verdict}: {line}", file=sys.stderr)
    done = [r for r in rows if r[1] != "failed"]
    improved = sum(1 for r in done if r[1] == "improved")
    regressed = sum(1 for r in done if r[1] == "regressed")
    print(f"\n## A/A campaigns on {a.sandbox} (profile {a.profile})\n")
    print("| # | campaign | cells |\n|---:|---|---|")
    for i, verdict, line in rows:
        print(f"| {i} | {verdict} | {line} |")
    print(
        f"\n{len(done)} campaigns: {improved} said improved, {regressed} said regressed "
        f"({improved + regressed} false alarms, {100 * (improved + regressed) / max(1, len(done)):.0f}%; "
        f"the guard allows at most 5%); {len(rows) - len(done)} failed; "
        f"{(time.monotonic() - t0) / 60:.1f} min"
    )
    return 0 if len(done) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
