"""Settings: one target each, able to read, plan, apply and revert itself.

A target is a URI (DESIGN habit 10)::

    sysctl:vm.swappiness                             /proc/sys/vm/swappiness (+ /etc/sysctl.d/99-myaccel.conf)
    sysfs:/sys/kernel/mm/transparent_hugepage/enabled  the file (+ /etc/tmpfiles.d/99-myaccel.conf)
    debugfs:/sys/kernel/debug/sched/base_slice_ns    the file (runtime only by default)
    file:/etc/security/limits.d/99-myaccel.conf      a whole file myaccel writes
    mycnf:mysqld/innodb_io_capacity                  <conf.d>/99-myaccel.cnf, group [mysqld]
    mysql:innodb_io_capacity                         SET GLOBAL (optionally SET PERSIST)
    systemd:mariadb.service/NUMAPolicy               /etc/systemd/system/<unit>.d/99-myaccel.conf
                                                     ("server" as the unit: the server's unit)

Every setting works under a root directory (``/`` on a real machine, a copy of a fixture
sysroot in tests). Writes go only to the target itself or to a file myaccel owns (a name
with ``99-myaccel``, a header saying so); a user's own files are never edited.

The protocol (``Setting``):

- ``read()``: the current value, None when absent;
- ``plan(desired)``: what would change, or None when nothing would: the *simulate* path that
  ``apply --dry-run`` and ``verify`` share with apply itself (DESIGN habit 2);
- ``capture()``: the old state to journal before changing anything (DESIGN habit 1);
- ``apply(desired)`` and ``revert(entry)``: revert restores the journaled old state,
  idempotently (it may run for a change that never happened);
- ``spec()``: JSON-safe parameters that rebuild the setting in another process
  (``setting_from_spec``), so a rollback after a crash needs only the journal.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import math
import os
import re
import socket
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pymysql

from myaccel import proc
from myaccel.actions.errors import ApplyError
from myaccel.actions.files import (
    DEFAULT_FILE_MODE,
    ManagedFile,
    ancestors,
    check_logical_path,
    check_value_text,
    ensure_dirs,
    host_path,
    is_live_root,
    parse_choice,
    read_bytes,
    read_kernel_value,
    restore_file,
    snapshot_file,
    write_file_durably,
    write_kernel_value,
)
from myaccel.actions.journal import JournalEntry, OldState
from myaccel.errors import UsageError
from myaccel.knobs.values import ValueSyntaxError, parse_int
from myaccel.model import Frozen
from myaccel.server.optionfile import normalize_key

log = logging.getLogger(__name__)

SYSCTL_MANAGED = "/etc/sysctl.d/99-myaccel.conf"
TMPFILES_MANAGED = "/etc/tmpfiles.d/99-myaccel.conf"
MYCNF_MANAGED_NAME = "99-myaccel.cnf"
SYSTEMD_DROPIN_NAME = "99-myaccel.conf"
# Where distributions include a conf.d directory from my.cnf, most specific first.
CONF_DIR_CANDIDATES = (
    "/etc/mysql/mariadb.conf.d",
    "/etc/mysql/mysql.conf.d",
    "/etc/my.cnf.d",
    "/etc/mysql/conf.d",
)
SYSTEMD_UNIT_DIRS = (
    "/etc/systemd/system",
    "/run/systemd/system",
    "/lib/systemd/system",
    "/usr/lib/systemd/system",
)
SERVER_UNITS = ("mariadb.service", "mysql.service", "mysqld.service")
SYSCTL_DIRS = (
    "/etc/sysctl.d",
    "/run/sysctl.d",
    "/usr/local/lib/sysctl.d",
    "/usr/lib/sysctl.d",
    "/lib/sysctl.d",
)

SCHEMES = ("sysctl", "sysfs", "debugfs", "file", "mycnf", "mysql", "systemd")
ADVISORY_SCHEMES = ("advice", "build", "irq", "hardware", "bios")

Connect = Callable[[], "pymysql.connections.Connection[Any]"]
Runner = Callable[[Sequence[str]], object]

_SYSCTL_KEY_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:/+-]*$")
_VAR_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_GROUP_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
_UNIT_RE = re.compile(r"^[A-Za-z0-9_.@:\\-]+\.(service|socket|slice|scope)$")
_SYSTEMD_KEY_RE = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_GLOB_CHARS = set("*?[")


class Change(Frozen):
    """What applying one setting would do (dry run, verify) or did (apply)."""

    target: str
    kind: str
    current: str | None
    desired: str
    needs_root: bool
    writes: tuple[str, ...] = ()  # logical paths, or the statement for server variables
    takes_effect: str = "now"  # now | server restart | unit restart | boot
    warnings: tuple[str, ...] = ()


# ---------------------------------------------------------------- values


_TRUE = {"ON", "TRUE", "YES"}
_FALSE = {"OFF", "FALSE", "NO"}


def normalize_value(text: str) -> int | float | str:
    """A comparable form of a value as servers and kernels spell it: ``128M`` ==
    ``134217728``; ``ON`` == ``1`` == ``TRUE``; ``90.000000`` == ``90``; other text compares
    case-insensitively with whitespace runs collapsed (``4096\\t131072`` == ``4096 131072``)."""
    t = text.strip()
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        t = t[1:-1].strip()
    u = t.upper()
    if u in _TRUE:
        return 1
    if u in _FALSE:
        return 0
    try:
        return parse_int(t)
    except ValueSyntaxError:
        pass
    if re.fullmatch(r"[+-]?(\d+\.\d*|\.\d+)([eE][+-]?\d+)?", t):
        f = float(t)
        if math.isfinite(f):
            return int(f) if f.is_integer() else f
    return " ".join(t.split()).casefold()


def values_equal(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a is b
    return normalize_value(a) == normalize_value(b)


# ---------------------------------------------------------------- protocol


class Setting(ABC):
    """One target that can be read, planned, applied and reverted."""

    kind: ClassVar[str]
    target: str

    @property
    @abstractmethod
    def needs_root(self) -> bool:
        """True when applying writes system files or kernel state (on a real machine)."""

    @abstractmethod
    def read(self) -> str | None:
        """The current value; None when absent."""

    @abstractmethod
    def plan(self, desired: str) -> Change | None:
        """What ``apply(desired)`` would change, or None if nothing; touches nothing."""

    @abstractmethod
    def capture(self) -> OldState:
        """The state to journal before ``apply``: enough for ``revert`` to restore it."""

    @abstractmethod
    def apply(self, desired: str) -> None: ...

    @abstractmethod
    def revert(self, entry: JournalEntry) -> None:
        """Restore ``entry.old``; idempotent, and safe when the change never happened."""

    @abstractmethod
    def spec(self) -> dict[str, Any]:
        """JSON-safe constructor parameters (see ``setting_from_spec``)."""

    def matches(self, actual: str | None, desired: str) -> bool:
        """Whether a read-back value is the desired one (after normalization)."""
        return values_equal(actual, desired)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.target!r})"


class _RootedSetting(Setting):
    """A setting that writes files under ``root``."""

    def __init__(self, root: str | Path) -> None:
        # Absolute: the journal records it, and rollback may run from another directory.
        self.root = Path(root).absolute()
        self.live = is_live_root(self.root)

    @property
    def needs_root(self) -> bool:
        return self.live

    def _restore_files(self, entry: JournalEntry) -> bool:
        changed = False
        for state in reversed(entry.old.files):
            changed = restore_file(self.root, state) or changed
        return changed


# ---------------------------------------------------------------- kernel values


class _KernelValueSetting(_RootedSetting):
    """A value in /proc/sys, /sys or debugfs, optionally made persistent through a
    managed file."""

    logical: str

    def __init__(self, root: str | Path, persist: bool) -> None:
        super().__init__(root)
        self.persist = persist

    @abstractmethod
    def _managed(self) -> ManagedFile: ...

    @abstractmethod
    def _managed_key(self) -> str: ...

    def read(self) -> str | None:
        return read_kernel_value(self.root, self.logical)

    def _absent_error(self) -> UsageError:
        return UsageError(
            f"{self.target}: {self.logical} does not exist on this machine",
            hint="the kernel does not offer this setting (version, config or hardware); skip it",
        )

    def _validate(self, desired: str) -> str:
        check_value_text(desired, self.target)
        if not desired.strip():
            raise UsageError(f"{self.target}: empty value", hint="give the value to write")
        return desired.strip()

    def _persist_warnings(self, desired: str) -> tuple[str, ...]:
        return ()

    def plan(self, desired: str) -> Change | None:
        desired = self._validate(desired)
        current = self.read()
        if current is None:
            raise self._absent_error()
        raw = read_bytes(self.root, self.logical) or b""
        _, choices = parse_choice(raw.decode(errors="replace"))
        if choices and desired not in choices:
            raise UsageError(
                f"{self.target}: '{desired}' is not one of {', '.join(choices)}",
                hint="pick one of the values the kernel lists",
            )
        runtime_ok = self.matches(current, desired)
        persisted_ok = True
        writes = [self.logical]
        if self.persist:
            managed = self._managed()
            managed.check_owned()
            persisted_ok = values_equal(managed.get("", self._managed_key()), desired)
            writes.append(managed.path)
        if runtime_ok and persisted_ok:
            return None
        return Change(
            target=self.target,
            kind=self.kind,
            current=current,
            desired=desired,
            needs_root=self.needs_root,
            writes=tuple(writes),
            takes_effect="now",
            warnings=self._persist_warnings(desired) if self.persist else (),
        )

    def capture(self) -> OldState:
        files = [snapshot_file(self.root, self._managed().path)] if self.persist else []
        return OldState(value=self.read(), files=files)

    def apply(self, desired: str) -> None:
        desired = self._validate(desired)
        # Runtime first: a value the kernel rejects is never made persistent.
        if not self.matches(self.read(), desired):
            write_kernel_value(self.root, self.logical, desired, emulate=not self.live)
        if self.persist:
            self._managed().set("", self._managed_key(), desired)

    def revert(self, entry: JournalEntry) -> None:
        old = entry.old.value
        if old is not None and read_kernel_value(self.root, self.logical) != old:
            write_kernel_value(self.root, self.logical, old, emulate=not self.live)
        self._restore_files(entry)


class SysctlSetting(_KernelValueSetting):
    """``sysctl:vm.swappiness``: /proc/sys/vm/swappiness now, and a line in
    /etc/sysctl.d/99-myaccel.conf for boot (``persist``)."""

    kind = "sysctl"

    def __init__(self, key: str, *, root: str | Path = "/", persist: bool = True) -> None:
        super().__init__(root, persist)
        if not _SYSCTL_KEY_RE.match(key) or ".." in key or "//" in key:
            raise UsageError(
                f"'{key}' is not a sysctl key", hint="write it like sysctl does: vm.swappiness"
            )
        self.key = key
        self.target = f"sysctl:{key}"
        self.logical = "/proc/sys/" + (key if "/" in key else key.replace(".", "/"))

    def _managed(self) -> ManagedFile:
        return ManagedFile(
            self.root, SYSCTL_MANAGED, "sysctl", "Read at boot by systemd-sysctl (sysctl --system)."
        )

    def _managed_key(self) -> str:
        return self.key

    def spec(self) -> dict[str, Any]:
        return {"key": self.key, "root": str(self.root), "persist": self.persist}

    def matches(self, actual: str | None, desired: str) -> bool:
        if actual is None:
            return False
        return actual.split() == desired.split() or values_equal(actual, desired)

    def _persist_warnings(self, desired: str) -> tuple[str, ...]:
        """Files that systemd-sysctl reads after ours and that set the same key win at boot."""
        mine = os.path.basename(SYSCTL_MANAGED)
        later: dict[str, str] = {}
        for d in SYSCTL_DIRS:
            hd = host_path(self.root, d)
            if not hd.is_dir():
                continue
            for name in sorted(os.listdir(hd)):
                if name.endswith(".conf") and name > mine and name not in later:
                    later[name] = f"{d}/{name}"
        paths = [*later.values(), "/etc/sysctl.conf"]
        out = []
        want = self.key.replace("/", ".")
        for logical in paths:
            data = (
                read_bytes(self.root, logical) if host_path(self.root, logical).is_file() else None
            )
            if data is None:
                continue
            for line in data.decode(errors="replace").splitlines():
                k, sep, v = line.strip().lstrip("-").partition("=")
                if (
                    sep
                    and k.strip().replace("/", ".") == want
                    and not line.lstrip().startswith(("#", ";"))
                ):
                    out.append(
                        f"{logical} also sets {want} = {v.strip()} and is read after "
                        f"{SYSCTL_MANAGED}: its value wins at boot"
                    )
        return tuple(out)


class SysfsSetting(_KernelValueSetting):
    """``sysfs:/sys/kernel/mm/transparent_hugepage/enabled``: writes the bare word (a file
    reading ``always [madvise] never`` has the value ``madvise``); ``persist`` adds a
    ``w`` line to /etc/tmpfiles.d/99-myaccel.conf so systemd-tmpfiles writes it at boot."""

    kind = "sysfs"
    prefix = "/sys/"

    def __init__(self, path: str, *, root: str | Path = "/", persist: bool = True) -> None:
        super().__init__(root, persist)
        check_logical_path(path, self.kind + " path")
        if _GLOB_CHARS & set(path):
            raise UsageError(
                f"{self.kind}:{path} names several files",
                hint="expand it first (myaccel.actions.expand_target) into one target per file",
            )
        self._check_prefix(path)
        self.path = path
        self.logical = path
        self.target = f"{self.kind}:{path}"

    def _check_prefix(self, path: str) -> None:
        if not path.startswith(self.prefix):
            raise UsageError(
                f"sysfs path '{path}' is not under /sys", hint="write it like /sys/kernel/mm/..."
            )
        if path.startswith(DebugfsSetting.prefix):
            raise UsageError(f"'{path}' is in debugfs", hint=f"write the target as debugfs:{path}")

    def _managed(self) -> ManagedFile:
        return ManagedFile(
            self.root, TMPFILES_MANAGED, "tmpfiles", "Written at boot by systemd-tmpfiles (type w)."
        )

    def _managed_key(self) -> str:
        return self.path

    def spec(self) -> dict[str, Any]:
        return {"path": self.path, "root": str(self.root), "persist": self.persist}


class DebugfsSetting(SysfsSetting):
    """``debugfs:/sys/kernel/debug/sched/base_slice_ns``: scheduler knobs since 5.13.
    Runtime only by default (debugfs may not be mounted when tmpfiles runs)."""

    kind = "debugfs"
    prefix = "/sys/kernel/debug/"

    def __init__(self, path: str, *, root: str | Path = "/", persist: bool = False) -> None:
        super().__init__(path, root=root, persist=persist)

    def _check_prefix(self, path: str) -> None:
        if not path.startswith(self.prefix):
            raise UsageError(
                f"debugfs path '{path}' is not under /sys/kernel/debug",
                hint="write it like /sys/kernel/debug/sched/base_slice_ns",
            )

    def _absent_error(self) -> UsageError:
        mounted = (
            host_path(self.root, "/sys/kernel/debug/sched").is_dir()
            or host_path(self.root, "/sys/kernel/debug/sched_features").exists()
        )
        hint = (
            "this kernel does not offer it (names change between versions: 6.6 renamed "
            "min_granularity_ns to base_slice_ns); skip it"
            if mounted
            else "debugfs is not mounted (or not readable): mount -t debugfs none "
            "/sys/kernel/debug, as root"
        )
        return UsageError(f"{self.target}: {self.logical} does not exist", hint=hint)


# ---------------------------------------------------------------- whole files


class FileSetting(_RootedSetting):
    """``file:/etc/...``: a whole file myaccel writes. The old content is journaled byte for
    byte (or that it did not exist), with mode and owner; revert restores them and removes
    the file and any directories myaccel created."""

    kind = "file"

    def __init__(self, path: str, *, root: str | Path = "/", mode: int = DEFAULT_FILE_MODE) -> None:
        super().__init__(root)
        check_logical_path(path, "file path")
        if path.startswith(("/proc/", "/sys/", "/dev/")):
            raise UsageError(
                f"file:{path} is a kernel interface, not a file",
                hint=f"use sysctl: or sysfs:{path}",
            )
        self.path = path
        self.mode = mode
        self.target = f"file:{path}"

    def read(self) -> str | None:
        data = read_bytes(self.root, self.path)
        return None if data is None else data.decode("utf-8", errors="surrogateescape")

    def matches(self, actual: str | None, desired: str) -> bool:
        return actual == desired

    def plan(self, desired: str) -> Change | None:
        current = self.read()
        snapshot_file(self.root, self.path)  # refuses symlinks and non-regular files now
        if current == desired:
            return None
        return Change(
            target=self.target,
            kind=self.kind,
            current=current,
            desired=desired,
            needs_root=self.needs_root,
            writes=(self.path,),
            takes_effect="now",
        )

    def capture(self) -> OldState:
        return OldState(value=None, files=[snapshot_file(self.root, self.path)])

    def apply(self, desired: str) -> None:
        p = host_path(self.root, self.path)
        missing = [d for d in ancestors(self.path) if not host_path(self.root, d).exists()]
        ensure_dirs(self.root, missing)
        mode, uid, gid = self.mode, None, None
        if p.exists():
            st = p.stat()
            mode, uid, gid = st.st_mode & 0o7777, st.st_uid, st.st_gid
        data = desired.encode("utf-8", errors="surrogateescape")
        write_file_durably(self.root, self.path, data, mode=mode, uid=uid, gid=gid)

    def revert(self, entry: JournalEntry) -> None:
        self._restore_files(entry)

    def spec(self) -> dict[str, Any]:
        return {"path": self.path, "root": str(self.root), "mode": self.mode}


class OptionFileSetting(_RootedSetting):
    """``mycnf:mysqld/innodb_io_capacity``: one option in ``<conf_dir>/99-myaccel.cnf``, the
    file myaccel owns (several knobs share it). Takes effect at the next server start.
    ``conf_dir`` is a logical path under ``root`` that the server's my.cnf includes."""

    kind = "mycnf"

    def __init__(
        self,
        group: str,
        key: str,
        *,
        root: str | Path = "/",
        conf_dir: str,
        filename: str = MYCNF_MANAGED_NAME,
    ) -> None:
        super().__init__(root)
        if not _GROUP_RE.match(group) or not _GROUP_RE.match(key):
            raise UsageError(
                f"mycnf:{group}/{key} is not an option target",
                hint="write it as mycnf:GROUP/OPTION, e.g. mycnf:mysqld/innodb_io_capacity",
            )
        check_logical_path(conf_dir, "option file directory")
        if "/" in filename or not filename.endswith(".cnf"):
            raise UsageError(
                f"'{filename}' is not a .cnf file name", hint="!includedir reads only *.cnf"
            )
        self.group = group.lower()
        self.key = normalize_key(key)
        self.conf_dir = conf_dir.rstrip("/") or "/"
        self.filename = filename
        self.target = f"mycnf:{self.group}/{self.key}"

    @property
    def path(self) -> str:
        return f"{self.conf_dir.rstrip('/')}/{self.filename}"

    def _managed(self) -> ManagedFile:
        return ManagedFile(
            self.root,
            self.path,
            "mycnf",
            "Server options chosen by myaccel; they take effect at the next server start.",
        )

    def read(self) -> str | None:
        return self._managed().get(self.group, self.key)

    def _validate(self, desired: str) -> str:
        check_value_text(desired, self.target)
        if '"' in desired or "\\" in desired:
            raise UsageError(
                f"{self.target}: quotes and backslashes are not supported in values",
                hint="give the plain value",
            )
        return desired.strip()

    def _shadow_warnings(self) -> tuple[str, ...]:
        """Files read after ours in the same directory that set the same option win."""
        out = []
        hd = host_path(self.root, self.conf_dir)
        for name in sorted(os.listdir(hd)):
            if not name.endswith(".cnf") or name <= self.filename:
                continue
            data = read_bytes(self.root, f"{self.conf_dir}/{name}") or b""
            group = ""
            for line in data.decode(errors="replace").splitlines():
                s = line.strip()
                if s.startswith("[") and "]" in s:
                    group = s[1 : s.index("]")].strip().lower()
                elif group == self.group and normalize_key(s.partition("=")[0]) == self.key:
                    out.append(
                        f"{self.conf_dir}/{name} also sets {self.key} in [{group}] and is read "
                        f"after {self.filename}: its value wins"
                    )
        return tuple(out)

    def plan(self, desired: str) -> Change | None:
        desired = self._validate(desired)
        if not host_path(self.root, self.conf_dir).is_dir():
            raise UsageError(
                f"option file directory {self.conf_dir} does not exist",
                hint="pass the conf.d directory your my.cnf includes (!includedir) with --conf-dir",
            )
        managed = self._managed()
        managed.check_owned()
        current = managed.get(self.group, self.key)
        if values_equal(current, desired):
            return None
        return Change(
            target=self.target,
            kind=self.kind,
            current=current,
            desired=desired,
            needs_root=self.needs_root,
            writes=(self.path,),
            takes_effect="server restart",
            warnings=self._shadow_warnings(),
        )

    def capture(self) -> OldState:
        return OldState(files=[snapshot_file(self.root, self.path)])

    def apply(self, desired: str) -> None:
        self._managed().set(self.group, self.key, self._validate(desired))

    def revert(self, entry: JournalEntry) -> None:
        self._restore_files(entry)

    def spec(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "key": self.key,
            "root": str(self.root),
            "conf_dir": self.conf_dir,
            "filename": self.filename,
        }


class SystemdDropInSetting(_RootedSetting):
    """``systemd:mariadb.service/NUMAPolicy``: one ``[Service]`` key in
    /etc/systemd/system/<unit>.d/99-myaccel.conf, then ``systemctl daemon-reload`` (through
    ``runner``; on a non-live root nothing is run unless a runner is given). Takes effect
    when the unit restarts."""

    kind = "systemd"

    def __init__(
        self,
        unit: str,
        key: str,
        *,
        root: str | Path = "/",
        section: str = "Service",
        runner: Runner | None = None,
    ) -> None:
        super().__init__(root)
        if not _UNIT_RE.match(unit):
            raise UsageError(
                f"'{unit}' is not a systemd unit name", hint="write it like mariadb.service"
            )
        if not _SYSTEMD_KEY_RE.match(key) or not _SYSTEMD_KEY_RE.match(section):
            raise UsageError(
                f"'{section}.{key}' is not a systemd setting name",
                hint="write it as systemd spells it: NUMAPolicy, CPUAffinity, LimitNOFILE",
            )
        self.unit = unit
        self.key = key
        self.section = section
        self.runner = runner
        self.target = f"systemd:{unit}/{key}"
        self.path = f"/etc/systemd/system/{unit}.d/{SYSTEMD_DROPIN_NAME}"

    def _managed(self) -> ManagedFile:
        return ManagedFile(
            self.root,
            self.path,
            "systemd",
            f"Drop-in for {self.unit}; it takes effect when the unit restarts.",
        )

    def read(self) -> str | None:
        return self._managed().get(self.section, self.key)

    def _daemon_reload(self) -> None:
        if self.runner is not None:
            self.runner(["systemctl", "daemon-reload"])
        elif self.live:
            proc.run(["systemctl", "daemon-reload"], check=True, timeout_s=60)

    def plan(self, desired: str) -> Change | None:
        check_value_text(desired, self.target)
        desired = desired.strip()
        if not any(host_path(self.root, f"{d}/{self.unit}").exists() for d in SYSTEMD_UNIT_DIRS):
            raise UsageError(
                f"systemd unit {self.unit} is not installed",
                hint="name the unit that runs the server (systemctl list-units '*mysql*' "
                "'*mariadb*')",
            )
        managed = self._managed()
        managed.check_owned()
        current = managed.get(self.section, self.key)
        if current is not None and current.strip() == desired:
            return None
        return Change(
            target=self.target,
            kind=self.kind,
            current=current,
            desired=desired,
            needs_root=self.needs_root,
            writes=(self.path,),
            takes_effect="unit restart",
        )

    def matches(self, actual: str | None, desired: str) -> bool:
        return actual is not None and actual.strip() == desired.strip()

    def capture(self) -> OldState:
        return OldState(files=[snapshot_file(self.root, self.path)])

    def apply(self, desired: str) -> None:
        self._managed().set(self.section, self.key, desired.strip())
        self._daemon_reload()

    def revert(self, entry: JournalEntry) -> None:
        if self._restore_files(entry):
            self._daemon_reload()

    def spec(self) -> dict[str, Any]:
        return {"unit": self.unit, "key": self.key, "root": str(self.root), "section": self.section}


# ---------------------------------------------------------------- server variables


def check_variable_name(name: str) -> str:
    if not _VAR_RE.match(name):
        raise UsageError(
            f"'{name}' is not a server variable name", hint="write it like innodb_io_capacity"
        )
    return name.lower()


def sql_literal(value: str, escape: Callable[[str], str]) -> str:
    """The SQL spelling of a value for ``SET GLOBAL``: integers bare (sizes expanded:
    ``128M`` -> ``134217728``, which the server does not accept in SET), decimals bare,
    ON/OFF/TRUE/FALSE bare, anything else a quoted string (enums, lists like sql_mode)."""
    v = value.strip()
    try:
        return str(parse_int(v))
    except ValueSyntaxError:
        pass
    if re.fullmatch(r"[+-]?\d+\.\d+", v):
        return v
    if v.upper() in ("ON", "OFF", "TRUE", "FALSE"):
        return v.upper()
    return escape(v)


class ServerVariableSetting(Setting):
    """``mysql:innodb_io_capacity``: ``SET GLOBAL`` on a running server through
    ``connect`` (a callable returning a PyMySQL connection). ``persist`` uses MySQL 8's
    ``SET PERSIST`` (and revert restores or resets the persisted value); without it the
    change lasts until the server restarts (pair it with ``mycnf:`` for that)."""

    kind = "mysql"

    def __init__(
        self,
        name: str,
        *,
        connect: Connect,
        persist: bool = False,
        normalize: Callable[[str], object] | None = None,
    ) -> None:
        self.name = check_variable_name(name)
        self.connect = connect
        self.persist = persist
        self.normalize = normalize
        self.target = f"mysql:{self.name}"

    @property
    def needs_root(self) -> bool:
        return False  # needs SUPER / SYSTEM_VARIABLES_ADMIN on the server instead

    def matches(self, actual: str | None, desired: str) -> bool:
        if actual is None:
            return False
        if self.normalize is not None:
            try:
                return self.normalize(actual) == self.normalize(desired)
            except (ValueError, UsageError):
                pass
        return values_equal(actual, desired)

    def _query(self, conn: pymysql.connections.Connection[Any], sql: str) -> list[tuple[Any, ...]]:
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                return list(cur.fetchall())
        except pymysql.err.MySQLError as exc:
            raise self._error(exc, sql) from exc

    def _error(self, exc: pymysql.err.MySQLError, sql: str) -> Exception:
        code = exc.args[0] if exc.args else 0
        msg = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
        if code == 1193:
            return UsageError(
                f"the server has no variable {self.name}",
                hint="it may not exist in this flavor or version: make the plan again on this server (myaccel plan)",
            )
        if code in (1227, 1044, 1045, 1142):
            return ApplyError(
                f"not allowed to change {self.name}: {msg}",
                hint="connect as a user with SUPER or SYSTEM_VARIABLES_ADMIN",
            )
        if code == 1238:
            return ApplyError(
                f"{self.name} cannot be changed at runtime: {msg}",
                hint=f"use mycnf:mysqld/{self.name} and restart the server",
            )
        if code in (1231, 1232):
            return UsageError(
                f"the server rejected the value for {self.name}: {msg}",
                hint="check the allowed values (`myaccel explain` or the server manual)",
            )
        return ApplyError(
            f"{sql.split('=', maxsplit=1)[0].strip()} failed: {msg}",
            hint="see the server's error log",
        )

    def _with_conn(self, fn: Callable[[pymysql.connections.Connection[Any]], Any]) -> Any:
        conn = self.connect()
        try:
            return fn(conn)
        finally:
            with contextlib.suppress(pymysql.err.Error):
                conn.close()

    def _read(self, conn: pymysql.connections.Connection[Any]) -> str | None:
        rows = self._query(conn, f"SELECT @@GLOBAL.{self.name}")
        value = rows[0][0] if rows else None
        if isinstance(value, bytes):
            value = value.decode(errors="replace")
        return None if value is None else str(value)

    def _persisted(self, conn: pymysql.connections.Connection[Any]) -> str | None:
        rows = self._query(
            conn,
            "SELECT VARIABLE_VALUE FROM performance_schema.persisted_variables "
            f"WHERE VARIABLE_NAME = '{self.name}'",
        )
        return None if not rows or rows[0][0] is None else str(rows[0][0])

    def _check_persist(self, conn: pymysql.connections.Connection[Any]) -> None:
        version = str(self._query(conn, "SELECT VERSION()")[0][0])
        if "mariadb" in version.lower():
            raise UsageError(
                "SET PERSIST is MySQL 8 only; MariaDB has no persisted variables",
                hint=f"use mycnf:mysqld/{self.name} to keep the value across restarts",
            )

    def _local_auto_cnf(self, conn: pymysql.connections.Connection[Any]) -> Path | None:
        """``mysqld-auto.cnf`` (where SET PERSIST writes) when the server runs on this host
        and its datadir is readable here; None otherwise (then rollback restores the
        persisted values, not the file's bytes)."""
        rows = self._query(conn, "SELECT @@GLOBAL.datadir, @@GLOBAL.hostname")
        if not rows or rows[0][0] is None or str(rows[0][1]) != socket.gethostname():
            return None
        datadir = Path(str(rows[0][0]))
        return datadir / "mysqld-auto.cnf" if os.access(datadir, os.R_OK | os.X_OK) else None

    def read(self) -> str | None:
        value: str | None = self._with_conn(self._read)
        return value

    def plan(self, desired: str) -> Change | None:
        check_value_text(desired, self.target)
        desired = desired.strip()

        def look(conn: pymysql.connections.Connection[Any]) -> tuple[str | None, str | None]:
            current = self._read(conn)
            persisted = None
            if self.persist:
                self._check_persist(conn)
                persisted = self._persisted(conn)
            return current, persisted

        current, persisted = self._with_conn(look)
        ok = self.matches(current, desired)
        if self.persist:
            ok = ok and persisted is not None and self.matches(persisted, desired)
        if ok:
            return None
        verb = "SET PERSIST" if self.persist else "SET GLOBAL"
        return Change(
            target=self.target,
            kind=self.kind,
            current=current,
            desired=desired,
            needs_root=False,
            writes=(f"{verb} {self.name}",),
            takes_effect="now",
        )

    def capture(self) -> OldState:
        def look(conn: pymysql.connections.Connection[Any]) -> OldState:
            old = OldState(value=self._read(conn))
            if self.persist:
                persisted = self._persisted(conn)
                old.extra = {"persisted": persisted, "was_persisted": "1" if persisted else "0"}
                auto_cnf = self._local_auto_cnf(conn)
                if auto_cnf is not None:
                    # Rollback puts its bytes back after RESET PERSIST / PERSIST_ONLY, which
                    # rewrite it with new timestamps (or leave '{"Version": 2}' behind).
                    old.files = [snapshot_file(Path("/"), str(auto_cnf))]
            return old

        state: OldState = self._with_conn(look)
        return state

    def _set(self, conn: pymysql.connections.Connection[Any], verb: str, value: str | None) -> None:
        literal = "NULL" if value is None else sql_literal(value, conn.escape)
        self._query(conn, f"{verb} {self.name} = {literal}")

    def apply(self, desired: str) -> None:
        verb = "SET PERSIST" if self.persist else "SET GLOBAL"
        self._with_conn(lambda conn: self._set(conn, verb, desired.strip()))

    def revert(self, entry: JournalEntry) -> None:
        old = entry.old.value

        def undo(conn: pymysql.connections.Connection[Any]) -> None:
            if not values_equal(self._read(conn), old):
                self._set(conn, "SET GLOBAL", old)
            if entry.old.extra.get("was_persisted") == "1":
                self._set(conn, "SET PERSIST_ONLY", entry.old.extra.get("persisted"))
            elif "was_persisted" in entry.old.extra:
                self._query(conn, f"RESET PERSIST IF EXISTS {self.name}")

        self._with_conn(undo)

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "persist": self.persist}


# ---------------------------------------------------------------- factory


def find_conf_dir(root: str | Path = "/") -> str | None:
    """The conf.d directory a distribution's my.cnf includes, as a logical path."""
    for d in CONF_DIR_CANDIDATES:
        if host_path(Path(root), d).is_dir():
            return d
    return None


def find_server_unit(root: str | Path = "/") -> str | None:
    """The installed systemd unit of the server (mariadb.service, mysql.service, ...)."""
    for unit in SERVER_UNITS:
        for d in SYSTEMD_UNIT_DIRS:
            if host_path(Path(root), f"{d}/{unit}").exists():
                return unit
    return None


def _split_scheme(target: str) -> tuple[str, str]:
    scheme, sep, rest = target.partition(":")
    if not sep or not rest or not scheme:
        raise UsageError(
            f"'{target}' is not a setting target",
            hint="write SCHEME:NAME, e.g. sysctl:vm.swappiness or mysql:innodb_io_capacity "
            f"(schemes: {', '.join(SCHEMES)})",
        )
    return scheme.lower(), rest


def _split_two(target: str, rest: str, example: str) -> tuple[str, str]:
    a, sep, b = rest.partition("/")
    if not sep or not a or not b or "/" in b:
        raise UsageError(f"'{target}' needs two parts", hint=f"write it like {example}")
    return a, b


def setting_for(
    target: str,
    *,
    root: str | Path = "/",
    conf_dir: str | None = None,
    connect: Connect | None = None,
    server_unit: str | None = None,
    runner: Runner | None = None,
    persist: bool = True,
    persist_server_variables: bool = False,
) -> Setting:
    """The setting for a target URI.

    ``root``: where files live ("/" or a sysroot copy). ``conf_dir``: the conf.d directory
    (logical) for ``mycnf:``, found under ``root`` when None. ``connect``: connection factory
    for ``mysql:``. ``server_unit`` resolves ``systemd:server/...`` (found when None).
    ``persist``: also make kernel values survive a reboot (sysctl.d, tmpfiles.d).
    ``persist_server_variables``: ``SET PERSIST`` (MySQL 8) instead of ``SET GLOBAL``.
    """
    scheme, rest = _split_scheme(target)
    if scheme == "sysctl":
        return SysctlSetting(rest, root=root, persist=persist)
    if scheme == "sysfs":
        return SysfsSetting(rest, root=root, persist=persist)
    if scheme == "debugfs":
        return DebugfsSetting(rest, root=root)
    if scheme == "file":
        return FileSetting(rest, root=root)
    if scheme == "mycnf":
        group, key = _split_two(target, rest, "mycnf:mysqld/innodb_io_capacity")
        d = conf_dir if conf_dir is not None else find_conf_dir(root)
        if d is None:
            raise UsageError(
                f"no option file directory found for {target}",
                hint="pass the conf.d directory your my.cnf includes with --conf-dir "
                f"(looked for {', '.join(CONF_DIR_CANDIDATES)})",
            )
        return OptionFileSetting(group, key, root=root, conf_dir=d)
    if scheme == "mysql":
        check_variable_name(rest)
        if connect is None:
            raise UsageError(
                f"{target} needs a server connection",
                hint="pass --host/--socket/--user, or --sandbox NAME",
            )
        return ServerVariableSetting(rest, connect=connect, persist=persist_server_variables)
    if scheme == "systemd":
        unit, key = _split_two(target, rest, "systemd:mariadb.service/NUMAPolicy")
        if unit == "server":
            found = server_unit or find_server_unit(root)
            if found is None:
                raise UsageError(
                    "cannot tell which systemd unit runs the server",
                    hint=f"pass --server-unit (looked for {', '.join(SERVER_UNITS)})",
                )
            unit = found
        return SystemdDropInSetting(unit, key, root=root, runner=runner)
    if scheme in ADVISORY_SCHEMES:
        raise UsageError(
            f"{target} is advisory: myaccel apply cannot change it",
            hint="follow the recommendation by hand (see `myaccel explain ID`)",
        )
    raise UsageError(
        f"unknown setting scheme '{scheme}' in '{target}'",
        hint=f"known schemes: {', '.join(SCHEMES)}",
    )


def expand_target(target: str, *, root: str | Path = "/") -> list[str]:
    """One target per file for sysfs/debugfs globs (``sysfs:/sys/devices/system/cpu/cpu*/
    cpufreq/scaling_governor``), in natural order; other targets unchanged."""
    scheme, rest = _split_scheme(target)
    if scheme not in ("sysfs", "debugfs") or not (_GLOB_CHARS & set(rest)):
        return [target]
    base = Path(root)
    hits = glob.glob(str(host_path(base, rest)))
    if not hits:
        raise UsageError(
            f"{target} matches no file on this machine", hint="the kernel does not offer it"
        )
    strip = len(str(base).rstrip("/"))

    def natural(s: str) -> list[Any]:
        return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]

    return [f"{scheme}:{h[strip:]}" for h in sorted(hits, key=natural)]


_KINDS: dict[str, type[Setting]] = {
    "sysctl": SysctlSetting,
    "sysfs": SysfsSetting,
    "debugfs": DebugfsSetting,
    "file": FileSetting,
    "mycnf": OptionFileSetting,
    "mysql": ServerVariableSetting,
    "systemd": SystemdDropInSetting,
}


def setting_from_spec(
    kind: str,
    spec: dict[str, Any],
    *,
    connect: Connect | None = None,
    runner: Runner | None = None,
) -> Setting:
    """Rebuild a setting from a journal entry's ``kind`` and ``spec``."""
    if kind not in _KINDS:
        raise UsageError(
            f"journal entry of unknown kind '{kind}'",
            hint="it was written by another myaccel version; roll back with that version",
        )
    try:
        if kind == "sysctl":
            return SysctlSetting(spec["key"], root=spec["root"], persist=bool(spec["persist"]))
        if kind == "sysfs":
            return SysfsSetting(spec["path"], root=spec["root"], persist=bool(spec["persist"]))
        if kind == "debugfs":
            return DebugfsSetting(spec["path"], root=spec["root"], persist=bool(spec["persist"]))
        if kind == "file":
            return FileSetting(spec["path"], root=spec["root"], mode=int(spec["mode"]))
        if kind == "mycnf":
            return OptionFileSetting(
                spec["group"],
                spec["key"],
                root=spec["root"],
                conf_dir=spec["conf_dir"],
                filename=spec["filename"],
            )
        if kind == "systemd":
            return SystemdDropInSetting(
                spec["unit"], spec["key"], root=spec["root"], section=spec["section"], runner=runner
            )
    except KeyError as exc:
        raise UsageError(
            f"journal entry of kind '{kind}' lacks '{exc.args[0]}'",
            hint="the journal is damaged; restore it from a backup",
        ) from exc
    if connect is None:
        raise UsageError(
            f"rolling back mysql:{spec.get('name')} needs a server connection",
            hint="pass the same connection options as for apply (--host/--socket/--user or "
            "--sandbox NAME)",
        )
    return ServerVariableSetting(
        str(spec["name"]), connect=connect, persist=bool(spec.get("persist"))
    )
