"""Which server made a datadir, whether an install may run it, and its repair after an
interrupted snapshot restore."""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from myaccel.errors import SandboxError
from myaccel.server.flavor import flavor_label, parse_server_version
from myaccel.server.flavors import Flavor
from myaccel.server.sandbox.install import ServerInstall

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DatadirMarkers:
    flavor: Flavor | None
    version: str | None  # x.y.z when a marker file records it
    evidence: tuple[str, ...]


def detect_datadir(datadir: Path) -> DatadirMarkers:
    """Which server made a datadir, from the files it leaves behind."""
    evidence: list[str] = []
    flavor: Flavor | None = None
    version: str | None = None
    for marker in ("mariadb_upgrade_info", "mysql_upgrade_info"):
        p = datadir / marker
        if p.is_file():
            text = p.read_text(errors="replace").strip()
            evidence.append(f"{marker}={text}")
            m = re.match(r"(\d+)\.(\d+)\.(\d+)", text)
            if m:
                version = m.group(0)
            if "mariadb" in text.lower() or marker.startswith("mariadb"):
                flavor = "mariadb"
            elif m:
                flavor = "mysql"
            break
    if (datadir / "aria_log_control").exists():
        evidence.append("aria_log_control")
        flavor = "mariadb"
    if flavor is None and (datadir / "mysql.ibd").exists():
        evidence.append("mysql.ibd")
        flavor = "mysql"
    if flavor is None and (datadir / "auto.cnf").exists():
        evidence.append("auto.cnf")
        flavor = "mysql"
    return DatadirMarkers(flavor=flavor, version=version, evidence=tuple(evidence))


def _series(version: str) -> str:
    parsed = parse_server_version(version)
    return parsed.series if parsed else ".".join(version.split(".")[:2])


def series_key(series: str) -> tuple[int, ...]:
    """``"10.11"`` as ``(10, 11)``: release lines in numeric order (``9.7 < 10.11 < 26.7``)."""
    return tuple(int(p) for p in series.split(".") if p.isdigit())


def check_compatible(
    name: str,
    recorded_flavor: str,
    recorded_version: str,
    install: ServerInstall,
    markers: DatadirMarkers | None = None,
    *,
    newer: bool = False,
) -> None:
    """Refuse to run a datadir with a server of another flavor or another major.minor;
    with ``newer``, a later release line of the same flavor is accepted (it upgrades the
    datadir, one way: the version headroom runs it on a copy of the data only)."""
    v = install.version
    label = install.label
    rec_mm = _series(recorded_version)
    hint = (
        f"start it with the server that created it (`myaccel sandbox start {name} "
        f"--basedir DIR` of a {flavor_label(recorded_flavor)} {rec_mm} build), or "
        f"`myaccel sandbox destroy {name}` and `myaccel sandbox init {name}`"
    )
    if recorded_flavor != install.flavor:
        raise SandboxError(
            f"sandbox '{name}' holds a {flavor_label(recorded_flavor)} datadir; "
            f"{install.binary} is {label}",
            hint=hint,
        )
    if rec_mm != v.series and not (newer and series_key(v.series) > series_key(rec_mm)):
        raise SandboxError(
            f"sandbox '{name}' holds a {flavor_label(recorded_flavor)} {rec_mm} datadir "
            f"(created by {recorded_version}); {install.binary} is {label}",
            hint=hint,
        )
    if markers is not None and markers.flavor is not None and markers.flavor != install.flavor:
        raise SandboxError(
            f"the datadir of sandbox '{name}' was made by {flavor_label(markers.flavor)} "
            f"({', '.join(markers.evidence)}); {install.binary} is {label}",
            hint=hint,
        )
    if markers is not None and markers.version is not None:
        mm = ".".join(markers.version.split(".")[:2])
        if mm != v.series and not (newer and series_key(v.series) > series_key(mm)):
            raise SandboxError(
                f"the datadir of sandbox '{name}' was made by {install.adapter.label} "
                f"{markers.version}; {install.binary} is {label}",
                hint=hint,
            )


def recover_interrupted_restore(sandbox_dir: Path, datadir: Path) -> None:
    """Finish a snapshot restore that stopped between its two renames (see
    ``snapshots.SandboxSnapshots.snapshot_restore``)."""
    old = sandbox_dir / ".data.old"
    if not datadir.exists() and old.is_dir():
        log.warning("sandbox %s: finishing an interrupted restore", sandbox_dir.name)
        os.rename(old, datadir)
