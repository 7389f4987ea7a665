"""Option policy: what a user's ``--config``/``--set`` may change in a sandbox's option file.

The sandbox-owned keys (paths, port, socket) are written last, so they always win ("last
one wins" in option files); keys that would reach outside the sandbox are dropped, and the
user's copies are reported. ``compose_option_file`` writes the whole file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from myaccel.errors import UsageError
from myaccel.server.flavors import adapter_for
from myaccel.server.optionfile import iter_option_text, normalize_key

_SET_KEY_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")

# Keys the sandbox sets itself: written last, and the user's copies are dropped.
OWNED_KEYS = frozenset(
    {
        "basedir",
        "datadir",
        "socket",
        "port",
        "bind_address",
        "pid_file",
        "log_error",
        "user",
        "secure_file_priv",
        "lc_messages_dir",
        "language",
        "plugin_dir",
        "character_sets_dir",
    }
)
# Keys that would reach outside the sandbox (other ports, clusters): dropped.
FORBIDDEN_KEYS = frozenset(
    {
        "extra_port",
        "admin_address",
        "admin_port",
        "mysqlx_port",
        "mysqlx_socket",
        "mysqlx_bind_address",
    }
)
FORBIDDEN_PREFIXES = ("wsrep_", "group_replication_")
# Paths the server writes: an absolute value outside the sandbox is dropped (relative
# values are inside the datadir).
PATH_KEYS = frozenset(
    {
        "innodb_data_home_dir",
        "innodb_log_group_home_dir",
        "innodb_undo_directory",
        "innodb_tmpdir",
        "innodb_temp_tablespaces_dir",
        "innodb_doublewrite_dir",
        "tmpdir",
        "log_bin",
        "log_bin_index",
        "relay_log",
        "relay_log_index",
        "general_log_file",
        "slow_query_log_file",
        "log_slow_query_file",
        "log_tc",
        "aria_log_dir_path",
        "server_audit_file_path",
    }
)
_POLICY_KEYS = OWNED_KEYS | PATH_KEYS | FORBIDDEN_KEYS


def canonical_key(key: str) -> str:
    """``--loose-skip-log-error`` and ``log-error`` both name ``log_error`` (a modifier
    is dropped only before a key of the policy: ``skip-name-resolve`` stays itself)."""
    return normalize_key(key, drop_loose=True, drop_modifier=_POLICY_KEYS)


def _unquoted(value: str) -> str:
    v = value.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
        return v[1:-1]
    return v


def drop_reason(key: str, value: str | None, sandbox_dir: Path) -> str | None:
    """Why a user's option must not reach the server, or None."""
    k = canonical_key(key)
    if k in OWNED_KEYS:
        return "managed by the sandbox"
    if k in FORBIDDEN_KEYS or k.startswith(FORBIDDEN_PREFIXES):
        return "would reach outside the sandbox"
    if k in PATH_KEYS and value is not None:
        v = _unquoted(value)
        if os.path.isabs(v):
            p = Path(os.path.normpath(v))
            if p != sandbox_dir and sandbox_dir not in p.parents:
                return "absolute path outside the sandbox"
    return None


@dataclass(frozen=True)
class OptionLine:
    key: str
    value: str | None  # raw text after '=', None for a bare flag
    origin: str

    def render(self) -> str:
        return self.key if self.value is None else f"{self.key}={self.value}"


@dataclass(frozen=True)
class Override:
    key: str
    value: str | None
    reason: str
    origin: str

    def describe(self) -> str:
        shown = self.key if self.value is None else f"{self.key}={self.value}"
        return f"{shown} ({self.reason})"


def server_groups(flavor: str, major_minor: str) -> tuple[str, ...]:
    """Option-file groups the server reads, as in the MySQL/MariaDB documentation."""
    return adapter_for(flavor).option_groups(major_minor)


def read_server_options(path: Path, groups: Sequence[str]) -> list[OptionLine]:
    """The server options of an option file, in file order (duplicates kept: the server
    applies them in order, last wins, and some options such as plugin-load-add add up).
    Follows ``!include`` and ``!includedir`` (through the shared option-file reader)."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError as exc:
        raise UsageError(
            f"config file '{path}' does not exist",
            hint="pass an existing option file (my.cnf) with a [mysqld] section",
        ) from exc
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UsageError(
            f"cannot read config file '{path}': {reason}",
            hint="pass a readable option file (my.cnf) with a [mysqld] section",
        ) from exc
    wanted = {g.lower() for g in groups}
    return [
        OptionLine(o.key, o.value, o.origin)
        for o in iter_option_text(text, origin=str(path))
        if o.group in wanted
    ]


def parse_sets(items: Sequence[str]) -> dict[str, str]:
    """``--set key=value`` items (later ones win); malformed items are a UsageError."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not _SET_KEY_RE.match(key):
            raise UsageError(
                f"malformed --set '{item}': expected KEY=VALUE",
                hint="for example --set innodb_buffer_pool_size=1G (repeat --set for more keys)",
            )
        if any(c in value for c in "\n\r\0"):
            raise UsageError(
                f"malformed --set '{key}=...': the value has a line break",
                hint="values must fit on one line",
            )
        out[key] = value.strip()
    return out


def check_sets(sets: Mapping[str, str], sandbox_dir: Path) -> None:
    hints = {
        "managed by the sandbox": "the sandbox sets datadir, socket, port, bind-address, "
        "pid-file, log-error, basedir, user and the plugin/message dirs itself",
        "would reach outside the sandbox": "extra ports, the X protocol and cluster "
        "replication (wsrep_*, group_replication_*) are not allowed in a sandbox",
        "absolute path outside the sandbox": "use a relative path (inside the datadir) or "
        f"one under {sandbox_dir}",
    }
    for key, value in sets.items():
        reason = drop_reason(key, value, sandbox_dir)
        if reason is not None:
            raise UsageError(f"--set {key}: {reason}", hint=hints.get(reason, ""))


def quote_value(value: str) -> str:
    """A value as option-file text: backslashes are escapes there, so double them, and
    quote values with spaces or '#'."""
    v = value.replace("\\", "\\\\")
    if v == "" or any(c in v for c in " \t#'\""):
        return '"' + v.replace('"', '\\"') + '"'
    return v


@dataclass(frozen=True)
class ComposedOptions:
    text: str
    overridden: tuple[Override, ...]
    user_keys: tuple[str, ...]


def compose_option_file(
    *,
    sandbox_name: str,
    sandbox_dir: Path,
    client: Sequence[tuple[str, str]],
    base: Sequence[tuple[str, str | None]],
    owned: Sequence[tuple[str, str | None]],
    user_options: Sequence[OptionLine] = (),
    config_file: Path | None = None,
    sets: Mapping[str, str] | None = None,
) -> ComposedOptions:
    """Base settings, then the user's file, then ``--set``, then the sandbox-owned keys.

    Everything goes into one ``[mysqld]`` group in that order, so the server's "last one
    wins" rule gives exactly that precedence."""
    overridden: list[Override] = []
    lines = [
        f"# Generated by myaccel for sandbox '{sandbox_name}'. Rewritten at every start: do",
        f"# not edit. Other settings: myaccel sandbox start {sandbox_name} --config FILE "
        "--set KEY=VALUE",
        "# Admin client: mariadb --defaults-file=<this file>  (or mysql --defaults-file=...)",
        "",
        "[client]",
    ]
    lines += [f"{k}={v}" for k, v in client]
    lines += ["", "[mysqld]", "# -- base settings"]
    lines += [k if v is None else f"{k}={v}" for k, v in base]
    user_keys: list[str] = []
    if config_file is not None:
        lines.append(f"# -- from {config_file}")
        for opt in user_options:
            reason = drop_reason(opt.key, opt.value, sandbox_dir)
            if reason is not None:
                overridden.append(Override(opt.key, opt.value, reason, opt.origin))
                lines.append(f"# ignored ({reason}): {opt.render()}")
                continue
            user_keys.append(normalize_key(opt.key))
            lines.append(opt.render())
    if sets:
        lines.append("# -- from --set")
        for k, v in sets.items():
            user_keys.append(normalize_key(k))
            lines.append(f"{k}={quote_value(v)}")
    lines.append("# -- owned by the sandbox: last, so they always win")
    lines += [k if v is None else f"{k}={v}" for k, v in owned]
    return ComposedOptions("\n".join(lines) + "\n", tuple(overridden), tuple(user_keys))
