"""The clone's configuration: what the source server was configured with, made to run
beside it.

Three sources, in the order the clone's option file applies them (last one wins):

1. the options its option files give (``--print-defaults`` with the ``--defaults-*``
   options it was started with) and its own command line, for options that are not
   variables (``plugin-load-add``, ``log-bin=NAME``, ``skip-log-bin``);
2. every variable whose running value (``SHOW GLOBAL VARIABLES``: option files, ``SET
   PERSIST`` and ``SET GLOBAL`` alike) differs from the binary's compiled default, with its
   origin;
3. the rewrites (``rewrite.py``): paths, port, socket and server id of the clone's own,
   memory scaled to what the host can spare, options that would reach outside the sandbox
   dropped, each with its reason.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from myaccel import proc
from myaccel.clone.defaults import same_value
from myaccel.clone.record import ConfigEntry, Rewrite
from myaccel.clone.rewrite import Target, memory_factor, rewrite_option, scale_memory
from myaccel.clone.source import SourceServer, command_line_options, defaults_args
from myaccel.server.optionfile import normalize_key
from myaccel.server.sandbox.options import quote_value

# Variables whose SHOW VARIABLES form is not their option form (log_bin is ON/OFF, the
# option a base name): taken from the option files only.
# server_uid (MariaDB) is the instance's identity; report_port follows the port.
NOT_FROM_RUNTIME = frozenset({"log_bin", "log_basename", "server_uid", "report_port"})
# Written with the source's value even when it is the compiled default: the sandbox's own
# base configuration changes them, or the server sizes them from the CPUs it may use (and
# the clone is fenced onto fewer).
ALWAYS_WRITTEN = frozenset(
    {
        "skip_name_resolve",
        "thread_pool_size",
        "innodb_read_io_threads",
        "innodb_write_io_threads",
        "innodb_parallel_read_threads",
        "innodb_purge_threads",
        "innodb_page_cleaners",
        "innodb_buffer_pool_instances",
        "innodb_log_writer_threads",
        "table_open_cache_instances",
        "innodb_ddl_threads",
        # sized at startup from max_connections and the open-files limit, which the source
        # may have changed since (SET GLOBAL)
        "back_log",
        "host_cache_size",
        "thread_cache_size",
        "open_files_limit",
        "table_open_cache",
        "table_definition_cache",
        # chosen at startup from the log file's storage
        "innodb_log_file_buffering",
    }
)


@dataclass
class CloneConfig:
    entries: list[ConfigEntry] = field(default_factory=list)
    rewritten: list[Rewrite] = field(default_factory=list)
    memory_factor: float = 1.0  # the big buffers' scale (1.0: not scaled)

    def render(self, header: str) -> str:
        lines = [f"# {ln}" if ln else "#" for ln in header.splitlines()]
        lines += ["", "[mysqld]"]
        origin = None
        for e in self.entries:
            if e.origin != origin:
                lines.append(f"# -- {e.origin}")
                origin = e.origin
            lines.append(e.key if e.value is None else f"{e.key}={quote_value(e.value)}")
        return "\n".join(lines) + "\n"


def parse_print_defaults(text: str) -> list[tuple[str, str | None]]:
    """``--key=value`` arguments of ``--print-defaults`` output (its first line names
    the program)."""
    body = " ".join(ln for ln in text.splitlines() if ln.lstrip().startswith("--"))
    return [_split_arg(a) for a in re.split(r"\s+(?=--)", body.strip()) if a.startswith("--")]


def _split_arg(arg: str) -> tuple[str, str | None]:
    key, sep, value = arg[2:].partition("=")
    return key, (value if sep else None)


def options_read(src: SourceServer) -> list[tuple[str, str | None, str]]:
    """(key, value, origin) the source server got from option files and its command line."""
    out: list[tuple[str, str | None, str]] = []
    binary = src.binary
    if binary is not None and src.args:
        argv = src.adapter.print_defaults_argv(str(binary), defaults_args(src.args))
        done = proc.run(argv, timeout_s=30.0)
        if done.ok:
            out += [(k, v, "option files") for k, v in parse_print_defaults(done.stdout)]
        else:
            src.notes.append(f"{' '.join(argv)} failed: option files not read")
    out += [(*_split_arg(a), "command line") for a in command_line_options(src.args)]
    return out


def _origin(name: str, src: SourceServer, from_files: set[str]) -> str:
    if name in src.persisted:
        return "SET PERSIST"
    if name in from_files:
        return "option files"
    return "running value, not the compiled default (SET GLOBAL, or sized at startup)"


def derive_config(
    src: SourceServer,
    defaults: Mapping[str, str],
    read: Sequence[tuple[str, str | None, str]],
    target: Target,
) -> CloneConfig:
    """The clone's option lines and the rewrites, each with its reason."""
    cfg = CloneConfig()
    variables = src.variables
    from_files: set[str] = set()
    for key, value, origin in read:
        name = normalize_key(key, drop_loose=True, drop_modifier=True)
        from_files.add(name)
        if name in variables and name in defaults and name not in NOT_FROM_RUNTIME:
            continue  # its running value follows
        _add(cfg, key, value, origin, src, target)
    for name, value in sorted(variables.items()):
        if name not in defaults or name in NOT_FROM_RUNTIME:
            continue
        if same_value(value, defaults[name]) and name not in ALWAYS_WRITTEN:
            continue
        if value.startswith("(") and value.endswith(")"):
            continue  # a placeholder such as ft_stopword_file's "(built-in)"
        if not defaults[name] and value.startswith("./"):
            continue  # the server's own choice for an unset path (inside its datadir)
        # loose-: a variable of a plugin the clone has not loaded yet must not stop it
        _add(cfg, f"loose-{name}", value, _origin(name, src, from_files), src, target)
    _identity(cfg, src, target)
    budget, candidate = target.memory_budget_bytes, target.candidate_memory
    cfg.memory_factor = memory_factor(cfg.entries, variables, budget, candidate)[0]
    for rw in scale_memory(cfg.entries, variables, budget, candidate):
        _set(cfg, rw.variable, rw.clone_value, "myaccel")
        cfg.rewritten.append(rw)
    return cfg


def _add(
    cfg: CloneConfig, key: str, value: str | None, origin: str, src: SourceServer, target: Target
) -> None:
    outcome = rewrite_option(key, value, src, target)
    if outcome.rewrite is not None and not any(
        r.variable == outcome.rewrite.variable for r in cfg.rewritten
    ):
        cfg.rewritten.append(outcome.rewrite)
    if outcome.keep:
        cfg.entries.append(ConfigEntry(key=key, value=outcome.value, origin=origin))


def _set(cfg: CloneConfig, key: str, value: str | None, origin: str) -> None:
    name = normalize_key(key, drop_loose=True)
    cfg.entries = [e for e in cfg.entries if normalize_key(e.key, drop_loose=True) != name]
    cfg.entries.append(ConfigEntry(key=key, value=value, origin=origin))


def _identity(cfg: CloneConfig, src: SourceServer, target: Target) -> None:
    """A server id of its own; never replicate from the source's primary."""
    old = src.variables.get("server_id")
    new = str(target.server_id)
    _set(cfg, "server_id", new, "myaccel")
    cfg.rewritten.append(
        Rewrite(
            variable="server_id",
            source_value=old,
            clone_value=new,
            reason="a server id of its own (the clone's port): two servers with one id "
            "confuse replication and GTIDs",
        )
    )
    skip = src.adapter.skip_replica_start
    if not same_value(src.variables.get(skip, "OFF"), "ON"):
        _set(cfg, skip, "ON", "myaccel")
        cfg.rewritten.append(
            Rewrite(
                variable=skip,
                source_value=src.variables.get(skip),
                clone_value="ON",
                reason="the clone must not start replicating from the source's primary "
                "(its copied replication settings point there)",
            )
        )
