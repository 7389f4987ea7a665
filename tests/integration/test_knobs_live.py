"""The knob catalog against a real MariaDB server (the session sandbox, 10.11 on Debian 12).

The sandbox runs with its own ``--defaults-file`` (Debian's /etc/mysql files are not read)
and sets only paths, the port and ``skip-name-resolve``; variables whose value came from
the option file or the command line (``GLOBAL_VALUE_ORIGIN`` CONFIG / COMMAND-LINE) are left
out of the default comparison, so every other value is the server's real default.

Read-only: nothing here changes the shared sandbox.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from myaccel.knobs import Catalog, Machine, ServerKnobs
from myaccel.server.connection import connect, query_rows
from myaccel.server.sandbox import Sandbox

pytestmark = pytest.mark.integration

SET_BY_SANDBOX = {"CONFIG", "COMMAND-LINE"}
SCOPES = {"GLOBAL": "global", "SESSION": "both", "SESSION ONLY": "session"}


@dataclass(frozen=True)
class Live:
    version: str
    variables: dict[str, str]  # SHOW GLOBAL VARIABLES
    origin: dict[str, str]  # information_schema.SYSTEM_VARIABLES
    read_only: dict[str, bool]
    scope: dict[str, str]
    numeric_range: dict[str, tuple[str | None, str | None]]
    enum_values: dict[str, str | None]
    srv: ServerKnobs


@pytest.fixture(scope="module")
def live(sandbox_server: Sandbox) -> Iterator[Live]:
    if not sandbox_server.is_running():
        sandbox_server.start(timeout_s=120)
    conn = connect(sandbox_server.connect_params())
    try:
        version = str(query_rows(conn, "SELECT VERSION()")[0][0])
        if "mariadb" not in version.lower():
            pytest.skip(f"the sandbox server is not MariaDB ({version})")
        variables = {str(n): str(v) for n, v in query_rows(conn, "SHOW GLOBAL VARIABLES")}
        rows: list[tuple[Any, ...]] = query_rows(
            conn,
            "SELECT LOWER(VARIABLE_NAME), GLOBAL_VALUE_ORIGIN, READ_ONLY, VARIABLE_SCOPE, "
            "NUMERIC_MIN_VALUE, NUMERIC_MAX_VALUE, ENUM_VALUE_LIST "
            "FROM information_schema.SYSTEM_VARIABLES",
        )
    finally:
        conn.close()
    srv = Catalog.load().for_server("mariadb", version)
    if not srv.exact:
        pytest.skip(f"MariaDB {version} is not a series the catalog was checked against")
    yield Live(
        version=version,
        variables=variables,
        origin={str(r[0]): str(r[1]) for r in rows},
        read_only={str(r[0]): str(r[2]) == "YES" for r in rows},
        scope={str(r[0]): str(r[3]) for r in rows},
        numeric_range={
            str(r[0]): (None if r[4] is None else str(r[4]), None if r[5] is None else str(r[5]))
            for r in rows
        },
        enum_values={str(r[0]): None if r[6] is None else str(r[6]) for r in rows},
        srv=srv,
    )


def this_machine() -> Machine:
    """What mariadbd sees: CPUs it may run on (my_getncpus) and MemTotal."""
    cpus = len(os.sched_getaffinity(0))
    mem_kib = next(
        int(line.split()[1])
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal:")
    )
    return Machine(logical_cpus=cpus, ram_bytes=mem_kib * 1024)


def test_catalog_defaults_equal_the_servers(live: Live) -> None:
    compared: list[str] = []
    disagreements: list[str] = []
    for k in live.srv.knobs():
        if live.srv.machine_dependent(k.name):
            continue
        assert k.name in live.variables, f"{k.name} exists per catalog but not on {live.version}"
        if live.origin.get(k.name) in SET_BY_SANDBOX:
            continue
        expected = live.srv.default(k.name)
        actual = live.srv.parse_value(k.name, live.variables[k.name])
        compared.append(k.name)
        if actual != expected:
            disagreements.append(
                f"{k.name}: catalog {expected!r}, MariaDB {live.version} {actual!r}"
            )
    assert not disagreements, "\n".join(disagreements)
    # 88 knobs, 77 on 10.11, a few machine-dependent, skip_name_resolve set by the sandbox
    assert len(compared) >= 65, compared


def test_machine_dependent_formulas_on_this_machine(live: Live) -> None:
    machine = this_machine()
    checked = 0
    for k in live.srv.knobs():
        if not live.srv.machine_dependent(k.name) or k.formula is None:
            continue
        if live.origin.get(k.name) in SET_BY_SANDBOX:
            continue
        expected = live.srv.default(k.name, machine=machine)
        assert live.srv.parse_value(k.name, live.variables[k.name]) == expected, k.name
        checked += 1
    assert checked >= 1  # thread_pool_size = logical CPUs


def test_removed_knobs_are_absent_and_present_ones_exist(live: Live) -> None:
    cat = live.srv.catalog
    removed = [s.name for s in cat if live.srv.removed(s.name)]
    assert "innodb_buffer_pool_instances" in removed
    for name in removed:
        assert name not in live.variables, f"{name} is marked removed but {live.version} has it"
    for spec in cat:
        k = live.srv.knob(spec.name)
        if not k.exists:
            assert spec.name not in live.variables, (
                f"{spec.name} is missing from the catalog for {live.version}"
            )
        else:
            assert spec.name in live.variables, spec.name


def test_dynamic_and_scope_agree(live: Live) -> None:
    wrong: list[str] = []
    for k in live.srv.knobs():
        if k.name not in live.read_only:
            continue
        if live.srv.dynamic(k.name) == live.read_only[k.name]:
            wrong.append(
                f"{k.name}: catalog dynamic={k.dynamic}, READ_ONLY={live.read_only[k.name]}"
            )
        scope = SCOPES.get(live.scope[k.name], live.scope[k.name])
        if scope != k.spec.scope:
            wrong.append(f"{k.name}: catalog scope {k.spec.scope}, server {scope}")
    assert not wrong, "\n".join(wrong)


def test_ranges_and_enum_values_agree(live: Live) -> None:
    """Documented min/max (where the catalog has them) and enum values, in server order
    (the order gives the meaning of numeric enum values such as query_cache_type=2)."""
    wrong: list[str] = []
    for k in live.srv.knobs():
        if k.name not in live.numeric_range:
            continue
        if k.spec.type == "enum":
            server_values = (live.enum_values[k.name] or "").split(",")
            if [v.lower() for v in server_values] != [v.lower() for v in k.values]:
                wrong.append(f"{k.name}: catalog values {list(k.values)}, server {server_values}")
            continue
        lo, hi = live.numeric_range[k.name]
        if k.min is not None and lo is not None and float(lo) != float(k.min):
            wrong.append(f"{k.name}: catalog min {k.min}, server {lo}")
        if k.max is not None and hi is not None and float(hi) != float(k.max):
            wrong.append(f"{k.name}: catalog max {k.max}, server {hi}")
    assert not wrong, "\n".join(wrong)
