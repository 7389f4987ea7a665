"""What the guest image is made of, and where the lab keeps it.

The image's cache key is a hash of everything below that changes its content: the recipe
version (bump it when `image.py` changes what it writes into the tree), the suite, the
variant and the package list.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

RECIPE_VERSION = 1
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


def cache_dir() -> Path:
    return Path(os.environ.get("MYACCEL_LAB_CACHE") or DEFAULT_CACHE)


def mirror() -> str:
    return os.environ.get("MYACCEL_LAB_MIRROR") or DEFAULT_MIRROR


def image_key() -> str:
    recipe = {
        "recipe": RECIPE_VERSION,
        "suite": SUITE,
        "variant": VARIANT,
        "packages": sorted(PACKAGES),
    }
    blob = json.dumps(recipe, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
