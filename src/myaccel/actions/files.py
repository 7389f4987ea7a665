"""File primitives for settings: snapshots, durable writes, byte-exact restores, kernel
value writes, and the files myaccel owns ("managed files").

Paths are *logical* (``/etc/sysctl.d/99-myaccel.conf``) and resolved under a root directory
(``/`` on a real machine, a copy of a fixture sysroot in tests), like ``facts.sysroot``.

Durability: a file is written to a temporary sibling, fsynced, renamed over the target and
the directory is fsynced, so a crash leaves either the old or the new content, never a mix.
A stray temporary from a crash between those steps is removed by ``restore_file``.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import logging
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field

from myaccel.actions.errors import ApplyError
from myaccel.artifacts import fsync_dir, replace_durably
from myaccel.errors import UsageError
from myaccel.model import Strict
from myaccel.server.optionfile import normalize_key

log = logging.getLogger(__name__)

TMP_MARK = ".myaccel-tmp-"
MANAGED_MARKER = "# Managed by myaccel"
DEFAULT_FILE_MODE = 0o644
DEFAULT_DIR_MODE = 0o755


class FileState(Strict):
    """A file as it was before a change: enough to put it back byte for byte."""

    path: str  # logical path
    existed: bool
    content_b64: str | None = None
    mode: str | None = None  # permission bits in octal, e.g. "0644"
    uid: int | None = None
    gid: int | None = None
    # Logical directories that did not exist (myaccel creates them), shallowest first.
    missing_dirs: list[str] = Field(default_factory=list)

    @property
    def content(self) -> bytes | None:
        return None if self.content_b64 is None else base64.b64decode(self.content_b64)

    @property
    def mode_bits(self) -> int | None:
        return None if self.mode is None else int(self.mode, 8)


def _denied(what: str, more: str) -> ApplyError:
    """``cannot WHAT: permission denied``; the hint says to run as root, then ``more``."""
    return ApplyError(f"cannot {what}: permission denied", hint=f"run as root (sudo){more}")


def host_path(root: Path, logical: str) -> Path:
    return root / logical.lstrip("/")


def is_live_root(root: Path) -> bool:
    """True when ``root`` is this machine's ``/`` (writes reach the real kernel and /etc)."""
    try:
        return root.resolve() == Path("/")
    except OSError:
        return False


def check_logical_path(path: str, what: str = "path") -> str:
    """An absolute, normalized path without ``..``: what every file target must be."""
    if not path.startswith("/"):
        raise UsageError(f"{what} '{path}' is not absolute", hint="write it as /dir/file")
    parts = path.split("/")[1:]
    if any(p in ("", ".", "..") for p in parts) or "\0" in path:
        raise UsageError(
            f"{what} '{path}' is not a normalized path",
            hint="use a plain absolute path without '..', '.' or '//'",
        )
    return path


def snapshot_file(root: Path, logical: str) -> FileState:
    """Record a file's bytes, mode and owner, or that it does not exist (and which of its
    parent directories are missing)."""
    p = host_path(root, logical)
    if p.is_symlink():
        raise UsageError(
            f"{logical} is a symbolic link; myaccel only manages regular files",
            hint="point the setting at the link's target, or remove the link",
        )
    try:
        st = p.stat()
    except FileNotFoundError:
        missing: list[str] = []
        parent = os.path.dirname(logical)
        while parent not in ("/", "") and not host_path(root, parent).exists():
            missing.append(parent)
            parent = os.path.dirname(parent)
        return FileState(path=logical, existed=False, missing_dirs=list(reversed(missing)))
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(
            f"{logical} exists and is not a regular file", hint="move it away, then retry"
        )
    data = _read_bytes(p, logical)
    return FileState(
        path=logical,
        existed=True,
        content_b64=base64.b64encode(data).decode("ascii"),
        mode=f"{stat.S_IMODE(st.st_mode):04o}",
        uid=st.st_uid,
        gid=st.st_gid,
    )


def _read_bytes(p: Path, logical: str) -> bytes:
    try:
        return p.read_bytes()
    except PermissionError as exc:
        raise _denied(f"read {logical}", " to change system settings") from exc


def read_bytes(root: Path, logical: str) -> bytes | None:
    """A file's content, or None when it does not exist."""
    p = host_path(root, logical)
    try:
        return p.read_bytes()
    except FileNotFoundError:
        return None
    except PermissionError as exc:
        raise _denied(f"read {logical}", " to read or change system settings") from exc


def ensure_dirs(root: Path, logical_dirs: list[str]) -> None:
    """Create the given logical directories (shallowest first), fsyncing each parent."""
    for d in logical_dirs:
        p = host_path(root, d)
        if p.is_dir():
            continue
        try:
            p.mkdir(mode=DEFAULT_DIR_MODE)
            os.chmod(p, DEFAULT_DIR_MODE)  # umask-independent
        except PermissionError as exc:
            raise _denied(f"create directory {d}", " to change system settings") from exc
        fsync_dir(p.parent)


def write_file_durably(
    root: Path,
    logical: str,
    data: bytes,
    *,
    mode: int = DEFAULT_FILE_MODE,
    uid: int | None = None,
    gid: int | None = None,
) -> None:
    """Replace a file atomically: temporary sibling, fsync, rename, fsync the directory
    (``artifacts.replace_durably``); ``uid``/``gid``: its owner (None: as created)."""
    p = host_path(root, logical)
    tmp = p.with_name(f".{p.name}{TMP_MARK}{os.getpid()}")
    try:
        replace_durably(p, tmp, data, mode=mode, owner=(uid, gid))
    except PermissionError as exc:
        raise _denied(f"write {logical}", " to change system settings") from exc
    except FileNotFoundError as exc:
        raise ApplyError(
            f"cannot write {logical}: directory {os.path.dirname(logical)} does not exist",
            hint="create it first, or check the path",
        ) from exc


def _remove_strays(p: Path) -> None:
    """Remove temporaries that a crash in ``write_file_durably`` may have left."""
    prefix = f".{p.name}{TMP_MARK}"
    try:
        names = os.listdir(p.parent)
    except OSError:
        return
    for name in names:
        if name.startswith(prefix):
            with contextlib.suppress(OSError):
                (p.parent / name).unlink()


def restore_file(root: Path, state: FileState) -> bool:
    """Put a file back as ``state`` recorded it; idempotent. Returns True if anything
    changed on disk."""
    p = host_path(root, state.path)
    _remove_strays(p)
    changed = False
    if state.existed:
        data = state.content or b""
        mode = state.mode_bits if state.mode_bits is not None else DEFAULT_FILE_MODE
        try:
            st = p.lstat()
            same = (
                stat.S_ISREG(st.st_mode)
                and stat.S_IMODE(st.st_mode) == mode
                and (state.uid is None or st.st_uid == state.uid)
                and (state.gid is None or st.st_gid == state.gid)
                and p.read_bytes() == data
            )
        except FileNotFoundError:
            same = False
        if not same:
            ensure_dirs(root, [d for d in ancestors(state.path) if not host_path(root, d).exists()])
            write_file_durably(root, state.path, data, mode=mode, uid=state.uid, gid=state.gid)
            changed = True
        return changed
    if p.exists() or p.is_symlink():
        try:
            p.unlink()
        except PermissionError as exc:
            raise _denied(f"remove {state.path}", " to roll back system settings") from exc
        fsync_dir(p.parent)
        changed = True
    for d in reversed(state.missing_dirs):  # deepest first
        dp = host_path(root, d)
        if dp.is_dir():
            try:
                dp.rmdir()
            except OSError as exc:
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    log.warning("keeping %s: it is not empty (something else wrote there)", d)
                    break
                raise
            fsync_dir(dp.parent)
            changed = True
    return changed


def ancestors(logical: str) -> list[str]:
    """``/a/b/c`` -> ``["/a", "/a/b"]``."""
    parts = logical.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


# ---------------------------------------------------------------- kernel values


_CHOICE_RE = re.compile(r"\[([^\]\s]+)\]")


def parse_choice(text: str) -> tuple[str | None, list[str]]:
    """``always [madvise] never`` -> (``madvise``, [always, madvise, never]); plain text ->
    (None, [])."""
    m = _CHOICE_RE.search(text)
    if not m:
        return None, []
    return m.group(1), [t.strip("[]") for t in text.split()]


def read_kernel_value(root: Path, logical: str) -> str | None:
    """A /proc/sys, /sys or debugfs value without its trailing newline; the selected word
    for ``a [b] c`` choice files; None when absent."""
    p = host_path(root, logical)
    try:
        text = p.read_text(errors="replace")
    except FileNotFoundError:
        return None
    except PermissionError as exc:
        raise _denied(f"read {logical}", "; debugfs is readable by root only") from exc
    except OSError as exc:
        raise ApplyError(f"cannot read {logical}: {exc.strerror or exc}") from exc
    selected, _ = parse_choice(text)
    if selected is not None:
        return selected
    return text.rstrip("\n")


def write_kernel_value(root: Path, logical: str, value: str, *, emulate: bool) -> None:
    """Write one value the way ``echo value > file`` does.

    With ``emulate`` (a captured tree, not the live kernel) the file is rewritten to what
    the kernel would show afterwards: for choice files the brackets move to the chosen word,
    so a captured tree keeps reading like a real one and a revert is byte-identical.
    """
    p = host_path(root, logical)
    payload = value + "\n"
    if emulate:
        try:
            old = p.read_text(errors="replace")
        except FileNotFoundError:
            old = ""
        selected, choices = parse_choice(old)
        if selected is not None:
            if value not in choices:
                raise ApplyError(f"writing '{value}' to {logical}: invalid argument (emulated)")

            def mark(m: re.Match[str]) -> str:
                word = m.group(0).strip("[]")
                return f"[{word}]" if word == value else word

            payload = re.sub(r"\[?[^\s\[\]]+\]?", mark, old)
    try:
        fd = os.open(p, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC)
    except FileNotFoundError as exc:
        raise ApplyError(
            f"{logical} does not exist on this machine",
            hint="the kernel does not offer this setting; skip it",
        ) from exc
    except PermissionError as exc:
        raise _denied(f"write {logical}", " to change kernel settings") from exc
    try:
        os.write(fd, payload.encode())
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            raise ApplyError(
                f"the kernel rejected '{value}' for {logical} (invalid argument)",
                hint="check the allowed values: cat " + logical,
            ) from exc
        if exc.errno in (errno.EPERM, errno.EACCES):
            raise ApplyError(
                f"cannot write {logical}: operation not permitted",
                hint="run as root; in a container the kernel may refuse it altogether",
            ) from exc
        raise ApplyError(f"writing {logical} failed: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)


# ---------------------------------------------------------------- managed files

ManagedStyle = Literal["sysctl", "tmpfiles", "mycnf", "systemd"]


def check_value_text(value: str, what: str) -> str:
    """Values go into line-oriented files: no newlines or control characters."""
    if any(ord(c) < 32 and c != "\t" for c in value) or "\x7f" in value:
        raise UsageError(
            f"{what} value {value!r} contains a newline or control character",
            hint="a value must be one line of printable text",
        )
    return value


@dataclass
class ManagedFile:
    """A file that belongs to myaccel: a header comment, then ``key = value`` lines (in
    sections for option files and systemd drop-ins). It is regenerated on every change; the
    journal keeps its previous bytes, so rollback restores whatever was there."""

    root: Path
    path: str  # logical
    style: ManagedStyle
    purpose: str

    def header(self) -> str:
        return (
            f"{MANAGED_MARKER}: written by `myaccel apply`; do not edit by hand.\n"
            "# Undo with `myaccel rollback`: it restores the previous content of this file\n"
            "# (or removes it if myaccel created it).\n"
            f"# {self.purpose}\n"
        )

    def normalize_key(self, key: str) -> str:
        if self.style == "mycnf":
            return normalize_key(key)
        return key.strip()

    def load(self) -> dict[str, dict[str, str]]:
        """Sections -> keys -> values (section "" for flat files); empty if absent.

        Raises when a file of that name exists but was not written by myaccel: it is the
        user's, and myaccel never edits a user's file.
        """
        raw = read_bytes(self.root, self.path)
        if raw is None:
            return {}
        text = raw.decode("utf-8", errors="replace")
        if not text.startswith(MANAGED_MARKER):
            raise UsageError(
                f"{self.path} exists but was not written by myaccel",
                hint="myaccel never edits files it does not own: rename that file "
                "(keeping its settings), then apply again",
            )
        out: dict[str, dict[str, str]] = {}
        section = ""
        for line in text.splitlines():
            s = line.strip()
            if not s or s[0] in "#;":
                continue
            if self.style in ("mycnf", "systemd") and s.startswith("[") and s.endswith("]"):
                section = s[1:-1].strip()
                continue
            if self.style == "tmpfiles":
                fields = s.split(None, 6)
                if len(fields) == 7 and fields[0] == "w":
                    out.setdefault(section, {})[fields[1]] = fields[6]
                continue
            k, sep, v = s.partition("=")
            if not sep:
                continue
            v = v.strip()
            if self.style == "mycnf" and len(v) >= 2 and v[0] == v[-1] == '"':
                v = v[1:-1]
            out.setdefault(section, {})[self.normalize_key(k)] = v
        return out

    def get(self, section: str, key: str) -> str | None:
        return self.load().get(section, {}).get(self.normalize_key(key))

    def render(self, entries: dict[str, dict[str, str]]) -> bytes:
        lines = [self.header()]
        for section, values in entries.items():
            if not values:
                continue
            block: list[str] = []
            if section:
                block.append(f"[{section}]")
            for k, v in values.items():
                block.append(self._line(k, v))
            lines.append("\n".join(block) + "\n")
        return "\n".join(lines).encode()

    def _line(self, key: str, value: str) -> str:
        if self.style == "sysctl":
            return f"{key} = {value}"
        if self.style == "tmpfiles":
            return f"w {key} - - - - {value}"
        if self.style == "systemd":
            return f"{key}={value}"
        if value == "" or any(c in value for c in " \t#;'"):
            return f'{key} = "{value}"'
        return f"{key} = {value}"

    def set(self, section: str, key: str, value: str) -> None:
        """Set one key (other keys keep their order) and rewrite the file durably."""
        entries = self.load()
        entries.setdefault(section, {})[self.normalize_key(key)] = value
        p = host_path(self.root, self.path)
        missing = [d for d in ancestors(self.path) if not host_path(self.root, d).exists()]
        ensure_dirs(self.root, missing)
        try:
            st = p.stat()
            mode, uid, gid = stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid
        except FileNotFoundError:
            mode, uid, gid = DEFAULT_FILE_MODE, None, None
        write_file_durably(self.root, self.path, self.render(entries), mode=mode, uid=uid, gid=gid)

    def check_owned(self) -> None:
        """Raise now (at plan time) if the file exists and is not ours."""
        self.load()
