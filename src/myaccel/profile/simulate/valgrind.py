"""The valgrind tools themselves: version, the argv that runs the server under a tool,
``callgrind_control`` (the counting window) and the annotate tools (the top functions)."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from myaccel import proc
from myaccel.errors import ProcessFailed
from myaccel.profile.simulate.models import FunctionCost, Tool
from myaccel.profile.simulate.parse import AnnotatedFunction, parse_annotate

# One client command in MariaDB and MySQL: sql_parse.cc do_command(THD*, ...).
COLLECT_FUNCTION = "do_command*"
# Functions kept in the top tables.
TOP_N = 25

log = logging.getLogger(__name__)


def valgrind_version() -> str:
    """``valgrind-3.19.0`` -> ``3.19.0``."""
    done = proc.run([proc.require("valgrind"), "--version"], timeout_s=30.0)
    text = (done.stdout or done.stderr).strip()
    m = re.search(r"(\d+\.\d+(?:\.\d+)?)", text)
    if not done.ok or not m:
        raise ProcessFailed(
            f"cannot read the valgrind version ({text[:80]!r})",
            hint="reinstall valgrind: apt-get install valgrind",
        )
    return m.group(1)


def valgrind_argv(
    tool: Tool,
    out_file: Path,
    log_file: Path,
    *,
    cache_sim: bool = True,
    branch_sim: bool = True,
    collect_function: str = COLLECT_FUNCTION,
    valgrind: str = "valgrind",
    extra: Sequence[str] = (),
) -> list[str]:
    """The argv prefix that runs the server under ``tool``.

    callgrind starts with instrumentation off (``callgrind_control -i on`` switches it on
    for the window) and collects only inside ``collect_function``. ``extra`` options come
    last, e.g. ``--LL=8388608,16,64`` to model another last-level cache than this CPU's."""
    yes_no = {True: "yes", False: "no"}
    argv = [
        valgrind,
        f"--tool={tool}",
        f"--log-file={log_file}",
        f"--cache-sim={yes_no[cache_sim]}",
        f"--branch-sim={yes_no[branch_sim]}",
    ]
    if tool == "cachegrind":
        argv.append(f"--cachegrind-out-file={out_file}")
    else:
        argv += [
            f"--callgrind-out-file={out_file}",
            "--instr-atstart=no",
            "--collect-atstart=no",
            f"--toggle-collect={collect_function}",
            "--separate-threads=no",
            "--dump-instr=no",
        ]
    return argv + list(extra)


def callgrind_control(pid: int, *args: str) -> None:
    """``callgrind_control ARGS PID`` (through vgdb); raise when it did not reach it."""
    done = proc.run([proc.require("callgrind_control"), *args, str(pid)], timeout_s=120.0)
    text = (done.stdout + done.stderr).strip()
    log.debug("callgrind_control %s %s: %s", " ".join(args), pid, text)
    # it exits 0 even when no callgrind run has that pid ("Error: Callgrind task ...")
    failed = any(ln.startswith("Error") for ln in text.splitlines())
    if not done.ok or failed or "OK." not in text:
        raise ProcessFailed(
            f"callgrind_control {' '.join(args)} failed for pid {pid}: {text[:200] or 'no output'}",
            hint="callgrind_control talks to valgrind through vgdb, which needs ptrace "
            "(kernel.yama.ptrace_scope <= 1 and no seccomp filter blocking it)",
        )


def _run_annotate(argv: Sequence[str]) -> str:
    done = proc.run(argv, timeout_s=300.0)
    if not done.ok:
        raise ProcessFailed(
            done.failure(Path(argv[0]).name),
            hint="check the valgrind output file it was given (complete? same tool?)",
        )
    return done.stdout


def function_table(
    tool: Tool, out_file: Path, total_ir: int, *, top_n: int = TOP_N
) -> tuple[list[FunctionCost], list[FunctionCost]]:
    """Top functions by self Ir (all events), and for callgrind by inclusive Ir."""
    common = ["--auto=no", "--show-percs=no", "--sort=Ir"]
    if tool == "cachegrind":
        text = _run_annotate([proc.require("cg_annotate"), *common, "--threshold=0", str(out_file)])
        _, _, rows = parse_annotate(text)
        return _costs(rows, total_ir, top_n), []
    annotate = proc.require("callgrind_annotate")
    self_text = _run_annotate([annotate, *common, "--threshold=100", str(out_file)])
    # Ir only: with every event shown, callgrind_annotate 3.19 cuts the inclusive table
    # short (its inclusive PROGRAM TOTALS overflow under --toggle-collect).
    incl_text = _run_annotate(
        [annotate, *common, "--show=Ir", "--threshold=100", "--inclusive=yes", str(out_file)]
    )
    _, _, self_rows = parse_annotate(self_text)
    _, _, incl_rows = parse_annotate(incl_text)
    incl_by_key = {(r.location, r.function): r.counts.get("Ir", 0) for r in incl_rows}
    top_self = _costs(self_rows, total_ir, top_n, incl_by_key)
    self_by_key = {(r.location, r.function): r for r in self_rows}
    top_incl: list[FunctionCost] = []
    for r in incl_rows[:top_n]:
        s = self_by_key.get((r.location, r.function))
        ir_incl = r.counts.get("Ir", 0)
        ir_self = s.counts.get("Ir", 0) if s else 0
        top_incl.append(
            FunctionCost(
                function=r.function,
                location=r.location,
                ir_self=ir_self,
                self_pct=_pct(ir_self, total_ir),
                ir_inclusive=ir_incl,
                inclusive_pct=_pct(ir_incl, total_ir),
                events=dict(s.counts) if s else {},
            )
        )
    return top_self, top_incl


def _pct(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 3) if whole else 0.0


def _costs(
    rows: Sequence[AnnotatedFunction],
    total_ir: int,
    top_n: int,
    inclusive: Mapping[tuple[str | None, str], int] | None = None,
) -> list[FunctionCost]:
    ordered = sorted(rows, key=lambda r: r.counts.get("Ir", 0), reverse=True)[:top_n]
    out = []
    for r in ordered:
        incl = inclusive.get((r.location, r.function)) if inclusive is not None else None
        out.append(
            FunctionCost(
                function=r.function,
                location=r.location,
                ir_self=r.counts.get("Ir", 0),
                self_pct=_pct(r.counts.get("Ir", 0), total_ir),
                ir_inclusive=incl,
                inclusive_pct=_pct(incl, total_ir) if incl is not None else None,
                events=dict(r.counts),
            )
        )
    return out
