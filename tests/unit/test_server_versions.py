"""MySQL's calendar versions (YY.M.P from 26.7.0, July 2026) and release tracks: the major
number no longer tells MySQL from MariaDB nor an LTS from an innovation release, so the
flavor comes from the version strings and the track from a table, never from the number
(an unannounced line has no track: None)."""

from __future__ import annotations

import pytest

from myaccel.server.flavor import (
    calendar_version,
    mysql_track,
    parse_binary_version,
    parse_server_version,
)


@pytest.mark.parametrize(
    ("version", "comment", "flavor", "track", "calendar"),
    [
        ("26.7.0", "MySQL Community Server - GPL", "mysql", "innovation", True),
        ("28.4.0", "MySQL Community Server - GPL", "mysql", "lts", True),
        ("29.1.0", "MySQL Community Server - GPL", "mysql", None, True),  # not announced
        ("9.7.4", "MySQL Community Server - GPL", "mysql", "lts", False),
        ("9.3.0", "MySQL Community Server - GPL", "mysql", "innovation", False),
        ("8.4.6", "MySQL Community Server - GPL", "mysql", "lts", False),
        ("8.0.43", "MySQL Community Server - GPL", "mysql", "legacy", False),
        ("11.8.3-MariaDB-1", "Debian", "mariadb", None, False),
        ("12.1.2-MariaDB", "mariadb.org binary distribution", "mariadb", None, False),
    ],
)
def test_versions_and_tracks(
    version: str, comment: str, flavor: str, track: str | None, calendar: bool
) -> None:
    v = parse_server_version(version, comment)
    assert v is not None and v.flavor == flavor
    assert mysql_track(v) == track and calendar_version(v) is calendar
    assert v.at_least(8, 0, 30)  # comparisons stay right across the renumbering


def test_a_calendar_version_binary() -> None:
    v = parse_binary_version(
        "/usr/sbin/mysqld  Ver 26.7.0 for Linux on x86_64 (MySQL Community Server - GPL)"
    )
    assert v is not None and v.flavor == "mysql" and v.text == "26.7.0"
    assert calendar_version(v) and mysql_track(v) == "innovation"
