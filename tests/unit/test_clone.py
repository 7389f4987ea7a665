"""The parts of ``myaccel clone`` that need no server: the compiled-defaults table, the
option-file reading, the rewrites (paths, owned keys, memory), the configuration derived
from a source, the fence, the preflight checks and the record."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fake_runner import FIXTURES, Recording, ReplayRunner

from myaccel import artifacts
from myaccel.actions.target import CommandServer, SandboxServer, SystemdServer, UnmanagedServer
from myaccel.clone import CloneError
from myaccel.clone.accounts import first_start_sql
from myaccel.clone.config import derive_config, parse_print_defaults
from myaccel.clone.defaults import parse_help_defaults, same_value
from myaccel.clone.fence import choose_fence
from myaccel.clone.preflight import (
    DiskCheck,
    Preflight,
    Problem,
    RestartMethod,
    detect_restart,
    disk_for_copy,
    needed_privileges,
)
from myaccel.clone.record import CloneRecord, ServerChoice, SourceInfo, load_record, save_record
from myaccel.clone.rewrite import Target, explain_difference, rewrite_option, scale_memory
from myaccel.clone.source import SourceServer, command_line_options, defaults_args
from myaccel.clone.verify import UNEXPLAINED, variable_diff
from myaccel.env import Environment, using
from myaccel.server.connection import ConnectParams
from myaccel.server.flavor import parse_server_version
from myaccel.server.flavors import adapter_for

HELP = """\
  --port=#            Port number to use for connection

Variables (--variable-name=value)
and boolean options {FALSE|TRUE}                             Value (after reading options)
------------------------------------------------------------ -------------
bind-address                                                 (No default value)
innodb-buffer-pool-size                                      134217728
max-connections                                              151
performance-schema                                           FALSE
skip-name-resolve                                            FALSE
thread-pool-size                                             2

To see what values a running MySQL server is using, type
"""
GIB = 1024**3


def _source(tmp_path: Path, flavor: str = "mariadb", **variables: str) -> SourceServer:
    raw = "10.11.19-MariaDB" if flavor == "mariadb" else "9.7.4"
    version = parse_server_version(raw, "")
    assert version is not None
    datadir = tmp_path / "src" / "data"
    base = {
        "datadir": str(datadir) + "/",
        "tmpdir": str(tmp_path / "src" / "tmp"),
        "socket": str(tmp_path / "run" / "mysqld.sock"),
        "pid_file": str(tmp_path / "run" / "mysqld.pid"),
        "server_id": "1",
        "max_connections": "151",
        "innodb_buffer_pool_size": str(GIB),
        "thread_pool_size": "2",
        "skip_name_resolve": "OFF",
    }
    params = ConnectParams(host=None, port=3306, socket="/s", user="backup", password=None)
    return SourceServer(params=params, version=version, variables={**base, **variables})


def _target(tmp_path: Path, budget: int = 64 * GIB) -> Target:
    sdir = tmp_path / "clone"
    return Target(sdir, sdir / "data", 14000, 14000, budget)


def test_help_defaults_table() -> None:
    d = parse_help_defaults(HELP)
    assert d["innodb_buffer_pool_size"] == "134217728"
    assert d["bind_address"] == ""  # (No default value)
    assert "port" not in d  # the option list above the table is not the table
    assert parse_help_defaults("no table here") == {}


def test_same_value_spellings() -> None:
    assert same_value("ON", "TRUE") and same_value("OFF", "false")
    assert same_value("100.000000", "100")
    assert not same_value("222", "151")


def test_print_defaults_and_command_line() -> None:
    out = "mariadbd would have been started with the following arguments:\n"
    out += "--datadir=/var/lib/mysql --skip-name-resolve --sql-mode=A,B\n"
    assert parse_print_defaults(out) == [
        ("datadir", "/var/lib/mysql"),
        ("skip-name-resolve", None),
        ("sql-mode", "A,B"),
    ]
    args = ["/usr/sbin/mariadbd", "--defaults-file=/etc/my.cnf", "--port=3307", "--log-bin"]
    assert defaults_args(args) == ["--defaults-file=/etc/my.cnf"]
    assert command_line_options(args) == ["--port=3307", "--log-bin"]


def test_rewrite_paths_owned_and_forbidden(tmp_path: Path) -> None:
    src, t = _source(tmp_path), _target(tmp_path)
    owned = rewrite_option("socket", "/run/x.sock", src, t)
    assert not owned.keep and owned.rewrite is not None and "socket" in owned.rewrite.reason
    inside = rewrite_option("general_log_file", str(tmp_path / "src/data/g.log"), src, t)
    assert inside.keep and inside.value == str(t.datadir / "g.log")
    assert inside.rewrite is not None and "datadir" in inside.rewrite.reason
    log_bin = rewrite_option("log_bin", "/var/log/mysql/bin", src, t)
    assert log_bin.value == str(t.sandbox_dir / "files" / "bin")
    assert not rewrite_option("wsrep_on", "ON", src, t).keep
    assert rewrite_option("ssl_ca", "/etc/mysql/ca.pem", src, t).value == "/etc/mysql/ca.pem"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("daemonize", None),
        ("daemonize", "ON"),
        ("loose-daemonize", None),
        ("initialize", None),
        ("validate-config", None),
        ("console", None),
    ],
)
def test_process_control_options_are_not_copied(
    tmp_path: Path, key: str, value: str | None
) -> None:
    """A MySQL started with ``mysqld --daemonize``: the clone's server must not fork away
    from the sandbox that watches it."""
    out = rewrite_option(key, value, _source(tmp_path), _target(tmp_path))
    assert not out.keep and out.rewrite is not None
    assert "how the source's process was started" in out.rewrite.reason


def test_memory_scaled_to_the_budget(tmp_path: Path) -> None:
    variables = {"innodb_buffer_pool_size": str(8 * GIB), "key_buffer_size": str(GIB)}
    out = scale_memory([], variables, 3 * GIB)
    scaled = {r.variable: int(str(r.clone_value)) for r in out}
    assert sum(scaled.values()) <= 3 * GIB
    assert scaled["innodb_buffer_pool_size"] > scaled["key_buffer_size"]
    assert all("scaled" in r.reason for r in out)
    assert scale_memory([], variables, 64 * GIB) == []


def test_derive_config(tmp_path: Path) -> None:
    src = _source(tmp_path, max_connections="222")
    src.persisted = {}
    defaults = parse_help_defaults(HELP)
    read = [("skip-name-resolve", None, "option files"), ("plugin-load-add", "x.so", "cmd")]
    cfg = derive_config(src, defaults, read, _target(tmp_path, budget=GIB // 2))
    keys = {e.key: e.value for e in cfg.entries}
    assert keys["loose-max_connections"] == "222"  # a runtime change
    assert keys["plugin-load-add"] == "x.so"  # not a variable: from the option files
    assert keys["loose-skip_name_resolve"] == "OFF"  # always the source's value
    assert keys["loose-thread_pool_size"] == "2"  # sized from the CPUs: always written
    assert keys["server_id"] == "14000" and keys["skip_slave_start"] == "ON"
    rewritten = {r.variable for r in cfg.rewritten}
    assert {"server_id", "skip_slave_start", "innodb_buffer_pool_size"} <= rewritten
    text = cfg.render("header")
    assert text.startswith("# header\n\n[mysqld]\n") and "loose-max_connections=222" in text


def test_variable_diff_explains_or_marks(tmp_path: Path) -> None:
    src, t = _source(tmp_path), _target(tmp_path)
    clone = {**src.variables, "port": "14000", "server_uuid": "b", "odd": "2"}
    source_now = {**src.variables, "port": "3306", "server_uuid": "a", "odd": "1"}
    diff = {d.variable: d.reason for d in variable_diff(src, source_now, clone, [], t)}
    assert "port" in diff["port"] and "UUID" in diff["server_uuid"]
    assert diff["odd"] == UNEXPLAINED
    assert explain_difference("mysqlx_port", "33060", None, {}, src, t) is not None


def test_fence_choice() -> None:
    f = choose_fence(None, host_cpus=[0, 1, 2, 3])
    assert f.cpus == [2, 3] and f.nice == 10
    assert choose_fence([0], host_cpus=[0, 1, 2]).cpus == [1, 2]
    assert choose_fence(None, host_cpus=[0]).cpus is None
    assert choose_fence(None, host_cpus=[0, 1], cpus=[0], nice=5).cpus == [0]
    prefix = choose_fence(None, host_cpus=[0, 1]).argv_prefix()
    assert prefix[prefix.index("nice") + 2] == "10"


def _systemd_host(root: Path, pid: int, cgroup: str, main_pid: int | None) -> ReplayRunner:
    """A sysroot of a host systemd runs, whose process ``pid`` is in ``cgroup``, and a
    runner that answers ``systemctl show -P MainPID`` with ``main_pid`` (None: not asked)."""
    (root / "run" / "systemd" / "system").mkdir(parents=True)
    (root / "proc" / str(pid)).mkdir(parents=True)
    (root / "proc" / str(pid) / "cgroup").write_text(cgroup)
    fake = ReplayRunner()
    if main_pid is not None:
        fake.on(["systemctl", "show", "-P", "MainPID"], Recording(stdout=f"{main_pid}\n"))
    return fake


def test_restart_method(tmp_path: Path) -> None:
    src = _source(tmp_path)
    root = tmp_path / "root"
    assert detect_restart(src, root=root).kind is UnmanagedServer  # not on this host
    src.pid = 4242
    fake = _systemd_host(root, 4242, "0::/system.slice/mariadb.service\n", main_pid=4242)
    with using(Environment(runner=fake)):
        found = detect_restart(src, root=root)
    assert (found.kind, found.detail) == (SystemdServer, "mariadb.service")
    assert found.known and found.describe() == "systemd (mariadb.service)"
    assert fake.argvs() == [("systemctl", "show", "-P", "MainPID", "mariadb.service")]
    (root / "proc" / "4242" / "cgroup").write_text("0::/user.slice/user-0.slice/session-3.scope\n")
    with using(Environment(runner=ReplayRunner())):  # no unit in the cgroup: nothing asked
        none = detect_restart(src, root=root)
    assert none.kind is UnmanagedServer and not none.known
    assert "not the main process of a systemd service" in none.describe()
    assert detect_restart(src, "systemctl restart db", root=root).kind is CommandServer
    src.sandbox = "prod"
    assert detect_restart(src, root=root).kind is SandboxServer


@pytest.mark.parametrize(
    ("main_pid", "booted", "unit"),
    [
        pytest.param(3289, True, "mariadb.service", id="the-units-main-process"),
        # started by hand from the service's shell: in its cgroup, not its main process
        pytest.param(1234, True, None, id="in-the-units-cgroup-only"),
        pytest.param(None, False, None, id="systemd-does-not-run-the-host"),
    ],
)
def test_the_preflight_finds_the_unit_apply_finds(
    tmp_path: Path, main_pid: int | None, booted: bool, unit: str | None
) -> None:
    """The clone preflight (``detect_restart``) and ``myaccel apply``
    (``actions.session.derive_unit``) name the same unit for one server, from one sysroot:
    the service whose main process the server is, not just the one whose cgroup holds it."""
    from myaccel.actions.session import derive_unit
    from myaccel.facts.load import load_facts

    facts = load_facts(str(FIXTURES / "report" / "accelerate-demo" / "facts.json"))
    pid = facts.server.pid.value if facts.server else None
    assert pid == 3289
    root = tmp_path / "root"
    fake = _systemd_host(root, pid, "0::/system.slice/mariadb.service\n", main_pid)
    if not booted:
        (root / "run" / "systemd" / "system").rmdir()
    src = _source(tmp_path)
    src.pid = pid
    notes: list[str] = []
    with using(Environment(runner=fake)):
        found = detect_restart(src, root=root)
        applied = derive_unit(UnmanagedServer(src.params), facts, notes.append, root=root)
    if unit is None:
        assert found.kind is UnmanagedServer and type(applied) is UnmanagedServer
    else:
        assert (found.kind, found.detail) == (SystemdServer, unit)
        assert isinstance(applied, SystemdServer) and applied.unit == unit


def test_restart_method_of_a_sandbox_reached_by_socket(myaccel_home: Path) -> None:
    src = _source(myaccel_home)
    option_file = myaccel_home / "sandboxes" / "prod" / "my.cnf"
    src.pid, src.args = 4242, ["/usr/sbin/mariadbd", f"--defaults-file={option_file}"]
    found = detect_restart(src)
    assert (found.kind, found.detail) == (SandboxServer, "prod")


def test_privileges_and_disk(tmp_path: Path) -> None:
    maria = _source(tmp_path)
    assert "BINLOG MONITOR" in needed_privileges(maria, "clone")
    mysql = _source(tmp_path, flavor="mysql")
    assert needed_privileges(mysql, "clone") == ["BACKUP_ADMIN", "INSERT", "DELETE"]
    mysql.clone_plugin = "ACTIVE"
    assert needed_privileges(mysql, "clone") == ["BACKUP_ADMIN"]
    assert needed_privileges(mysql, "apply") == ["SYSTEM_VARIABLES_ADMIN"]
    small = disk_for_copy(1024, tmp_path / "not" / "yet")
    assert small.fits and small.path == str(tmp_path)
    assert not DiskCheck("/", need_bytes=10, free_bytes=5).fits


def test_preflight_raises_the_first_blocking_problem() -> None:
    pre = Preflight(RestartMethod(UnmanagedServer, "x"), [], None)
    pre.problems.append(Problem("only a warning", "h", blocking=False))
    pre.require()
    pre.problems.append(Problem("no BACKUP_ADMIN", "GRANT BACKUP_ADMIN"))
    with pytest.raises(CloneError, match="no BACKUP_ADMIN") as err:
        pre.require()
    assert err.value.hint == "GRANT BACKUP_ADMIN"


def test_first_start_sql_one_statement_per_line() -> None:
    for flavor in ("mariadb", "mysql"):
        sql = first_start_sql(adapter_for(flavor), user="sbtest", password="pw", database="sb")
        lines = sql.splitlines()
        assert all(ln.endswith(";") for ln in lines)
        assert any("root" in ln and "ALL PRIVILEGES" in ln for ln in lines)
        assert not any("DROP" in ln for ln in lines)  # nothing of the copy is removed


def test_record_round_trip(tmp_path: Path) -> None:
    rec = CloneRecord(
        name="c",
        created_at="now",
        source=SourceInfo(
            connection="root@socket /s",
            flavor="mariadb",
            version="10.11.19",
            version_string="10.11.19-MariaDB",
            basedir="/usr",
            datadir="/d",
            data_bytes=1,
        ),
        server=ServerChoice(binary="/usr/sbin/mariadbd", basedir="/usr", same_binary=True, note=""),
        config_file="/c/clone.cnf",
    )
    rec.step("copy", "done", "1 byte")
    path = save_record(tmp_path, rec)
    assert artifacts.load_any(path).model_dump() == rec.model_dump()
    assert load_record(tmp_path).steps[0].name == "copy"


def test_the_ab_needs_room_for_each_arms_redo_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found in the lab: a plan's 2 GiB redo log, written out in the candidate's snapshot,
    filled the free disk in the middle of the A/B. accelerate now refuses before the clone."""
    from myaccel.accelerate.existing import check_ab_disk
    from myaccel.actions.plan_apply import PlannedChanges
    from myaccel.clone.errors import NoDiskForCopy
    from myaccel.clone.preflight import disk_for_ab
    from plans import rec

    mib = 1024 * 1024
    src = _source(tmp_path, innodb_log_file_size=str(96 * mib))
    src.data_bytes = 124 * mib
    pc = PlannedChanges(recs=[rec("server-redo-capacity", "mysql:innodb_log_file_size", "2G")])
    free = 4 * GIB
    module = sys.modules["myaccel.clone.preflight"]  # the package names a function so too
    monkeypatch.setattr(module, "_free_bytes", lambda t: (t, free))
    need = disk_for_ab(src.data_bytes, 96 * mib, [96 * mib, 2 * GIB], tmp_path).need_bytes
    assert need > free  # two dense 2 GiB logs: the grown one and the candidate's snapshot
    with pytest.raises(NoDiskForCopy, match="the clone's A/B"):
        check_ab_disk(src, pc, arms=2)
    check_ab_disk(src, PlannedChanges(), arms=2)  # the server's own 96 MiB log fits


def test_the_ab_disk_counts_the_dataset_its_binary_log_and_a_margin(tmp_path: Path) -> None:
    """Found on a user's server: 5.1-6.2 GiB used for a 456 MB datadir (1 GiB planned
    redo log), where the estimate counted about 0.8 GiB; measured with
    scripts/accelerate_disk.py: 4,470 MiB at the peak for a 277 MiB datadir."""
    from myaccel.clone.preflight import AB_MARGIN_SHARE, disk_for_ab

    mib = 1024 * 1024
    data, redo, planned, dataset = 277 * mib, 96 * mib, GIB, 20_000 * 240
    bare = disk_for_ab(data, redo, [redo, planned], tmp_path).need_bytes
    assert bare > 4470 * mib  # the measured peak
    full = disk_for_ab(data, redo, [redo, planned], tmp_path, dataset_bytes=dataset)
    logged = disk_for_ab(data, redo, [redo, planned], tmp_path, dataset_bytes=dataset, binlog=True)
    margin = 1 + AB_MARGIN_SHARE
    # in the live datadir (twice while restoring), the dataset snapshot and 2 arms'
    assert full.need_bytes - bare == pytest.approx(5 * dataset * margin, rel=0.01)
    assert logged.need_bytes - full.need_bytes == pytest.approx(dataset * margin, rel=0.01)
    assert "the dataset, 3 snapshots" in full.describe()
    user = disk_for_ab(456 * mib, redo, [redo, planned], tmp_path).need_bytes
    assert user > 5 * GIB  # the user's 456 MB datadir: about what was used (5.1-6.2 GiB)
