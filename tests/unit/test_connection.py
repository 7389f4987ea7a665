import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from myaccel.cli.main import cli
from myaccel.errors import ConnectionFailed, UsageError
from myaccel.server.connection import ConnectionOptions, connect, resolve
from myaccel.server.optionfile import OptionFile, parse_option_text


def test_option_file_parsing(tmp_path: Path) -> None:
    inc = tmp_path / "conf.d"
    inc.mkdir()
    (inc / "a.cnf").write_text("[client]\nport = 3310\n")
    (inc / "b.txt").write_text("[client]\nport = 9999\n")  # not *.cnf: ignored
    text = f"""
# comment
[client]
user = "dba"
password=s3cr#t
socket = /tmp/x.sock   # trailing comment
[mysqld]
skip-name-resolve
innodb-buffer-pool-size=1G
!includedir {inc}
"""
    of = OptionFile()
    parse_option_text(text, of, origin=str(tmp_path / "my.cnf"))
    assert of.get(["client"], "user") == "dba"
    assert of.get(["client"], "password") == "s3cr#t"
    assert of.get(["client"], "socket") == "/tmp/x.sock"
    assert of.get(["client"], "port") == "3310"
    assert of.groups["mysqld"]["skip_name_resolve"] is None
    assert of.get(["mysqld"], "innodb_buffer_pool_size") == "1G"


def test_resolve_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cnf = tmp_path / "client.cnf"
    cnf.write_text("[client]\nuser=fromfile\npassword=filepw\nhost=10.0.0.1\nport=3307\n")
    monkeypatch.delenv("MYSQL_PWD", raising=False)
    p = resolve(ConnectionOptions(defaults_file=str(cnf)))
    assert (p.user, p.password, p.host, p.port, p.socket) == (
        "fromfile",
        "filepw",
        "10.0.0.1",
        3307,
        None,
    )
    monkeypatch.setenv("MYSQL_PWD", "envpw")
    p = resolve(ConnectionOptions(defaults_file=str(cnf), user="cli"))
    assert (p.user, p.password) == ("cli", "envpw")
    p = resolve(ConnectionOptions(defaults_file=str(cnf), password="clipw", port=3999))
    assert p.password == "clipw" and p.port == 3999


def test_localhost_means_socket(tmp_path: Path) -> None:
    cnf = tmp_path / "c.cnf"
    cnf.write_text("[client]\nsocket=/tmp/s.sock\n")
    p = resolve(ConnectionOptions(defaults_file=str(cnf), host="localhost"))
    assert p.socket == "/tmp/s.sock" and p.host is None


def test_missing_defaults_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        resolve(ConnectionOptions(defaults_file=str(tmp_path / "none.cnf")))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_connection_refused_has_hint() -> None:
    port = free_port()
    with pytest.raises(ConnectionFailed) as ei:
        connect(resolve(ConnectionOptions(host="127.0.0.1", port=port, user="x", password="y")))
    assert "cannot reach" in ei.value.message and ei.value.hint


def test_cli_connection_refused_exit_code() -> None:
    port = free_port()
    r = CliRunner().invoke(
        cli, ["probe", "--host", "127.0.0.1", "--port", str(port), "--user", "u"]
    )
    assert r.exit_code == 3
    assert r.stderr.startswith("error: cannot reach a server at u@127.0.0.1:")
    assert "hint:" in r.stderr
