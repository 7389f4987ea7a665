#!/usr/bin/env python3
"""Time ``myaccel.facts.binary.collect_binary`` on real server binaries and print figures.

Usage: .venv/bin/python scripts/bench_binary.py [--runs N] [BINARY ...]

Without arguments it times Debian's arm64 mariadbd (cached by
tests/integration/test_binary_arm64_mariadbd.py under /var/cache/myaccel-tests or
.pytest_cache/myaccel-tests) and the host's /usr/sbin/mariadbd. A benchmark prints; it
never fails on a duration.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from myaccel.errors import MyaccelError
from myaccel.facts.binary import collect_binary

REPO = Path(__file__).resolve().parents[1]
ARM64_CANDIDATES = [
    Path(d) / "mariadb-server-core-arm64" / "usr" / "sbin" / "mariadbd"
    for d in ("/var/cache/myaccel-tests", REPO / ".pytest_cache" / "myaccel-tests")
]
HOST_MARIADBD = Path("/usr/sbin/mariadbd")


def default_binaries() -> list[Path]:
    found = [p for p in ARM64_CANDIDATES if p.is_file()][:1]
    if not found:
        print(
            "skip: Debian arm64 mariadbd not cached; fetch it with "
            ".venv/bin/pytest tests/integration/test_binary_arm64_mariadbd.py",
            file=sys.stderr,
        )
    if HOST_MARIADBD.is_file():
        found.append(HOST_MARIADBD)
    return found


def bench(path: Path, runs: int) -> int:
    durations: list[float] = []
    facts = None
    for _ in range(runs):
        t0 = time.perf_counter()
        try:
            facts = collect_binary(path)
        except MyaccelError as err:
            print(f"error: {path}: {err.message}", file=sys.stderr)
            return 1
        durations.append(time.perf_counter() - t0)
    assert facts is not None
    a = facts.atomics.value
    size_mb = (facts.size_bytes.value or 0) / 1e6
    print(
        f"binary {path}: {size_mb:.1f} MB {facts.machine.value} "
        f"atomics={a.klass if a else 'unknown'} "
        f"instructions={a.instructions_scanned if a else 0} "
        f"runs={runs} min_s={min(durations):.3f} median_s={statistics.median(durations):.3f} "
        f"max_s={max(durations):.3f}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("binaries", nargs="*", type=Path)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    paths = args.binaries or default_binaries()
    if not paths:
        print("no binaries to time", file=sys.stderr)
        return 1
    return max(bench(p, max(1, args.runs)) for p in paths)


if __name__ == "__main__":
    sys.exit(main())
