"""The files of the Debian package besides the Python tree: the launcher, the control
files (control, md5sums, postinst, prerm), /usr/share/doc and lintian's overrides."""

from __future__ import annotations

import email.parser
import email.utils
import gzip
import hashlib
from pathlib import Path

PACKAGE = "myaccel"
MAINTAINER = "myaccel maintainers <maintainers@myaccel.org>"
HOMEPAGE = "https://pypi.org/project/myaccel/"
DESCRIPTION = """\
full-stack performance acceleration for MySQL and MariaDB servers
 myaccel probes a MySQL-family server and its host (CPU, NUMA, memory,
 kernel, storage, NIC, the server's binary), turns the facts into a layered
 plan, proves it with an interleaved A/B benchmark and applies it with a
 journal and automatic rollback. `myaccel doctor` says what this host lacks
 for each command.
 .
 The Python libraries it runs on are bundled, at the versions it was tested
 with, under /usr/lib/myaccel/python; it runs on Debian's python3."""

LAUNCHER = '''\
#!/usr/bin/python3 -I
"""myaccel, run by Debian's python3 with myaccel and its pinned Python libraries from
{lib} (ahead of any python3-* package). Found from this file's own place, so an
unpacked package runs as well (``dpkg-deb -x``)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "{rel}"))

from myaccel.cli.main import main  # noqa: E402

main()
'''

# Byte-code is made where the package is installed, by the python3 that runs it, and
# removed with it, as dh_python3 does for Debian's own Python packages (lintian:
# package-installs-python-pycache-dir). A file that does not compile stays source only.
POSTINST = """\
#!/bin/sh
set -e
if [ "$1" = configure ]; then
    python3 -m compileall -q -j 0 {lib} >/dev/null 2>&1 || true
fi
"""
PRERM = """\
#!/bin/sh
set -e
if [ -d {lib} ]; then
    find {lib} -type d -name __pycache__ -prune -exec rm -rf {{}} +
fi
"""

# lintian's tags that stay, each with its reason (docs/packaging.md). All but the first
# two are about PyPI's manylinux wheels under /usr/lib/myaccel/python, installed as their
# projects built and tested them: rebuilding or patching them is what the bundle avoids.
OVERRIDES = """\
# Read by sysbench as its script argument (bench/runner.py), never run itself; tqdm's
# completion snippet, sourced by shells, never run (myaccel does not install it).
myaccel: script-not-executable [usr/lib/myaccel/python/myaccel/bench/lua/myaccel_wrapper.lua]
myaccel: script-not-executable [usr/lib/myaccel/python/tqdm/completion.sh]
myaccel: unusual-interpreter sysbench [usr/lib/myaccel/python/myaccel/bench/lua/myaccel_wrapper.lua]
# A test file of scipy's, never run.
myaccel: unusual-interpreter python [usr/lib/myaccel/python/scipy/*]
# Libraries the wheels bundle (Pillow's libjpeg, libtiff, freetype...; matplotlib's
# freetype, PyYAML's libyaml), as PyPI ships them: the versions the wheels were tested with.
myaccel: embedded-library *
# scipy's wheel keeps the RUNPATH of its build machine (/opt/_internal/...), a directory no
# Debian system has: the library it names is found through the wheel's own scipy.libs.
myaccel: custom-library-search-path *
# Fortran/C kernels and test modules of numpy and scipy that call no libc function
# (lapack_lite, _dop, _fpumode...): they link nothing, which is all they need.
myaccel: library-not-linked-against-libc [usr/lib/myaccel/python/*]
myaccel: shared-library-lacks-prerequisites [usr/lib/myaccel/python/*]
# matplotlib's own copy of the DejaVu fonts (mpl-data): it renders the report's plots
# with them, and finds them there only.
myaccel: duplicate-font-file *
myaccel: font-outside-font-dir *
myaccel: font-in-non-font-package *
# The licenses each distribution ships in its .dist-info (they ask to be kept with it),
# and text files the libraries read or ship in their packages (scipy's test data, notes).
myaccel: extra-license-file [usr/lib/myaccel/python/*]
myaccel: package-contains-documentation-outside-usr-share-doc [usr/lib/myaccel/python/*]
# How the wheels' projects build, link and strip their binaries (stripping an auditwheel-
# repaired library can break it), and words in their strings.
myaccel: unstripped-binary-or-object [usr/lib/myaccel/python/*]
myaccel: hardening-no-bindnow [usr/lib/myaccel/python/*]
myaccel: hardening-no-fortify-functions [usr/lib/myaccel/python/*]
myaccel: binary-has-unneeded-section *
myaccel: static-library-has-unneeded-sections *
myaccel: spelling-error-in-binary *
"""


def write_launcher(path: Path, lib: str) -> None:
    """``/usr/bin/myaccel``: ``lib`` relative to ``/usr``."""
    rel = lib.removeprefix("usr/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(LAUNCHER.format(lib=f"/{lib}", rel=rel))
    path.chmod(0o755)


def bundled(site: Path) -> list[tuple[str, str, str]]:
    """(name, version, license) of every distribution under ``site``, from its metadata."""
    rows = []
    for meta in sorted(site.glob("*.dist-info/METADATA")):
        msg = email.parser.HeaderParser().parsestr(meta.read_text(errors="replace"))
        lic = msg.get("License-Expression") or ""
        if not lic:
            classifiers = [c for c in msg.get_all("Classifier") or [] if c.startswith("License")]
            lic = classifiers[0].split(" :: ")[-1] if classifiers else (msg.get("License") or "")
        lic = " ".join(lic.split())[:80] or "see its METADATA"
        rows.append((str(msg["Name"]), str(msg["Version"]), lic))
    return rows


def _gzip(path: Path, text: str) -> None:
    with path.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
        f.write(text.encode())


def write_docs(tree: Path, site: Path, version: str, epoch: int) -> None:
    """copyright (myaccel's and each bundled distribution's license), changelog.gz and
    lintian's overrides."""
    doc = tree / "usr/share/doc" / PACKAGE
    doc.mkdir(parents=True, exist_ok=True)
    rows = "\n".join(f"  {n} {v}: {lic}" for n, v, lic in bundled(site) if n != PACKAGE)
    (doc / "copyright").write_text(
        "myaccel\n\nCopyright: the myaccel authors\nLicense: Apache-2.0\n"
        " On Debian systems the full text of the Apache License 2.0 is in\n"
        " /usr/share/common-licenses/Apache-2.0.\n\n"
        "/usr/lib/myaccel/python holds these Python distributions from PyPI, each under\n"
        "its own license (the text is in its *.dist-info directory there):\n\n" + rows + "\n"
    )
    when = email.utils.formatdate(epoch, usegmt=True).replace("GMT", "+0000")
    _gzip(
        doc / "changelog.gz",
        f"{PACKAGE} ({version}) unstable; urgency=medium\n\n"
        f"  * Release {version}, built by `make dist` from its wheel.\n\n"
        f" -- {MAINTAINER}  {when}\n",
    )
    overrides = tree / "usr/share/lintian/overrides" / PACKAGE
    overrides.parent.mkdir(parents=True, exist_ok=True)
    overrides.write_text(OVERRIDES)


def installed_size_kib(tree: Path) -> int:
    """What dpkg-gencontrol would say: 1 KiB per started KiB of each file, plus one per
    directory and link."""
    total = 0
    for path in tree.rglob("*"):
        if "DEBIAN" in path.relative_to(tree).parts[:1]:
            continue
        total += (path.lstat().st_size + 1023) // 1024 if path.is_file() else 1
    return total


def write_control(tree: Path, version: str, arch: str, relations: dict[str, str], lib: str) -> None:
    """DEBIAN/control, md5sums, postinst and prerm."""
    meta = tree / "DEBIAN"
    meta.mkdir(exist_ok=True)
    fields = {
        "Package": PACKAGE,
        "Version": version,
        "Architecture": arch,
        "Maintainer": MAINTAINER,
        "Installed-Size": str(installed_size_kib(tree)),
        **relations,
        "Section": "admin",
        "Priority": "optional",
        "Homepage": HOMEPAGE,
        "Description": DESCRIPTION,
    }
    (meta / "control").write_text("".join(f"{k}: {v}\n" for k, v in fields.items()))
    sums = []
    for path in sorted(tree.rglob("*")):
        rel = path.relative_to(tree)
        if path.is_file() and not path.is_symlink() and rel.parts[0] != "DEBIAN":
            sums.append(f"{hashlib.md5(path.read_bytes()).hexdigest()}  {rel}\n")
    (meta / "md5sums").write_text("".join(sums))
    for name, body in (("postinst", POSTINST), ("prerm", PRERM)):
        script = meta / name
        script.write_text(body.format(lib=f"/{lib}"))
        script.chmod(0o755)
