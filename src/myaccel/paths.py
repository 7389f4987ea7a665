"""Where myaccel keeps its state: ``$MYACCEL_HOME`` (default ``~/.local/share/myaccel``)."""

from __future__ import annotations

import os
from pathlib import Path


def myaccel_home() -> Path:
    env = os.environ.get("MYACCEL_HOME")
    if env:
        return Path(env).expanduser().resolve()
    return Path.home() / ".local" / "share" / "myaccel"


def entries(directory: Path) -> list[Path]:
    """The entries of ``directory`` sorted by name; none when it cannot be read (missing,
    not a directory, no permission)."""
    try:
        return sorted(directory.iterdir())
    except OSError:
        return []


class Below:
    """A read-only attribute for a path below another path attribute of the same object:
    ``error_log = Below("dir", "mysqld.err")`` reads as ``self.dir / "mysqld.err"``."""

    def __init__(self, base: str, name: str) -> None:
        self.base = base
        self.name = name

    def __get__(self, obj: object, owner: type | None = None) -> Path:
        return Path(getattr(obj, self.base)) / self.name
