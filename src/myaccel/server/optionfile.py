"""Read MySQL/MariaDB option files (my.cnf).

Written here rather than with ``configparser`` because option files have directives
configparser cannot read (``!include``, ``!includedir``), keys without values
(``skip-name-resolve``), repeated keys where the last one wins, and ``-``/``_``
equivalence in names.
"""

from __future__ import annotations

import os
from collections.abc import Container, Iterator
from dataclasses import dataclass, field
from pathlib import Path

# Option modifiers the server accepts before a name: ``--skip-X`` (= X off), ``--enable-X``,
# ``--disable-X``; ``--loose-`` (ignore when unknown) may come before them.
OPTION_MODIFIERS = ("skip_", "enable_", "disable_")


def normalize_key(
    key: str, *, drop_loose: bool = False, drop_modifier: bool | Container[str] = False
) -> str:
    """The one spelling of an option or variable name: ``-`` and ``_`` alike (we use ``_``,
    the variable spelling), lower case.

    ``drop_loose`` also removes a ``loose_`` prefix; ``drop_modifier`` removes one of
    ``skip_``/``enable_``/``disable_`` (``True``: always; a set of names: only when what
    remains is one of them, so ``skip_name_resolve`` stays a name of its own)."""
    k = key.strip().replace("-", "_").lower()
    if drop_loose:
        k = k.removeprefix("loose_")
    if drop_modifier is False:
        return k
    for m in OPTION_MODIFIERS:
        rest = k[len(m) :]
        if k.startswith(m) and (isinstance(drop_modifier, bool) or rest in drop_modifier):
            return rest
    return k


def _unquote(value: str) -> str:
    v = value.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
        return v[1:-1]
    # strip trailing comment after whitespace
    for marker in (" #", "\t#"):
        if marker in v:
            v = v.split(marker, 1)[0].rstrip()
    return v


@dataclass
class OptionFile:
    """Groups of options in file order; later assignments override earlier ones."""

    groups: dict[str, dict[str, str | None]] = field(default_factory=dict)
    files_read: list[str] = field(default_factory=list)

    def get(self, groups: list[str], key: str) -> str | None:
        """Value of ``key`` in the last of ``groups`` that sets it (client conventions)."""
        k = normalize_key(key)
        val: str | None = None
        for g in groups:
            opts = self.groups.get(g, {})
            if k in opts:
                val = opts[k]
        return val

    def merged(self, groups: list[str]) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for g in groups:
            out.update(self.groups.get(g, {}))
        return out


@dataclass(frozen=True)
class RawOption:
    """One option line as written: group, key and value before normalization, and the file."""

    group: str
    key: str
    value: str | None
    origin: str


def iter_option_text(text: str, *, origin: str = "<text>", depth: int = 0) -> Iterator[RawOption]:
    """Option lines in file order (duplicates kept: the server applies them in order),
    following ``!include`` and ``!includedir`` (missing included files are skipped)."""
    group: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("!"):
            directive, _, arg = line.partition(" ")
            arg = arg.strip()
            base = Path(origin).parent if origin != "<text>" else Path(".")
            target = (base / arg) if arg and not os.path.isabs(arg) else Path(arg)
            if depth >= 10:
                continue
            if directive == "!include":
                yield from iter_option_file(target, depth=depth + 1)
            elif directive == "!includedir" and target.is_dir():
                for name in sorted(os.listdir(target)):
                    if name.endswith(".cnf"):
                        yield from iter_option_file(target / name, depth=depth + 1)
            continue
        if line.startswith("["):
            group = line[1 : line.index("]")].strip().lower() if "]" in line else None
            continue
        if group is None:
            continue
        if "=" in line:
            k, _, v = line.partition("=")
            yield RawOption(group, k.strip(), v.strip(), origin)
        else:
            yield RawOption(group, line.split("#", 1)[0].strip(), None, origin)


def iter_option_file(path: str | Path, *, depth: int = 0) -> Iterator[RawOption]:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return
    yield from iter_option_text(text, origin=str(path), depth=depth)


def parse_option_text(
    text: str, into: OptionFile, *, origin: str = "<text>", depth: int = 0
) -> None:
    for opt in iter_option_text(text, origin=origin, depth=depth):
        if opt.origin not in into.files_read:
            into.files_read.append(opt.origin)
        into.groups.setdefault(opt.group, {})[normalize_key(opt.key)] = (
            None if opt.value is None else _unquote(opt.value)
        )


def read_option_file(
    path: str | Path, into: OptionFile | None = None, *, depth: int = 0, missing_ok: bool = False
) -> OptionFile:
    of = into if into is not None else OptionFile()
    p = Path(path)
    try:
        text = p.read_text(errors="replace")
    except FileNotFoundError:
        if missing_ok:
            return of
        raise
    of.files_read.append(str(p))
    parse_option_text(text, of, origin=str(p), depth=depth)
    return of
