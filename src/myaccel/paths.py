"""Where myaccel keeps its state: ``$MYACCEL_HOME`` (default ``~/.local/share/myaccel``);
and attributes read through another attribute (``Below``, ``Via``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar, overload

if TYPE_CHECKING:
    from myaccel.errors import MyaccelError

T = TypeVar("T")


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


def existing_dir(
    path: str | Path, what: str, error: type[MyaccelError], *, hint: str, not_dir_hint: str
) -> Path:
    """``path`` (a user's argument naming ``what``) when it is a directory; else ``error``
    with ``hint`` (nothing there) or ``not_dir_hint`` (something else there)."""
    p = Path(path)
    if not p.exists():
        raise error(f"{what} '{path}' does not exist", hint=hint)
    if not p.is_dir():
        raise error(f"{what} '{path}' is not a directory", hint=not_dir_hint)
    return p


class Below:
    """A read-only attribute for a path below another path attribute of the same object:
    ``error_log = Below("dir", "mysqld.err")`` reads as ``self.dir / "mysqld.err"``."""

    def __init__(self, base: str, name: str) -> None:
        self.base = base
        self.name = name

    def __get__(self, obj: object, owner: type | None = None) -> Path:
        return Path(getattr(obj, self.base)) / self.name


class Via(Generic[T]):
    """A read-only attribute that is the same-named attribute of another attribute of the
    same object: ``port = Via[int]("state")`` reads as ``self.state.port``."""

    def __init__(self, holder: str) -> None:
        self.holder = holder
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Self: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...

    def __get__(self, obj: object | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return getattr(getattr(obj, self.holder), self.name)

    def __set__(self, obj: object, value: object) -> None:
        raise AttributeError(f"{self.name} is read-only (set {self.holder}.{self.name})")
