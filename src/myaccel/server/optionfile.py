"""Read MySQL/MariaDB option files (my.cnf).

Written here rather than with ``configparser`` because option files have directives
configparser cannot read (``!include``, ``!includedir``), keys without values
(``skip-name-resolve``), repeated keys where the last one wins, and ``-``/``_``
equivalence in names.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


def normalize_key(key: str) -> str:
    """Option names treat ``-`` and ``_`` alike; we use ``_`` (the variable spelling)."""
    return key.strip().replace("-", "_").lower()


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


def parse_option_text(
    text: str, into: OptionFile, *, origin: str = "<text>", depth: int = 0
) -> None:
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
            if directive == "!include":
                read_option_file(target, into, depth=depth + 1, missing_ok=True)
            elif directive == "!includedir" and target.is_dir():
                for name in sorted(os.listdir(target)):
                    if name.endswith(".cnf"):
                        read_option_file(target / name, into, depth=depth + 1, missing_ok=True)
            continue
        if line.startswith("[") and "]" in line:
            group = line[1 : line.index("]")].strip().lower()
            into.groups.setdefault(group, {})
            continue
        if group is None:
            continue
        if "=" in line:
            k, _, v = line.partition("=")
            into.groups[group][normalize_key(k)] = _unquote(v)
        else:
            into.groups[group][normalize_key(line)] = None


def read_option_file(
    path: str | Path, into: OptionFile | None = None, *, depth: int = 0, missing_ok: bool = False
) -> OptionFile:
    of = into if into is not None else OptionFile()
    p = Path(path)
    if depth > 10:
        return of
    try:
        text = p.read_text(errors="replace")
    except FileNotFoundError:
        if missing_ok:
            return of
        raise
    of.files_read.append(str(p))
    parse_option_text(text, of, origin=str(p), depth=depth)
    return of
