"""Output locations checked before anything is done: ``build --out`` (and its default under
``$MYACCEL_HOME/builds``), ``bench``'s results directory, ``capture --out``.

A command that would fail to write its results must fail before it compiles, drops a
dataset or switches a server's logging on. Permissions alone do not tell (root ignores
them; a read-only mount, ``/proc`` or ``/sys`` refuse root too), so the nearest existing
directory is probed: a private directory is created there and removed at once. Nothing is
left behind, and nothing is created when the check fails.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from myaccel.errors import ExitCode, MyaccelError, UsageError

_HINT = (
    "choose another path (a directory you may write, on a read-write file system), "
    "or point MYACCEL_HOME elsewhere for the default location"
)


class NotWritable(MyaccelError, code="not-writable", exit_code=ExitCode.IO_ERROR):
    """An output location that cannot be written (permission, a read-only or pseudo file
    system), found before anything was done."""


def _nearest_existing(p: Path) -> Path:
    while not os.path.lexists(p) and p != p.parent:
        p = p.parent
    return p


def _probe(base: Path, shown: str | Path, what: str, hint: str) -> None:
    """Create and remove a private directory in ``base``; ``NotWritable`` naming ``shown``
    (the user's argument) when the file system refuses."""
    try:
        probe = tempfile.mkdtemp(prefix=".myaccel-probe-", dir=base)
    except OSError as exc:
        why = (exc.strerror or type(exc).__name__).lower()
        at = "" if Path(shown).absolute() == base else f" (at '{base}')"
        raise NotWritable(f"{what} '{shown}' cannot be written: {why}{at}", hint=hint) from None
    os.rmdir(probe)


def check_writable_dir(path: str | Path, what: str, *, hint: str = _HINT) -> Path:
    """``path``, a directory that will be created if needed and written into, can be: its
    nearest existing ancestor is a directory where this process may create entries.

    Raises ``UsageError`` (exit 2) when something other than a directory is in the way and
    ``NotWritable`` (exit 8) when the file system refuses. Returns ``path`` as given."""
    p = Path(path)
    base = _nearest_existing(p.absolute())
    if not base.is_dir():
        where = "is not a directory" if base == p.absolute() else f"is below '{base}', a file"
        raise UsageError(f"{what} '{path}' {where}", hint=hint)
    _probe(base, path, what, hint)
    return p


def check_output_file(path: str | Path, what: str, *, hint: str = _HINT) -> Path:
    """``path``, a file to be written (its directory is not created), can be: its
    directory exists (``UsageError`` otherwise) and may be written (``NotWritable``)."""
    p = Path(path)
    parent = p.absolute().parent
    if not parent.exists():
        raise UsageError(
            f"{what} '{path}': the directory '{parent}' does not exist",
            hint="create it first (mkdir -p), or choose a path in an existing directory",
        )
    if not parent.is_dir():
        raise UsageError(f"{what} '{path}': '{parent}' is not a directory", hint=hint)
    _probe(parent, path, what, hint)
    return p


__all__ = ["NotWritable", "check_output_file", "check_writable_dir"]
