"""``file:/etc/...``: a whole file myaccel writes."""

from __future__ import annotations

from pathlib import Path

from myaccel.actions.files import (
    DEFAULT_FILE_MODE,
    ancestors,
    check_logical_path,
    ensure_dirs,
    host_path,
    read_bytes,
    snapshot_file,
    write_file_durably,
)
from myaccel.actions.settings.base import Change, FileBackedSetting
from myaccel.errors import UsageError


class FileSetting(FileBackedSetting):
    """``file:/etc/...``: a whole file myaccel writes. The old content is journaled byte for
    byte (or that it did not exist), with mode and owner; revert restores them and removes
    the file and any directories myaccel created."""

    kind = "file"
    spec_fields = ("path", "root", "mode")

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
        return self._change(current, desired, [self.path])

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
