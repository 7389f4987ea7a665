"""Collect all facts: host (through a sysroot), server (when reachable), binary."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from myaccel import __version__
from myaccel.errors import ConnectionFailed
from myaccel.facts.container import collect_container
from myaccel.facts.cpu import collect_cpu
from myaccel.facts.kernel import collect_kernel
from myaccel.facts.managers import collect_managers
from myaccel.facts.memory import collect_memory
from myaccel.facts.network import collect_network
from myaccel.facts.perfcap import collect_perf
from myaccel.facts.storage import collect_storage
from myaccel.facts.sysroot import Sysroot
from myaccel.model import BinaryFacts, Facts, ServerFacts
from myaccel.server.connection import ConnectParams

DEFAULT_DATADIRS = ("/var/lib/mysql",)


def collect_facts(
    sysroot: str | Path | Sysroot = "/",
    *,
    server: ConnectParams | None = None,
    server_required: bool = False,
    binary: str | Path | None = None,
    analyze_server_binary: bool = True,
    storage_path: str | None = None,
    perf_live_test: bool = True,
) -> Facts:
    sr = sysroot if isinstance(sysroot, Sysroot) else Sysroot(sysroot)
    warnings: list[str] = []

    server_facts: ServerFacts | None = None
    if server is not None:
        from myaccel.facts.server import collect_server

        try:
            server_facts = collect_server(server, sr)
        except ConnectionFailed as exc:
            if server_required:
                raise
            warnings.append(f"server not probed: {exc.message}")

    if storage_path is None:
        if server_facts is not None and server_facts.datadir.value:
            storage_path = server_facts.datadir.value
        else:
            storage_path = next((d for d in DEFAULT_DATADIRS if sr.exists(d)), "/")

    binary_facts: BinaryFacts | None = None
    bin_path: str | None = str(binary) if binary is not None else None
    if bin_path is None and analyze_server_binary and server_facts is not None:
        bin_path = server_facts.binary_path.value
    if bin_path is not None:
        from myaccel.facts.binary import collect_binary

        binary_facts = collect_binary(bin_path)

    hostname = sr.read_line("/proc/sys/kernel/hostname")
    return Facts(
        myaccel_version=__version__,
        collected_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        hostname=hostname,
        sysroot=str(sr.root),
        cpu=collect_cpu(sr),
        memory=collect_memory(sr),
        kernel=collect_kernel(sr),
        storage=collect_storage(sr, storage_path),
        network=collect_network(sr),
        perf=collect_perf(sr, live_test=perf_live_test),
        managers=collect_managers(sr),
        server=server_facts,
        binary=binary_facts,
        container=collect_container(sr),
        warnings=warnings,
    )
