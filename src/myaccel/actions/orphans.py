"""Switches left by a command that was killed: found and undone by the next command.

A command whose server changes last only while it runs (``capture`` switches the general
log or a performance_schema consumer on for its window) names itself as the journal's
``owner``. Its ``finally`` block switches them back on every way out that Python sees
(errors, SIGINT, SIGTERM, SIGHUP: ``myaccel.signals``); SIGKILL, an OOM kill or a power
cut leave the journal ``open`` with its owner gone. ``find_orphans`` lists those journals;
``myaccel.cli.main`` rolls them back before the next command runs, so a general log left on
fills no disk for longer than until the next ``myaccel`` command.
"""

from __future__ import annotations

from pathlib import Path

from myaccel.actions.errors import JournalError
from myaccel.actions.journal import Journal


def find_orphans(journal_dir: Path) -> list[Journal]:
    """Unfinished journals (open, or failed: a repair that could not finish) whose owner
    process is gone (same boot, pid and start time no longer match), oldest first.
    Unreadable journals are not this function's business (``myaccel rollback`` reports
    them)."""
    found = []
    for path in Journal.find_unfinished(journal_dir):
        try:
            journal = Journal.load(path)
        except JournalError:
            continue
        owner = journal.data.owner
        if owner is not None and not owner.alive():
            found.append(journal)
    return found
