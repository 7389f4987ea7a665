"""Which option files a server process reads (apply writes only there), and the server
record rollback reads: in the journal, or the older servers/<id>.json, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from myaccel.actions import Journal
from myaccel.actions.errors import JournalCorrupt
from myaccel.actions.protocol import rollback_with_restart
from myaccel.actions.server_files import option_files_of, server_option_files
from myaccel.actions.target import (
    CommandServer,
    ServerTarget,
    SystemdServer,
    UnmanagedServer,
    recorded_target,
    rollback_target,
    target_from_record,
)
from myaccel.server.connection import ConnectionOptions, ConnectParams


def _etc(tmp: Path) -> Path:
    etc = tmp / "etc" / "mysql"
    (etc / "conf.d").mkdir(parents=True)
    (etc / "mariadb.conf.d").mkdir()
    (etc / "my.cnf").write_text(
        f"[client-server]\n!includedir {etc}/conf.d/\n!includedir {etc}/mariadb.conf.d/\n"
    )
    (etc / "mariadb.conf.d" / "50-server.cnf").write_text("[mysqld]\nport = 3306\n")
    return etc


def test_default_order_follows_includedirs_last_wins(tmp_path: Path) -> None:
    etc = _etc(tmp_path)
    found = option_files_of(
        ["/usr/sbin/mariadbd"], search_order=["/nonexistent/my.cnf", str(etc / "my.cnf")]
    )
    assert found.include_dirs == [str(etc / "conf.d"), str(etc / "mariadb.conf.d")]
    assert found.conf_dir == str(etc / "mariadb.conf.d")
    assert str(etc / "mariadb.conf.d" / "50-server.cnf") in found.files


def test_defaults_file_without_includedir_gives_no_dir(tmp_path: Path) -> None:
    etc = _etc(tmp_path)
    own = tmp_path / "own.cnf"
    own.write_text("[mysqld]\ndatadir=/x\n")
    found = option_files_of(
        ["mariadbd", f"--defaults-file={own}", "--user=mysql"],
        search_order=[str(etc / "my.cnf")],
    )
    assert found.files == [str(own)] and found.conf_dir is None
    assert "no !includedir" in found.why_no_dir()


def test_no_defaults_and_extra_file(tmp_path: Path) -> None:
    etc = _etc(tmp_path)
    assert (
        option_files_of(["mariadbd", "--no-defaults"], search_order=[str(etc / "my.cnf")]).files
        == []
    )
    extra_dir = tmp_path / "extra.d"
    extra_dir.mkdir()
    extra = tmp_path / "extra.cnf"
    extra.write_text(f"!includedir {extra_dir}\n")
    found = option_files_of(
        ["mariadbd", f"--defaults-extra-file={extra}"], search_order=[str(etc / "my.cnf")]
    )
    assert found.conf_dir == str(extra_dir)  # read after the global files


def test_from_a_fake_proc(tmp_path: Path) -> None:
    own = tmp_path / "my.cnf"
    own.write_text("[mysqld]\n")
    (tmp_path / "proc" / "77").mkdir(parents=True)
    (tmp_path / "proc" / "77" / "cmdline").write_bytes(
        b"/usr/sbin/mariadbd\0--defaults-file=" + str(own).encode() + b"\0"
    )
    found = server_option_files(77, "/nonexistent/mariadbd", proc_root=tmp_path / "proc")
    assert found is not None and found.files == [str(own)] and found.conf_dir is None
    assert server_option_files(78, None, proc_root=tmp_path / "proc") is None


def _journal(tmp_path: Path, server: dict[str, object] | None) -> Journal:
    return Journal.create(tmp_path / "journals", server=server)


def test_server_record_in_journal_is_checksummed(tmp_path: Path) -> None:
    h = UnmanagedServer(
        params=ConnectParams(host=None, port=3306, socket="/s.sock", user="u", password="PW")
    )
    j = _journal(tmp_path, h.describe())
    assert "PW" not in j.path.read_text()
    got = recorded_target(j.path, Journal.load(j.path))
    assert got is not None and got.params is not None and got.params.socket == "/s.sock"
    doc = json.loads(j.path.read_text())
    doc["server"]["connection"]["socket"] = "/other.sock"
    j.path.write_text(json.dumps(doc))
    with pytest.raises(JournalCorrupt):
        Journal.load(j.path)
    assert Journal.checked_status(j.path) == "corrupt"


def test_old_handle_file_and_corrupt_ones(tmp_path: Path) -> None:
    j = _journal(tmp_path, None)
    assert recorded_target(j.path, j) is None
    servers = j.path.parent / "servers"
    servers.mkdir()
    handle_file = servers / f"{j.path.stem}.json"
    handle_file.write_text(
        json.dumps({"kind": "systemd", "connection": {"socket": "/s", "user": "u"}, "unit": "m"})
    )
    got = recorded_target(j.path, j)
    assert got is not None and got.unit == "m" and got.params is not None
    for bad in ("{not json", "[1, 2]", json.dumps({"kind": "none", "connection": "x"})):
        handle_file.write_text(bad)
        with pytest.raises(JournalCorrupt):
            recorded_target(j.path, j)


P = ConnectParams(host="db1", port=3307, socket=None, user="dba", password="PW")


@pytest.mark.parametrize(
    ("target", "record"),
    [
        (
            SystemdServer(P, Path("/etc/mysql/conf.d"), "mariadb.service"),
            {"kind": "systemd", "unit": "mariadb.service", "conf_dir": "/etc/mysql/conf.d"},
        ),
        (
            CommandServer(P, None, "/usr/local/sbin/restart-db"),
            {"kind": "command", "restart_command": "/usr/local/sbin/restart-db"},
        ),
        (UnmanagedServer(P), {"kind": "none"}),
        (UnmanagedServer(), {"kind": "none", "connection": None}),
    ],
)
def test_server_record_format_is_the_one_journals_hold(
    target: ServerTarget, record: dict[str, object]
) -> None:
    """The record every journal since the ``server`` field holds, key for key (no
    password), and read back as the same kind of target."""
    want: dict[str, object] = {
        "connection": {"host": "db1", "port": 3307, "socket": None, "user": "dba"},
        "kind": "none",
        "sandbox": None,
        "unit": None,
        "conf_dir": None,
        "home": None,
    }
    want.update(record)
    assert target.describe() == want
    assert list(target.describe())[:6] == list(want)[:6]
    back = target_from_record(json.loads(json.dumps(target.describe())))
    assert type(back) is type(target) and back.describe() == target.describe()
    assert back.params is None or back.params.password is None


def test_an_old_journal_of_the_fixtures_loads_and_rolls_back(tmp_path: Path) -> None:
    """A journal written before the ``server`` record existed (tests/fixtures/report):
    no target is recorded, and rolling it back (already rolled back) changes nothing."""
    fixture = Path(__file__).parents[1] / "fixtures" / "report" / "journal"
    jdir = tmp_path / "journals"
    jdir.mkdir()
    [src] = fixture.glob("*.json")
    path = jdir / src.name
    path.write_bytes(src.read_bytes())
    journal = Journal.load(path)
    assert recorded_target(path, journal) is None
    assert rollback_target(path, journal, ConnectionOptions()) is None
    res = rollback_with_restart(None, journal, note=lambda m: None, force=True)
    assert res.reverted == [] and len(res.already_reverted) == len(journal.entries)
    assert Journal.load(path).status == "rolled-back"


def test_rollback_target_options_override_the_record(tmp_path: Path) -> None:
    """-u/-p over the recorded server: same socket, the user and password given."""
    j = _journal(tmp_path, SystemdServer(P, None, "mariadb.service").describe())
    seen: list[ConnectionOptions] = []

    def resolve(conn: ConnectionOptions) -> ConnectParams:
        seen.append(conn)
        return ConnectParams(
            conn.host, conn.port or 3306, conn.socket, conn.user or "", conn.password
        )

    got = rollback_target(j.path, j, ConnectionOptions(user="ops", password="S"), resolve)
    assert isinstance(got, SystemdServer) and got.unit == "mariadb.service"
    assert got.params is not None and (got.params.host, got.params.user) == ("db1", "ops")
    assert got.params.password == "S" and seen[0].port == 3307
