"""The setting protocol and what every kind shares: ``Change``, value comparison, files
under a root.

The protocol (``Setting``):

- ``read()``: the current value, None when absent;
- ``plan(desired)``: what would change, or None when nothing would: the *simulate* path that
  ``apply --dry-run`` and ``verify`` share with apply itself (DESIGN habit 2);
- ``capture()``: the old state to journal before changing anything (DESIGN habit 1);
- ``apply(desired)`` and ``revert(entry)``: revert restores the journaled old state,
  idempotently (it may run for a change that never happened);
- ``spec()``: JSON-safe parameters that rebuild the setting in another process
  (``setting_from_spec``), so a rollback after a crash needs only the journal.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pymysql

from myaccel.actions.files import (
    ManagedFile,
    ManagedStyle,
    is_live_root,
    restore_file,
    snapshot_file,
)
from myaccel.actions.journal import JournalEntry, OldState
from myaccel.knobs.values import ValueSyntaxError, parse_int
from myaccel.model import Frozen

Connect = Callable[[], "pymysql.connections.Connection[Any]"]
Runner = Callable[[Sequence[str]], object]


class Change(Frozen):
    """What applying one setting would do (dry run, verify) or did (apply)."""

    target: str
    kind: str
    current: str | None
    desired: str
    needs_root: bool
    writes: tuple[str, ...] = ()  # logical paths, or the statement for server variables
    takes_effect: str = "now"  # now | server restart | unit restart | boot
    warnings: tuple[str, ...] = ()


# ---------------------------------------------------------------- values


_TRUE = {"ON", "TRUE", "YES"}
_FALSE = {"OFF", "FALSE", "NO"}


def normalize_value(text: str) -> int | float | str:
    """A comparable form of a value as servers and kernels spell it: ``128M`` ==
    ``134217728``; ``ON`` == ``1`` == ``TRUE``; ``90.000000`` == ``90``; other text compares
    case-insensitively with whitespace runs collapsed (``4096\\t131072`` == ``4096 131072``)."""
    t = text.strip()
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        t = t[1:-1].strip()
    u = t.upper()
    if u in _TRUE:
        return 1
    if u in _FALSE:
        return 0
    try:
        return parse_int(t)
    except ValueSyntaxError:
        pass
    if re.fullmatch(r"[+-]?(\d+\.\d*|\.\d+)([eE][+-]?\d+)?", t):
        f = float(t)
        if math.isfinite(f):
            return int(f) if f.is_integer() else f
    return " ".join(t.split()).casefold()


def values_equal(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a is b
    return normalize_value(a) == normalize_value(b)


# ---------------------------------------------------------------- protocol


class Setting(ABC):
    """One target that can be read, planned, applied and reverted."""

    kind: ClassVar[str]
    # The constructor parameters ``spec()`` records, each an attribute of the same name.
    spec_fields: ClassVar[tuple[str, ...]]
    target: str

    @property
    @abstractmethod
    def needs_root(self) -> bool:
        """True when applying writes system files or kernel state (on a real machine)."""

    @abstractmethod
    def read(self) -> str | None:
        """The current value; None when absent."""

    @abstractmethod
    def plan(self, desired: str) -> Change | None:
        """What ``apply(desired)`` would change, or None if nothing; touches nothing."""

    @abstractmethod
    def capture(self) -> OldState:
        """The state to journal before ``apply``: enough for ``revert`` to restore it."""

    @abstractmethod
    def apply(self, desired: str) -> None: ...

    @abstractmethod
    def revert(self, entry: JournalEntry) -> None:
        """Restore ``entry.old``; idempotent, and safe when the change never happened."""

    def managed_entry(self) -> tuple[ManagedFile, str, str] | None:
        """The managed file, section and key that carry this setting's value, if a file
        myaccel regenerates carries it (what a dry run predicts the text of)."""
        return None

    @property
    def survives_reboot(self) -> bool:
        """Whether the applied value is still in effect after the machine boots again (a
        file carries it); False for runtime-only kernel values."""
        return True

    def spec(self) -> dict[str, Any]:
        """JSON-safe constructor parameters (see ``setting_from_spec``)."""
        return {
            name: str(v) if isinstance(v := getattr(self, name), Path) else v
            for name in self.spec_fields
        }

    def _change(
        self,
        current: str | None,
        desired: str,
        writes: Sequence[str],
        *,
        takes_effect: str = "now",
        warnings: tuple[str, ...] = (),
    ) -> Change:
        return Change(
            target=self.target,
            kind=self.kind,
            current=current,
            desired=desired,
            needs_root=self.needs_root,
            writes=tuple(writes),
            takes_effect=takes_effect,
            warnings=warnings,
        )

    def matches(self, actual: str | None, desired: str) -> bool:
        """Whether a read-back value is the desired one (after normalization)."""
        return values_equal(actual, desired)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.target!r})"


class RootedSetting(Setting):
    """A setting that writes files under ``root``."""

    def __init__(self, root: str | Path) -> None:
        # Absolute: the journal records it, and rollback may run from another directory.
        self.root = Path(root).absolute()
        self.live = is_live_root(self.root)

    @property
    def needs_root(self) -> bool:
        return self.live

    def _restore_files(self, entry: JournalEntry) -> bool:
        changed = False
        for state in reversed(entry.old.files):
            changed = restore_file(self.root, state) or changed
        return changed


class FileBackedSetting(RootedSetting):
    """A setting whose whole state is one file (``path``, logical): the journal keeps that
    file's bytes, and revert puts them back."""

    path: str

    def capture(self) -> OldState:
        return OldState(files=[snapshot_file(self.root, self.path)])

    def revert(self, entry: JournalEntry) -> None:
        self._restore_files(entry)


class ManagedEntrySetting(FileBackedSetting):
    """One ``key = value`` in a ``section`` of a file myaccel owns and regenerates on every
    change (``ManagedFile``); a file of that name that is not myaccel's is never edited."""

    managed_style: ClassVar[ManagedStyle]
    section: str
    key: str
    purpose: str  # the header line saying what reads the file

    def _managed(self) -> ManagedFile:
        return ManagedFile(self.root, self.path, self.managed_style, self.purpose)

    def managed_entry(self) -> tuple[ManagedFile, str, str]:
        return self._managed(), self.section, self.key

    def read(self) -> str | None:
        return self._managed().get(self.section, self.key)

    def _owned_value(self) -> str | None:
        """The current value; raises when the file is someone else's."""
        managed = self._managed()
        managed.check_owned()
        return managed.get(self.section, self.key)

    def _write(self, value: str) -> None:
        self._managed().set(self.section, self.key, value)
