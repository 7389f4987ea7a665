"""BOLT: post-link block and function layout from a profile of the training workload.

Needs Debian's ``bolt-N`` (``/usr/lib/llvm-N/bin/llvm-bolt`` and ``perf2bolt``), a binary
linked with ``-Wl,--emit-relocs`` and a perf profile. These VMs have no PMU and no LBR, so
the profile is sampled with ``perf record -e cpu-clock`` and converted in non-LBR mode
(``perf2bolt -nl``); with LBR hardware ``-j any,u`` branch stacks would give BOLT more.
"""

from __future__ import annotations

import glob
from dataclasses import dataclass
from pathlib import Path

from myaccel import proc

BOLT_MARKER_SECTIONS = (".note.bolt_info", ".bolt.org.text")


@dataclass(frozen=True)
class BoltTools:
    llvm_bolt: str
    perf2bolt: str
    perf: str
    version: str


def find_bolt() -> tuple[BoltTools | None, str]:
    """The BOLT tools, or None with the reason they cannot be used."""
    cands: list[tuple[str, str]] = []
    lb, p2b = proc.which("llvm-bolt"), proc.which("perf2bolt")
    if lb and p2b:
        cands.append((lb, p2b))
    for d in sorted(glob.glob("/usr/lib/llvm-*/bin"), reverse=True):
        b, p = Path(d) / "llvm-bolt", Path(d) / "perf2bolt"
        if b.is_file() and p.is_file():
            cands.append((str(b), str(p)))
    if not cands:
        return None, "llvm-bolt is not installed (Debian: apt-get install bolt-16)"
    perf = proc.which("perf")
    if perf is None:
        return None, "perf is not installed (apt-get install linux-perf): BOLT needs a profile"
    lb, p2b = cands[0]
    ver = proc.run([lb, "--version"], timeout_s=30)
    line = next((ln.strip() for ln in ver.stdout.splitlines() if "version" in ln.lower()), "")
    return BoltTools(lb, p2b, perf, line or "?"), ""


def bolt_args(binary: Path, fdata: Path, output: Path) -> list[str]:
    return [
        str(binary),
        "-o",
        str(output),
        f"-data={fdata}",
        "-reorder-blocks=ext-tsp",
        "-reorder-functions=hfsort",
        "-split-functions",
        "-split-all-cold",
        "-dyno-stats",
    ]


def has_bolt_marker(binary: Path) -> tuple[bool, str]:
    from elftools.elf.elffile import ELFFile

    try:
        with binary.open("rb") as fh:
            names = [s.name for s in ELFFile(fh).iter_sections()]
    except Exception as exc:  # unreadable ELF: report, never crash
        return False, f"sections not readable: {type(exc).__name__}"
    found = [n for n in names if n in BOLT_MARKER_SECTIONS or n.startswith(".bolt")]
    if found:
        return True, f"sections {', '.join(found[:3])}"
    return False, "no .note.bolt_info / .bolt.org.* sections"
