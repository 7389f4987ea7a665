"""Where the general log of a capture is written: a directory the server's own user can
write and myaccel can read, private to them, removed after the capture.

A server runs as its own user (``mysql`` on a distribution's package) and cannot write
myaccel's 0700 directory under ``$MYACCEL_HOME`` (nor see ``/root`` or ``/home`` at all
under the packages' systemd units, ``ProtectHome=true``). So the server's uid is found
first (its process, from ``@@pid_file`` and ``/proc``; else the owner of its datadir):

- the server runs as myaccel's own user (a sandbox, or myaccel run as ``mysql``): a 0700
  directory under ``$MYACCEL_HOME/capture``, as before;
- myaccel is root: a 0700 directory owned by the server's uid/gid under a root-owned 0711
  ``myaccel-capture`` in the system's temporary directory (``/tmp``: the server's own
  ``tmpdir`` on a stock install), the file made first, 0600, owned by the server's user;
- otherwise no one but root could make such a directory: refused before any switch.

A service unit with ``PrivateTmp=true`` (not Debian's ``mariadb.service``, which says
``PrivateTmp=false``; others do) gives the server a ``/tmp`` of its own: the name it is told
(``general_log_file``) must be one in its ``/tmp``. Then, as root, the directory is made
and the log read through the server's own view of the file system (``/proc/PID/root``),
under the same name.

Each directory is named after the capture's pid (``general-log-PID-XXXX``): the capture
removes it at its end (also on an error); one left by a killed capture is removed when
its journal is rolled back (``myaccel rollback``, or the next command's repair of orphaned
journals: ``remove_left``), else by the next capture (its pid is gone)."""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from myaccel.errors import ExitCode, MyaccelError
from myaccel.paths import myaccel_home

LOG_NAME = "general.log"
SHARED_NAME = "myaccel-capture"
_DIR_RE = re.compile(r"^general-log-(\d+)-")


class LogDirRefused(MyaccelError, code="capture-log-dir", exit_code=ExitCode.IO_ERROR):
    """The server's user could not write a general log file myaccel can make for it."""


@dataclass(frozen=True)
class ServerUser:
    uid: int
    gid: int
    evidence: str  # how it was found
    pid: int | None = None  # the server's process, when it was found from it

    @property
    def name(self) -> str:
        try:
            return pwd.getpwuid(self.uid).pw_name
        except KeyError:
            return str(self.uid)


def ids_from_status(text: str) -> tuple[int, int] | None:
    """The effective uid and gid of a ``/proc/PID/status``."""
    ids: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("Uid", "Gid") and len(rest.split()) >= 2:
            ids[key] = int(rest.split()[1])
    return (ids["Uid"], ids["Gid"]) if len(ids) == 2 else None


def find_server_user(
    pid_file: str, datadir: str, proc_root: Path = Path("/proc")
) -> ServerUser | None:
    """The server's uid/gid: of its process (``@@pid_file``, ``/proc/PID/status``), else
    the owner of its datadir; None when neither can be read here."""
    with contextlib.suppress(OSError, ValueError):
        pid = int(Path(pid_file).read_text().split()[0]) if pid_file else 0
        if pid > 0:
            ids = ids_from_status((proc_root / str(pid) / "status").read_text())
            if ids is not None:
                return ServerUser(
                    ids[0], ids[1], f"server pid {pid} (@@pid_file {pid_file})", pid=pid
                )
    with contextlib.suppress(OSError):
        if datadir:
            st = os.stat(datadir)
            return ServerUser(st.st_uid, st.st_gid, f"owner of the datadir {datadir}")
    return None


def traversable(path: Path, uid: int, gid: int, stat_fn: Callable[[Path], os.stat_result]) -> bool:
    """Whether ``uid``/``gid`` may reach ``path`` (search permission on every directory
    from ``/`` down to it, ``path`` included)."""
    if uid == 0:
        return True
    for d in [*reversed(path.parents), path]:
        st = stat_fn(d)
        if st.st_uid == uid:
            bit = stat.S_IXUSR
        elif st.st_gid == gid:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not st.st_mode & bit:
            return False
    return True


@dataclass(frozen=True)
class LogDirPlan:
    parent: Path
    owner: tuple[int, int] | None  # chown the directory and file to this uid/gid
    # where myaccel reaches the server's file system when the server has a /tmp of its
    # own (``/proc/PID/root``); None: the same file system as myaccel's
    seen_from: Path | None = None

    def local(self, path: Path) -> Path:
        """``path`` as the server names it, as myaccel reaches it."""
        return path if self.seen_from is None else self.seen_from / path.relative_to("/")


@dataclass(frozen=True)
class LogFile:
    """The capture's general log: ``path`` as the server is told (``general_log_file``),
    ``local`` where myaccel reads and removes it (the same unless the server has a private
    ``/tmp``)."""

    path: Path
    local: Path


def private_tmp(pid: int, tmp: Path, proc_root: Path = Path("/proc")) -> bool:
    """Whether process ``pid`` sees another ``tmp`` than this process (a unit's
    ``PrivateTmp=true``: its own mount there)."""
    try:
        theirs = os.stat(proc_root / str(pid) / "root" / tmp.relative_to("/"))
        ours = os.stat(tmp)
    except (OSError, ValueError):
        return False
    return (theirs.st_dev, theirs.st_ino) != (ours.st_dev, ours.st_ino)


def plan_log_dir(server: ServerUser | None, euid: int, home: Path, shared_tmp: Path) -> LogDirPlan:
    """Where the log directory goes (``LogDirRefused`` when myaccel cannot make one the
    server's user writes)."""
    if server is None or server.uid == euid:
        return LogDirPlan(home / "capture", None)
    if euid == 0:
        seen_from = None
        if server.pid is not None and private_tmp(server.pid, shared_tmp):
            seen_from = Path(f"/proc/{server.pid}/root")
        return LogDirPlan(shared_tmp / SHARED_NAME, (server.uid, server.gid), seen_from)
    raise LogDirRefused(
        f"the server runs as {server.name} (uid {server.uid}, {server.evidence}) and cannot "
        f"write the general log into a directory of myaccel's user (uid {euid})",
        hint=f"run myaccel capture as root or as {server.name}, or switch performance_schema "
        "on (performance_schema=ON in the server's option file, then a restart)",
    )


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale_dirs(parent: Path, alive: Callable[[int], bool] = _pid_alive) -> list[Path]:
    """Log directories of captures whose process is gone."""
    out = []
    with contextlib.suppress(OSError):
        for p in sorted(parent.iterdir()):
            m = _DIR_RE.match(p.name)
            if m and p.is_dir() and not p.is_symlink() and not alive(int(m.group(1))):
                out.append(p)
    return out


def _shared_parent(parent: Path, euid: int) -> None:
    """``parent`` exists, is a real directory of root's, 0711 (search only for others)."""
    with contextlib.suppress(FileExistsError):
        parent.mkdir(mode=0o711)
    st = parent.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != euid or st.st_mode & 0o022:
        raise LogDirRefused(
            f"{parent} is not a directory of root's that only root writes",
            hint=f"remove {parent} (myaccel makes it again)",
        )
    os.chmod(parent, 0o711)


def make_log_dir(plan: LogDirPlan, server: ServerUser | None) -> LogFile:
    """Make the capture's directory and its empty log file (0700 / 0600, the server's
    user's when ``plan.owner``). Directories left by killed captures are removed first."""
    euid = os.geteuid()
    parent = plan.local(plan.parent)
    if plan.owner is None:
        parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    else:
        _shared_parent(parent, euid)
    for old in stale_dirs(parent):
        shutil.rmtree(old, ignore_errors=True)
    d = Path(tempfile.mkdtemp(prefix=f"general-log-{os.getpid()}-", dir=parent))  # 0700
    local = d / LOG_NAME
    fd = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        if plan.owner is not None:
            os.fchown(fd, *plan.owner)
            os.chown(d, *plan.owner)
    finally:
        os.close(fd)
    if server is not None and not traversable(local.parent, server.uid, server.gid, os.stat):
        shutil.rmtree(d, ignore_errors=True)
        raise LogDirRefused(
            f"the server's user {server.name} cannot reach {local.parent}",
            hint="set MYACCEL_HOME (or TMPDIR, as root) to a directory whose parents "
            f"{server.name} may search",
        )
    return LogFile(plan.parent / d.name / LOG_NAME, local)


def prepare(pid_file: str, datadir: str) -> LogFile:
    """The general log file of a capture, where the server's user writes it."""
    server = find_server_user(pid_file, datadir)
    plan = plan_log_dir(server, os.geteuid(), myaccel_home(), Path(tempfile.gettempdir()))
    return make_log_dir(plan, server)


def left_by(entries: Iterable[tuple[str, str]]) -> list[Path]:
    """The log directories a capture's journal names (its ``mysql:general_log_file``
    entries: target, new value) that are still there and whose capture is gone: what a
    rollback of a killed capture removes. Only a directory myaccel makes qualifies
    (``general-log-PID-...`` in ``capture`` or ``myaccel-capture``, not a symlink)."""
    out = []
    for target, value in entries:
        if target != "mysql:general_log_file" or not value:
            continue
        d = Path(value).parent
        m = _DIR_RE.match(d.name)
        if m is None or d.parent.name not in ("capture", SHARED_NAME):
            continue
        if d.is_dir() and not d.is_symlink() and not _pid_alive(int(m.group(1))):
            out.append(d)
    return out


def remove_left(entries: Iterable[tuple[str, str]], note: Callable[[str], None]) -> None:
    """Remove what ``left_by`` finds (after the switches are back), saying so."""
    for d in left_by(entries):
        shutil.rmtree(d, ignore_errors=True)
        note(f"removed the general log directory {d} of a killed capture")
