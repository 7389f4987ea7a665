"""Sandboxes: private MariaDB/MySQL instances for benchmarks and experiments.

One concern per module: ``install`` (which server binary), ``datadir`` (which server made a
datadir), ``layout`` (names, homes, ports, sockets), ``options`` (what a user's
``--config``/``--set`` may change), ``state`` (``state.json`` and results), ``process`` (the
server process and locks), and the ``Sandbox`` class in layers (``core``, ``lifecycle``,
``snapshots``, ``instance``). Flavor differences are in ``myaccel.server.flavors``.

The names below are the package's public face (``from myaccel.server.sandbox import
Sandbox``); everything else is imported from its module.
"""

from myaccel.server.sandbox.core import DEFAULT_TIMEOUT_S
from myaccel.server.sandbox.install import ServerInstall, find_server
from myaccel.server.sandbox.instance import Sandbox
from myaccel.server.sandbox.layout import DEFAULT_NAME
from myaccel.server.sandbox.options import parse_sets
from myaccel.server.sandbox.state import (
    SANDBOX_SCHEMA,
    ActiveConfig,
    SandboxState,
    SandboxStatus,
    ServerOptions,
    SnapshotInfo,
    StartResult,
    StopResult,
)

__all__ = [
    "DEFAULT_NAME",
    "DEFAULT_TIMEOUT_S",
    "SANDBOX_SCHEMA",
    "ActiveConfig",
    "Sandbox",
    "SandboxState",
    "SandboxStatus",
    "ServerInstall",
    "ServerOptions",
    "SnapshotInfo",
    "StartResult",
    "StopResult",
    "find_server",
    "parse_sets",
]
