"""The guest image: a Debian tree made with debootstrap from Debian packages only, set up
for key-only root ssh on eth0, written into a raw ext4 image with `mkfs.ext4 -d` (no loop
mount), cached under `<cache>/images/<key>` with the kernel, initrd and ssh key it boots with.

A build works in `<key>.partial` and renames it when complete, so a cached image is always
whole; an interrupted build resumes after its debootstrap when that had finished.

A foreign architecture (arm64 on an x86-64 host) is built the same way: debootstrap
`--arch=arm64` runs its second stage (dpkg, maintainer scripts, update-initramfs) in the
chroot through binfmt_misc and qemu-user-static's `qemu-aarch64` registered with the F flag
(the kernel opens the static emulator at registration, so it need not be in the chroot);
`foreign_exec` mounts binfmt_misc and registers it when the host has not.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from lab.config import (
    AMD64,
    ARCHES,
    DEPENDENCIES_MARK,
    GUEST_VENV,
    IMAGE_SIZE,
    RECIPE_VERSION,
    SUITE,
    VARIANT,
    Arch,
    cache_dir,
    dependencies_in_image,
    image_key,
    mirror,
    packages,
    pinned_dependencies,
)
from lab.errors import LabError
from lab.timing import Timings

HOSTNAME = "myaccel-lab"
# Timers that would wake the idle guest and compete with the tests for emulated CPUs.
MASKED_UNITS = (
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "man-db.timer",
    "e2scrub_all.timer",
    "fstrim.timer",
)


@dataclass(frozen=True)
class Image:
    """A complete cached image: what a boot needs."""

    directory: Path
    arch: Arch = AMD64

    @property
    def raw(self) -> Path:
        return self.directory / "base.raw"

    @property
    def kernel(self) -> Path:
        return self.directory / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.directory / "initrd.img"

    @property
    def key(self) -> Path:
        return self.directory / "id_ed25519"

    def manifest(self) -> dict[str, object]:
        data: dict[str, object] = json.loads((self.directory / "image.json").read_text())
        return data


def cached_image(cache: Path | None = None, arch: Arch = AMD64) -> Image | None:
    directory = (cache or cache_dir()) / "images" / image_key(arch)
    return Image(directory, arch) if (directory / "image.json").is_file() else None


def image_at(directory: Path) -> Image:
    """A cached image by its directory, with the architecture its manifest records (an
    image from before the architecture parameter is amd64)."""
    manifest = json.loads((directory / "image.json").read_text())
    return Image(directory, ARCHES[manifest.get("arch", AMD64.debian)])


def _run(argv: list[str], what: str, log: Path | None = None) -> None:
    if log is None:
        r = subprocess.run(argv, check=False, capture_output=True, text=True)
        code, detail = r.returncode, (r.stderr or r.stdout).strip().splitlines()[-1:]
    else:
        with log.open("w") as out:
            code = subprocess.run(
                argv, check=False, stdout=out, stderr=subprocess.STDOUT
            ).returncode
        detail = [f"see {log}"]
    if code != 0:
        raise LabError(f"lab: {what} failed (exit {code}): {' '.join(detail)}")


def _mounts_under(root: Path) -> list[str]:
    prefix = str(root.resolve()) + "/"
    with open("/proc/mounts") as mounts:
        points = [line.split()[1].replace("\\040", " ") for line in mounts]
    return [p for p in points if p.startswith(prefix)]


def _unmount_under(root: Path) -> None:
    """Unmount what an interrupted debootstrap left mounted in the tree (proc, sys, dev):
    deleting or imaging the tree must never walk into the host's /proc, /sys or /dev."""
    for point in sorted(_mounts_under(root), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], check=False, capture_output=True)
    left = _mounts_under(root)
    if left:
        raise LabError(f"lab: {left[0]} is still mounted; unmount it before the lab deletes {root}")


BINFMT = Path("/proc/sys/fs/binfmt_misc")
BINFMT_CONF = Path("/usr/lib/binfmt.d")  # qemu-user-static's registrations, F flag included


def foreign_exec(arch: Arch) -> None:
    """Make the host run `arch`'s binaries in a chroot: binfmt_misc mounted, qemu-user-static's
    entry for the architecture registered and enabled. The dynamic `/usr/bin/qemu-aarch64` of
    qemu-user cannot serve here: in the chroot its x86-64 loader and libraries are missing."""
    name = f"qemu-{arch.machine}"
    conf = BINFMT_CONF / f"{name}.conf"
    if not conf.is_file():
        raise LabError(f"lab: {conf} is missing (apt-get install qemu-user-static)")
    if not (BINFMT / "register").exists():
        _run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(BINFMT)], "mount binfmt_misc")
    entry = BINFMT / name
    if not entry.exists():
        line = next(ln for ln in conf.read_text().splitlines() if ln.startswith(":"))
        (BINFMT / "register").write_text(line + "\n")
    if entry.read_text().splitlines()[0] != "enabled":
        entry.write_text("1\n")


def _debootstrap(work: Path, arch: Arch, timings: Timings) -> Path:
    root = work / "root"
    done = work / "debootstrap.ok"
    if done.exists():
        return root
    if root.exists():
        _unmount_under(root)
        shutil.rmtree(root)
    if arch.foreign:
        foreign_exec(arch)
    argv = [
        "debootstrap",
        *([f"--arch={arch.debian}"] if arch.foreign else []),
        f"--variant={VARIANT}",
        f"--include={','.join(packages(arch))}",
        SUITE,
        str(root),
        mirror(),
    ]
    with timings.step("debootstrap"):
        _run(argv, "debootstrap", log=work / "debootstrap.log")
    done.touch()
    return root


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def _configure(root: Path, work: Path) -> None:
    """Key-only root ssh, eth0 by DHCP (qemu's user network), the root fs, quiet timers."""
    key = work / "id_ed25519"
    if not key.exists():
        _run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "myaccel-lab", "-f", str(key)],
            "ssh-keygen",
        )
    ssh_dir = root / "root/.ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    _write(ssh_dir / "authorized_keys", (work / "id_ed25519.pub").read_text(), 0o600)
    _write(
        root / "etc/network/interfaces",
        "auto lo\niface lo inet loopback\n\nauto eth0\niface eth0 inet dhcp\n",
    )
    _write(root / "etc/hostname", f"{HOSTNAME}\n")
    _write(root / "etc/hosts", f"127.0.0.1 localhost\n127.0.1.1 {HOSTNAME}\n")
    _write(root / "etc/fstab", "/dev/vda / ext4 defaults 0 1\n")
    _write(
        root / "etc/ssh/sshd_config.d/myaccel-lab.conf",
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\nUseDNS no\n",
    )
    for unit in MASKED_UNITS:
        link = root / "etc/systemd/system" / unit
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            link.symlink_to("/dev/null")
    for deb in (root / "var/cache/apt/archives").glob("*.deb"):
        deb.unlink()


def _install_dependencies(root: Path, house: Path, timings: Timings) -> None:
    """myaccel's pinned dependencies into the tree's /opt/myaccel venv, from the wheelhouse,
    by the tree's own Python in a chroot: at the host's speed, where the same install in a
    booted TCG guest took 468 s (boot, copy, `pip install`, font cache; measured in CI). Then
    matplotlib's font cache and every module byte-compiled, as the guest would on first use.
    Only myaccel's own wheel is installed in the booted guest (lab/install.py)."""
    staged = root / "root/myaccel-wheels"
    shutil.rmtree(staged, ignore_errors=True)
    shutil.copytree(house, staged, ignore=shutil.ignore_patterns(".complete"))
    venv = root / GUEST_VENV.lstrip("/")
    shutil.rmtree(venv, ignore_errors=True)
    inside = ["env", "-i", "HOME=/root", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"]
    chroot = ["chroot", str(root), *inside]
    with timings.step("myaccel's dependencies into the tree (chroot, pip --no-index)"):
        _run([*chroot, "python3", "-m", "venv", GUEST_VENV], "python3 -m venv (chroot)")
        _run(
            [
                *chroot, f"{GUEST_VENV}/bin/pip", "install", "-q", "--no-index",
                "--find-links", "/root/myaccel-wheels", *pinned_dependencies(),
            ],
            "pip install of the dependencies (chroot)",
        )  # fmt: skip
        _run(
            [
                *chroot,
                f"{GUEST_VENV}/bin/python",
                "-c",
                "import matplotlib.pyplot, numpy, scipy.stats",
            ],
            "matplotlib's font cache (chroot)",
        )
    shutil.rmtree(staged)
    (venv / DEPENDENCIES_MARK).touch()


def _kernel_files(root: Path, work: Path) -> str:
    kernels = sorted((root / "boot").glob("vmlinuz-*"))
    if len(kernels) != 1:
        raise LabError(f"lab: expected one kernel in {root / 'boot'}, found {len(kernels)}")
    release = kernels[0].name.removeprefix("vmlinuz-")
    initrd = root / "boot" / f"initrd.img-{release}"
    if not initrd.is_file():
        raise LabError(f"lab: {initrd} is missing (update-initramfs did not run in debootstrap)")
    shutil.copyfile(kernels[0], work / "vmlinuz")
    shutil.copyfile(initrd, work / "initrd.img")
    return release


def _mkfs(root: Path, work: Path, timings: Timings) -> None:
    raw = work / "base.raw"
    raw.unlink(missing_ok=True)
    with timings.step("image (mkfs.ext4 -d)"):
        _run(["truncate", "-s", IMAGE_SIZE, str(raw)], "truncate")
        _run(["mkfs.ext4", "-q", "-F", "-L", HOSTNAME, "-d", str(root), str(raw)], "mkfs.ext4 -d")


def build_image(
    timings: Timings, cache: Path | None = None, arch: Arch = AMD64, house: Path | None = None
) -> Image:
    """The cached image for this recipe, built first when absent (root, ~5 min). ``house``:
    the wheelhouse of myaccel's dependencies, installed into an image of the host's own
    architecture (`config.dependencies_in_image`)."""
    found = cached_image(cache, arch)
    if found is not None:
        timings.say(f"lab: image {found.directory} (cached)")
        return found
    if dependencies_in_image(arch) and house is None:
        raise LabError(f"lab: the {arch.debian} image needs the wheelhouse of its dependencies")
    images = (cache or cache_dir()) / "images"
    final = images / image_key(arch)
    work = images / f"{image_key(arch)}.partial"
    work.mkdir(parents=True, exist_ok=True)
    started = len(timings.steps)
    root = _debootstrap(work, arch, timings)
    _unmount_under(root)
    _configure(root, work)
    if house is not None and dependencies_in_image(arch):
        _install_dependencies(root, house, timings)
    release = _kernel_files(root, work)
    _mkfs(root, work, timings)
    manifest = {
        "recipe": RECIPE_VERSION,
        "arch": arch.debian,
        "suite": SUITE,
        "packages": list(packages(arch)),
        "kernel": release,
        "key": image_key(arch),
        "dependencies": house.name if house is not None and dependencies_in_image(arch) else None,
        "mirror": mirror(),
        "seconds": dict(timings.steps[started:]),
    }
    (work / "image.json").write_text(json.dumps(manifest, indent=2) + "\n")
    # the tree is in the image now; keeping it would double the cache's 1.3 GB
    shutil.rmtree(root)
    work.rename(final)
    return Image(final, arch)
