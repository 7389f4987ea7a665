"""Cross targets on this machine: how a target program runs here, and what CMake and
pkg-config need to configure and build for the target.

Running: every target program (cmake's try-run checks, the install check, training, smoke
runs, the tests) goes through ``target_runner``, which runs it under ``qemu-<arch>`` with ONE
root whatever multiarch packages the host has: the loader and the C library of Debian's
cross root (``/usr/aarch64-linux-gnu``, package ``libc6-arm64-cross``), found first through
``LD_LIBRARY_PATH``, then the multiarch library directories (``/usr/lib/aarch64-linux-gnu``:
the ``:arm64`` packages a real server links, e.g. ``libssl3:arm64``). Without the explicit
path the cross loader reads the host's ``/etc/ld.so.cache``; once ``libc6:arm64`` is
installed that cache points at the multiarch C library, of another build than the loader,
and the guest spins at 100% CPU instead of starting.

Configuring: CMake gets ``CMAKE_CROSSCOMPILING_EMULATOR`` (the same qemu command, so
try-run checks such as MariaDB's ``HAVE_SYSTEM_LIBFMT`` run instead of segfaulting), and
configure and build run with ``PKG_CONFIG_LIBDIR`` on the target's pkg-config directories
(else pkg-config answers with the host's OpenSSL).
"""

from __future__ import annotations

from myaccel import proc
from myaccel.builder.errors import DependencyMissing

# Debian's cross root (the loader and C library of the cross toolchain) per target
CROSS_ROOT = {"aarch64": "/usr/aarch64-linux-gnu"}
TRIPLET = {"aarch64": "aarch64-linux-gnu", "x86_64": "x86_64-linux-gnu"}
DEB_ARCH = {"aarch64": "arm64", "x86_64": "amd64"}


def deb_arch(target_arch: str) -> str:
    """Debian's architecture name of a target (``aarch64`` -> ``arm64``)."""
    return DEB_ARCH.get(target_arch, target_arch)


def library_path(target_arch: str) -> list[str]:
    """Where the guest loader looks for libraries, in order: the cross root first (its
    C library matches its loader), then the multiarch directories."""
    triplet = TRIPLET.get(target_arch, f"{target_arch}-linux-gnu")
    root = CROSS_ROOT.get(target_arch, "/")
    return [f"{root}/lib", f"/usr/lib/{triplet}", f"/lib/{triplet}"]


def qemu_argv(target_arch: str, *, reserved_va: str | None = None) -> list[str]:
    """``qemu-<arch> -L <cross root> -E LD_LIBRARY_PATH=...``: the prefix of every run of a
    target program on this machine. ``reserved_va`` (``-R 4G``) bounds the guest's address
    space: qemu-user keeps a descriptor per guest page of every mapping, so a guest that
    reserves terabytes (InnoDB's buffer pool in MariaDB 10.11.12+) costs the host tens of
    GB of memory without it, and its reservation fails instead with it (the smoke run)."""
    qemu = proc.which(f"qemu-{target_arch}")
    if qemu is None:
        raise DependencyMissing(
            f"running {target_arch} programs here needs qemu-{target_arch}",
            hint="apt-get install qemu-user",
        )
    root = CROSS_ROOT.get(target_arch, "/")
    bound = ["-R", reserved_va] if reserved_va else []
    return [
        qemu,
        *bound,
        "-L",
        root,
        "-E",
        "LD_LIBRARY_PATH=" + ":".join(library_path(target_arch)),
    ]


def target_runner(target_arch: str, cross: bool) -> list[str]:
    """How to execute a target program here: directly, or under qemu-user (cross)."""
    return qemu_argv(target_arch) if cross else []


def pkg_config_libdir(target_arch: str) -> str:
    triplet = TRIPLET.get(target_arch, f"{target_arch}-linux-gnu")
    return f"/usr/lib/{triplet}/pkgconfig:/usr/share/pkgconfig"


def build_env(target_arch: str, cross: bool) -> dict[str, str | None]:
    """Environment changes of configure and build (cmake re-runs itself during builds)."""
    if not cross:
        return {}
    # PKG_CONFIG_PATH would be searched before the LIBDIR: a host path there leaks in
    return {"PKG_CONFIG_LIBDIR": pkg_config_libdir(target_arch), "PKG_CONFIG_PATH": None}


def cmake_args(target_arch: str) -> list[str]:
    """The CMake definitions of a cross configure (qemu must be installed)."""
    return [
        "-DCMAKE_SYSTEM_NAME=Linux",
        f"-DCMAKE_SYSTEM_PROCESSOR={target_arch}",
        "-DCMAKE_FIND_ROOT_PATH_MODE_PROGRAM=NEVER",
        "-DCMAKE_CROSSCOMPILING_EMULATOR=" + ";".join(qemu_argv(target_arch)),
    ]


def foreign_architectures() -> list[str]:
    """``dpkg --print-foreign-architectures`` (empty where dpkg is missing)."""
    if proc.which("dpkg") is None:
        return []
    done = proc.run(["dpkg", "--print-foreign-architectures"], timeout_s=30)
    return done.stdout.split() if done.ok else []


def install_hint(packages: list[str], target_arch: str | None) -> str:
    """``apt-get install ...``, after ``dpkg --add-architecture`` when a target's packages
    (``libssl-dev:arm64``) are needed and dpkg does not know that architecture yet."""
    cmd = f"apt-get install {' '.join(packages)}"
    if target_arch is None:
        return cmd
    arch = deb_arch(target_arch)
    if arch in foreign_architectures():
        return cmd
    return f"dpkg --add-architecture {arch} && apt-get update && {cmd}"
