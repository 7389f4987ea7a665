"""Print how long `myaccel probe` takes here (host facts only, no binary analysis).

Usage: .venv/bin/python scripts/bench_probe.py [RUNS]
A figure, not an assert: the target is < 1 s per probe on the 2-core development VM.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
exe = str(Path(sys.executable).with_name("myaccel"))
in_process: list[float] = []
cli: list[float] = []

from myaccel.facts.collect import collect_facts  # noqa: E402

for _ in range(runs):
    t0 = time.perf_counter()
    collect_facts("/", analyze_server_binary=False)
    in_process.append(time.perf_counter() - t0)
for _ in range(runs):
    t0 = time.perf_counter()
    subprocess.run([exe, "probe", "--no-server", "--json"], check=True, capture_output=True)
    cli.append(time.perf_counter() - t0)
print(
    f"probe (host facts, in process): median {statistics.median(in_process):.3f} s over {runs} runs (max {max(in_process):.3f} s)"
)
print(
    f"myaccel probe --no-server (whole CLI, incl. interpreter start): median {statistics.median(cli):.3f} s (max {max(cli):.3f} s)"
)
print("target: < 1 s")
