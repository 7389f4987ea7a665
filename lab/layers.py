"""myaccel's pinned dependencies installed once per image and wheelhouse, as a qcow2 layer
over the cached image: a guest's overlay is then made on the layer, and the session only
installs myaccel's own wheel (seconds) instead of the dependencies (about 2 minutes under
TCG, measured: 108 to 196 s).

The layer is made by a guest of its own: booted from an overlay of the image, the
dependencies installed (`install.install_dependencies`; on arm64 also MariaDB's system
tables, which its image lacks), powered off cleanly, its overlay kept. It is built in a
temporary directory and renamed into place, so a killed build leaves no half layer; its
key is the image's and the wheelhouse's (both keyed by what they hold)."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

from lab.config import AMD64
from lab.guest import Guest
from lab.image import Image
from lab.install import install_dependencies, mariadb_system_tables
from lab.timing import Timings
from lab.topology import lab_topology

LAYER = "deps.qcow2"
COMPLETE = ".complete"


# bump when what the layer holds changes (2: matplotlib's font cache built in it)
LAYER_RECIPE = 2


def layer_dir(image: Image, house: Path) -> Path:
    name = f"{image.directory.name}-{house.name}-r{LAYER_RECIPE}"
    return image.directory.parent.parent / "layers" / name


def deps_layer(image: Image, house: Path, timings: Timings) -> Path | None:
    """The layer's qcow2 (built when missing); None for an image that holds the
    dependencies of ``house`` itself (an image of the host's architecture: lab/image.py)."""
    if image.manifest().get("dependencies") == house.name:
        timings.say(f"lab: the image holds the dependencies of {house.name}")
        return None
    final = layer_dir(image, house)
    if (final / COMPLETE).exists():
        timings.say(f"lab: dependencies layer {final} (cached)")
        return final / LAYER
    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    # the lab's machine without the second disk and NIC: only the root disk is kept
    topology = replace(lab_topology(image.arch), extra_disks_gib=(), nic_queues=0)
    guest = Guest(image, topology, work, timings)
    try:
        with timings.step("dependencies layer (boot, install, poweroff)"):
            guest.boot()
            if image.arch != AMD64:
                mariadb_system_tables(guest, timings)
            install_dependencies(guest, house, timings)
            guest.run("sync")  # on the layer's disk even if the poweroff has to be forced
            guest.stop()
        (work / "vda.qcow2").rename(work / LAYER)
        (work / COMPLETE).touch()
        try:
            os.rename(work, final)
        except OSError:  # another session made it meanwhile: theirs is as good
            shutil.rmtree(work, ignore_errors=True)
    except BaseException:
        guest.kill()
        shutil.rmtree(work, ignore_errors=True)
        raise
    return final / LAYER
