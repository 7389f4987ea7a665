"""What changes between the source server and its clone, and why: the sandbox's own keys
(paths, port, socket), paths the server writes, options that would reach outside the
sandbox, memory scaled to what the host can spare, and the differences that follow from
those after the clone starts (``explain_difference``)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from myaccel.clone.record import ConfigEntry, Rewrite
from myaccel.clone.source import SourceServer
from myaccel.server.optionfile import normalize_key
from myaccel.server.sandbox.options import (
    FORBIDDEN_KEYS,
    FORBIDDEN_PREFIXES,
    OWNED_KEYS,
    PATH_KEYS,
    canonical_key,
)
from myaccel.units import format_bytes

# The sandbox's own keys, and why a clone cannot share them with its source.
OWNED_REASONS = {
    "datadir": "the clone's own copy of the data (under its sandbox)",
    "socket": "the clone's own socket (under its sandbox)",
    "port": "the clone's own port on 127.0.0.1 (the source keeps its port)",
    "bind_address": "the clone listens on 127.0.0.1 only",
    "pid_file": "the clone's own pid file",
    "log_error": "the clone's own error log",
    "basedir": "the install the clone runs (see the record's server)",
    "user": "the clone runs as the user who made it",
    "secure_file_priv": "the clone's own directory for LOAD DATA / SELECT INTO OUTFILE",
    "lc_messages_dir": "the install the clone runs",
    "plugin_dir": "the install the clone runs",
    "character_sets_dir": "the install the clone runs",
    "tmpdir": "the clone's own temporary directory",
}
# Variables that differ after the start for a reason of their own (not a rewrite).
FOLLOWS = {
    "server_uuid": "each server makes its own UUID (auto.cnf is not copied)",
    "server_uid": "each server makes its own id",
    "skip_slave_start": "the old name of skip_replica_start (rewritten)",
    "init_file": "the clone's first start made its accounts with it (the file is deleted)",
    "report_port": "follows the clone's port",
    "gtid_executed": "the source has written since the copy",
    "gtid_purged": "the copy has no binary logs of the source",
    "gtid_binlog_pos": "the copy has no binary logs of the source",
    "gtid_binlog_state": "the copy has no binary logs of the source",
    "gtid_current_pos": "the copy has no binary logs of the source",
    "gtid_slave_pos": "the copy has no binary logs of the source",
}
# Options of how the source's process was started or what it was asked to do once, not
# of the server it runs: the sandbox starts and watches its own server in the foreground
# (a clone given --daemonize forks, its start sees "exited with code 0"; found on a MySQL
# 9.7 started with mysqld --daemonize).
PROCESS_CONTROL = frozenset(
    {
        "daemonize",
        "initialize",
        "initialize_insecure",
        "bootstrap",
        "help",
        "verbose",
        "validate_config",
        "console",
        "gdb",
        "no_monitor",
        "print_defaults",
    }
)
PROCESS_CONTROL_REASON = (
    "how the source's process was started, not a setting of the server: the sandbox starts "
    "and watches its own server"
)
MEMORY_KEYS = (
    "innodb_buffer_pool_size",
    "key_buffer_size",
    "aria_pagecache_buffer_size",
    "query_cache_size",
    "innodb_log_buffer_size",
)
MIB = 1024 * 1024
MIN_BUFFER_POOL = 128 * MIB


@dataclass(frozen=True)
class Target:
    """Where the clone lives."""

    sandbox_dir: Path
    datadir: Path
    port: int
    server_id: int
    memory_budget_bytes: int
    # the memory knobs (bytes) a candidate configuration will set on the clone (a plan to
    # A/B on it): the factor is chosen so that both the clone's base and the candidate fit
    candidate_memory: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    keep: bool
    value: str | None
    rewrite: Rewrite | None = None


def _under(path: str, root: Path) -> str | None:
    """``path`` relative to ``root`` when it lies below it, else None."""
    if not os.path.isabs(path) or not str(root).strip("/"):
        return None
    p = Path(os.path.normpath(path))
    if p == root:
        return "."
    return str(p.relative_to(root)) if root in p.parents else None


def _left_out(name: str, value: str | None, reason: str) -> Outcome:
    return Outcome(
        False, None, Rewrite(variable=name, source_value=value, clone_value=None, reason=reason)
    )


def rewrite_option(key: str, value: str | None, src: SourceServer, target: Target) -> Outcome:
    """What becomes of one option of the source in the clone's option file."""
    name = canonical_key(key)
    if name in OWNED_KEYS or name == "tmpdir":
        return _left_out(name, value, OWNED_REASONS.get(name, "set by the sandbox"))
    if name in PROCESS_CONTROL:
        return _left_out(name, value, PROCESS_CONTROL_REASON)
    if name in FORBIDDEN_KEYS or name.startswith(FORBIDDEN_PREFIXES) or name.startswith("mysqlx"):
        return _left_out(
            name,
            value,
            "dropped: it would reach outside the sandbox (another port, the X protocol or a "
            "cluster)",
        )
    if value is None:
        return Outcome(True, None)
    raw = value.strip().strip("'\"")
    for old_root, new_root, what in path_roots(src, target):
        rel = _under(raw, old_root)
        if rel is not None:
            new = str(new_root / rel) if rel != "." else str(new_root)
            return Outcome(True, new, _path_rewrite(name, value, new, what))
    if name in PATH_KEYS and os.path.isabs(raw):
        new = str(target.sandbox_dir / "files" / Path(raw).name)
        return Outcome(True, new, _path_rewrite(name, value, new, "a path the server writes"))
    return Outcome(True, value)


_SHARED_DIRS = frozenset({Path("/"), Path("/tmp"), Path("/var/tmp"), Path("/usr")})


def path_roots(src: SourceServer, target: Target) -> list[tuple[Path, Path, str]]:
    """The source's own directories (most specific first) and the clone's counterparts."""
    v = src.variables
    roots = [(src.datadir, target.datadir, "the source's datadir")]
    if v.get("tmpdir"):
        roots.append((Path(v["tmpdir"]), target.sandbox_dir / "tmp", "the source's tmpdir"))
    for key in ("socket", "pid_file", "log_error"):
        if v.get(key) and os.path.isabs(v[key]):
            d = Path(v[key]).parent
            roots.append((d, target.sandbox_dir / "files", f"the directory of its {key}"))
    roots = [(Path(os.path.normpath(a)), b, w) for a, b, w in roots]
    roots = [r for r in roots if r[0] not in _SHARED_DIRS]
    return sorted(roots, key=lambda r: len(str(r[0])), reverse=True)


def _path_rewrite(name: str, old: str, new: str, what: str) -> Rewrite:
    return Rewrite(
        variable=normalize_key(name, drop_loose=True),
        source_value=old,
        clone_value=new,
        reason=f"{what} ({old}) moved under the clone's sandbox, so the two servers never "
        "write the same file",
    )


def _entry_bytes(entries: Sequence[ConfigEntry], variables: Mapping[str, str], key: str) -> int:
    value = next(
        (e.value for e in reversed(entries) if normalize_key(e.key, drop_loose=True) == key),
        None,
    )
    if value is None:
        value = variables.get(key)
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def memory_factor(
    entries: Sequence[ConfigEntry],
    variables: Mapping[str, str],
    budget_bytes: int,
    candidate: Mapping[str, int] | None = None,
) -> tuple[float, int]:
    """(factor, peak): the factor the clone's big buffers are scaled by (1.0 when they fit
    in ``budget_bytes``), and the larger of their sum and the sum with ``candidate``'s
    values in place (a plan to run on the clone, scaled by the same factor)."""
    sizes = {k: _entry_bytes(entries, variables, k) for k in MEMORY_KEYS}
    with_candidate = {**sizes, **{k: v for k, v in (candidate or {}).items() if k in sizes}}
    peak = max(sum(sizes.values()), sum(with_candidate.values()))
    if peak <= budget_bytes or peak == 0:
        return 1.0, peak
    return budget_bytes / peak, peak


def scaled_size(key: str, size: int, factor: float) -> int:
    """``size`` of memory knob ``key`` times ``factor``, in whole MiB, never below the
    floor (128 MiB for the buffer pool, 1 MiB for the others) nor above ``size``."""
    if factor >= 1.0:
        return size
    floor = MIN_BUFFER_POOL if key == "innodb_buffer_pool_size" else MIB
    return min(size, max(floor, int(size * factor) // MIB * MIB))


def scale_memory(
    entries: Sequence[ConfigEntry],
    variables: Mapping[str, str],
    budget_bytes: int,
    candidate: Mapping[str, int] | None = None,
) -> list[Rewrite]:
    """Shrink the clone's big buffers in proportion when they (or a ``candidate``'s in
    their place) add up to more than ``budget_bytes`` (what the host can spare beside the
    running source)."""
    factor, peak = memory_factor(entries, variables, budget_bytes, candidate)
    if factor >= 1.0:
        return []
    total = sum(_entry_bytes(entries, variables, k) for k in MEMORY_KEYS)
    whose = (
        f"the source's buffers ({format_bytes(total)})"
        if peak == total
        else f"the buffers of the plan to run on the clone ({format_bytes(peak)}; the "
        f"source's: {format_bytes(total)})"
    )
    out = []
    for key in MEMORY_KEYS:
        size = _entry_bytes(entries, variables, key)
        new = scaled_size(key, size, factor)
        if size == 0 or new >= size:
            continue
        out.append(
            Rewrite(
                variable=key,
                source_value=str(size),
                clone_value=str(new),
                reason=f"memory scaled by {factor:.2f}: {whose} exceed what the host can "
                f"spare beside it ({format_bytes(budget_bytes)}, half of the memory "
                "available)",
            )
        )
    return out


def explain_difference(
    name: str,
    source_value: str | None,
    clone_value: str | None,
    rewritten: Mapping[str, str],
    src: SourceServer,
    target: Target,
) -> str | None:
    """Why variable ``name`` differs between the source and the clone; None if unexplained."""
    if name in rewritten:
        return rewritten[name]
    if name in OWNED_REASONS:
        return OWNED_REASONS[name]
    if FOLLOWS.get(name):
        return FOLLOWS[name]
    if name.startswith("mysqlx") and clone_value is None:
        return "the X plugin is off in a sandbox (it would listen on port 33060)"
    if name.startswith("clone_") and clone_value is None:
        return "the clone plugin was loaded on the source for the copy only"
    if source_value and clone_value and os.path.isabs(clone_value):
        rel_src = _under(source_value, src.datadir)
        rel_clone = _under(clone_value, target.datadir) or _under(clone_value, target.sandbox_dir)
        if rel_clone is not None and (rel_src is not None or os.path.isabs(source_value)):
            return "a path of the source's files, the clone's own under its sandbox"
    return None
