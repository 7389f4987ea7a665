"""Redo log files made dense: content unchanged, no hole left, and a copy as the
snapshots make it (`cp -a --reflink=auto`) stays dense."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from myaccel.server.sandbox.redo_files import densify, densify_redo, redo_files, unwritten_bytes

MIB = 1 << 20


def _sparse(path: Path, size: int, chunks: dict[int, bytes]) -> None:
    with path.open("wb") as f:
        f.truncate(size)
        for off, data in chunks.items():
            f.seek(off)
            f.write(data)


def _allocated(path: Path) -> int:
    return path.stat().st_blocks * 512


def test_densify_keeps_the_bytes_and_fills_the_holes(tmp_path: Path) -> None:
    log = tmp_path / "ib_logfile0"
    _sparse(log, 8 * MIB, {0: b"header" * 100, 5 * MIB: os.urandom(4096)})
    before = log.read_bytes()
    if unwritten_bytes(log) == 0:
        pytest.skip("this filesystem reports no holes (SEEK_HOLE)")
    assert _allocated(log) < 8 * MIB
    written = densify(log)
    assert written >= 7 * MIB
    assert log.read_bytes() == before
    assert unwritten_bytes(log) == 0 and _allocated(log) >= 8 * MIB
    assert densify(log) == 0  # dense already: nothing written


def test_fallocated_file_counts_as_unwritten_and_is_written(tmp_path: Path) -> None:
    log = tmp_path / "ib_logfile0"
    fd = os.open(log, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        os.posix_fallocate(fd, 0, 4 * MIB)
        os.pwrite(fd, b"checkpoint", 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    if unwritten_bytes(log) == 0:
        pytest.skip("this filesystem reports fallocated blocks as data")
    before = log.read_bytes()
    assert densify(log) > 0
    assert log.read_bytes() == before and unwritten_bytes(log) == 0


def test_redo_files_of_both_flavors_and_a_dense_copy(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "#innodb_redo").mkdir(parents=True)
    _sparse(data / "ib_logfile0", 2 * MIB, {0: b"x"})
    _sparse(data / "#innodb_redo" / "#ib_redo7", 2 * MIB, {0: b"y"})
    _sparse(data / "#innodb_redo" / "#ib_redo8_tmp", 2 * MIB, {})
    (data / "ibdata1").write_bytes(b"not redo")
    assert [p.name for p in redo_files(data)] == ["#ib_redo7", "#ib_redo8_tmp", "ib_logfile0"]
    densify_redo(data)
    assert all(unwritten_bytes(p) == 0 for p in redo_files(data))
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", "--reflink=auto", str(data), str(copy)], check=True)
    assert all(unwritten_bytes(p) == 0 for p in redo_files(copy))
    assert (copy / "ib_logfile0").read_bytes() == (data / "ib_logfile0").read_bytes()


@pytest.mark.parametrize("tail", [0, 1000, 4095])
def test_an_unaligned_end_is_written_back_too(tmp_path: Path, tail: int) -> None:
    """Direct I/O where the hole is aligned, buffered for a last piece that is not: every
    byte kept, no hole left."""
    log = tmp_path / "ib_logfile0"
    size = 6 * MIB + tail
    _sparse(log, size, {0: os.urandom(5000), 3 * MIB + 4096: os.urandom(4096)})
    if not tail:  # data at the end; else the last hole runs to an unaligned end of file
        with log.open("r+b") as f:
            f.seek(size - 3)
            f.write(b"end")
    before = log.read_bytes()
    if unwritten_bytes(log) == 0:
        pytest.skip("this filesystem reports no holes (SEEK_HOLE)")
    assert densify(log) > 0
    assert log.read_bytes() == before
    assert unwritten_bytes(log) == 0


def test_a_filesystem_without_direct_io_is_densified_buffered() -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir():
        pytest.skip("no /dev/shm")
    log = shm / f"myaccel-test-redo-{os.getpid()}"
    try:
        _sparse(log, 2 * MIB + 100, {MIB: b"z" * 10})
        before = log.read_bytes()
        if unwritten_bytes(log) == 0:
            pytest.skip("tmpfs reports no holes here")
        assert densify(log) > 0
        assert log.read_bytes() == before and unwritten_bytes(log) == 0
    finally:
        log.unlink(missing_ok=True)


def test_a_direct_descriptor_that_refuses_io_falls_back_to_buffered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filesystem may accept O_DIRECT at open and refuse the I/O (EINVAL): the rest is
    written back buffered, the bytes unchanged."""
    import errno

    from myaccel.server.sandbox import redo_files

    log = tmp_path / "ib_logfile0"
    _sparse(log, 4 * MIB, {0: b"head", 2 * MIB: os.urandom(4096)})
    before = log.read_bytes()
    if unwritten_bytes(log) == 0:
        pytest.skip("this filesystem reports no holes (SEEK_HOLE)")
    refusing: list[int] = []

    def fake_direct(path: Path) -> int:
        fd = os.open(path, os.O_RDWR)
        refusing.append(fd)
        return fd

    real = os.preadv

    def preadv(fd: int, buffers: list[memoryview], offset: int) -> int:
        if fd in refusing:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(fd, buffers, offset)

    monkeypatch.setattr(redo_files, "_direct_fd", fake_direct)
    monkeypatch.setattr(redo_files.os, "preadv", preadv)
    assert densify(log) > 0 and refusing
    assert log.read_bytes() == before and unwritten_bytes(log) == 0
