"""The knob catalog against real servers: MariaDB 10.11 (the session sandbox, Debian 12's
server), MariaDB 11.8 (its own sandbox: the one scripts/ensure-mariadb.sh installs, or
``$MYACCEL_MARIADB118_BASEDIR``) and MySQL 9.7 (its own sandbox: the MySQL that scripts/ensure-mysql.sh installs, or
``$MYACCEL_MYSQL_BASEDIR``), the latter once plain and once with the community thread pool
plugin loaded (``plugin-load-add=thread_pool.so``), whose variables exist only then.

Each sandbox runs with its own ``--defaults-file`` (Debian's /etc/mysql files are not read)
and sets only paths, the port and ``skip-name-resolve`` (MySQL: also ``mysqlx=OFF``);
variables whose value came from the option file or the command line (MariaDB
``GLOBAL_VALUE_ORIGIN`` CONFIG / COMMAND-LINE, MySQL ``VARIABLE_SOURCE`` EXPLICIT /
COMMAND_LINE) are left out of the default comparison, so every other value is the server's
real default.

MariaDB describes its variables in ``information_schema.SYSTEM_VARIABLES``. MySQL has only
``performance_schema.variables_info`` (source, min, max), so scope, dynamic-ness and enum
values are asked of the server: ``SELECT @@SESSION.x`` fails for a global-only variable,
``SET GLOBAL x = @@GLOBAL.x`` (the same value) fails for a read-only one, and a dynamic enum
is set to 0, 1, ... (then back) to read its values in order. Read-only enums can only be
checked for their current value. The MariaDB sandbox is only read; the MySQL one is private.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql
import pytest

from myaccel.knobs import Catalog, Machine, ResolvedKnob, ServerKnobs
from myaccel.server.connection import connect, query_rows
from myaccel.server.sandbox import Sandbox, ServerOptions

pytestmark = pytest.mark.integration

SET_BY_SANDBOX = {"CONFIG", "COMMAND-LINE", "EXPLICIT", "COMMAND_LINE"}
SCOPES = {"GLOBAL": "global", "SESSION": "both", "SESSION ONLY": "session"}
ER_INCORRECT_GLOBAL_LOCAL_VAR = 1238  # read only, or GLOBAL/SESSION only
ER_WRONG_VALUE_FOR_VAR = 1231
THREAD_POOL = "thread_pool"
# flavor -> knobs a removal must cover, and how many defaults must at least be compared
EXPECTED_REMOVED = {
    "mariadb": ("innodb_buffer_pool_instances",),
    "mysql": ("innodb_log_file_size", "innodb_log_files_in_group"),
}
MIN_COMPARED = {"mariadb": 65, "mariadb-11.8": 65, "mysql": 60, "mysql+thread_pool": 1}


@dataclass(frozen=True)
class Live:
    label: str  # mariadb, mariadb-11.8, mysql, mysql+thread_pool
    version: str
    variables: dict[str, str]  # SHOW GLOBAL VARIABLES
    origin: dict[str, str]
    read_only: dict[str, bool]
    scope: dict[str, str]
    numeric_range: dict[str, tuple[str | None, str | None]]
    enum_values: dict[str, str | None]  # comma separated, None = not known
    srv: ServerKnobs
    loaded_plugins: frozenset[str] = frozenset()

    @property
    def flavor(self) -> str:
        return self.label.split("+")[0].split("-")[0]

    def under_test(self, k: ResolvedKnob) -> bool:
        """Plugin knobs are checked where their plugin is loaded, the others elsewhere."""
        return (k.plugin in self.loaded_plugins) if k.plugin else not self.loaded_plugins

    def knobs(self) -> list[ResolvedKnob]:
        return [k for k in self.srv.knobs() if self.under_test(k)]


# ------------------------------------------------------------------ MariaDB


def _mariadb_live(sb: Sandbox, label: str = "mariadb") -> Live:
    if not sb.is_running():
        sb.start(timeout_s=120)
    conn = connect(sb.connect_params())
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
    return Live(
        label=label,
        version=version,
        variables=variables,
        origin={str(r[0]): str(r[1]) for r in rows},
        read_only={str(r[0]): str(r[2]) == "YES" for r in rows},
        scope={str(r[0]): SCOPES.get(str(r[3]), str(r[3])) for r in rows},
        numeric_range={str(r[0]): (_opt(r[4]), _opt(r[5])) for r in rows},
        enum_values={str(r[0]): _opt(r[6]) for r in rows},
        srv=srv,
    )


def _opt(v: object) -> str | None:
    return None if v is None else str(v)


# ------------------------------------------------------------------ MySQL


def _errno(exc: pymysql.err.MySQLError) -> int:
    return int(exc.args[0]) if exc.args and isinstance(exc.args[0], int) else -1


def _fails(run: Callable[[str], object], sql: str, errno: int) -> bool:
    try:
        run(sql)
    except pymysql.err.MySQLError as exc:
        if _errno(exc) == errno:
            return True
        raise
    return False


def _mysql_enum_values(run: Callable[[str], list[tuple[Any, ...]]], name: str, scope: str) -> str:
    """Set a dynamic enum to 0, 1, ... until the server says there is no such value; restore;
    the values in order. A value the server has but refuses now (innodb_doublewrite=OFF
    while doublewrite is on: error 1210) is ``?``."""
    at = "SESSION" if scope == "both" else "GLOBAL"
    original = str(run(f"SELECT @@{at}.{name}")[0][0])
    values: list[str] = []
    try:
        for i in range(64):
            try:
                run(f"SET {at} {name} = {i}")
            except pymysql.err.MySQLError as exc:
                if _errno(exc) == ER_WRONG_VALUE_FOR_VAR:
                    break
                values.append("?")
                continue
            values.append(str(run(f"SELECT @@{at}.{name}")[0][0]))
    finally:
        run(f"SET {at} {name} = '{original}'")
    return ",".join(values)


def _mysql_live(sb: Sandbox, label: str, loaded: frozenset[str]) -> Live:
    conn = connect(sb.connect_params())

    def run(sql: str) -> list[tuple[Any, ...]]:
        return query_rows(conn, sql)

    try:
        version = str(run("SELECT VERSION()")[0][0])
        srv = Catalog.load().for_server("mysql", version)
        if not srv.exact:
            pytest.skip(f"MySQL {version} is not a series the catalog was checked against")
        variables = {str(n): str(v) for n, v in run("SHOW GLOBAL VARIABLES")}
        info = run(
            "SELECT VARIABLE_NAME, VARIABLE_SOURCE, MIN_VALUE, MAX_VALUE "
            "FROM performance_schema.variables_info"
        )
        read_only: dict[str, bool] = {}
        scope: dict[str, str] = {}
        enums: dict[str, str | None] = {}
        for k in srv.knobs():
            if k.name not in variables:
                continue
            scope[k.name] = (
                "global"
                if _fails(run, f"SELECT @@SESSION.{k.name}", ER_INCORRECT_GLOBAL_LOCAL_VAR)
                else "both"
            )
            read_only[k.name] = _fails(
                run, f"SET GLOBAL {k.name} = @@GLOBAL.{k.name}", ER_INCORRECT_GLOBAL_LOCAL_VAR
            )
            if k.spec.type == "enum":
                enums[k.name] = (
                    None if read_only[k.name] else _mysql_enum_values(run, k.name, scope[k.name])
                )
    finally:
        conn.close()
    return Live(
        label=label,
        version=version,
        variables=variables,
        origin={str(r[0]): str(r[1]) for r in info},
        read_only=read_only,
        scope=scope,
        # bools and enums report 0..0
        numeric_range={
            str(r[0]): (None, None) if (r[2], r[3]) == ("0", "0") else (_opt(r[2]), _opt(r[3]))
            for r in info
        },
        enum_values=enums,
        srv=srv,
        loaded_plugins=loaded,
    )


@pytest.fixture(scope="module")
def mysql_sandbox(
    tmp_path_factory: pytest.TempPathFactory, mysql_basedir: Path | None
) -> Iterator[Sandbox]:
    home = tmp_path_factory.mktemp("knobs-mysql-home")
    sb = Sandbox.init("knobs97", basedir=mysql_basedir, home=home, timeout_s=180, flavor="mysql")
    try:
        yield sb
    finally:
        sb.destroy()


@pytest.fixture(scope="module")
def mariadb118_sandbox(
    tmp_path_factory: pytest.TempPathFactory, mariadb118_basedir: Path
) -> Iterator[Sandbox]:
    home = tmp_path_factory.mktemp("knobs-mariadb118-home")
    sb = Sandbox.init("knobs118", basedir=mariadb118_basedir, home=home, timeout_s=180)
    try:
        yield sb
    finally:
        sb.destroy()


@pytest.fixture(scope="module", params=["mariadb", "mariadb-11.8", "mysql", "mysql+thread_pool"])
def live(request: pytest.FixtureRequest) -> Live:
    label = str(request.param)
    if label == "mariadb":
        return _mariadb_live(request.getfixturevalue("sandbox_server"))
    if label == "mariadb-11.8":
        live = _mariadb_live(request.getfixturevalue("mariadb118_sandbox"), label)
        assert live.srv.series == "11.8", live.version
        return live
    sb: Sandbox = request.getfixturevalue("mysql_sandbox")
    if label == "mysql":
        sb.restart(reset=True, timeout_s=120)
        return _mysql_live(sb, label, frozenset())
    sb.restart(ServerOptions(sets={"plugin-load-add": f"{THREAD_POOL}.so"}), timeout_s=120)
    return _mysql_live(sb, label, frozenset({THREAD_POOL}))


def this_machine() -> Machine:
    """What the server sees: CPUs it may run on (my_getncpus) and MemTotal."""
    cpus = len(os.sched_getaffinity(0))
    mem_kib = next(
        int(line.split()[1])
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal:")
    )
    return Machine(logical_cpus=cpus, ram_bytes=mem_kib * 1024)


# ------------------------------------------------------------------ the checks


def test_catalog_defaults_equal_the_servers(live: Live) -> None:
    compared: list[str] = []
    disagreements: list[str] = []
    for k in live.knobs():
        if live.srv.machine_dependent(k.name):
            continue
        assert k.name in live.variables, f"{k.name} exists per catalog but not on {live.version}"
        if live.origin.get(k.name) in SET_BY_SANDBOX:
            continue
        expected = live.srv.default(k.name)
        actual = live.srv.parse_value(k.name, live.variables[k.name])
        compared.append(k.name)
        if actual != expected:
            disagreements.append(f"{k.name}: catalog {expected!r}, {live.label} {actual!r}")
    assert not disagreements, "\n".join(disagreements)
    # a few machine-dependent knobs and the sandbox's own settings are left out
    assert len(compared) >= MIN_COMPARED[live.label], compared


def test_machine_dependent_formulas_on_this_machine(live: Live) -> None:
    machine = this_machine()
    checked: list[str] = []
    wrong: list[str] = []
    for k in live.knobs():
        if not live.srv.machine_dependent(k.name) or k.formula is None:
            continue
        if live.origin.get(k.name) in SET_BY_SANDBOX:
            continue
        expected = live.srv.default(k.name, machine=machine)
        actual = live.srv.parse_value(k.name, live.variables[k.name])
        checked.append(k.name)
        if actual != expected:
            wrong.append(f"{k.name}: formula gives {expected!r}, {live.label} {actual!r}")
    assert not wrong, "\n".join(wrong)
    assert checked  # MariaDB: thread_pool_size = logical CPUs; MySQL: I/O threads, ...


def test_removed_knobs_are_absent_and_present_ones_exist(live: Live) -> None:
    cat = live.srv.catalog
    removed = [s.name for s in cat if live.srv.removed(s.name)]
    for name in EXPECTED_REMOVED[live.flavor]:
        assert name in removed, f"the catalog does not know {name} is gone in {live.version}"
    for name in removed:
        assert name not in live.variables, f"{name} is marked removed but {live.version} has it"
    for spec in cat:
        k = live.srv.knob(spec.name)
        if not k.exists:
            assert spec.name not in live.variables, (
                f"{spec.name} is missing from the catalog for {live.version}"
            )
        elif live.under_test(k):
            assert spec.name in live.variables, spec.name
        elif k.plugin and k.plugin not in live.loaded_plugins:
            assert spec.name not in live.variables, f"{spec.name} without plugin {k.plugin}"


def test_dynamic_and_scope_agree(live: Live) -> None:
    wrong: list[str] = []
    for k in live.knobs():
        if k.name not in live.read_only:
            continue
        if live.srv.dynamic(k.name) == live.read_only[k.name]:
            wrong.append(
                f"{k.name}: catalog dynamic={k.dynamic}, READ_ONLY={live.read_only[k.name]}"
            )
        if live.scope[k.name] != k.spec.scope:
            wrong.append(f"{k.name}: catalog scope {k.spec.scope}, server {live.scope[k.name]}")
    assert not wrong, "\n".join(wrong)


def _same(k: ResolvedKnob, server: str, catalog: float) -> bool:
    """MySQL's variables_info shows the bounds of a double variable without decimals
    (innodb_max_dirty_pages_pct: 99 for 99.999)."""
    if float(server) == float(catalog):
        return True
    return k.spec.type == "float" and float(server) == math.trunc(catalog)


def test_ranges_and_enum_values_agree(live: Live) -> None:
    """Documented min/max (where the catalog has them) and enum values, in server order
    (the order gives the meaning of numeric enum values such as query_cache_type=2)."""
    wrong: list[str] = []
    for k in live.knobs():
        if k.name not in live.numeric_range:
            continue
        if k.spec.type == "enum":
            listed = live.enum_values.get(k.name)
            if listed is None:  # MySQL read-only enum: only its value can be checked
                if live.variables[k.name].lower() not in [v.lower() for v in k.values]:
                    wrong.append(f"{k.name}: {live.variables[k.name]} not in {list(k.values)}")
                continue
            server_values = listed.split(",")
            ours = [v.lower() for v in k.values]
            # "?": refused now. After its values a MySQL enum may accept aliases that read
            # back as one of them (innodb_doublewrite: FALSE, TRUE = DETECT_AND_RECOVER).
            agree = len(server_values) >= len(ours) and all(
                theirs in ("?", ours[i]) if i < len(ours) else theirs in ("?", *ours)
                for i, theirs in enumerate(v.lower() for v in server_values)
            )
            if live.flavor == "mariadb":
                agree = agree and len(server_values) == len(ours)
            if not agree:
                wrong.append(f"{k.name}: catalog values {list(k.values)}, server {server_values}")
            continue
        lo, hi = live.numeric_range[k.name]
        if k.min is not None and lo is not None and not _same(k, lo, k.min):
            wrong.append(f"{k.name}: catalog min {k.min}, server {lo}")
        if k.max is not None and hi is not None and not _same(k, hi, k.max):
            wrong.append(f"{k.name}: catalog max {k.max}, server {hi}")
    assert not wrong, "\n".join(wrong)
