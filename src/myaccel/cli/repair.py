"""Before each command: is there anything a killed command left behind?

Asked by every command (``myaccel.cli.main``), so it imports only the standard library:
it reads the journals, the sandboxes' ``state.json`` and the half-made-clone markers as
plain JSON and asks ``/proc`` whether their owners still run. Only when something was
left (a journal whose owner is gone, a sandbox left on an arm's configuration, a
half-made clone) does it load ``myaccel.cli.repair_work``, which undoes it; a command
with nothing to repair pays a few file reads.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from myaccel.paths import myaccel_home
from myaccel.proclife import still_runs

Note = Callable[[str], None]
CLONE_MARKER = "clone-incomplete.json"  # myaccel.clone.incomplete.MARKER, without its imports
_UNFINISHED = ("open", "failed")  # myaccel.actions.journal.UNFINISHED
_FINAL = ("applied", "rolled-back")
# a journal's status comes before its server, owner and entries (JournalData's field
# order): its head says whether the rest, old file contents included, needs reading
_HEAD_BYTES = 4096
_STATUS = re.compile(rb'(?<!\\)"status"\s*:\s*"([a-z-]+)"')


class _Engaged:
    on = False


def _read(path: Any) -> Any:
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


def _head_final(path: Any) -> bool:
    """Whether the journal's head already says it is finished (applied or rolled back)."""
    try:
        with path.open("rb") as f:
            head = f.read(_HEAD_BYTES)
    except OSError:
        return False
    m = _STATUS.search(head)
    return m is not None and m.group(1).decode() in _FINAL


def _gone(owner: Any) -> bool:
    """A recorded owner (``ProcessOwner`` as JSON) that no longer runs."""
    if not isinstance(owner, dict):
        return False
    try:
        return not still_runs(int(owner["pid"]), str(owner["started"]), str(owner["boot_id"]))
    except (KeyError, TypeError, ValueError):
        return False


def anything_left() -> bool:
    """Whether a killed command left something for the next command to undo."""
    home = myaccel_home()
    try:
        if any((home / "sandboxes").glob(f"*/{CLONE_MARKER}")):
            return True
        for state in (home / "sandboxes").glob("*/state.json"):
            doc = _read(state)
            if isinstance(doc, dict) and _gone((doc.get("active_config") or {}).get("owner")):
                return True
        for journal in (home / "journals").glob("*.json"):
            if _head_final(journal):
                continue  # most journals: no need to parse their recorded files
            doc = _read(journal)
            unfinished = isinstance(doc, dict) and doc.get("status") in _UNFINISHED
            if unfinished and _gone(doc.get("owner")):
                return True
    except OSError:
        return False
    return False


def repair_orphans(note: Note) -> None:
    """At a command's start: undo what killed commands left (``repair_work``)."""
    _Engaged.on = anything_left()
    if _Engaged.on:
        from myaccel.cli import repair_work

        repair_work.repair_orphans(note)


def repair_with(params: Any) -> None:
    """Once the command has its server options: retry with them (``repair_work``)."""
    if _Engaged.on:
        from myaccel.cli import repair_work

        repair_work.repair_with(params)


def warn_unrepaired() -> None:
    """At the command's end: one warning per thing still not undone (``repair_work``)."""
    if _Engaged.on:
        from myaccel.cli import repair_work

        repair_work.warn_unrepaired()
