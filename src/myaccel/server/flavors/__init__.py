"""Server flavors as adapters: one module per flavor behind ``base.ServerFlavor``.

Add a flavor: a subclass in its own module, listed in ``ADAPTERS`` (the order is the order
binaries are looked for), its version-string detection in ``server/flavor.py``.
"""

from __future__ import annotations

from myaccel.errors import UsageError
from myaccel.server.flavor import ServerVersion
from myaccel.server.flavors.base import Flavor, ServerFlavor
from myaccel.server.flavors.mariadb import MariaDBFlavor
from myaccel.server.flavors.mysql import MySQLFlavor

ADAPTERS: tuple[ServerFlavor, ...] = (MariaDBFlavor(), MySQLFlavor())


def adapter_for(flavor: str | ServerVersion) -> ServerFlavor:
    """The adapter of a flavor name (``mariadb``, ``mysql``, ``percona``) or a version."""
    name = flavor.flavor if isinstance(flavor, ServerVersion) else flavor
    for ad in ADAPTERS:
        if name in ad.handles:
            return ad
    raise UsageError(
        f"unknown server flavor '{name}'",
        hint="use one of: " + ", ".join(ad.name for ad in ADAPTERS),
    )


__all__ = ["ADAPTERS", "Flavor", "ServerFlavor", "adapter_for"]
