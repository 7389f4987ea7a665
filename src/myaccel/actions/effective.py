"""What a plan's recommendations would make the server read, whatever the target kind: the
input of apply's guard (``guard.py``).

- ``mysql:NAME``: ``SET GLOBAL`` (or ``SET PERSIST``) of NAME on the server;
- ``mycnf:GROUP/OPTION``: OPTION in a managed option file, when GROUP is one the server
  reads;
- ``file:PATH``: the options of the server groups of the text written (an option file),
  and every ``--option`` in it (a unit file, a drop-in, an environment file);
- any other target: every ``--option`` in its value (``systemd:UNIT/ExecStart``,
  ``systemd:UNIT/Environment``);
- any target: every ``SET [GLOBAL|PERSIST] name = value`` in its value (an init file, an
  ``init_connect``), and for ``file:`` the keys of a JSON text (``mysqld-auto.cnf``).

Also here: which paths are myaccel's own managed files, which directives pull other files
in, and the host's memory.
"""

from __future__ import annotations

import os
from collections.abc import Container
from dataclasses import dataclass
from pathlib import Path

from myaccel.knobs.catalog import Catalog
from myaccel.model import Facts
from myaccel.rules.model import Recommendation
from myaccel.server.option_spelling import (
    OptionWord,
    command_line_words,
    include_directives,
    is_server_group,
    json_words,
    option_file_words,
    option_word,
    sql_words,
)

# Names of the files apply writes itself (managed option file, sysctl.d, tmpfiles.d and
# systemd drop-ins, the binary swap's drop-in): a plan never writes them by ``file:``.
MANAGED_PREFIXES = ("99-myaccel", "zz-myaccel")
MEMINFO = "/proc/meminfo"
# a systemd setting that makes the unit read another file
PULLING_KEYS = ("EnvironmentFile",)
# server options that make it read another file (SQL at start, other option files)
PULLING_OPTIONS = frozenset({"init_file", "defaults_file", "defaults_extra_file"})
# Option names that are a prefix of a durability knob but mean something else (the
# plugin's on/off option).
NOT_PREFIXES = frozenset({"innodb"})


@dataclass(frozen=True)
class Assignment:
    """One server option a recommendation sets, as the server reads it."""

    rec: Recommendation
    word: OptionWord
    head: str  # what the recommendation does, for messages
    runtime: bool = False  # a mysql: target (the running server, maybe on another host)
    direct: bool = False  # the option a mysql:/mycnf: target names (not one in its value)


def assignments(r: Recommendation, names: Container[str] = ()) -> list[Assignment]:
    """The server options ``r`` sets (``names``: option names of their own that start like
    a modifier, such as ``skip_name_resolve``)."""
    scheme, _, rest = r.target.partition(":")
    head = f"{r.target} = {_show(r.proposed)}"
    inline = [Assignment(r, w, _written_head(r, w)) for w in sql_words(r.proposed, names=names)]
    if scheme == "mysql":
        word = option_word(rest, r.proposed, names=names)
        return [Assignment(r, word, head, runtime=True, direct=True), *inline]
    if scheme == "mycnf":
        group, _, key = rest.partition("/")
        if not key or not is_server_group(group):
            return inline
        word = option_word(key, r.proposed, group=group, names=names)
        return [Assignment(r, word, head, direct=True), *inline]
    words = list(command_line_words(r.proposed, names=names))
    if scheme == "file":
        text = r.proposed
        words = [*option_file_words(text, names=names), *json_words(text, names=names), *words]
    return [*(Assignment(r, w, _written_head(r, w)) for w in words), *inline]


def durability_knobs(cat: Catalog, name: str) -> list[str]:
    """The durability knobs (the catalog's marking) an option name sets: its own, or, for
    a prefix the server would complete (MariaDB accepts unambiguous prefixes of option
    names), every durability knob it begins."""
    spec = cat.get(name)
    if spec is not None:
        return [spec.name] if spec.durability else []
    if not name or name in NOT_PREFIXES:
        return []
    return [s.name for s in cat.specs if s.durability and s.name.startswith(name)]


def _written_head(r: Recommendation, w: OptionWord) -> str:
    spelt = _short(w.spelt, 80)
    if w.kind == "argument":
        return f"{r.target} passes `{spelt}` to the server, which"
    if w.kind == "sql":
        return f"{r.target} holds `{spelt}`, which"
    if w.kind == "json":
        return f"{r.target} writes `{spelt}` (as SET PERSIST does), which"
    where = f"in [{w.group}]" if w.group else "before any group"
    return f"{r.target} writes `{spelt}` {where}, which"


def managed_file(path: str) -> str | None:
    """The path (as given, or after ``..`` and symbolic links are resolved) when it names
    one of myaccel's managed files, else None."""
    for p in dict.fromkeys((path, os.path.normpath(path), str(Path(path).resolve()))):
        if Path(p).name.lower().startswith(MANAGED_PREFIXES):
            return p
    return None


def pulled_in(r: Recommendation, words: list[OptionWord]) -> list[str]:
    """What in ``r`` (whose server options are ``words``) makes the server or its unit read
    other files: ``!include``/``!includedir`` or ``EnvironmentFile=`` in a ``file:``,
    ``EnvironmentFile`` of a ``systemd:`` drop-in, ``init-file``/``defaults-file``/
    ``defaults-extra-file`` in any form."""
    scheme, _, rest = r.target.partition(":")
    found = [w.spelt for w in words if w.name in PULLING_OPTIONS]
    if scheme == "file":
        envs = [
            ln.strip()
            for ln in r.proposed.splitlines()
            if ln.strip().startswith(PULLING_KEYS) and "=" in ln
        ]
        return [*include_directives(r.proposed), *envs, *found]
    if scheme == "systemd" and rest.rpartition("/")[2] in PULLING_KEYS:
        return [f"{rest.rpartition('/')[2]}={r.proposed.strip()}", *found]
    return found


@dataclass(frozen=True)
class HostMemory:
    """What bounds a buffer's size: this host's RAM (MemTotal)."""

    total_bytes: int
    source: str  # where MemTotal was read
    server_remote: bool = False  # mysql: targets change a server on another host


def host_memory(facts: Facts | None) -> HostMemory | None:
    """MemTotal from the facts, else from /proc/meminfo; None when neither tells it."""
    remote = (
        facts is not None
        and facts.server is not None
        and facts.server.pid.unknown == "server is remote"  # facts/server.py: not local
    )
    if facts is not None and facts.memory.total_bytes.value:
        return HostMemory(facts.memory.total_bytes.value, MEMINFO, remote)
    total = meminfo_total()
    return None if total is None else HostMemory(total, MEMINFO, remote)


def meminfo_total(path: str = MEMINFO) -> int | None:
    from myaccel.facts.memory import parse_meminfo

    try:
        text = Path(path).read_text()
    except OSError:
        return None
    return parse_meminfo(text).get("MemTotal") or None


def _show(value: str) -> str:
    text = value if value.isprintable() else repr(value)
    return _short(text, 60)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
