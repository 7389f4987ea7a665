"""Deterministic cost of a build: instructions executed (callgrind ``Ir``) per operation on
the bounded training workload. Unlike wall time, Ir does not move with a noisy neighbour,
so plain vs optimized builds compare exactly on a 2-core VM (single-threaded driver: no
spin-loop iterations that depend on scheduling).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from myaccel import proc
from myaccel.builder.errors import BuildFailed
from myaccel.builder.runner import run_streamed
from myaccel.builder.train import FixtureWorkload

_TOTALS_RE = re.compile(r"^(?:summary|totals):\s+([\d ]+)$", re.MULTILINE)
_EVENTS_RE = re.compile(r"^events:\s+(.+)$", re.MULTILINE)


@dataclass(frozen=True)
class IrResult:
    binary: str
    ir_total: int
    ops: int
    # callgrind --branch-sim=yes: conditional/indirect branches and simulated mispredicts
    events: dict[str, int] | None = None

    @property
    def ir_per_op(self) -> float:
        return self.ir_total / self.ops if self.ops else float("nan")

    def to_dict(self) -> dict[str, object]:
        ev = self.events or {}
        mis = ev.get("Bcm", 0) + ev.get("Bim", 0)
        return {
            "binary": self.binary,
            "ir_total": self.ir_total,
            "ops": self.ops,
            "ir_per_op": round(self.ir_per_op, 2),
            "events": dict(ev),
            "mispredicts_per_op": round(mis / self.ops, 3) if ev and self.ops else None,
        }


def parse_callgrind_events(text: str) -> dict[str, int]:
    """Event totals of a callgrind output file (``events:`` names, ``summary:`` counts)."""
    m = _TOTALS_RE.search(text)
    if not m:
        raise BuildFailed(
            "callgrind output has no summary/totals line",
            hint="valgrind may have been interrupted; rerun the measure stage (--resume)",
        )
    counts = [int(x) for x in m.group(1).split()]
    e = _EVENTS_RE.search(text)
    names = e.group(1).split() if e else ["Ir"]
    return dict(zip(names, counts, strict=False))


def parse_callgrind_total(text: str) -> int:
    return parse_callgrind_events(text).get("Ir", 0)


def callgrind_ir(binary: Path, workload: FixtureWorkload, work: Path, log: IO[str]) -> IrResult:
    valgrind = proc.which("valgrind")
    if valgrind is None:
        raise BuildFailed("valgrind is not installed", hint="apt-get install valgrind")
    work.mkdir(parents=True, exist_ok=True)
    tag = hashlib.sha256(str(binary).encode()).hexdigest()[:12]
    out = work / f"callgrind.{tag}.out"
    run_streamed(
        [
            valgrind,
            "--tool=callgrind",
            "--branch-sim=yes",
            f"--callgrind-out-file={out}",
            *workload.argv(binary),
        ],
        log,
        cwd=work,
        env=None,
        what="callgrind",
        timeout_s=1800,
    )
    events = parse_callgrind_events(out.read_text(errors="replace"))
    return IrResult(str(binary), events.get("Ir", 0), workload.ops, events)
