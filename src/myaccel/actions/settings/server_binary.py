"""``systemd-binary:UNIT``: the server binary a systemd unit runs (``accelerate --build
--swap-binary`` on a real server).

Apply writes a drop-in myaccel owns, ``/etc/systemd/system/UNIT.d/zz-myaccel-binary.conf``
(named to sort after every other drop-in, so its ``ExecStart`` is the one in effect):

    [Service]
    ExecStart=
    ExecStart=/new/bin/mariadbd $MYSQLD_OPTS ...

the unit's own command line with only the program replaced (the empty ``ExecStart=`` clears
the unit's, as a service may have only one). Then ``systemctl daemon-reload``; it takes
effect when the unit restarts. The drop-in's old state (usually: absent, and its directory
too) is journaled, and revert puts it back byte for byte and reloads again. The new binary
must be the same version as the one it replaces (a datadir is never upgraded on the way).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from myaccel import proc
from myaccel.actions.files import (
    MANAGED_MARKER,
    ancestors,
    ensure_dirs,
    host_path,
    read_bytes,
    snapshot_file,
    write_file_durably,
)
from myaccel.actions.journal import JournalEntry
from myaccel.actions.settings.base import Change, FileBackedSetting, Runner
from myaccel.actions.settings.systemd import SYSTEMD_UNIT_DIRS, check_unit_name
from myaccel.errors import UsageError
from myaccel.server.flavor import parse_binary_version

DROPIN_NAME = "zz-myaccel-binary.conf"
HEADER = MANAGED_MARKER + ": the server binary of {unit} (accelerate --build --swap-binary).\n"
# an absolute path to a server binary, as a word of a command line
_SERVER_RE = re.compile(r"(?<![\w/.-])(/[^\s\"';`$]*/(?:mariadbd|mysqld))(?=[\s\"';]|$)")
_SAFE_PATH = re.compile(r"^/[A-Za-z0-9_./+@-]+$")


def _logical_lines(text: str) -> list[str]:
    """Lines with backslash continuations joined, comments dropped."""
    out: list[str] = []
    cur = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not cur and (not line or line[0] in "#;"):
            continue
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        out.append(cur + line)
        cur = ""
    if cur:
        out.append(cur)
    return out


def _exec_starts(text: str, found: list[str]) -> list[str]:
    """``found`` updated by the ``[Service]`` ``ExecStart`` lines of one unit file."""
    section = ""
    for line in _logical_lines(text):
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            continue
        key, sep, value = line.partition("=")
        if sep and section == "Service" and key.strip() == "ExecStart":
            value = value.strip()
            found = [*found, value] if value else []  # an empty one clears the list
    return found


def unit_files(root: Path, unit: str, *, skip: str | None = None) -> list[str]:
    """The logical paths systemd reads for ``unit``: its unit file (the first directory
    that has it), then its drop-ins by file name (a name in an earlier directory hides the
    same name in a later one); ``skip`` leaves out one drop-in name."""
    files: list[str] = []
    for d in SYSTEMD_UNIT_DIRS:
        if host_path(root, f"{d}/{unit}").is_file():
            files.append(f"{d}/{unit}")
            break
    dropins: dict[str, str] = {}
    for d in SYSTEMD_UNIT_DIRS:
        ddir = host_path(root, f"{d}/{unit}.d")
        if not ddir.is_dir():
            continue
        for p in sorted(ddir.glob("*.conf")):
            if p.name != skip:
                dropins.setdefault(p.name, f"{d}/{unit}.d/{p.name}")
    return files + [dropins[n] for n in sorted(dropins)] if files else []


def exec_start(root: Path, unit: str, *, skip: str | None = None) -> str | None:
    """The command line the unit runs (its last ``ExecStart`` after the drop-ins)."""
    found: list[str] = []
    for logical in unit_files(root, unit, skip=skip):
        data = read_bytes(root, logical)
        if data is not None:
            found = _exec_starts(data.decode("utf-8", errors="replace"), found)
    return found[-1] if found else None


def server_path(command: str) -> str | None:
    """The server binary's path in an ``ExecStart`` value: the program itself, or inside a
    wrapper (Debian's ``/bin/sh -c "... exec /usr/sbin/mariadbd $MYSQLD_OPTS ..."``,
    ``numactl --interleave=all /usr/sbin/mariadbd``)."""
    m = _SERVER_RE.search(command)
    return m.group(1) if m else None


def replace_server(command: str, old: str, new: str) -> str:
    """``command`` with every occurrence of the path ``old`` (as a whole word) as ``new``."""
    return re.sub(rf"(?<![\w/.-]){re.escape(old)}(?=[\s\"';]|$)", lambda _: new, command)


class ServerBinarySetting(FileBackedSetting):
    kind = "systemd-binary"
    spec_fields = ("unit", "root")

    def __init__(self, unit: str, *, root: str | Path = "/", runner: Runner | None = None) -> None:
        super().__init__(root)
        check_unit_name(unit)
        self.unit = unit
        self.runner = runner
        self.target = f"systemd-binary:{unit}"
        self.path = f"/etc/systemd/system/{unit}.d/{DROPIN_NAME}"

    def read(self) -> str | None:
        command = exec_start(self.root, self.unit)
        return server_path(command) if command else None

    def matches(self, actual: str | None, desired: str) -> bool:
        return actual is not None and os.path.normpath(actual) == os.path.normpath(desired)

    def _original(self) -> tuple[str, str]:
        """The unit's command line without our drop-in, and the server binary in it."""
        command = exec_start(self.root, self.unit, skip=DROPIN_NAME)
        if command is None:
            raise UsageError(
                f"systemd unit {self.unit} is not installed or has no ExecStart",
                hint="name the unit that runs the server (systemctl cat mariadb.service)",
            )
        server = server_path(command)
        if server is None:
            raise UsageError(
                f"the ExecStart of {self.unit} names no mariadbd or mysqld: {command[:120]}",
                hint="swap the binary by hand, or point the unit at the server binary first",
            )
        return command, server

    def _check_owned(self) -> None:
        data = read_bytes(self.root, self.path)
        if data is not None and not data.decode(errors="replace").startswith(MANAGED_MARKER):
            raise UsageError(
                f"{self.path} exists and is not myaccel's",
                hint="move it away (myaccel never edits files it did not write), then retry",
            )

    def _version(self, logical: str) -> str:
        p = host_path(self.root, logical)
        done = proc.run([str(p), "--version"], timeout_s=60)
        ver = parse_binary_version(done.stdout) if done.ok else None
        if ver is None:
            raise UsageError(
                f"{logical} --version did not print a server version",
                hint="pass the mariadbd/mysqld of a complete install tree",
            )
        return ver.label

    def plan(self, desired: str) -> Change | None:
        if not _SAFE_PATH.match(desired):
            raise UsageError(
                f"{self.target}: '{desired}' is not an absolute path without spaces or quotes",
                hint="pass the build's bin/mariadbd by its absolute path",
            )
        p = host_path(self.root, desired)
        if not (p.is_file() and os.access(p, os.X_OK)):
            raise UsageError(
                f"{desired} is not an executable file", hint="pass the build's bin/mariadbd"
            )
        _, current = self._original()
        self._check_owned()
        snapshot_file(self.root, self.path)  # refuses a link or a directory now
        active = self.read()
        if self.matches(active, desired):
            return None
        old_v, new_v = self._version(current), self._version(desired)
        if old_v != new_v:
            raise UsageError(
                f"{desired} is {new_v}, {self.unit} runs {old_v}",
                hint="swap only to a build of the same version (the datadir is not upgraded)",
            )
        return self._change(active, desired, [self.path], takes_effect="unit restart")

    def render(self, desired: str) -> str:
        command, server = self._original()
        line = replace_server(command, server, desired)
        return (
            HEADER.format(unit=self.unit)
            + "# `myaccel rollback` removes this file (and puts the unit's own ExecStart back).\n"
            + "[Service]\nExecStart=\nExecStart="
            + line
            + "\n"
        )

    def _daemon_reload(self) -> None:
        if self.runner is not None:
            self.runner(["systemctl", "daemon-reload"])
        elif self.live:
            proc.run(["systemctl", "daemon-reload"], check=True, timeout_s=60)

    def apply(self, desired: str) -> None:
        self._check_owned()
        data = self.render(desired).encode()
        missing = [d for d in ancestors(self.path) if not host_path(self.root, d).exists()]
        ensure_dirs(self.root, missing)
        write_file_durably(self.root, self.path, data, mode=0o644)
        self._daemon_reload()

    def revert(self, entry: JournalEntry) -> None:
        if self._restore_files(entry):
            self._daemon_reload()
