"""Progress for long work: a live line on a terminal, plain rate-limited lines otherwise.

rich is imported when a bar is drawn: every command imports ``note`` from here, and its
``--help`` should not pay for rich."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rich.progress import Progress, ProgressColumn

    from myaccel.bench.run_record import RunRecord


def interactive() -> bool:
    return sys.stderr.isatty() and not _ci()


def _ci() -> bool:
    import os

    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def live_bar(field: str, clock: ProgressColumn) -> Progress:
    """A started one-line bar on stderr: the task's description, the bar, the task field
    ``field`` and ``clock`` (time elapsed or remaining); it disappears when stopped."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn

    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn(f"{{task.fields[{field}]}}"),
        clock,
        console=Console(stderr=True),
        transient=True,
    )
    bar.start()
    return bar


class RunProgress:
    """Shows TPS and time left of the current run; in pipes and CI prints a line at most
    every ``plain_every_s`` seconds."""

    def __init__(self, plain_every_s: float = 10.0) -> None:
        self.tty = interactive()
        self.plain_every_s = plain_every_s
        self._progress: Progress | None = None
        self._task: Any = None
        self._label = ""
        self._total = 0.0
        self._last_plain = 0.0

    def start(self, label: str, total_s: float) -> None:
        self._label, self._total = label, total_s
        self._last_plain = time.monotonic()
        if self.tty:
            from rich.progress import TimeRemainingColumn

            self._progress = live_bar("tps", TimeRemainingColumn())
            self._task = self._progress.add_task(label, total=total_s, tps="")
        else:
            click.echo(f"{label}: started ({total_s:.0f} s)", err=True)

    def report(self, rep: dict[str, Any]) -> None:
        if rep.get("kind") != "interval":
            return
        t = float(rep.get("t") or 0)
        tps = rep.get("tps")
        tps_s = f"tps {tps:,.1f}" if isinstance(tps, int | float) else "tps ?"
        if self._progress is not None:
            self._progress.update(self._task, completed=min(t, self._total), tps=tps_s)
        elif time.monotonic() - self._last_plain >= self.plain_every_s:
            self._last_plain = time.monotonic()
            click.echo(f"{self._label}: t={t:.0f}/{self._total:.0f} s {tps_s}", err=True)

    def stop(self, result: str) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        click.echo(f"{self._label}: {result}", err=True)


def note(msg: str) -> None:
    click.echo(msg, err=True)


def result_line(rec: RunRecord) -> str:
    """A run's outcome in one line: its figures, or why it is invalid."""
    if rec.summary is None or not rec.validity.valid:
        return "INVALID: " + "; ".join(rec.validity.reasons)
    s = rec.summary
    w = f" ({'; '.join(rec.validity.warnings)})" if rec.validity.warnings else ""
    return f"tps {s.tps:,.1f} qps {s.qps:,.1f} p95 {s.latency_ms_p95 or 0:.2f} ms{w}"


class TerminalProgress:
    """The benchmarks' progress on stderr (``myaccel.bench.session.BenchProgress``):
    notes as lines, each run as a ``RunProgress``."""

    def __init__(self) -> None:
        self._run: RunProgress | None = None

    def note(self, msg: str) -> None:
        note(msg)

    def run_started(self, label: str, total_s: float) -> None:
        self._run = RunProgress()
        self._run.start(label, total_s)

    def run_report(self, report: dict[str, Any]) -> None:
        if self._run is not None:
            self._run.report(report)

    def run_finished(self, record: RunRecord) -> None:
        if self._run is not None:
            self._run.stop(result_line(record))
            self._run = None
