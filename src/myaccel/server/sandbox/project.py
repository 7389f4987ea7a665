"""The servers the project installs itself, by flavor and release line.

``scripts/ensure-mysql.sh`` and ``scripts/ensure-mariadb.sh`` (run by ``make system-deps``)
make install prefixes under ``$MYACCEL_MYSQL_ROOT`` (default ``/opt/myaccel``) named
``FLAVOR-SERIES``: ``mysql-9.7`` and ``mariadb-11.8``, each runnable from the host like any
``--basedir`` build. A sandbox asking for a flavor (and a series) that the system does not
have finds them here; a later version of a flavor is one more row of ``PROJECT_INSTALLS``
(and its script), found by the same lookup.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from myaccel.server.flavors import Flavor


def project_root() -> Path:
    """Where the project's servers are installed (``$MYACCEL_MYSQL_ROOT`` or /opt/myaccel)."""
    return Path(os.environ.get("MYACCEL_MYSQL_ROOT") or "/opt/myaccel")


@dataclass(frozen=True)
class ProjectInstall:
    """One server the project installs: its flavor, release line and the script that
    installs it."""

    flavor: Flavor
    series: str  # "9.7", "11.8": the release line (major.minor)
    script: str  # relative to the repository

    @property
    def prefix(self) -> Path:
        return project_root() / f"{self.flavor}-{self.series}"

    @property
    def hint(self) -> str:
        return f"install it with: bash {self.script} (or pass --basedir DIR)"


PROJECT_INSTALLS: tuple[ProjectInstall, ...] = (
    ProjectInstall("mysql", "9.7", "scripts/ensure-mysql.sh"),
    ProjectInstall("mariadb", "11.8", "scripts/ensure-mariadb.sh"),
)


def project_installs(
    flavor: Flavor | None = None, series: str | None = None
) -> list[ProjectInstall]:
    """The project's installs of ``flavor`` (all when None) and release line ``series``."""
    return [
        p
        for p in PROJECT_INSTALLS
        if (flavor is None or p.flavor == flavor) and (series is None or p.series == series)
    ]
