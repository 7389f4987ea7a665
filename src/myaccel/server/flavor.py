"""Server flavor and version from VERSION() and @@version_comment.

Tested against a table of real version strings (tests/fixtures/version_strings.json)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class ServerVersion:
    flavor: str  # mysql, mariadb, percona
    major: int
    minor: int
    patch: int
    variant: str = ""  # e.g. "xtradb-cluster"

    @property
    def text(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    @property
    def series(self) -> str:
        return f"{self.major}.{self.minor}"

    def at_least(self, major: int, minor: int, patch: int = 0) -> bool:
        return (self.major, self.minor, self.patch) >= (major, minor, patch)


_VER = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def parse_server_version(version: str, comment: str = "") -> ServerVersion | None:
    """``10.11.6-MariaDB-0+deb12u1`` -> mariadb 10.11.6; ``8.0.35-27`` with a Percona
    comment -> percona 8.0.35. Returns None when no x.y.z is present."""
    v = version.strip()
    # The protocol handshake of MariaDB < 11 prefixes "5.5.5-"; VERSION() does not, but
    # strings copied from client banners do.
    if v.startswith("5.5.5-") and "mariadb" in v.lower():
        v = v[len("5.5.5-") :]
    m = _VER.search(v)
    if not m:
        return None
    major, minor, patch = (int(g) for g in m.groups())
    low_v, low_c = v.lower(), comment.lower()
    variant = ""
    if "mariadb" in low_v or "mariadb" in low_c:
        flavor = "mariadb"
    elif "percona" in low_c or "percona" in low_v:
        flavor = "percona"
        if "xtradb cluster" in low_c:
            variant = "xtradb-cluster"
    else:
        flavor = "mysql"
    return ServerVersion(flavor, major, minor, patch, variant)


def parse_binary_version(text: str) -> ServerVersion | None:
    """Parse ``mariadbd --version`` / ``mysqld --version`` output."""
    # "mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)"
    # "/usr/sbin/mysqld  Ver 8.0.36-0ubuntu0.22.04.1 for Linux on x86_64 ((Ubuntu))"
    # "mysqld  Ver 8.0.35-27 for Linux on x86_64 (Percona Server (GPL), Release 27, ...)"
    m = re.search(r"Ver\s+(\S+)(.*)$", text.strip().splitlines()[0] if text.strip() else "")
    if not m:
        return None
    return parse_server_version(m.group(1), m.group(2))
