"""Parsers of what valgrind writes: the header and totals of a ``cachegrind.out`` /
``callgrind.out`` file, and the text tables of ``cg_annotate`` / ``callgrind_annotate``."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from myaccel.errors import UsageError
from myaccel.profile.simulate.models import CacheSpec


@dataclass(frozen=True)
class OutFileSummary:
    """What the header and the summary line of a cachegrind/callgrind out file say."""

    creator: str | None
    command: str | None
    events: tuple[str, ...]
    totals: dict[str, int]
    caches: tuple[CacheSpec, ...]


_CACHE_DESC_RE = re.compile(
    r"^desc:\s*(I1|D1|LL) cache:\s*(\d+) B, (\d+) B, (\d+)-way associative", re.IGNORECASE
)


def _counts(names: Sequence[str], values: str) -> dict[str, int]:
    nums = [int(v) for v in values.split()]
    # trailing zero counts may be left out in the file format
    nums += [0] * (len(names) - len(nums))
    return dict(zip(names, nums, strict=False))


def parse_out_file(text: str) -> OutFileSummary:
    """Totals and cache model from a ``cachegrind.out``/``callgrind.out`` file's text.

    The totals are the ``totals:`` line (callgrind; its ``summary:`` line is wrong after
    ``--toggle-collect`` and zeroing) or else the ``summary:`` line (cachegrind). A file
    cut short (server killed before valgrind wrote it all) has neither: ``UsageError``."""
    events: tuple[str, ...] = ()
    summary: str | None = None
    totals_line: str | None = None
    creator = command = None
    caches: list[CacheSpec] = []
    for line in text.splitlines():
        if line.startswith("events:"):
            events = tuple(line.split(":", 1)[1].split())
        elif line.startswith("summary:"):
            summary = line.split(":", 1)[1]
        elif line.startswith("totals:"):
            totals_line = line.split(":", 1)[1]
        elif line.startswith("creator:"):
            creator = line.split(":", 1)[1].strip()
        elif line.startswith("cmd:"):
            command = line.split(":", 1)[1].strip()
        elif line.startswith("desc:"):
            m = _CACHE_DESC_RE.match(line)
            if m:
                caches.append(
                    CacheSpec(
                        name=m.group(1),
                        size_bytes=int(m.group(2)),
                        line_bytes=int(m.group(3)),
                        ways=int(m.group(4)),
                    )
                )
    counts = totals_line if totals_line is not None else summary
    if not events or counts is None:
        raise UsageError(
            "the valgrind output file has no events/summary line (incomplete?)",
            hint="the server must shut down cleanly for valgrind to write its file; see the "
            "valgrind log next to it",
        )
    return OutFileSummary(
        creator=creator,
        command=command,
        events=events,
        totals=_counts(events, counts),
        caches=tuple(caches),
    )


def read_out_file(path: Path) -> OutFileSummary:
    """``parse_out_file`` on the header and summary lines of a (large) out file."""
    keep: list[str] = []
    try:
        with open(path, errors="replace") as fh:
            for line in fh:
                if line.startswith(("events:", "summary:", "totals:", "creator:", "cmd:", "desc:")):
                    keep.append(line.rstrip("\n"))
    except OSError as exc:
        raise UsageError(
            f"cannot read valgrind output '{path}': {exc.strerror or exc}",
            hint="the server must shut down cleanly for valgrind to write its file",
        ) from exc
    return parse_out_file("\n".join(keep))


@dataclass(frozen=True)
class AnnotatedFunction:
    location: str | None
    function: str
    counts: dict[str, int]


_COUNT_RE = re.compile(r"^-?[\d,]+$|^\.$")


def parse_annotate(text: str) -> tuple[tuple[str, ...], dict[str, int], list[AnnotatedFunction]]:
    """Parse ``cg_annotate``/``callgrind_annotate --show-percs=no --auto=no`` text output.

    Returns the shown event names, the PROGRAM TOTALS row and one row per function line,
    in the tool's order (sorted by the first event). Count columns are numbers with
    thousands separators (``.`` = zero); the rest of the line is ``file:function`` and,
    for callgrind, `` [object]``. Lines that do not fit are skipped."""
    lines = text.splitlines()
    shown: tuple[str, ...] = ()
    for ln in lines:
        if ln.startswith("Events shown:"):
            shown = tuple(ln.split(":", 1)[1].split())
            break
    totals: dict[str, int] = {}
    rows: list[AnnotatedFunction] = []
    in_functions = False
    for ln in lines:
        stripped = ln.strip()
        if not stripped or stripped.startswith("-----"):
            continue
        if shown and stripped.split()[: len(shown)] == list(shown):
            # a column header; the one ending in file:function starts the function table
            in_functions = stripped.endswith("file:function")
            continue
        parts = stripped.split()
        if len(parts) <= len(shown) or not shown:
            continue
        cols = parts[: len(shown)]
        if not all(_COUNT_RE.match(c) for c in cols):
            if in_functions and rows:
                # source annotation or the end of the table
                in_functions = False
            continue
        counts = {
            e: (0 if c == "." else int(c.replace(",", "")))
            for e, c in zip(shown, cols, strict=True)
        }
        rest = _rest_after_columns(stripped, len(shown))
        if rest == "PROGRAM TOTALS":
            totals = counts
            continue
        if not in_functions:
            continue
        location, function = _split_location(rest)
        rows.append(AnnotatedFunction(location=location, function=function, counts=counts))
    return shown, totals, rows


def _rest_after_columns(line: str, ncols: int) -> str:
    """The text after the first ``ncols`` whitespace-separated columns."""
    m = re.match(r"^\s*" + r"\S+\s+" * ncols, line)
    return line[m.end() :].strip() if m else ""


_OBJECT_RE = re.compile(r"\s+\[([^\]]+)\]$")


def _split_location(rest: str) -> tuple[str | None, str]:
    """``file:function [object]`` -> ("file [object]", "function")."""
    obj = None
    m = _OBJECT_RE.search(rest)
    if m:
        obj = m.group(1)
        rest = rest[: m.start()]
    file, sep, function = rest.partition(":")
    if not sep:
        return obj, rest
    location = file if obj is None else f"{file} [{obj}]"
    return location, function
