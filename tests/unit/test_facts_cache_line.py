"""The L1 data cache line when the kernel lists the caches without it (arm64 kernels read
cache sizes from firmware tables, which qemu's virt board and some ACPI systems leave
empty): the CPU's own, through glibc."""

from __future__ import annotations

import platform

from myaccel.facts.cpu import _with_cpu_line, libc_l1d_line_size
from myaccel.model import CacheLevel


def test_glibc_reads_the_line_from_the_cpu() -> None:
    line = libc_l1d_line_size()
    if platform.machine() in ("x86_64", "aarch64"):
        assert line is not None and line in (32, 64, 128, 256), line


def test_only_level_one_data_without_a_line_gets_the_cpus() -> None:
    levels = [
        CacheLevel(level=1, type="Data"),
        CacheLevel(level=1, type="Instruction"),
        CacheLevel(level=2, type="Unified"),
        CacheLevel(level=1, type="Unified", line_size_bytes=128),
    ]
    got = _with_cpu_line(levels, 64)
    assert [lv.line_size_bytes for lv in got] == [64, None, None, 128]
    assert _with_cpu_line(levels, None) == levels
