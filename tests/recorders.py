"""What tests record of a run (imported as ``recorders``: ``tests/`` is on the path of every
test): ``Notes``, an ``accelerate`` progress that keeps every line, and ``tree_digest``, the
sha256 of every file under a directory (byte-identical rollbacks)."""

from __future__ import annotations

import hashlib
from pathlib import Path


class Notes:
    """``accelerate.Progress`` that records its lines (runs as their labels, steps as
    ``== title``), says yes to every question and keeps the A/B's result."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.ab: object = None

    def note(self, message: str) -> None:
        self.lines.append(message)

    def step(self, title: str) -> None:
        self.lines.append(f"== {title}")

    def run_started(self, label: str, total_s: float) -> None:
        self.lines.append(label)

    def run_finished(self, rec: object) -> None: ...

    def run_report(self, line: str) -> None: ...

    def confirm(self, question: str) -> bool:
        return True

    def ab_done(self, result: object) -> None:
        self.ab = result


def tree_digest(path: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under ``path`` ({} when it does not exist)."""
    if not path.exists():
        return {}
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }
