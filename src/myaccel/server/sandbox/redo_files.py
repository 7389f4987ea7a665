"""A stopped datadir's InnoDB redo log files, made dense: every block of each file written
on disk, its bytes unchanged.

Why: a server that resizes its redo log at start creates the new file with fallocate
(unwritten extents), and a copy may hold holes. Every first write into such a block
makes the filesystem convert or allocate it, so each group commit's fdatasync also
commits the filesystem's journal; a server that has run a while writes into blocks
written before. An A/B whose arms differ in redo size ran the arm whose size matched the
dataset snapshot's on a fully written copy and the other on a log its server had just
created: measured on this project's 2-vCPU VM (ext4, MariaDB 10.11, write-only at 16
threads), the same two configurations gave -4.6% one way round and +8% the other
(docs/benchmarking.md).

Written here rather than with a tool: `fallocate` makes unwritten extents (the problem
itself) and `cp --sparse=never` rewrites the whole file through a second copy; this
writes back only the ranges the filesystem reports as holes (`SEEK_HOLE`, which reports
unwritten extents as holes too once their cached pages are dropped), each with the
bytes read from it, so the content is the same by construction."""

from __future__ import annotations

import errno
import mmap
import os
from pathlib import Path

# MariaDB 10.5+ has ib_logfile0, older servers ib_logfile0..N; MySQL 8.0.30+ keeps its
# redo in #innodb_redo/ (#ib_redoN, spare files #ib_redoN_tmp).
REDO_GLOBS = ("ib_logfile*", "#innodb_redo/#ib_redo*")

CHUNK = 4 << 20
# direct I/O's alignment: the logical block size of any disk (4096 or 512) divides it
ALIGN = 4096


def redo_files(datadir: Path) -> list[Path]:
    """The redo log files of ``datadir``, sorted."""
    return sorted({p for g in REDO_GLOBS for p in datadir.glob(g) if p.is_file()})


def _holes(fd: int, size: int) -> list[tuple[int, int]]:
    """The [start, end) ranges the filesystem reports as holes; none where it cannot tell
    (no SEEK_HOLE: every byte then counts as written). The file's cached pages are
    dropped first: ext4 reports an unwritten extent as data while its pages are in the
    page cache (after any read of it)."""
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    out: list[tuple[int, int]] = []
    off = 0
    while off < size:
        try:
            hole = os.lseek(fd, off, os.SEEK_HOLE)
        except OSError as e:
            if e.errno in (errno.EINVAL, errno.EOPNOTSUPP):
                return []
            raise
        if hole >= size:
            break
        try:
            data = os.lseek(fd, hole, os.SEEK_DATA)
        except OSError as e:
            if e.errno != errno.ENXIO:  # ENXIO: no data after the hole
                raise
            data = size
        out.append((hole, data))
        off = data
    return out


def unwritten_bytes(path: Path) -> int:
    """Bytes of ``path`` the filesystem reports as holes (or unwritten extents)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return sum(e - s for s, e in _holes(fd, os.fstat(fd).st_size))
    finally:
        os.close(fd)


def _direct_fd(path: Path) -> int | None:
    """``path`` opened for direct I/O, or None where the filesystem refuses it (tmpfs)."""
    try:
        return os.open(path, os.O_RDWR | os.O_DIRECT)
    except OSError as e:
        if e.errno == errno.EINVAL:
            return None
        raise


def _copy_back(fd: int, direct: int | None, buf: mmap.mmap, pos: int, end: int) -> int:
    """Read [pos, end) and write the same bytes back; the bytes written. Through ``direct``
    where the range is aligned (the page cache neither filled nor copied: measured in a TCG
    guest, 2 GiB in 13 s against 100 s buffered), else through ``fd``."""
    view = memoryview(buf)
    written = 0
    while pos < end:
        n = min(CHUNK, end - pos)
        aligned = direct is not None and pos % ALIGN == 0 and n % ALIGN == 0
        use = direct if aligned and direct is not None else fd
        try:
            got = os.preadv(use, [view[:n]], pos)
        except OSError as e:
            if use == fd or e.errno != errno.EINVAL:
                raise
            direct, use = None, fd  # opened for direct I/O but refused it: buffered from here
            got = os.preadv(fd, [view[:n]], pos)
        if got <= 0:
            break
        if got % ALIGN:
            use = fd  # a short read at the end of the file: write it buffered
        os.pwritev(use, [view[:got]], pos)
        pos += got
        written += got
    view.release()
    return written


def densify(path: Path) -> int:
    """Write back every hole of ``path`` with the bytes read from it, then fsync; the
    bytes written (0 for a dense file)."""
    fd = os.open(path, os.O_RDWR)
    direct: int | None = None
    written = 0
    try:
        holes = _holes(fd, os.fstat(fd).st_size)
        if holes:
            direct = _direct_fd(path)
            with mmap.mmap(-1, CHUNK) as buf:  # page-aligned, as direct I/O needs
                for start, end in holes:
                    written += _copy_back(fd, direct, buf, start, end)
        if written:
            os.fsync(fd)
            if direct is not None:
                os.fsync(direct)
    finally:
        if direct is not None:
            os.close(direct)
        os.close(fd)
    return written


def densify_redo(datadir: Path) -> int:
    """Densify every redo log file of a stopped ``datadir``; the bytes written."""
    return sum(densify(p) for p in redo_files(datadir))
