"""Half-made clones: marked while they are made, removed when their maker is gone.

A clone is a sandbox from its first step (``Sandbox.reserve``), long before it holds a
usable copy. ``make_clone`` writes ``clone-incomplete.json`` into the sandbox's directory
right after reserving it (the pid and start time of the process making it) and removes it
as the very last step. An interrupt (SIGINT, SIGTERM, SIGHUP) removes the half-made clone
at once; SIGKILL cannot be caught, so the marker stays and the next ``myaccel clone`` (or
``accelerate`` on an existing server, which clones) removes every marked clone whose maker
is no longer running, with whatever it left running (the copy tool, the clone's server),
and says so. ``incomplete_clones`` lists them for a command that shows sandboxes.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from myaccel.artifacts import write_text
from myaccel.errors import MyaccelError
from myaccel.server.sandbox import Sandbox
from myaccel.server.sandbox.layout import resolve_home, sandboxes_root
from myaccel.server.sandbox.state import now_iso

MARKER = "clone-incomplete.json"
# a start time read twice may differ by the clock tick; a reused pid differs by far more
_SAME_START_S = 1.0

Say = Callable[[str], None]


@dataclass(frozen=True)
class IncompleteClone:
    name: str
    directory: Path
    pid: int | None  # the process making it (None: the marker is unreadable)
    since: str
    alive: bool  # that process still runs: the clone is being made, not abandoned

    def describe(self) -> str:
        who = f"pid {self.pid}" if self.pid is not None else "an unknown process"
        state = "being made by" if self.alive else "left half-made by"
        return f"clone '{self.name}' {state} {who} (since {self.since or 'unknown'})"


def _start_time(pid: int) -> float | None:
    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.Error, OSError):
        return None


def mark(sandbox_dir: Path) -> Path:
    """Write the marker: this process is making the clone in ``sandbox_dir``."""
    pid = os.getpid()
    doc = {"pid": pid, "started": _start_time(pid), "since": now_iso()}
    return write_text(sandbox_dir / MARKER, json.dumps(doc) + "\n", private=True)


def unmark(sandbox_dir: Path) -> None:
    """The clone is complete: remove the marker."""
    (sandbox_dir / MARKER).unlink(missing_ok=True)


def _read(sandbox_dir: Path) -> IncompleteClone | None:
    path = sandbox_dir / MARKER
    if not path.is_file():
        return None
    pid: int | None = None
    started: float | None = None
    since = ""
    try:
        doc = json.loads(path.read_text())
        pid = int(doc["pid"])
        started = float(doc["started"]) if doc.get("started") is not None else None
        since = str(doc.get("since") or "")
    except (OSError, ValueError, KeyError, TypeError):
        pass  # unreadable: written atomically, so damaged by hand; nobody owns it
    now = _start_time(pid) if pid is not None else None
    alive = now is not None and (started is None or abs(now - started) < _SAME_START_S)
    return IncompleteClone(sandbox_dir.name, sandbox_dir, pid, since, alive)


def incomplete_clones(home: Path | None = None) -> list[IncompleteClone]:
    """The marked clones under ``home``'s sandboxes, being made or abandoned."""
    root = sandboxes_root(resolve_home(home))
    if not root.is_dir():
        return []
    found = []
    for entry in sorted(root.iterdir()):
        if entry.is_dir() and not entry.name.startswith("."):
            ic = _read(entry)
            if ic is not None:
                found.append(ic)
    return found


# what a clone starts: the copy tool and the clone's server (names as /proc shows them)
_OURS = ("mariadb-backup", "mariabackup", "mariadbd", "mysqld")


def _processes_inside(directory: Path) -> list[psutil.Process]:
    """The copy tools and servers whose command line names a path under ``directory``
    (the copy's ``--target-dir``, the clone's server's ``--defaults-file``)."""
    prefix = str(directory) + "/"
    out = []
    for p in psutil.process_iter(["pid", "name", "cmdline"]):
        name = str(p.info.get("name") or "")
        cmdline = p.info.get("cmdline") or []
        if name in _OURS and any(prefix in str(a) for a in cmdline):
            out.append(p)
    return out


def remove_abandoned(home: Path | None, say: Say) -> list[str]:
    """Remove every clone left half-made by a process that is gone (killed with SIGKILL,
    a power loss), stopping what it left running; the names removed."""
    removed = []
    for ic in incomplete_clones(home):
        if ic.alive:
            continue
        say(f"removing {ic.describe()}")
        for p in _processes_inside(ic.directory):
            with contextlib.suppress(psutil.Error, OSError):
                p.send_signal(signal.SIGKILL)
                p.wait(timeout=10)
        try:
            Sandbox.destroy_named(ic.name, home=home)
        except (MyaccelError, OSError) as exc:  # the command asked for still runs
            say(f"warning: could not remove it ({exc}); try: myaccel sandbox destroy {ic.name}")
            continue
        removed.append(ic.name)
    return removed
