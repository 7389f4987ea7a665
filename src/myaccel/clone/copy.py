"""A consistent copy of a running server's data, without stopping it.

- MariaDB: ``mariadb-backup --backup`` into a staging directory (through a 0600 option file,
  so no password is on a command line), then ``--prepare``, run under the clone's fence.
- MySQL: the clone plugin, ``CLONE LOCAL DATA DIRECTORY``; the server writes the copy
  itself. When the plugin is not loaded it is installed for the copy and uninstalled after
  it, each step in the clone's record first (the only write myaccel makes on the source).

Progress: the staging directory's size against the expected size, every few seconds.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pymysql

from myaccel import proc
from myaccel.clone.errors import CloneError
from myaccel.clone.record import StepState
from myaccel.clone.source import SourceServer
from myaccel.server.connection import ConnectParams, connect
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


def _client_lines(params: ConnectParams) -> list[str]:
    lines = [f"user={params.user}"]
    if params.password:
        lines.append(f'password="{params.password}"')
    if params.socket:
        lines.append(f"socket={params.socket}")
    else:
        lines += [f"host={params.host}", f"port={params.port}", "protocol=TCP"]
    return lines


def mariadb_backup(src: SourceServer, staging: Path, fence_prefix: list[str], say: Say) -> None:
    """``mariadb-backup --backup`` then ``--prepare`` into ``staging``."""
    tool = proc.which("mariadb-backup") or proc.which("mariabackup")
    if tool is None:
        raise CloneError(
            "mariadb-backup is not installed (a MariaDB clone copies the data with it)",
            hint="apt-get install mariadb-backup (scripts/ensure-system-deps.sh installs it)",
        )
    v = src.variables
    server = [f"datadir={src.datadir}"]
    for key in ("innodb_data_home_dir", "innodb_log_group_home_dir", "innodb_undo_directory"):
        if v.get(key) and v[key] not in ("./", "."):
            server.append(f"{key}={v[key]}")
    if v.get("innodb_data_file_path"):
        server.append(f"innodb_data_file_path={v['innodb_data_file_path']}")
    text = "[mariadb-backup]\n" + "\n".join(_client_lines(src.params) + server) + "\n"
    fd, name = tempfile.mkstemp(prefix="myaccel-clone-", suffix=".cnf", dir=staging.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        log = staging.parent / "copy.log"
        say(f"copying {src.datadir} with mariadb-backup --backup")
        _run_logged(
            [
                *fence_prefix,
                tool,
                f"--defaults-file={name}",
                "--backup",
                f"--target-dir={staging}",
            ],
            log,
            "mariadb-backup --backup",
        )
    finally:
        Path(name).unlink(missing_ok=True)
    say("making the copy consistent with mariadb-backup --prepare")
    _run_logged(
        [*fence_prefix, tool, "--no-defaults", "--prepare", f"--target-dir={staging}"],
        staging.parent / "copy.log",
        "mariadb-backup --prepare",
    )


def _run_logged(argv: list[str], log: Path, what: str) -> None:
    done = proc.run(argv, timeout_s=COPY_TIMEOUT_S)
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
    uninstalled after when it was not loaded)."""
    conn = connect(src.params)
    installed = False
    try:
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
    finally:
        if installed:
            try:
                with conn.cursor() as cur:
                    cur.execute("UNINSTALL PLUGIN clone")
                journal("install-clone-plugin", "undone", "UNINSTALL PLUGIN clone")
            except pymysql.err.MySQLError as exc:
                journal("install-clone-plugin", "failed", f"UNINSTALL PLUGIN clone: {exc}")
        conn.close()


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
