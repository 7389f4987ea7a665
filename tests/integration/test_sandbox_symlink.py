"""A sandbox reached through a symlink (issue 15): a symlinked ``$MYACCEL_HOME/sandboxes``
or a symlinked ``$MYACCEL_HOME`` must see the running server as running, never as crashed
(which would delete its socket and pid file)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from myaccel import proc
from myaccel.cli.main import cli
from myaccel.server.sandbox import Sandbox
from myaccel.server.sandbox.process import uses_option_file

pytestmark = pytest.mark.integration


@pytest.fixture
def homes(tmp_path: Path) -> dict[str, Path]:
    """Three views of one sandboxes directory: the real home, a home whose ``sandboxes``
    is a symlink to the real one, and a symlink to the real home."""
    real = tmp_path / "real"
    (real / "sandboxes").mkdir(parents=True)
    via = tmp_path / "via"
    via.mkdir()
    (via / "sandboxes").symlink_to(real / "sandboxes")
    link = tmp_path / "link"
    link.symlink_to(real)
    return {"real": real, "via": via, "link": link}


def cli_in(home: Path, *args: str) -> tuple[int, str]:
    r = CliRunner().invoke(cli, list(args), env={"MYACCEL_HOME": str(home)})
    return r.exit_code, r.stdout + r.stderr


def test_defaults_file_compared_through_symlinks(homes: dict[str, Path]) -> None:
    cnf = homes["real"] / "sandboxes" / "my.cnf"
    cnf.write_text("[mysqld]\n")
    for view in ("real", "via", "link"):
        arg = f"--defaults-file={homes[view] / 'sandboxes' / 'my.cnf'}"
        assert uses_option_file(["/usr/sbin/mariadbd", arg], cnf)
        assert uses_option_file(["mariadbd", arg], homes["via"] / "sandboxes" / "my.cnf")
    other = homes["real"] / "other.cnf"
    other.write_text("")
    assert not uses_option_file(["mariadbd", f"--defaults-file={other}"], cnf)
    assert not uses_option_file(["mariadbd", f"--defaults-extra-file={cnf}"], cnf)


@pytest.fixture
def server_installed() -> None:
    if proc.which("mariadbd") is None and proc.which("mysqld") is None:
        pytest.skip("no mariadbd/mysqld installed")


@pytest.fixture
def made(homes: dict[str, Path], request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    sb = Sandbox.init("symlinked", home=homes[request.param], timeout_s=120)
    try:
        yield sb
    finally:
        sb.destroy()


@pytest.mark.usefixtures("server_installed")
@pytest.mark.parametrize(
    ("made", "others"),
    [("real", ("via", "link")), ("via", ("real", "link"))],
    indirect=["made"],
    ids=["init-real", "init-through-symlink"],
)
def test_status_through_another_view_is_running(
    made: Sandbox, homes: dict[str, Path], others: tuple[str, ...]
) -> None:
    sb = made
    pid_file, sock = sb.pid_file, sb.socket
    assert pid_file.exists() and sock.exists()
    for view in others:
        other = Sandbox.load("symlinked", home=homes[view])
        st = other.status()
        assert st.state == "running", view
        assert st.pid == sb.status().pid
        code, out = cli_in(homes[view], "sandbox", "status", "symlinked")
        assert code == 0 and "running" in out and "crashed" not in out, out
        # start and stop are where a "crashed" verdict would delete the files
        code, out = cli_in(homes[view], "sandbox", "start", "symlinked")
        assert "already running" in out and "cleaned up" not in out, out
        assert pid_file.exists() and sock.exists(), view
    assert sb.status().state == "running"
    # stopping through a symlinked view stops the server instead of "cleaning up"
    code, out = cli_in(homes[others[0]], "sandbox", "stop", "symlinked")
    assert code == 0 and "stopped sandbox" in out and "crashed" not in out, out
    assert sb.status().state == "stopped"
