"""Install discovery: which server binary a sandbox runs, and the files around it.

An explicit binary, an install prefix or build tree (``--basedir``), the installed servers
on PATH/sbin (each flavor's binaries, in ``flavors.ADAPTERS`` order), then the MySQL that
``scripts/ensure-mysql.sh`` installs. Versions come from the one parser in
``server/flavor.py``; what differs per flavor from ``server/flavors/``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from myaccel import proc
from myaccel.errors import SandboxError, ToolMissing, UsageError
from myaccel.server.flavor import ServerVersion, binary_version_line, parse_binary_version
from myaccel.server.flavors import ADAPTERS, Flavor, ServerFlavor, adapter_for
from myaccel.server.sandbox.project import project_installs


@dataclass(frozen=True)
class ServerInstall:
    """A server binary and the files around it."""

    binary: Path
    basedir: Path
    version: ServerVersion
    install_db: Path | None = None  # mariadb-install-db / mysql_install_db (MariaDB only)
    custom: bool = False  # from --basedir (then the paths below are set when found)
    lc_messages_dir: Path | None = None
    plugin_dir: Path | None = None
    charsets_dir: Path | None = None

    @property
    def adapter(self) -> ServerFlavor:
        return adapter_for(self.version)

    @property
    def flavor(self) -> Flavor:
        """The sandbox flavor (a Percona Server binary is ``mysql``)."""
        return self.adapter.name

    @property
    def label(self) -> str:
        """``MySQL 9.7.4`` (the sandbox flavor's name and the version)."""
        return f"{self.adapter.label} {self.version.text}"


def myaccel_mysql_prefix() -> Path:
    """Where scripts/ensure-mysql.sh installs MySQL 9.7 (``$MYACCEL_MYSQL_ROOT/mysql-9.7``,
    default ``/opt/myaccel/mysql-9.7``): an install prefix like any ``--basedir``."""
    return project_installs("mysql", "9.7")[0].prefix


_SERIES = re.compile(r"(\d+)\.(\d+)")


def parse_series(text: str) -> str:
    """``--version`` as a release line: ``11.8``, ``9.7``, ``26.7`` (a ``UsageError``
    otherwise)."""
    m = _SERIES.fullmatch(text.strip())
    if m is None:
        raise UsageError(
            f"--version {text!r} is not a release line",
            hint="pass MAJOR.MINOR, e.g. --version 11.8 (MariaDB) or --version 9.7 (MySQL)",
        )
    return f"{int(m.group(1))}.{int(m.group(2))}"


def parse_version_output(text: str) -> ServerVersion:
    """``mariadbd --version`` / ``mysqld --version`` output as a ``ServerVersion``; a
    ``SandboxError`` when it has none (not a server binary)."""
    version = parse_binary_version(text)
    if version is None:
        line = binary_version_line(text) or text.strip()
        raise SandboxError(
            f"cannot read the server version from: {line.strip()[:120]!r}",
            hint="is this a mariadbd/mysqld binary? pass --basedir of a MariaDB/MySQL build",
        )
    return version


def read_server_version(binary: Path) -> ServerVersion:
    done = proc.run([str(binary), "--version"], timeout_s=30.0)
    if not done.ok:
        raise SandboxError(
            done.failure(f"{binary} --version"),
            hint="check that the binary runs on this machine (architecture, shared libraries)",
        )
    return parse_version_output(done.stdout or done.stderr)


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _first_dir(base: Path, candidates: Sequence[str], marker: str = "") -> Path | None:
    for rel in candidates:
        d = base / rel
        if d.is_dir() and (not marker or (d / marker).exists()):
            return d
    return None


def _first_executable(base: Path, candidates: Sequence[str]) -> Path | None:
    return next((base / c for c in candidates if _executable(base / c)), None)


def _from_binary(binary: Path) -> ServerInstall:
    if not _executable(binary):
        raise SandboxError(
            f"server binary '{binary}' is missing or not executable",
            hint="reinstall it, start with --basedir DIR of another build of the same "
            "version, or destroy and re-init the sandbox",
        )
    version = read_server_version(binary)
    return ServerInstall(
        binary=binary,
        basedir=binary.resolve().parent.parent,
        version=version,
        install_db=adapter_for(version).system_install_db(),
    )


def _from_basedir(basedir: Path) -> ServerInstall:
    base = basedir.expanduser().resolve()
    if not base.is_dir():
        raise UsageError(
            f"basedir '{basedir}' is not a directory",
            hint="pass the install prefix of a build: a directory with bin/ or sbin/ "
            "holding mariadbd or mysqld, and share/",
        )
    candidates = [c for ad in ADAPTERS for c in ad.binary_candidates()]
    found = _first_executable(base, candidates)
    if found is None:
        raise UsageError(
            f"no mariadbd or mysqld under '{base}'",
            hint="looked in bin/, sbin/ and libexec/; pass the install prefix of the build "
            "(cmake --install . --prefix DIR)",
        )
    version = read_server_version(found)
    share = _first_dir(base, ("share/mariadb", "share/mysql", "share"), "english")
    return ServerInstall(
        binary=found,
        basedir=base,
        version=version,
        install_db=_first_executable(base, adapter_for(version).install_db_candidates()),
        custom=True,
        lc_messages_dir=share,
        plugin_dir=_first_dir(
            base, ("lib/plugin", "lib/mysql/plugin", "lib/mariadb/plugin", "lib64/plugin")
        ),
        charsets_dir=_first_dir(
            base, ("share/charsets", "share/mysql/charsets", "share/mariadb/charsets")
        ),
    )


def find_server(
    basedir: Path | None = None,
    *,
    binary: Path | None = None,
    flavor: Flavor | None = None,
    series: str | None = None,
) -> ServerInstall:
    """The server to use: an explicit binary, a build tree (``--basedir``), or the installed
    ``mariadbd`` then ``mysqld`` on PATH/sbin, then the servers the project installs
    (``project.PROJECT_INSTALLS``: MySQL 9.7, MariaDB 11.8); ``flavor`` and ``series``
    (a release line, ``11.8``) keep only servers of that flavor and line."""
    if binary is not None:
        return _from_binary(binary)
    if basedir is not None:
        install = _from_basedir(basedir)
        if series is not None and install.version.series != series:
            raise UsageError(
                f"--version {series} but {install.binary} is {install.label}",
                hint="pass --basedir of a build of that release line, or leave out --version",
            )
        return install
    adapters = [adapter_for(flavor)] if flavor is not None else list(ADAPTERS)
    for ad in adapters:
        for name in ad.server_binaries:
            path = proc.which(name)
            if not path:
                continue
            on_path = _from_binary(Path(path))
            # Debian's mariadb-server installs /usr/sbin/mysqld as a link to mariadbd.
            if (flavor is None or on_path.flavor == flavor) and (
                series is None or on_path.version.series == series
            ):
                return on_path
    wanted = [p for ad in adapters for p in project_installs(ad.name, series)]
    for project in wanted:
        ad = adapter_for(project.flavor)
        if _first_executable(project.prefix, ad.binary_candidates()) is not None:
            return _from_basedir(project.prefix)
    if flavor is None and series is None:
        raise ToolMissing(
            "no MariaDB or MySQL server binary found (looked for mariadbd, then mysqld)",
            hint="install one with: apt-get install mariadb-server  (or pass --basedir DIR of a build)",
        )
    what = " ".join(x for x in ((adapters[0].label if flavor else ""), series or "") if x)
    looked = ", ".join(str(p.prefix) for p in wanted) or "no project install of it"
    names = " or ".join(b for ad in adapters for b in ad.server_binaries)
    raise ToolMissing(
        f"no {what} server found (no {names} on PATH that is {what}; {looked})",
        hint=wanted[0].hint
        if wanted
        else "pass --basedir DIR of a build of it; the project installs "
        + ", ".join(f"{adapter_for(p.flavor).label} {p.series}" for p in project_installs()),
    )


def init_argv(install: ServerInstall, option_file: Path) -> list[str]:
    """The command that creates the datadir named in ``option_file`` (the flavor's)."""
    return install.adapter.init_argv(install, option_file)


def server_argv(install: ServerInstall, option_file: Path) -> list[str]:
    return install.adapter.server_argv(install, option_file)
