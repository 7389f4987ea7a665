"""Snapshots of a stopped datadir: save, restore (copy, then swap with two renames), list,
delete. They live in ``snapshots/SNAP/`` (``data/`` and ``snapshot.json``, schema
``myaccel.sandbox-snapshot/1``), copied with ``cp -a --reflink=auto`` and synced to disk
before they are renamed into place."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

from myaccel import artifacts, proc
from myaccel.errors import MyaccelError, SandboxError
from myaccel.server.sandbox.core import COPY_TIMEOUT_S, DEFAULT_TIMEOUT_S, Progress, noop
from myaccel.server.sandbox.layout import validate_name
from myaccel.server.sandbox.lifecycle import SandboxLifecycle
from myaccel.server.sandbox.state import SnapshotInfo, SnapshotRecord, now_iso


def dir_size_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += (Path(root) / f).lstat().st_size
    return total


class SandboxSnapshots(SandboxLifecycle):
    """The snapshot commands of a sandbox (the server must be stopped, or ``stop``)."""

    def _snapshot_dir(self, snap: str) -> Path:
        validate_name(snap, "snapshot")
        return self.snapshots_dir / snap

    def _require_stopped(self, action: str, stop: bool, say: Progress) -> bool:
        """Stop the server for a snapshot action if allowed; True when it was running."""
        state, pid = self._probe()
        if state == "crashed":
            self._clean_stale()
            return False
        if state != "running":
            return False
        if not stop:
            raise SandboxError(
                f"cannot {action} while sandbox '{self.name}' is running (pid {pid})",
                hint=f"stop it first (`myaccel sandbox stop {self.name}`) or pass --stop to "
                "stop it and start it again afterwards",
            )
        say(self._stop_unlocked(DEFAULT_TIMEOUT_S).message)
        return True

    def _resume(self, say: Progress) -> None:
        ac = self.state.active_config
        res = self._start_unlocked(config=ac.config_file, sets=ac.sets, basedir=ac.basedir, say=say)
        say(res.message)

    def snapshot_save(
        self, snap: str, *, stop: bool = False, progress: Progress | None = None
    ) -> SnapshotInfo:
        """Copy the stopped datadir to ``snapshots/SNAP`` (reflinks where the filesystem
        has them). With ``stop``, a running server is stopped and started again."""
        say = progress or noop
        target = self._snapshot_dir(snap)
        with self._locked():
            if target.exists():
                raise SandboxError(
                    f"snapshot '{snap}' of sandbox '{self.name}' already exists",
                    hint=f"pick another name, or `myaccel sandbox snapshot delete {self.name} "
                    f"{snap}` first",
                )
            was_running = self._require_stopped("take a snapshot", stop, say)
            try:
                self.snapshots_dir.mkdir(exist_ok=True)
                tmp = self.snapshots_dir / f".{snap}.tmp-{os.getpid()}"
                shutil.rmtree(tmp, ignore_errors=True)
                tmp.mkdir()
                try:
                    say(f"copying {self.datadir} to snapshot '{snap}'")
                    proc.run(
                        ["cp", "-a", "--reflink=auto", str(self.datadir), str(tmp / "data")],
                        timeout_s=COPY_TIMEOUT_S,
                        check=True,
                    )
                    info = SnapshotInfo(
                        name=snap,
                        path=str(target),
                        size_bytes=dir_size_bytes(tmp / "data"),
                        created_at=now_iso(),
                        version=self.state.version_string,
                        active_config=self.state.active_config.describe(),
                    )
                    record = SnapshotRecord.of(info, self.state.flavor)
                    artifacts.save(tmp / "snapshot.json", record)
                    os.sync()  # the copy on disk before it is named a snapshot
                    os.rename(tmp, target)
                except BaseException:
                    shutil.rmtree(tmp, ignore_errors=True)
                    raise
            finally:
                if was_running:
                    self._resume(say)
        return info

    def snapshot_restore(
        self, snap: str, *, stop: bool = False, progress: Progress | None = None
    ) -> SnapshotInfo:
        """Replace the datadir by a snapshot: copy to a temporary directory, then swap with
        two renames (an interrupted swap is repaired at the next start)."""
        say = progress or noop
        source = self._snapshot_dir(snap)
        with self._locked():
            info = self._snapshot_info(source)
            if info is None:
                raise SandboxError(
                    f"no snapshot named '{snap}' in sandbox '{self.name}'",
                    hint=f"see `myaccel sandbox snapshot list {self.name}`",
                )
            was_running = self._require_stopped("restore a snapshot", stop, say)
            try:
                tmp = self.dir / f".data.restore-{os.getpid()}"
                old = self.dir / ".data.old"
                shutil.rmtree(tmp, ignore_errors=True)
                say(f"copying snapshot '{snap}' to {self.datadir}")
                try:
                    proc.run(
                        ["cp", "-a", "--reflink=auto", str(source / "data"), str(tmp)],
                        timeout_s=COPY_TIMEOUT_S,
                        check=True,
                    )
                    # On disk before the swap: a crash cannot leave a half-written
                    # datadir, and a benchmark run after a restore does not pay for the
                    # copy's writeback (up to 30 s later, in the middle of the run).
                    os.sync()
                except BaseException:
                    shutil.rmtree(tmp, ignore_errors=True)
                    raise
                shutil.rmtree(old, ignore_errors=True)
                if self.datadir.exists():
                    os.rename(self.datadir, old)
                os.rename(tmp, self.datadir)
                shutil.rmtree(old, ignore_errors=True)
            finally:
                if was_running:
                    self._resume(say)
        return info

    @staticmethod
    def _snapshot_info(path: Path) -> SnapshotInfo | None:
        """A snapshot's record; one without a readable ``snapshot.json`` (a crash while it
        was taken, a hand-made copy) is described from its directory."""
        if not (path / "data").is_dir():
            return None
        with contextlib.suppress(MyaccelError):
            record = artifacts.load(path / "snapshot.json", SnapshotRecord, error=SandboxError)
            return dataclasses.replace(record.info(), name=path.name, path=str(path))
        created = datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat(timespec="seconds")
        return SnapshotInfo(
            name=path.name,
            path=str(path),
            size_bytes=dir_size_bytes(path / "data"),
            created_at=created,
        )

    def snapshot_list(self) -> list[SnapshotInfo]:
        if not self.snapshots_dir.is_dir():
            return []
        out = []
        for entry in sorted(self.snapshots_dir.iterdir()):
            if entry.name.startswith(".") or not entry.is_dir():
                continue
            info = self._snapshot_info(entry)
            if info is not None:
                out.append(info)
        return out

    def snapshot_delete(self, snap: str) -> None:
        target = self._snapshot_dir(snap)
        with self._locked():
            if not target.is_dir():
                raise SandboxError(
                    f"no snapshot named '{snap}' in sandbox '{self.name}'",
                    hint=f"see `myaccel sandbox snapshot list {self.name}`",
                )
            shutil.rmtree(target)
