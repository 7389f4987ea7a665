"""The package's relationships: ``Depends`` from what the bundled extension modules link
(read from their ELF headers), ``Recommends``/``Suggests`` from what each command runs
(``myaccel.doctor.needs``, the same data ``myaccel doctor`` checks)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection

# The bundled site-packages hold CPython 3.11 extension modules (cp311 wheels): another
# python3 minor version could not load them, hence the upper bound.
PYTHON = "python3 (>= 3.11~), python3 (<< 3.12)"

# The system libraries manylinux wheels may link (the manylinux policy's allow-list) that
# the bundled modules do link, and the Debian 12 package of each. A library missing here
# fails the build: a new one must be looked at.
SYSTEM_LIBRARIES = {
    "libc.so.6": "libc6",
    "libm.so.6": "libc6",
    "libpthread.so.0": "libc6",
    "libdl.so.2": "libc6",
    "librt.so.1": "libc6",
    "ld-linux-x86-64.so.2": "libc6",
    "ld-linux-aarch64.so.1": "libc6",
    "libgcc_s.so.1": "libgcc-s1",
    "libstdc++.so.6": "libstdc++6",
    "libz.so.1": "zlib1g",
}

# Debian packages of the tools in doctor/needs.py, by how much a DBA's server wants them:
# Recommends (installed by apt by default): what probe/plan/bench/ab/accelerate/tune/profile
# and a MariaDB clone run; Suggests: building servers from source and the rest.
# `apt install --no-install-recommends` leaves the former out (a MySQL host does not want
# mariadb-backup: MySQL's clone plugin does its copy).
RECOMMENDS = ("sysbench", "fio", "linux-perf", "numactl", "mariadb-backup")
SUGGESTS = ("valgrind", "gcc", "g++", "cmake", "ninja-build", "bison", "systemd")
# Essential in Debian (always installed): lintian asks that they are not named.
ESSENTIAL = ("util-linux",)


def tool_packages() -> set[str]:
    """Every Debian package named in ``myaccel.doctor.needs``."""
    from myaccel.doctor.needs import COMMANDS

    return {need.apt for needs in COMMANDS.values() for need in needs if need.apt}


def check_tool_packages() -> None:
    """Fail when doctor's needs name a package this module does not place."""
    placed = {*RECOMMENDS, *SUGGESTS, *ESSENTIAL}
    unplaced = tool_packages() - placed
    if unplaced:
        raise SystemExit(
            f"packaging/depends.py: place {sorted(unplaced)} in RECOMMENDS or SUGGESTS"
        )


def elf_files(tree: Path) -> list[Path]:
    """The ELF files under ``tree`` (extension modules and the libraries wheels vendor)."""
    found = []
    for path in sorted(tree.rglob("*")):
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as f:
                if f.read(4) == b"\x7fELF":
                    found.append(path)
    return found


def _needed(path: Path) -> tuple[set[str], set[str], str]:
    """(DT_NEEDED, GLIBC_x.y versions needed, machine) of one ELF file."""
    with path.open("rb") as f:
        elf = ELFFile(f)
        needed: set[str] = set()
        versions: set[str] = set()
        for section in elf.iter_sections():
            if isinstance(section, DynamicSection):
                needed |= {cast(Any, t).needed for t in section.iter_tags("DT_NEEDED")}
            elif isinstance(section, GNUVerNeedSection):
                for _, aux in section.iter_versions():
                    versions |= {a.name for a in aux if a.name.startswith("GLIBC_2.")}
        return needed, versions, str(elf["e_machine"])


def _glibc_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version))


def library_depends(files: Iterable[Path], machine: str) -> str:
    """``Depends`` entries for the system libraries ``files`` link, with the newest glibc
    symbol version they need; every file must be built for ``machine`` (EM_X86_64,
    EM_AARCH64)."""
    files = list(files)
    bundled = {p.name for p in files}
    packages: set[str] = set()
    glibc = "GLIBC_2.17"
    for path in files:
        needed, versions, found = _needed(path)
        if found != machine:
            raise SystemExit(f"{path}: {found}, not {machine}")
        for lib in sorted(needed - bundled):
            if lib not in SYSTEM_LIBRARIES:
                raise SystemExit(f"{path} links {lib}: add its Debian package to SYSTEM_LIBRARIES")
            packages.add(SYSTEM_LIBRARIES[lib])
        glibc = max([glibc, *versions], key=_glibc_key)
    entries = [
        f"libc6 (>= {glibc.removeprefix('GLIBC_')})" if p == "libc6" else p
        for p in sorted(packages | {"libc6"})
    ]
    return ", ".join(entries)


def relationships(elf: Iterable[Path], machine: str) -> dict[str, str]:
    """The control file's Depends, Recommends and Suggests."""
    check_tool_packages()
    return {
        "Depends": f"{PYTHON}, {library_depends(elf, machine)}",
        "Recommends": ", ".join(RECOMMENDS),
        "Suggests": ", ".join(SUGGESTS),
    }
