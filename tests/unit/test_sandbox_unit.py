"""Sandbox logic that needs no server: versions, argv, option files, markers, state."""

from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from myaccel.cli.main import cli
from myaccel.errors import SandboxError, ToolMissing, UsageError
from myaccel.server.flavors import adapter_for
from myaccel.server.sandbox import SANDBOX_SCHEMA, ActiveConfig, Sandbox, SandboxState
from myaccel.server.sandbox.datadir import DatadirMarkers, check_compatible, detect_datadir
from myaccel.server.sandbox.install import (
    ServerInstall,
    find_server,
    init_argv,
    parse_version_output,
    server_argv,
)
from myaccel.server.sandbox.layout import (
    SOCKET_PATH_MAX_BYTES,
    port_in_use,
    socket_path_for,
    validate_name,
    validate_port,
)
from myaccel.server.sandbox.options import (
    OptionLine,
    canonical_key,
    check_sets,
    compose_option_file,
    drop_reason,
    parse_sets,
    read_server_options,
    server_groups,
)
from myaccel.server.sandbox.process import pid_alive

MARIADB_1011 = (
    "/usr/sbin/mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)"
)
MARIADB_114 = "mariadbd  Ver 11.4.2-MariaDB for Linux on aarch64 (MariaDB Server)"
MARIADB_103 = "/usr/sbin/mysqld  Ver 10.3.39-MariaDB-0+deb10u2 for debian-linux-gnu on x86_64"
MYSQL_80 = "/usr/sbin/mysqld  Ver 8.0.36 for Linux on x86_64 (MySQL Community Server - GPL)"
MYSQL_84 = "/usr/sbin/mysqld  Ver 8.4.0 for Linux on aarch64 (MySQL Community Server - GPL)"
MYSQL_57 = "/usr/sbin/mysqld  Ver 5.7.44 for Linux on x86_64 (MySQL Community Server (GPL))"
MYSQL_56 = "/usr/sbin/mysqld  Ver 5.6.51 for Linux on x86_64 (MySQL Community Server (GPL))"
PERCONA_80 = (
    "/usr/sbin/mysqld  Ver 8.0.35-27 for Linux on x86_64 (Percona Server (GPL), Release '27', "
    "Revision '2f8eeab2')"
)


# ------------------------------------------------------------------ versions


@pytest.mark.parametrize(
    ("text", "flavor", "number", "mm"),
    [
        (MARIADB_1011, "mariadb", "10.11.19", "10.11"),
        (MARIADB_114, "mariadb", "11.4.2", "11.4"),
        (MARIADB_103, "mariadb", "10.3.39", "10.3"),
        (MYSQL_80, "mysql", "8.0.36", "8.0"),
        (MYSQL_84, "mysql", "8.4.0", "8.4"),
        (MYSQL_57, "mysql", "5.7.44", "5.7"),
        (PERCONA_80, "mysql", "8.0.35", "8.0"),
        ("some noise\n" + MYSQL_80 + "\n", "mysql", "8.0.36", "8.0"),
    ],
)
def test_parse_version_output(text: str, flavor: str, number: str, mm: str) -> None:
    v = parse_version_output(text)
    # the sandbox flavor (Percona Server runs as mysql) is the adapter's
    assert (adapter_for(v).name, v.text, v.series) == (flavor, number, mm)


def test_parse_version_output_garbage() -> None:
    with pytest.raises(SandboxError) as exc:
        parse_version_output("bash: mysqld: command not found")
    assert exc.value.hint


# ------------------------------------------------------------------ argv


def _install(text: str, **kw: object) -> ServerInstall:
    args: dict[str, object] = {
        "binary": Path("/opt/x/bin/mysqld"),
        "basedir": Path("/opt/x"),
        "version": parse_version_output(text),
    }
    args.update(kw)
    return ServerInstall(**args)  # type: ignore[arg-type]


def test_init_argv_mariadb_1011() -> None:
    inst = _install(MARIADB_1011, install_db=Path("/usr/bin/mariadb-install-db"))
    argv = init_argv(inst, Path("/s/my.cnf"))
    assert argv == [
        "/usr/bin/mariadb-install-db",
        "--defaults-file=/s/my.cnf",
        "--basedir=/opt/x",
        "--auth-root-authentication-method=normal",
        "--skip-test-db",
    ]


def test_init_argv_old_mariadb_has_no_new_flags() -> None:
    inst = _install(MARIADB_103, install_db=Path("/x/scripts/mysql_install_db"))
    argv = init_argv(inst, Path("/s/my.cnf"))
    assert argv[:2] == ["/x/scripts/mysql_install_db", "--defaults-file=/s/my.cnf"]
    assert not any(a.startswith("--auth-root") or a == "--skip-test-db" for a in argv)


def test_init_argv_mariadb_without_install_db() -> None:
    with pytest.raises(ToolMissing):
        init_argv(_install(MARIADB_1011), Path("/s/my.cnf"))


@pytest.mark.parametrize("text", [MYSQL_80, MYSQL_84, MYSQL_57, PERCONA_80])
def test_init_argv_mysql(text: str) -> None:
    argv = init_argv(_install(text), Path("/s/my.cnf"))
    # --defaults-file must be the first option for mysqld
    assert argv == ["/opt/x/bin/mysqld", "--defaults-file=/s/my.cnf", "--initialize-insecure"]


def test_init_argv_mysql_too_old() -> None:
    with pytest.raises(SandboxError, match="too old"):
        init_argv(_install(MYSQL_56), Path("/s/my.cnf"))


def test_server_argv() -> None:
    assert server_argv(_install(MYSQL_80), Path("/s/my.cnf")) == [
        "/opt/x/bin/mysqld",
        "--defaults-file=/s/my.cnf",
    ]


def _fake_binary(path: Path, version_line: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho '{version_line}'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_find_server_mysql_basedir(tmp_path: Path) -> None:
    _fake_binary(tmp_path / "bin" / "mysqld", MYSQL_80)
    (tmp_path / "share" / "english").mkdir(parents=True)
    (tmp_path / "lib" / "plugin").mkdir(parents=True)
    inst = find_server(tmp_path)
    assert inst.flavor == "mysql"
    assert inst.version.text == "8.0.36"
    assert inst.binary == tmp_path / "bin" / "mysqld"
    assert inst.custom
    assert inst.install_db is None
    assert inst.lc_messages_dir == tmp_path / "share"
    assert inst.plugin_dir == tmp_path / "lib" / "plugin"
    assert init_argv(inst, Path("/s/my.cnf"))[-1] == "--initialize-insecure"


def test_find_server_mariadb_build_tree(tmp_path: Path) -> None:
    _fake_binary(tmp_path / "sbin" / "mariadbd", MARIADB_114)
    _fake_binary(tmp_path / "scripts" / "mariadb-install-db", "unused")
    (tmp_path / "share" / "mariadb" / "english").mkdir(parents=True)
    inst = find_server(tmp_path)
    assert inst.flavor == "mariadb"
    assert inst.install_db == tmp_path / "scripts" / "mariadb-install-db"
    assert inst.lc_messages_dir == tmp_path / "share" / "mariadb"
    argv = init_argv(inst, Path("/s/my.cnf"))
    assert argv[0] == str(tmp_path / "scripts" / "mariadb-install-db")
    assert f"--basedir={tmp_path}" in argv


def test_find_server_basedir_without_server(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no mariadbd or mysqld"):
        find_server(tmp_path)
    with pytest.raises(UsageError, match="not a directory"):
        find_server(tmp_path / "missing")


def test_find_server_binary_that_is_not_a_server(tmp_path: Path) -> None:
    _fake_binary(tmp_path / "bin" / "mysqld", "hello")
    with pytest.raises(SandboxError, match="cannot read the server version"):
        find_server(tmp_path)


# ------------------------------------------------------------------ names, ports, sockets


@pytest.mark.parametrize("name", ["default", "a", "ab-test_1.2", "X" * 64])
def test_validate_name_ok(name: str) -> None:
    assert validate_name(name) == name


@pytest.mark.parametrize("name", ["", ".hidden", "a/b", "../x", "a b", "X" * 65, "-x"])
def test_validate_name_bad(name: str) -> None:
    with pytest.raises(UsageError):
        validate_name(name)


def test_validate_port() -> None:
    assert validate_port(13306) == 13306
    with pytest.raises(UsageError, match="3306"):
        validate_port(3306)
    with pytest.raises(UsageError, match="out of range"):
        validate_port(70000)


def test_port_in_use() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert port_in_use(port)
    assert not port_in_use(port)


def test_socket_path_short_and_fallback(tmp_path: Path) -> None:
    short, fallback = socket_path_for(Path("/home/u/.local/share/myaccel/sandboxes/default"))
    assert short.name == "mysqld.sock"
    assert not fallback
    deep = Path("/" + "/".join(["very-long-directory-name"] * 6)) / "sandboxes" / "default"
    path, fallback = socket_path_for(deep, uid=1234)
    assert fallback
    assert str(path).startswith("/tmp/myaccel-1234/")
    assert len(os.fsencode(str(path))) <= SOCKET_PATH_MAX_BYTES
    # stable and distinct per directory
    assert socket_path_for(deep, uid=1234)[0] == path
    assert socket_path_for(deep / "x", uid=1234)[0] != path


def test_pid_alive() -> None:
    assert pid_alive(os.getpid())
    assert not pid_alive(2**22 + 12345)


# ------------------------------------------------------------------ --set and option files


def test_parse_sets() -> None:
    sets = parse_sets(
        ["max_connections=500", "innodb-buffer-pool-size = 1G", "init_connect=SET a=1", "x.y="]
    )
    assert sets == {
        "max_connections": "500",
        "innodb-buffer-pool-size": "1G",
        "init_connect": "SET a=1",
        "x.y": "",
    }
    assert parse_sets(["a=1", "a=2"]) == {"a": "2"}


@pytest.mark.parametrize("item", ["max_connections", "=5", "1abc=2", "a b=1", "a=1\n2", ""])
def test_parse_sets_malformed(item: str) -> None:
    with pytest.raises(UsageError) as exc:
        parse_sets([item])
    assert exc.value.hint
    assert "\n" not in exc.value.message


def test_check_sets(tmp_path: Path) -> None:
    check_sets(
        {"max_connections": "5", "log_bin": "binlog", "tmpdir": str(tmp_path / "t")}, tmp_path
    )
    for key, value in [
        ("port", "3306"),
        ("datadir", "/var/lib/mysql"),
        ("loose-socket", "/x"),
        ("skip-log-error", ""),
        ("wsrep_cluster_address", "gcomm://"),
        ("log_bin", "/var/lib/mysql/bin"),
        ("extra-port", "3307"),
    ]:
        with pytest.raises(UsageError):
            check_sets({key: value}, tmp_path)


def test_canonical_key_and_drop_reason(tmp_path: Path) -> None:
    assert canonical_key("loose-bind-address") == "bind_address"
    assert canonical_key("skip-log-error") == "log_error"
    assert canonical_key("skip-name-resolve") == "skip_name_resolve"
    assert drop_reason("Port", "1", tmp_path) == "managed by the sandbox"
    assert drop_reason("innodb_log_group_home_dir", "'/var/lib/mysql'", tmp_path)
    assert drop_reason("innodb_log_group_home_dir", "./", tmp_path) is None
    assert drop_reason("general_log_file", str(tmp_path / "g.log"), tmp_path) is None
    assert drop_reason("innodb_buffer_pool_size", "1G", tmp_path) is None


def test_server_groups() -> None:
    assert server_groups("mysql", "8.0") == ("mysqld", "server", "mysqld-8.0")
    g = server_groups("mariadb", "10.11")
    assert {"mysqld", "server", "mariadb", "mariadbd", "mariadb-10.11", "mysqld-10.11"} <= set(g)


def test_read_server_options(tmp_path: Path) -> None:
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "conf.d" / "a.cnf").write_text("[mysqld]\nplugin-load-add=b\n")
    (tmp_path / "conf.d" / "ignored.txt").write_text("[mysqld]\nnope=1\n")
    (tmp_path / "inc.cnf").write_text("[server]\nthread_cache_size=8\n")
    cfg = tmp_path / "my.cnf"
    cfg.write_text(
        "# comment\n[client]\nport=3306\n"
        "[mysqld]\ninnodb_buffer_pool_size = 1G\nskip-name-resolve\n"
        "plugin-load-add=a\n; other comment\n"
        "[mariadb-10.11]\nmax_connections=10\n[mysqld-8.0]\nmax_connections=80\n"
        "[mysqld]\ninit_connect='SET NAMES utf8mb4'\n"
        "!include inc.cnf\n!includedir conf.d\n!include missing.cnf\n"
    )
    opts = read_server_options(cfg, server_groups("mariadb", "10.11"))
    assert [o.render() for o in opts] == [
        "innodb_buffer_pool_size=1G",
        "skip-name-resolve",
        "plugin-load-add=a",
        "max_connections=10",
        "init_connect='SET NAMES utf8mb4'",
        "thread_cache_size=8",
        "plugin-load-add=b",
    ]
    mysql = [o.render() for o in read_server_options(cfg, server_groups("mysql", "8.0"))]
    assert "max_connections=80" in mysql
    assert "max_connections=10" not in mysql


def test_read_server_options_missing_or_unreadable(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        read_server_options(tmp_path / "nope.cnf", ["mysqld"])
    with pytest.raises(UsageError, match="cannot read"):
        read_server_options(tmp_path, ["mysqld"])


def test_compose_option_file_precedence(tmp_path: Path) -> None:
    sdir = tmp_path / "sb"
    user = [
        OptionLine("datadir", "/var/lib/mysql", "u.cnf"),
        OptionLine("innodb_buffer_pool_size", "1G", "u.cnf"),
        OptionLine("log_bin", "/var/log/mysql/bin", "u.cnf"),
        OptionLine("max_connections", "10", "u.cnf"),
        OptionLine("wsrep_on", "ON", "u.cnf"),
    ]
    composed = compose_option_file(
        sandbox_name="t",
        sandbox_dir=sdir,
        client=[("socket", "/s.sock")],
        base=[("skip-name-resolve", None)],
        owned=[("datadir", f"{sdir}/data"), ("port", "13999")],
        user_options=user,
        config_file=Path("u.cnf"),
        sets={"max_connections": "20", "init_connect": "SET a = 'x'", "path": "C:\\t"},
    )
    lines = [ln for ln in composed.text.splitlines() if ln and not ln.startswith("#")]
    mysqld = lines[lines.index("[mysqld]") + 1 :]
    assert mysqld == [
        "skip-name-resolve",
        "innodb_buffer_pool_size=1G",
        "max_connections=10",
        "max_connections=20",
        "init_connect=\"SET a = 'x'\"",
        "path=C:\\\\t",
        f"datadir={sdir}/data",
        "port=13999",
    ]
    assert [o.key for o in composed.overridden] == ["datadir", "log_bin", "wsrep_on"]
    assert composed.overridden[0].reason == "managed by the sandbox"
    assert "[client]\nsocket=/s.sock" in composed.text


# ------------------------------------------------------------------ datadir markers


def test_detect_datadir(tmp_path: Path) -> None:
    maria = tmp_path / "maria"
    maria.mkdir()
    (maria / "mysql_upgrade_info").write_text("10.11.19-MariaDB")
    (maria / "aria_log_control").write_bytes(b"")
    m = detect_datadir(maria)
    assert (m.flavor, m.version) == ("mariadb", "10.11.19")
    mysql8 = tmp_path / "mysql8"
    mysql8.mkdir()
    (mysql8 / "mysql.ibd").write_bytes(b"")
    (mysql8 / "auto.cnf").write_text("[auto]\nserver-uuid=x\n")
    assert detect_datadir(mysql8).flavor == "mysql"
    maria11 = tmp_path / "maria11"
    maria11.mkdir()
    (maria11 / "mariadb_upgrade_info").write_text("11.4.2-MariaDB")
    assert detect_datadir(maria11) == DatadirMarkers(
        "mariadb", "11.4.2", ("mariadb_upgrade_info=11.4.2-MariaDB",)
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    assert detect_datadir(empty).flavor is None


def test_check_compatible() -> None:
    inst = _install(MARIADB_1011)
    check_compatible("s", "mariadb", "10.11.6", inst)  # patch level differs: fine
    check_compatible("s", "mariadb", "10.11.19", inst, DatadirMarkers("mariadb", "10.11.19", ()))
    with pytest.raises(SandboxError, match=r"10\.6 datadir") as exc:
        check_compatible("s", "mariadb", "10.6.16", inst)
    assert "--basedir" in exc.value.hint
    with pytest.raises(SandboxError, match="MySQL datadir"):
        check_compatible("s", "mysql", "8.0.36", inst)
    with pytest.raises(SandboxError, match="made by MySQL"):
        check_compatible("s", "mariadb", "10.11.19", inst, DatadirMarkers("mysql", None, ("x",)))
    with pytest.raises(SandboxError, match=r"made by MariaDB 11\.4\.2"):
        check_compatible("s", "mariadb", "10.11.19", inst, DatadirMarkers("mariadb", "11.4.2", ()))


# ------------------------------------------------------------------ state and loading


def _state(name: str = "s", port: int = 13999) -> SandboxState:
    return SandboxState(
        name=name,
        flavor="mariadb",
        version="10.11.19",
        version_string=MARIADB_1011,
        binary="/usr/sbin/mariadbd",
        basedir="/usr",
        port=port,
        socket=f"/tmp/{name}.sock",
        datadir=f"/tmp/{name}/data",
        created_at="2026-01-01T00:00:00+00:00",
        bench_password="pw",
    )


def test_state_roundtrip_and_load(tmp_path: Path) -> None:
    st = _state()
    st.active_config = ActiveConfig(config_file="/x.cnf", sets={"a": "1"})
    sdir = tmp_path / "sandboxes" / "s"
    sdir.mkdir(parents=True)
    (sdir / "state.json").write_text(st.model_dump_json())
    data = json.loads((sdir / "state.json").read_text())
    assert data["schema_version"] == SANDBOX_SCHEMA
    sb = Sandbox.load("s", home=tmp_path)
    assert sb.state == st
    assert sb.state.active_config.describe() == "/x.cnf, a=1"
    assert sb.status().state == "stopped"
    assert sb.pid is None
    assert [s.name for s in Sandbox.list_all(home=tmp_path)] == ["s"]
    cp = sb.connect_params()
    assert (cp.user, cp.socket, cp.password) == ("root", "/tmp/s.sock", None)
    bp = sb.bench_params()
    assert (bp.host, bp.port, bp.user, bp.password, bp.database) == (
        "127.0.0.1",
        13999,
        "sbtest",
        "pw",
        "sbtest",
    )
    assert sb.bench_params(tcp=False).socket == "/tmp/s.sock"


def test_status_crashed_from_stale_pid_file(tmp_path: Path) -> None:
    sdir = tmp_path / "sandboxes" / "s"
    sdir.mkdir(parents=True)
    (sdir / "state.json").write_text(_state().model_dump_json())
    (sdir / "mysqld.pid").write_text(f"{2**22 + 54321}\n")
    sb = Sandbox.load("s", home=tmp_path)
    assert sb.status().state == "crashed"
    assert "had crashed" in sb.stop()
    assert not (sdir / "mysqld.pid").exists()
    assert sb.status().state == "stopped"


def test_load_unknown_and_damaged(tmp_path: Path) -> None:
    with pytest.raises(SandboxError) as exc:
        Sandbox.load("nosuch", home=tmp_path)
    assert exc.value.message == "no sandbox named 'nosuch'"
    assert "myaccel sandbox init nosuch" in exc.value.hint
    damaged = tmp_path / "sandboxes" / "broken"
    damaged.mkdir(parents=True)
    with pytest.raises(SandboxError, match="damaged"):
        Sandbox.load("broken", home=tmp_path)
    (damaged / "state.json").write_text("{not json")
    with pytest.raises(SandboxError, match="damaged"):
        Sandbox.load("broken", home=tmp_path)
    (damaged / "state.json").write_text(json.dumps({"schema_version": "other/9"}))
    with pytest.raises(SandboxError, match="schema"):
        Sandbox.load("broken", home=tmp_path)
    assert Sandbox.list_all(home=tmp_path) == []
    assert "damaged" in Sandbox.destroy_named("broken", home=tmp_path)
    assert not damaged.exists()


# ------------------------------------------------------------------ CLI errors without a server


def _run(args: list[str]) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, args)
    return res.exit_code, res.stdout, res.stderr


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["sandbox", "start", "--set", "oops"], 2, "malformed --set 'oops'"),
        (["sandbox", "restart", "x", "--set", "=1"], 2, "malformed --set"),
        (["sandbox", "start", "nosuch"], 5, "no sandbox named 'nosuch'"),
        (["sandbox", "stop", "nosuch"], 5, "no sandbox named 'nosuch'"),
        (["sandbox", "status", "nosuch"], 5, "no sandbox named 'nosuch'"),
        (["sandbox", "destroy", "nosuch"], 5, "no sandbox named 'nosuch'"),
        (["sandbox", "snapshot", "list", "nosuch"], 5, "no sandbox named 'nosuch'"),
        (["sandbox", "init", "x", "--port", "3306"], 2, "port 3306 is reserved"),
        (["sandbox", "init", "bad/name"], 2, "invalid sandbox name"),
    ],
)
def test_cli_errors_without_server(
    myaccel_home: Path, args: list[str], code: int, needle: str
) -> None:
    rc, out, err = _run(args)
    assert rc == code
    assert out == ""
    lines = err.strip().splitlines()
    assert lines[0].startswith("error: ") and needle in lines[0]
    assert lines[1].startswith("hint: ")
    assert len(lines) == 2
    assert list(myaccel_home.iterdir()) == []  # nothing created


def test_cli_list_empty(myaccel_home: Path) -> None:
    rc, out, err = _run(["sandbox", "list"])
    assert (rc, out) == (0, "")
    assert "no sandboxes" in err
    rc, out, _ = _run(["sandbox", "list", "--json"])
    assert (rc, json.loads(out)) == (0, [])


# ------------------------------------------------------------------ init failures (fake server)

FAKE_SERVER = """#!/bin/sh
case "$*" in *--version*) echo "mariadbd  Ver 10.11.5-MariaDB for Linux on x86_64"; exit 0;; esac
echo "2026-01-01  0:00:00 0 [ERROR] fake server: cannot start" >&2
echo "2026-01-01  0:00:00 0 [ERROR] Aborting" >&2
exit 1
"""
FAKE_INSTALL_DB_OK = """#!/bin/sh
d=$(sed -n 's/^datadir=//p' "${1#--defaults-file=}" | tail -1)
mkdir -p "$d/mysql"
echo "Installing MariaDB/MySQL system tables in '$d' ..."
"""
FAKE_INSTALL_DB_FAIL = """#!/bin/sh
echo "ERROR: 1046  No database selected" >&2
exit 1
"""


def _fake_tree(base: Path, install_db: str) -> Path:
    for rel, text in (("bin/mariadbd", FAKE_SERVER), ("scripts/mariadb-install-db", install_db)):
        p = base / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        p.chmod(0o755)
    return base


def test_init_failure_in_install_db_leaves_nothing(tmp_path: Path) -> None:
    tree = _fake_tree(tmp_path / "build", FAKE_INSTALL_DB_FAIL)
    home = tmp_path / "home"
    with pytest.raises(SandboxError) as exc:
        Sandbox.init("x", basedir=tree, home=home)
    assert "mariadb-install-db failed" in exc.value.message
    assert "No database selected" in exc.value.message
    assert not (home / "sandboxes" / "x").exists()


def test_init_failure_at_start_shows_log_and_leaves_nothing(tmp_path: Path) -> None:
    tree = _fake_tree(tmp_path / "build", FAKE_INSTALL_DB_OK)
    home = tmp_path / "home"
    with pytest.raises(SandboxError) as exc:
        Sandbox.init("x", basedir=tree, home=home, timeout_s=10)
    assert "failed to start" in exc.value.message
    assert "fake server: cannot start" in exc.value.message  # the first error, not "Aborting"
    assert "last lines of" in exc.value.hint and "[ERROR] Aborting" in exc.value.hint
    assert not (home / "sandboxes" / "x").exists()


def test_cli_init_failure_exit_code(tmp_path: Path, myaccel_home: Path) -> None:
    tree = _fake_tree(tmp_path / "build", FAKE_INSTALL_DB_FAIL)
    rc, out, err = _run(["sandbox", "init", "x", "--basedir", str(tree)])
    assert rc == 5 and out == ""
    assert "error: mariadb-install-db failed" in err and "hint: " in err
    assert not (myaccel_home / "sandboxes" / "x").exists()


def test_relative_home_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    sdir = tmp_path / "rel" / "sandboxes" / "s"
    sdir.mkdir(parents=True)
    (sdir / "state.json").write_text(_state().model_dump_json())
    sb = Sandbox.load("s", home=Path("rel"))
    assert sb.home == tmp_path / "rel" and sb.option_file.is_absolute()
