"""What can be known before touching a server: how it will be restarted (the type of
``actions.target.ServerTarget`` that restarts it: a sandbox, a systemd unit, or a command
the user gives), whether the account has the privileges the work needs, and whether the
disk holds a copy of its data. Each problem is a one-line message with a hint; ``require``
raises the first blocking one before any side effect.

Used by ``myaccel clone`` (privileges for the copy, disk) and by the accelerate flow on an
existing server (restart method, privileges to change variables).

Each problem names the error it raises: a missing privilege is the server refusing what
the work needs (``MissingPrivileges``, exit 3, like a refused login), a copy that does not
fit on the disk is ``NoDiskForCopy`` (exit 8, like a full disk); the rest ``CloneError``.
A clone never falls back to the schema only on its own: ``--schema-only`` asks for it."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pymysql

from myaccel import proc
from myaccel.actions.settings.systemd import main_pid_unit, systemd_booted
from myaccel.actions.target import (
    CommandServer,
    SandboxServer,
    ServerTarget,
    SystemdServer,
    UnmanagedServer,
)
from myaccel.clone.errors import CloneError, MissingPrivileges, NoDiskForCopy
from myaccel.clone.source import SourceServer
from myaccel.errors import MyaccelError
from myaccel.server.connection import connect
from myaccel.server.privileges import ALIASES, SET_GLOBAL, may_select, read_privileges
from myaccel.server.sandbox.layout import sandboxes_root
from myaccel.units import format_bytes

Purpose = Literal["clone", "apply"]

# what a copy needs beyond the data itself: redo written meanwhile, the prepare step
COPY_OVERHEAD = 1.2
COPY_MARGIN_BYTES = 256 * 1024 * 1024
# never fill the file system beyond this share
KEEP_FREE_SHARE = 0.05


@dataclass(frozen=True)
class RestartMethod:
    """How myaccel could restart a server: the type of server target that does it
    (``SandboxServer``, ``SystemdServer``, ``CommandServer``; ``UnmanagedServer``: none),
    built by the work that restarts it (the preflight loads and changes nothing)."""

    kind: type[ServerTarget]
    detail: str  # the sandbox, the unit, the command, or why none
    evidence: str = ""

    @property
    def known(self) -> bool:
        return self.kind is not UnmanagedServer

    def describe(self) -> str:
        """The method as notes name it: ``systemd (mariadb.service)``."""
        return f"{self.kind.record_kind} ({self.detail})"


@dataclass(frozen=True)
class DiskCheck:
    path: str
    need_bytes: int
    free_bytes: int
    what: str = "a copy"  # or a schema-only clone's empty datadir

    @property
    def fits(self) -> bool:
        return self.free_bytes >= self.need_bytes

    def describe(self) -> str:
        return (
            f"{self.what} needs about {format_bytes(self.need_bytes)}, {self.path} has "
            f"{format_bytes(self.free_bytes)} free"
        )


@dataclass(frozen=True)
class Problem:
    message: str
    hint: str
    blocking: bool = True
    error: type[MyaccelError] = CloneError  # what ``require`` raises for it


@dataclass
class Preflight:
    restart: RestartMethod
    missing_privileges: list[str]
    disk: DiskCheck | None
    problems: list[Problem] = field(default_factory=list)

    def require(self) -> None:
        """Raise the first blocking problem (a one-line ``CloneError`` with its hint)."""
        for p in self.problems:
            if p.blocking:
                raise p.error(p.message, hint=p.hint)


def detect_restart(
    src: SourceServer, restart_command: str | None = None, root: Path = Path("/")
) -> RestartMethod:
    """How myaccel could restart the source: a command the user gave, its sandbox, or the
    systemd service whose main process it is (``main_pid_unit``: the unit ``myaccel apply``
    finds, ``actions.session.derive_unit``). ``root``: the sysroot of ``/proc`` and
    ``/run/systemd`` (a fixture tree in tests)."""
    if restart_command:  # the user's word wins over what myaccel would find
        return RestartMethod(CommandServer, restart_command, "given by the user")
    if src.sandbox is not None:
        return RestartMethod(SandboxServer, src.sandbox, "the server is a myaccel sandbox")
    for arg in src.args[1:2]:  # a sandbox's server reached by its socket or port
        option_file = Path(arg.removeprefix("--defaults-file="))
        if arg.startswith("--defaults-file=") and option_file.parent.parent == sandboxes_root():
            return RestartMethod(SandboxServer, option_file.parent.name, f"started with {arg}")
    pid = src.pid
    if pid is None:
        return RestartMethod(UnmanagedServer, "the server is not on this host", "no local process")
    if (unit := main_pid_unit(pid, root)) is not None:
        return RestartMethod(SystemdServer, unit, f"its main process is server pid {pid}")
    if not systemd_booted(root):
        return RestartMethod(
            UnmanagedServer,
            f"pid {pid} runs on a host that systemd does not run (started by hand or by a script)",
            "no /run/systemd/system",
        )
    return RestartMethod(
        UnmanagedServer,
        f"pid {pid} is not the main process of a systemd service (started by hand or by a script)",
        f"/proc/{pid}/cgroup, systemctl show -P MainPID",
    )


def global_privileges(conn: pymysql.connections.Connection[Any]) -> set[str]:
    """The global privileges of the connected account (``server.privileges``), with
    INSERT/DELETE granted on ``mysql`` or ``mysql.plugin`` counted too (all that
    INSTALL/UNINSTALL PLUGIN need)."""
    acc = read_privileges(conn)
    on_plugins = acc.schemas.get("mysql", set()) | acc.tables.get(("mysql", "plugin"), set())
    return acc.global_ | (on_plugins & {"INSERT", "DELETE"})


def needed_privileges(src: SourceServer, purpose: Purpose) -> list[str]:
    if purpose == "apply":
        return [SET_GLOBAL[src.adapter.name]] if src.adapter.name in SET_GLOBAL else []
    needed = list(src.adapter.hot_copy_privileges)
    if src.adapter.hot_copy == "clone-plugin" and src.clone_plugin != "ACTIVE":
        needed += ["INSERT", "DELETE"]  # INSTALL / UNINSTALL PLUGIN (mysql.plugin)
    return needed


def _satisfied(priv: str, have: set[str]) -> bool:
    return priv in have or bool(ALIASES.get(priv, frozenset()) & have)


# What the live guard reads after an apply where performance_schema is on (the statement
# digests' totals: latency and errors). Found on a MariaDB with performance_schema on: an
# account with the privileges the docs listed ran the whole clone A/B, then failed on this
# SELECT (error 1142) when the guard started.
GUARD_TABLE = "performance_schema.events_statements_summary_by_digest"
PFS_SELECT = "SELECT ON performance_schema.*"


def _performance_schema_on(src: SourceServer) -> bool:
    return src.variables.get("performance_schema", "").upper() in ("ON", "1")


def check_privileges(src: SourceServer, purpose: Purpose) -> list[str]:
    conn = connect(src.params)
    try:
        have = global_privileges(conn)
        missing = [p for p in needed_privileges(src, purpose) if not _satisfied(p, have)]
        if purpose == "apply" and _performance_schema_on(src) and not may_select(conn, GUARD_TABLE):
            missing.append(PFS_SELECT)
    finally:
        conn.close()
    return missing


def grant_hint(user: str, missing: list[str]) -> str:
    """The GRANT statements (as an administrator) that give ``user`` what is missing."""
    on_all = ", ".join(p for p in missing if p not in ("INSERT", "DELETE") and " ON " not in p)
    parts = [f"GRANT {on_all} ON *.* TO '{user}'@'HOST'"] if on_all else []
    parts += [f"GRANT {p} TO '{user}'@'HOST'" for p in missing if " ON " in p]
    hint = "; ".join(parts) + " (as an administrator)" if parts else ""
    if "INSERT" in missing:
        hint = (hint + "; and " if hint else "") + (
            "the clone plugin is not loaded: INSTALL PLUGIN clone SONAME "
            "'mysql_clone.so' as an administrator (myaccel then leaves it loaded), or "
            f"GRANT INSERT, DELETE ON mysql.plugin TO '{user}'@'HOST'"
        )
    return hint


def _free_bytes(target: Path) -> tuple[Path, int]:
    """The nearest existing directory of ``target`` and what may be used on its file
    system (``statvfs``), keeping ``KEEP_FREE_SHARE`` of it free."""
    probe = target
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    usage = shutil.disk_usage(probe)
    return probe, max(0, usage.free - int(usage.total * KEEP_FREE_SHARE))


def disk_for_copy(data_bytes: int, target: Path) -> DiskCheck:
    probe, free = _free_bytes(target)
    need = int(data_bytes * COPY_OVERHEAD) + COPY_MARGIN_BYTES
    return DiskCheck(str(probe), need, free)


# What the estimate of a clone's A/B adds on top of its parts, for what it does not count
# (undo and temporary tablespaces growing, the error and slow logs, the results).
AB_MARGIN_SHARE = 0.15


def disk_for_ab(
    data_bytes: int,
    redo_now: int,
    arm_redos: list[int],
    target: Path,
    *,
    dataset_bytes: int = 0,
    binlog: bool = False,
) -> DiskCheck:
    """The clone and the A/B on it, at their largest (``data_bytes``: the source's datadir,
    its redo log of ``redo_now`` included):

    - the clone's datadir with the benchmark's dataset (``dataset_bytes``; written to its
      binary log too when the source keeps one, ``binlog``) and its redo log grown to the
      largest arm's, twice while a snapshot is restored (the old datadir is removed once
      the restored one is in place);
    - the dataset snapshot, and one snapshot per arm with that arm's redo log written out
      (dense, so that no arm measures a log fresh from fallocate);
    - ``AB_MARGIN_SHARE`` and ``COPY_MARGIN_BYTES`` on top; the copy itself (``disk_for_copy``)
      when it needs more.

    Measured with ``scripts/accelerate_disk.py`` (a 277 MiB datadir, a plan's 1 GiB redo
    log): 4,470 MiB at the peak, while the last arm's snapshot was restored. A user's run
    used 5.1-6.2 GiB for a 456 MB datadir where the estimate counted about 0.8 GiB."""
    probe, free = _free_bytes(target)
    grown = max(0, max(arm_redos, default=0) - redo_now)
    live = data_bytes + dataset_bytes + grown
    snapshots = (data_bytes + dataset_bytes) + sum(
        data_bytes + dataset_bytes + max(0, redo - redo_now) for redo in arm_redos
    )
    ab = 2 * live + snapshots + (dataset_bytes if binlog else 0)
    need = max(int(data_bytes * COPY_OVERHEAD), int(ab * (1 + AB_MARGIN_SHARE)))
    what = (
        f"the clone and its A/B (the dataset, {len(arm_redos) + 1} snapshots, each arm's redo log)"
    )
    return DiskCheck(str(probe), need + COPY_MARGIN_BYTES, free, what=what)


def redo_bytes(variables: dict[str, str]) -> int:
    """The redo log the clone's first start creates, as the source is configured
    (MySQL 8.0.30+: ``innodb_redo_log_capacity``; else the log file size times the
    files)."""

    def num(key: str) -> int:
        text = variables.get(key, "")
        return int(text) if text.isdigit() else 0

    capacity = num("innodb_redo_log_capacity")
    if capacity:
        return capacity
    return num("innodb_log_file_size") * max(1, num("innodb_log_files_in_group"))


def disk_for_empty(variables: dict[str, str], target: Path) -> DiskCheck:
    """A schema-only clone: an empty datadir, the source's redo log size, the margin (the
    generated rows take at most a quarter of what is then free)."""
    probe, free = _free_bytes(target)
    need = redo_bytes(variables) + COPY_MARGIN_BYTES
    return DiskCheck(str(probe), need, free, what="an empty datadir with the source's redo log")


def preflight(
    src: SourceServer,
    *,
    purpose: Purpose,
    target: Path,
    restart_command: str | None = None,
    schema_only: bool = False,
    disk_hint: str | None = None,
) -> Preflight:
    """Every check that needs no side effect, for a clone or an apply. ``schema_only``:
    the clone copies no data (asked for), so the disk must hold an empty datadir only;
    ``disk_hint`` words what the command's user can do when a copy does not fit."""
    restart = detect_restart(src, restart_command)
    missing = check_privileges(src, purpose)
    disk = None
    if purpose == "clone":
        disk = (
            disk_for_empty(src.variables, target)
            if schema_only
            else disk_for_copy(src.data_bytes, target)
        )
    pre = Preflight(restart, missing, disk)
    user = src.params.user
    if missing:
        why = " (the guard reads the statement digests)" if PFS_SELECT in missing else ""
        pre.problems.append(
            Problem(
                f"the account {user} lacks {', '.join(missing)} for the {purpose}{why}",
                hint=grant_hint(user, missing),
                error=MissingPrivileges,
            )
        )
    if purpose == "clone":
        _local_copy_problems(src, pre, schema_only=schema_only, disk_hint=disk_hint)
    elif restart.kind is SystemdServer and os.geteuid() != 0:
        pre.problems.append(
            Problem(
                f"restarting {restart.detail} needs root (systemctl restart), and myaccel "
                f"runs as uid {os.geteuid()}",
                hint="run myaccel as root, or give --restart-command with a command you may "
                "run (e.g. 'sudo systemctl restart UNIT')",
                error=MissingPrivileges,
            )
        )
    elif not restart.known:
        pre.problems.append(
            Problem(
                f"myaccel cannot restart this server: {restart.detail}",
                hint="changes that need a restart are left out; a restart command given by "
                "the user (or a systemd unit) allows them",
                blocking=False,
            )
        )
    return pre


DISK_HINT = (
    "free space there, set MYACCEL_HOME to a larger file system, or pass --schema-only "
    "(the clone gets the schema and generated rows of the same shape, no copy)"
)


def _local_copy_problems(
    src: SourceServer, pre: Preflight, *, schema_only: bool, disk_hint: str | None
) -> None:
    if src.pid is None:
        pre.problems.append(
            Problem(
                "the server runs on another host: a clone is made on the server's own host",
                hint="run myaccel clone on the database host (socket or 127.0.0.1)",
            )
        )
        return
    backup = src.adapter.hot_copy == "mariadb-backup" and not schema_only
    if backup and proc.which("mariadb-backup") is None and proc.which("mariabackup") is None:
        # Debian's mariadb-server does not pull it in (found on a stock server in the lab)
        pre.problems.append(
            Problem(
                "mariadb-backup is not installed (a MariaDB clone copies the data with it)",
                hint="apt-get install mariadb-backup (of the server's version)",
            )
        )
    if src.adapter.hot_copy == "mariadb-backup" and not os.access(src.datadir, os.R_OK | os.X_OK):
        pre.problems.append(
            Problem(
                f"cannot read the server's datadir {src.datadir} (mariadb-backup reads its files)",
                hint="run myaccel clone as root or as the server's user",
            )
        )
    other_user = src.uid is not None and src.uid != os.getuid() and os.geteuid() != 0
    if other_user and src.adapter.hot_copy == "clone-plugin":
        pre.problems.append(
            Problem(
                f"the server runs as uid {src.uid} and writes the copy itself; "
                "myaccel would not own it",
                hint="run myaccel clone as root or as the server's user",
            )
        )
    if pre.disk is not None and not pre.disk.fits:
        pre.problems.append(
            Problem(
                f"not enough disk for the clone: {pre.disk.describe()}",
                hint=(
                    "free space there, or set MYACCEL_HOME to a larger file system"
                    if schema_only
                    else disk_hint or DISK_HINT
                ),
                error=NoDiskForCopy,
            )
        )
