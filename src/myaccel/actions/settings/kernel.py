"""Kernel values: ``sysctl:`` (/proc/sys), ``sysfs:`` (/sys) and ``debugfs:``
(/sys/kernel/debug), written at once and optionally made persistent through a file myaccel
owns (/etc/sysctl.d/99-myaccel.conf, /etc/tmpfiles.d/99-myaccel.conf)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import ClassVar

from myaccel.actions.files import (
    ManagedFile,
    ManagedStyle,
    check_logical_path,
    check_value_text,
    host_path,
    parse_choice,
    read_bytes,
    read_kernel_value,
    snapshot_file,
    write_kernel_value,
)
from myaccel.actions.journal import JournalEntry, OldState
from myaccel.actions.settings.base import Change, RootedSetting, values_equal
from myaccel.errors import UsageError

SYSCTL_MANAGED = "/etc/sysctl.d/99-myaccel.conf"
TMPFILES_MANAGED = "/etc/tmpfiles.d/99-myaccel.conf"
SYSCTL_DIRS = (
    "/etc/sysctl.d",
    "/run/sysctl.d",
    "/usr/local/lib/sysctl.d",
    "/usr/lib/sysctl.d",
    "/lib/sysctl.d",
)
GLOB_CHARS = set("*?[")
_SYSCTL_KEY_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:/+-]*$")


class KernelValueSetting(RootedSetting):
    """A value in /proc/sys, /sys or debugfs, optionally made persistent through a
    managed file."""

    # The file that makes the value persistent, its style and what reads it.
    managed_path: ClassVar[str]
    managed_style: ClassVar[ManagedStyle]
    managed_purpose: ClassVar[str]
    logical: str  # the kernel file
    managed_key: str  # the value's key in the managed file

    def __init__(self, root: str | Path, persist: bool) -> None:
        super().__init__(root)
        self.persist = persist

    def _managed(self) -> ManagedFile:
        return ManagedFile(self.root, self.managed_path, self.managed_style, self.managed_purpose)

    def managed_entry(self) -> tuple[ManagedFile, str, str] | None:
        return (self._managed(), "", self.managed_key) if self.persist else None

    @property
    def survives_reboot(self) -> bool:
        return self.persist

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
            persisted_ok = values_equal(managed.get("", self.managed_key), desired)
            writes.append(managed.path)
        if runtime_ok and persisted_ok:
            return None
        warnings = self._persist_warnings(desired) if self.persist else ()
        return self._change(current, desired, writes, warnings=warnings)

    def capture(self) -> OldState:
        files = [snapshot_file(self.root, self._managed().path)] if self.persist else []
        return OldState(value=self.read(), files=files)

    def apply(self, desired: str) -> None:
        desired = self._validate(desired)
        # Runtime first: a value the kernel rejects is never made persistent.
        if not self.matches(self.read(), desired):
            write_kernel_value(self.root, self.logical, desired, emulate=not self.live)
        if self.persist:
            self._managed().set("", self.managed_key, desired)

    def revert(self, entry: JournalEntry) -> None:
        old = entry.old.value
        if old is not None and read_kernel_value(self.root, self.logical) != old:
            write_kernel_value(self.root, self.logical, old, emulate=not self.live)
        self._restore_files(entry)


class SysctlSetting(KernelValueSetting):
    """``sysctl:vm.swappiness``: /proc/sys/vm/swappiness now, and a line in
    /etc/sysctl.d/99-myaccel.conf for boot (``persist``)."""

    kind = "sysctl"
    spec_fields = ("key", "root", "persist")
    managed_path = SYSCTL_MANAGED
    managed_style = "sysctl"
    managed_purpose = "Read at boot by systemd-sysctl (sysctl --system)."

    def __init__(self, key: str, *, root: str | Path = "/", persist: bool = True) -> None:
        super().__init__(root, persist)
        if not _SYSCTL_KEY_RE.match(key) or ".." in key or "//" in key:
            raise UsageError(
                f"'{key}' is not a sysctl key", hint="write it like sysctl does: vm.swappiness"
            )
        self.key = self.managed_key = key
        self.target = f"sysctl:{key}"
        self.logical = "/proc/sys/" + (key if "/" in key else key.replace(".", "/"))

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


class SysfsSetting(KernelValueSetting):
    """``sysfs:/sys/kernel/mm/transparent_hugepage/enabled``: writes the bare word (a file
    reading ``always [madvise] never`` has the value ``madvise``); ``persist`` adds a
    ``w`` line to /etc/tmpfiles.d/99-myaccel.conf so systemd-tmpfiles writes it at boot."""

    kind = "sysfs"
    spec_fields = ("path", "root", "persist")
    managed_path = TMPFILES_MANAGED
    managed_style = "tmpfiles"
    managed_purpose = "Written at boot by systemd-tmpfiles (type w)."
    prefix = "/sys/"

    def __init__(self, path: str, *, root: str | Path = "/", persist: bool = True) -> None:
        super().__init__(root, persist)
        check_logical_path(path, self.kind + " path")
        if GLOB_CHARS & set(path):
            raise UsageError(
                f"{self.kind}:{path} names several files",
                hint="expand it first (myaccel.actions.expand_target) into one target per file",
            )
        self._check_prefix(path)
        self.path = self.logical = self.managed_key = path
        self.target = f"{self.kind}:{path}"

    def _check_prefix(self, path: str) -> None:
        if not path.startswith(self.prefix):
            raise UsageError(
                f"sysfs path '{path}' is not under /sys", hint="write it like /sys/kernel/mm/..."
            )
        if path.startswith(DebugfsSetting.prefix):
            raise UsageError(f"'{path}' is in debugfs", hint=f"write the target as debugfs:{path}")


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
