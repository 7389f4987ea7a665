"""What the guest image is made of, and where the lab keeps it.

The image's cache key is a hash of everything below that changes its content: the recipe
version (bump it when `image.py` changes what it writes into the tree), the suite, the
variant and the package list, and for an image of the host's own architecture myaccel's
pinned dependencies (installed into its tree: `image.py`). An architecture other than amd64
adds its name and its own recipe version to the key.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

RECIPE_VERSION = 2  # 2: myaccel's dependencies in the tree, xfsprogs
SUITE = "bookworm"
VARIANT = "minbase"
PACKAGES: tuple[str, ...] = (
    "systemd-sysv",
    "udev",
    "openssh-server",
    "openssh-sftp-server",
    "linux-image-amd64",
    "mariadb-server",
    "sysbench",
    "iproute2",
    "python3",
    "python3-venv",
    "ifupdown",
    "isc-dhcp-client",
    "numactl",
    "procps",
    "kmod",
)
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_CACHE = Path("/var/cache/myaccel-lab")
IMAGE_SIZE = "6G"
# the cached tree and image, a boot's overlay and a wheelhouse, with room to spare
NEEDED_FREE_BYTES = 8 * 1024**3


@dataclass(frozen=True)
class Arch:
    """A guest architecture: Debian's name for it, the kernel's (``uname -m``), the kernel
    package, the system emulator and its Debian package, the serial console's device and the
    Python platform tag suffix of its wheels."""

    debian: str
    machine: str
    kernel_package: str
    qemu_system: str
    qemu_package: str
    console: str
    # bump when image.py changes what it writes for this architecture only (not amd64's key)
    recipe: int = 0

    @property
    def foreign(self) -> bool:
        """Its binaries need qemu-user here (debootstrap's second stage in a chroot)."""
        return self.machine != os.uname().machine


AMD64 = Arch(
    debian="amd64",
    machine="x86_64",
    kernel_package="linux-image-amd64",
    qemu_system="qemu-system-x86_64",
    qemu_package="qemu-system-x86",
    console="ttyS0",
)
ARM64 = Arch(
    debian="arm64",
    machine="aarch64",
    kernel_package="linux-image-arm64",
    qemu_system="qemu-system-aarch64",
    qemu_package="qemu-system-arm",
    console="ttyAMA0",
    recipe=1,
)
ARCHES = {arch.debian: arch for arch in (AMD64, ARM64)}


# What only the x86 lab's tests use: accelerate's clone of the server needs mariadb-backup
# (Debian's mariadb-server does not pull it in), and its MYACCEL_HOME is an XFS disk (reflink
# snapshots). The aarch64 lab runs no accelerate, and its image (built through qemu-user,
# slow) keeps its key without them.
AMD64_ONLY: tuple[str, ...] = ("mariadb-backup", "xfsprogs")
REPO = Path(__file__).resolve().parents[1]
# where myaccel goes in the guest: a venv, its dependencies marked once installed
GUEST_VENV = "/opt/myaccel"
DEPENDENCIES_MARK = ".dependencies-installed"


def packages(arch: Arch = AMD64) -> tuple[str, ...]:
    """PACKAGES with the architecture's kernel in place of amd64's (and amd64's own)."""
    own = AMD64_ONLY if arch == AMD64 else ()
    return tuple(arch.kernel_package if p == AMD64.kernel_package else p for p in PACKAGES) + own


def cache_dir() -> Path:
    return Path(os.environ.get("MYACCEL_LAB_CACHE") or DEFAULT_CACHE)


def mirror() -> str:
    return os.environ.get("MYACCEL_LAB_MIRROR") or DEFAULT_MIRROR


def pinned_dependencies() -> list[str]:
    """myaccel's pinned dependencies, from pyproject.toml."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    deps: list[str] = project["dependencies"]
    return deps


def dependencies_in_image(arch: Arch) -> bool:
    """Whether the image's tree gets myaccel's dependencies: where its chroot runs natively
    (seconds), not through qemu-user (the arm64 image on x86 takes them in a layer)."""
    return not arch.foreign


def image_key(arch: Arch = AMD64) -> str:
    recipe: dict[str, object] = {
        "recipe": RECIPE_VERSION,
        "suite": SUITE,
        "variant": VARIANT,
        "packages": sorted(packages(arch)),
    }
    if dependencies_in_image(arch):
        recipe["dependencies"] = pinned_dependencies()
    if arch != AMD64:
        recipe["arch"] = arch.debian
        recipe["arch_recipe"] = arch.recipe
    blob = json.dumps(recipe, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
