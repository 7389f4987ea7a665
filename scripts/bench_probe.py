"""Print how long `myaccel probe` takes here (host facts only, no binary analysis), and
how long `myaccel --help` and every `myaccel CMD --help` take.

Usage: .venv/bin/python scripts/bench_probe.py [RUNS]
Figures, not asserts: the targets are < 1 s per probe, < 0.3 s for `myaccel --help` and
< 0.5 s for each command's --help (median of 5 runs) on the 2-core development VM.
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


def help_seconds(argv: list[str], runs: int = 5) -> float:
    """Median wall time of ``myaccel ARGV --help`` (interpreter start included)."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([exe, *argv, "--help"], check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def command_paths() -> list[list[str]]:
    """Every command: each of the command table's, and each subcommand of a group
    (``sandbox start``, ``sandbox snapshot save``)."""
    import click

    from myaccel.cli.main import cli

    ctx = click.Context(cli)
    paths: list[list[str]] = []

    def walk(group: click.Group, prefix: list[str]) -> None:
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            paths.append([*prefix, name])
            if isinstance(cmd, click.Group):
                walk(cmd, [*prefix, name])

    walk(cli, [])
    return paths


print("--help, median of 5 runs (targets: myaccel < 0.3 s, each command < 0.5 s):")
for argv in [[], *command_paths()]:
    label = " ".join(["myaccel", *argv, "--help"])
    limit = 0.5 if argv else 0.3
    s = help_seconds(argv)
    print(f"  {label:40s} {s:.3f} s{'' if s < limit else '  (over the target)'}")
