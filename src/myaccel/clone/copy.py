"""A consistent copy of a running server's data, without stopping it.

- MariaDB: ``mariadb-backup --backup`` into a staging directory, then ``--prepare``, run
  under the clone's fence. The connection details (the password too) reach it as an option
  file that exists only in memory (``secret_option_file``): never on a command line, in the
  environment or on a disk.
- MySQL: the clone plugin, ``CLONE LOCAL DATA DIRECTORY``; the server writes the copy
  itself. When the plugin is not loaded it is installed for the copy and uninstalled after
  it, each step in the clone's record first (the only write myaccel makes on the source).

Progress: the staging directory's size against the expected size, every few seconds.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pymysql

from myaccel import proc, signals
from myaccel.clone.errors import CloneError
from myaccel.clone.record import StepState
from myaccel.clone.source import SourceServer
from myaccel.errors import MyaccelError
from myaccel.server.connection import ConnectParams, connect, query_value
from myaccel.server.sandbox.snapshots import dir_size_bytes
from myaccel.units import format_bytes

COPY_TIMEOUT_S = 6 * 3600.0
PROGRESS_EVERY_S = 2.0

Say = Callable[[str], None]
# called before and after the one write on a MySQL source: ("install-plugin", "started")...
Journal = Callable[[str, StepState, str], None]


@contextlib.contextmanager
def progress_of(staging: Path, expected_bytes: int, say: Say) -> Iterator[None]:
    """Report the size of ``staging`` while the body runs."""
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(PROGRESS_EVERY_S):
            size = dir_size_bytes(staging) if staging.exists() else 0
            share = f" ({min(99, 100 * size // expected_bytes)}%)" if expected_bytes else ""
            say(f"copied {format_bytes(size)} of about {format_bytes(expected_bytes)}{share}")

    t = threading.Thread(target=watch, name="clone-progress", daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join(timeout=5)


def option_value(text: str) -> str:
    """``text`` as a double-quoted option-file value (the escapes MariaDB's and MySQL's
    option-file readers undo: backslash, quotes, line breaks, tab)."""
    escaped = (
        text.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
    )
    return f'"{escaped}"'


def _client_lines(params: ConnectParams) -> list[str]:
    lines = [f"user={params.user}"]
    if params.password:
        lines.append(f"password={option_value(params.password)}")
    if params.socket:
        lines.append(f"socket={params.socket}")
    else:
        lines += [f"host={params.host}", f"port={params.port}", "protocol=TCP"]
    return lines


@contextlib.contextmanager
def secret_option_file(text: str) -> Iterator[int]:
    """An option file in memory only, as a descriptor a child inherits (``pass_fds``) and
    opens as ``/dev/fd/N``: an anonymous ``memfd`` (no path on any file system, gone with
    the last descriptor, so a kill -9 leaves nothing behind), mode 0400 (the client
    libraries ignore a world-writable option file, and a memfd is born 0777).

    Not a pipe: ``mariadb-backup`` reads its option file once per group list (server
    options, then client options), and a pipe gives the second read nothing; each open of
    ``/dev/fd/N`` on a memfd reads it from the start."""
    fd = os.memfd_create("myaccel-client-options", os.MFD_CLOEXEC)
    try:
        os.fchmod(fd, 0o400)
        data = text.encode()
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
        yield fd
    finally:
        os.close(fd)


def backup_options(src: SourceServer) -> str:
    """The ``[mariadb-backup]`` option file of a copy of ``src`` (its password included)."""
    v = src.variables
    server = [f"datadir={src.datadir}"]
    for key in ("innodb_data_home_dir", "innodb_log_group_home_dir", "innodb_undo_directory"):
        if v.get(key) and v[key] not in ("./", "."):
            server.append(f"{key}={v[key]}")
    if v.get("innodb_data_file_path"):
        server.append(f"innodb_data_file_path={v['innodb_data_file_path']}")
    return "[mariadb-backup]\n" + "\n".join(_client_lines(src.params) + server) + "\n"


def mariadb_backup(src: SourceServer, staging: Path, fence_prefix: list[str], say: Say) -> None:
    """``mariadb-backup --backup`` then ``--prepare`` into ``staging``."""
    tool = proc.which("mariadb-backup") or proc.which("mariabackup")
    if tool is None:
        raise CloneError(
            "mariadb-backup is not installed (a MariaDB clone copies the data with it)",
            hint="apt-get install mariadb-backup (scripts/ensure-system-deps.sh installs it)",
        )
    log = staging.parent / "copy.log"
    say(f"copying {src.datadir} with mariadb-backup --backup")
    with secret_option_file(backup_options(src)) as fd:
        _run_logged(
            [
                *fence_prefix,
                tool,
                f"--defaults-file=/dev/fd/{fd}",
                "--backup",
                f"--target-dir={staging}",
            ],
            log,
            "mariadb-backup --backup",
            pass_fds=(fd,),
        )
    say("making the copy consistent with mariadb-backup --prepare")
    _run_logged(
        [*fence_prefix, tool, "--no-defaults", "--prepare", f"--target-dir={staging}"],
        log,
        "mariadb-backup --prepare",
    )


def _run_logged(argv: list[str], log: Path, what: str, pass_fds: tuple[int, ...] = ()) -> None:
    """Run a copy step to its end (it dies with this process: ``proc.run``'s default),
    its output appended to ``log``."""
    done = proc.run(argv, timeout_s=COPY_TIMEOUT_S, pass_fds=pass_fds)
    with open(log, "a") as fh:
        fh.write(f"--- {' '.join(argv)}\n{done.stdout}{done.stderr}\n")
    if not done.ok:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
        raise CloneError(
            f"{what} failed (exit code {done.returncode}): {tail[0][:200]}",
            hint=f"see {log}",
        )


def clone_plugin(src: SourceServer, staging: Path, journal: Journal, say: Say) -> None:
    """``CLONE LOCAL DATA DIRECTORY`` into ``staging`` (the plugin installed for it and
    uninstalled after when it was not loaded). Interrupted (SIGINT, SIGTERM, SIGHUP), the
    copy the server is making is stopped (``KILL QUERY`` from another connection: the one
    waiting for it is mid-statement) before the plugin is uninstalled."""
    conn = connect(src.params)
    installed = False
    interrupted = False
    thread_id = 0
    try:
        thread_id = int(query_value(conn, "SELECT CONNECTION_ID()") or 0)
        with conn.cursor() as cur:
            if src.clone_plugin is None:
                journal("install-clone-plugin", "started", "INSTALL PLUGIN clone on the source")
                cur.execute("INSTALL PLUGIN clone SONAME 'mysql_clone.so'")
                installed = True
                journal("install-clone-plugin", "done", "")
            elif src.clone_plugin != "ACTIVE":
                raise CloneError(
                    f"the clone plugin on the source is {src.clone_plugin}",
                    hint="activate it (or UNINSTALL PLUGIN clone) and retry",
                )
            say(f"copying {src.datadir} with CLONE LOCAL DATA DIRECTORY")
            cur.execute("CLONE LOCAL DATA DIRECTORY = %s", (str(staging),))
    except pymysql.err.MySQLError as exc:
        raise CloneError(
            f"the clone plugin failed: {exc.args[-1]}",
            hint="see the source server's error log",
        ) from exc
    except BaseException:
        interrupted = True
        raise
    finally:
        with signals.shielded():
            if interrupted:
                if thread_id:
                    _stop_statement(src.params, thread_id)
                conn.close()
            if installed:
                _uninstall_plugin(conn if not interrupted else None, src.params, journal)
            if conn.open:
                conn.close()


def _stop_statement(params: ConnectParams, thread_id: int, wait_s: float = 30.0) -> None:
    """``KILL QUERY`` the statement of connection ``thread_id`` and wait for it to end
    (best effort: the clone is being removed anyway)."""
    try:
        other = connect(params)
    except MyaccelError:
        return
    try:
        with other.cursor() as cur:
            cur.execute(f"KILL QUERY {int(thread_id)}")
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                cur.execute(
                    "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %s "
                    "AND COMMAND = 'Query'",
                    (int(thread_id),),
                )
                row = cur.fetchone()
                if not row or not row[0]:
                    break
                time.sleep(0.2)
    except pymysql.err.MySQLError:
        pass
    finally:
        other.close()


def _uninstall_plugin(
    conn: pymysql.connections.Connection[Any] | None, params: ConnectParams, journal: Journal
) -> None:
    """Undo the install made for the copy (on a new connection when ``conn`` is None)."""
    try:
        c = conn if conn is not None else connect(params)
    except MyaccelError as exc:
        journal("install-clone-plugin", "failed", f"UNINSTALL PLUGIN clone: {exc}")
        return
    try:
        with c.cursor() as cur:
            cur.execute("UNINSTALL PLUGIN clone")
        journal("install-clone-plugin", "undone", "UNINSTALL PLUGIN clone")
    except pymysql.err.MySQLError as exc:
        journal("install-clone-plugin", "failed", f"UNINSTALL PLUGIN clone: {exc}")
    finally:
        if conn is None:
            c.close()


@contextlib.contextmanager
def server_writable(staging_parent: Path, sandbox_dir: Path, uid: int | None) -> Iterator[None]:
    """Let a source running as another user write the staging directory (we are root);
    hand everything back to us afterwards."""
    if uid is None or uid == os.getuid():
        yield
        return
    mode = sandbox_dir.stat().st_mode & 0o777
    os.chmod(sandbox_dir, 0o711)
    os.chown(staging_parent, uid, -1)
    try:
        yield
    finally:
        os.chmod(sandbox_dir, mode)
        for root, dirs, files in os.walk(staging_parent):
            for n in [*dirs, *files]:
                os.lchown(Path(root) / n, os.getuid(), os.getgid())
        os.chown(staging_parent, os.getuid(), os.getgid())


def hot_copy(
    src: SourceServer,
    datadir: Path,
    sandbox_dir: Path,
    *,
    fence_prefix: list[str],
    journal: Journal,
    say: Say,
) -> int:
    """Copy the running source's data into ``datadir``; its size in bytes."""
    parent = sandbox_dir / ".copy"
    shutil.rmtree(parent, ignore_errors=True)
    parent.mkdir(mode=0o700)
    staging = parent / "data"
    try:
        with (
            server_writable(parent, sandbox_dir, src.uid),
            progress_of(staging, src.data_bytes, say),
        ):
            if src.adapter.hot_copy == "mariadb-backup":
                mariadb_backup(src, staging, fence_prefix, say)
            else:
                clone_plugin(src, staging, journal, say)
        size = dir_size_bytes(staging)
        os.rename(staging, datadir)
        log = parent / "copy.log"
        if log.exists():
            os.rename(log, sandbox_dir / "copy.log")
    finally:
        shutil.rmtree(parent, ignore_errors=True)
    return size
