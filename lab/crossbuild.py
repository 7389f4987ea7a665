"""myaccel's own aarch64 build path, run on the host for the aarch64 lab: `myaccel build
--cross aarch64` of the repository's fixture project (tests/fixtures/buildproj: `kvlabd`, a
small C++ server with atomics), once with inline LSE for neoverse-n1 (`--opt lse`) and once
with the default outline atomics (`-moutline-atomics`: LSE chosen at run time). The guests
then run what the build produced on a CPU model with LSE and on one without.

A MariaDB tree is not built here: the cross build of one took 985 s of both CPUs of this
machine (docs/building.md) and needs the arm64 `-dev` packages installed on the host."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError
from lab.timing import Timings

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "buildproj"
TOOLS = {"cmake": "cmake", "aarch64-linux-gnu-g++": "g++-aarch64-linux-gnu"}
# label -> `myaccel build` options; the atomics class verify-build must find
BUILDS = {
    "lse": (["--opt", "lse", "--target-cpu", "neoverse-n1"], "inline-lse"),
    "outline": ([], "outline"),
}


@dataclass(frozen=True)
class CrossBuild:
    label: str
    binary: Path
    manifest: Path
    atomics: str  # the class verify-build expects


def missing_reason() -> str | None:
    for tool, package in TOOLS.items():
        if shutil.which(tool) is None:
            return f"lab: {tool} is missing (apt-get install {package})"
    return None


def cross_build(out: Path, label: str, timings: Timings) -> CrossBuild:
    """`myaccel build --cross aarch64` of the fixture into `out/label` with this checkout's
    myaccel (its src/ first on the path, as the wheel the guests get)."""
    options, atomics = BUILDS[label]
    target = out / label
    argv = [
        sys.executable, "-m", "myaccel", "build",
        "--source", str(FIXTURE),
        "--out", str(target),
        "--cross", "aarch64",
        "--jobs", "2",
        *options,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    with timings.step(f"myaccel build --cross aarch64 ({label}, host)"):
        r = subprocess.run(argv, check=False, capture_output=True, text=True, env=env, timeout=900)
    if r.returncode != 0:
        last = (r.stderr.strip() or r.stdout.strip()).splitlines()[-1:]
        raise LabError(f"lab: myaccel build --cross aarch64 ({label}) failed: {' '.join(last)}")
    return CrossBuild(label, target / "install/bin/kvlabd", target / "manifest.json", atomics)
