"""``perf record``'s argv and what its failures mean, and the DSO of each frame from
``perf script`` put back on the folded stacks."""

from __future__ import annotations

import re
from pathlib import Path

from myaccel.errors import MyaccelError, ProcessFailed, UsageError
from myaccel.profile import folded as folded_mod
from myaccel.profile.perfstat import PerfPermissionDenied

CALL_GRAPHS = ("fp", "dwarf")
# perf script fields: without ``period`` inferno counts samples (not nanoseconds of
# cpu-clock or cycles), so the folded counts and the summary are sample counts.
SCRIPT_FIELDS = "comm,pid,tid,time,event,ip,sym,dso"


def build_record_argv(
    perf: str,
    *,
    pid: int,
    duration_s: float,
    frequency_hz: int,
    event: str,
    call_graph: str,
    output: str | Path,
) -> list[str]:
    """``perf record -e EVENT -F HZ (-g | --call-graph dwarf) -p PID -o FILE -- sleep D``.

    The ``sleep`` bounds the window: perf stops following ``-p`` when the command ends.
    """
    if call_graph not in CALL_GRAPHS:
        raise UsageError(f"unknown call graph mode '{call_graph}'", hint="use fp or dwarf")
    cg = ["-g"] if call_graph == "fp" else ["--call-graph", "dwarf"]
    return [
        perf,
        "record",
        "-e",
        event,
        "-F",
        str(frequency_hz),
        *cg,
        "-p",
        str(pid),
        "-o",
        str(output),
        "--",
        "sleep",
        f"{duration_s:g}",
    ]


_CAPTURED = re.compile(r"Captured and wrote [\d.]+ \w+ \S+ \((\d+) samples\)")
_LOST = re.compile(r"Processed \d+ events and lost (\d+) chunks")


def record_error(returncode: int, stderr: str, *, pid: int) -> MyaccelError | None:
    if returncode == 0:
        return None
    text = stderr or ""
    tail = " | ".join(text.strip().splitlines()[-3:]) or "no output"
    if "perf_event_paranoid" in text or "No permission" in text or "Permission denied" in text:
        return PerfPermissionDenied(
            f"perf record was refused access to pid {pid}: {tail}",
            hint="run as root, or sysctl -w kernel.perf_event_paranoid=1",
        )
    if "No such process" in text or "Couldn't find" in text:
        return UsageError(
            f"pid {pid} exited before perf could attach",
            hint="is the server running? check with pidof mariadbd",
        )
    return ProcessFailed(
        f"perf record failed with exit code {returncode}: {tail}",
        hint="rerun with --debug to see the full perf command",
    )


def record_counts(stderr: str) -> tuple[int | None, int | None]:
    """Samples written and chunks lost, as perf record's closing lines say (None: not said)."""
    captured = _CAPTURED.search(stderr)
    lost = _LOST.search(stderr)
    return (
        int(captured.group(1)) if captured else None,
        int(lost.group(1)) if lost else None,
    )


# ---------------------------------------------------------------- DSO of each frame

# A callchain line of `perf script -F ...,ip,sym,dso`: "\t  55d0c0 do_command(THD*, bool) (/usr/sbin/mariadbd)"
_CHAIN_LINE = re.compile(r"^\s+[0-9a-fA-F]+\s+(?P<sym>.+?)\s+\((?P<dso>[^()]+)\)\s*$")


_HAS_DSO = re.compile(r"\s\[[^\[\]\s]+\]$")


def dso_map_from_script(text: str) -> dict[str, str]:
    """Symbol (as the folded stacks spell it) -> basename of the DSO perf found it in.

    inferno-collapse-perf keeps the DSO only for frames it could not name (``[mariadbd]``);
    this map puts it back on resolved frames so the summary has a per-DSO table. A name
    seen in several DSOs goes to the one it was seen in most.
    """
    from collections import Counter

    seen: dict[str, Counter[str]] = {}
    for line in text.splitlines():
        m = _CHAIN_LINE.match(line)
        if not m:
            continue
        sym = m.group("sym")
        if sym == "[unknown]":
            continue
        dso = m.group("dso")
        base = dso if dso.startswith("[") else dso.rsplit("/", 1)[-1]
        seen.setdefault(folded_mod.normalize_symbol(sym), Counter())[base] += 1
    return {sym: c.most_common(1)[0][0] for sym, c in seen.items()}


def annotate_dsos(folded_text: str, dsos: dict[str, str]) -> str:
    """Append `` [dso]`` to user-space frames of folded stacks whose DSO is known (the
    first frame, the command name, and kernel ``_[k]`` frames stay as they are)."""
    out: list[str] = []
    for line in folded_text.splitlines():
        stack, sep, count = line.rpartition(" ")
        if not sep:
            out.append(line)
            continue
        frames = stack.split(";")
        for i in range(1, len(frames)):
            f = frames[i]
            if f.endswith("_[k]") or f.startswith("[") or _HAS_DSO.search(f):
                continue
            dso = dsos.get(folded_mod.normalize_symbol(f))
            if dso is not None and not dso.startswith("[kernel"):
                frames[i] = f"{f} [{dso}]"
        out.append(f"{';'.join(frames)} {count}")
    return "\n".join(out) + "\n"
