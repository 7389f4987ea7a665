"""Server flavor and version: the one parser for VERSION() strings and ``--version`` output.

Tested against a table of real version strings (tests/fixtures/version_strings.json). What a
flavor does differently (initialize, start options, shutdown) is in ``server/flavors/``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

FLAVOR_LABELS = {"mariadb": "MariaDB", "mysql": "MySQL", "percona": "Percona Server"}


def flavor_label(flavor: str) -> str:
    """``mariadb`` -> ``MariaDB``; an unknown flavor as it is."""
    return FLAVOR_LABELS.get(flavor, flavor)


@dataclass(frozen=True)
class ServerVersion:
    flavor: str  # mysql, mariadb, percona
    major: int
    minor: int
    patch: int
    variant: str = ""  # e.g. "xtradb-cluster"
    # the text it was read from (a VERSION() string, a ``--version`` line); not compared
    raw: str = field(default="", compare=False)

    @property
    def text(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    @property
    def series(self) -> str:
        return f"{self.major}.{self.minor}"

    @property
    def release_line(self) -> str:
        """The line a release belongs to: ``11.8``, ``9.7``, ``26.10`` (= ``series``)."""
        return self.series

    @property
    def label(self) -> str:
        """``MariaDB 10.11.19``."""
        return f"{flavor_label(self.flavor)} {self.text}"

    def at_least(self, major: int, minor: int, patch: int = 0) -> bool:
        return (self.major, self.minor, self.patch) >= (major, minor, patch)


_VER = re.compile(r"(\d+)\.(\d+)\.(\d+)")
_BINARY_VER = re.compile(r"\bVer\s+(\S+)(.*)$")


def parse_server_version(version: str, comment: str = "", *, raw: str = "") -> ServerVersion | None:
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
    return ServerVersion(flavor, major, minor, patch, variant, raw=raw or version.strip())


def binary_version_line(text: str) -> str:
    """The line of ``mysqld --version`` output that holds the version (other lines are
    warnings some builds print first)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return next((ln for ln in lines if " Ver " in f" {ln} "), lines[0] if lines else "")


def parse_binary_version(text: str) -> ServerVersion | None:
    """Parse ``mariadbd --version`` / ``mysqld --version`` output (None if it has no
    ``Ver x.y.z``); ``raw`` is the version line."""
    # "mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)"
    # "/usr/sbin/mysqld  Ver 8.0.36-0ubuntu0.22.04.1 for Linux on x86_64 ((Ubuntu))"
    # "mysqld  Ver 8.0.35-27 for Linux on x86_64 (Percona Server (GPL), Release 27, ...)"
    line = binary_version_line(text)
    m = _BINARY_VER.search(line)
    if not m:
        return None
    return parse_server_version(m.group(1), m.group(2), raw=line)


# Release tracks by flavor and release line, as the vendors announce them: LTS is a property
# of a line in this table, never inferred from its number. A line absent here has no known
# track (None): new lines are added as they are announced.
#
# MySQL: 8.0 the legacy line, 8.4 and 9.7 long-term support, 9.0-9.6 innovation releases. From
# July 2026 MySQL numbers releases by the calendar (YY.M.P, 26.7.0; Oracle, 2026-06-16): the
# announced lines are innovation releases up to 28.4, the first calendar LTS (April 2028).
# Percona Server follows MySQL's lines.
MYSQL_TRACKS: dict[tuple[int, int], str] = {
    (8, 0): "legacy",
    (8, 4): "lts",
    **{(9, minor): "innovation" for minor in range(7)},
    (9, 7): "lts",
    **{line: "innovation" for line in ((26, 7), (26, 10), (27, 1), (27, 4), (27, 7), (28, 1))},
    (28, 4): "lts",
    (28, 7): "innovation",
}
# MariaDB (release model, mariadb.com/docs/release-notes/mariadb-release-model): LTS lines are
# maintained five years (10.6, 10.11, 11.4, 11.8, 12.3); 10.7-11.2 were short-term (one year);
# from 11.3 the others are rolling innovation releases (11.3, 11.5-11.7, 12.0-12.2).
MARIADB_TRACKS: dict[tuple[int, int], str] = {
    **{(10, minor): "short-term" for minor in range(7, 11)},
    **{(11, minor): "short-term" for minor in range(3)},
    **{(11, minor): "innovation" for minor in (3, 5, 6, 7)},
    **{(12, minor): "innovation" for minor in range(3)},
    **{line: "lts" for line in ((10, 6), (10, 11), (11, 4), (11, 8), (12, 3))},
}
RELEASE_TRACKS: dict[str, dict[tuple[int, int], str]] = {
    "mysql": MYSQL_TRACKS,
    "percona": MYSQL_TRACKS,
    "mariadb": MARIADB_TRACKS,
}


def release_track(v: ServerVersion) -> str | None:
    """``lts``, ``innovation``, ``short-term`` or ``legacy`` for the flavor's release line
    of ``v``; None for a line not in ``RELEASE_TRACKS`` (unknown, never guessed)."""
    return RELEASE_TRACKS.get(v.flavor, {}).get((v.major, v.minor))


def is_lts(v: ServerVersion) -> bool | None:
    """Whether ``v``'s release line is a long-term support line; None when unknown."""
    track = release_track(v)
    return None if track is None else track == "lts"


def mysql_track(v: ServerVersion) -> str | None:
    """``release_track`` for MySQL (or Percona); None for MariaDB."""
    return None if v.flavor == "mariadb" else release_track(v)


def calendar_version(v: ServerVersion) -> bool:
    """Whether ``v`` is one of MySQL's calendar versions (YY.M.P, from 26.7.0). MariaDB's
    majors (10, 11, 12, ...) are never read as calendar years: the flavor decides first."""
    return v.flavor != "mariadb" and (v.major, v.minor) >= (26, 7)
