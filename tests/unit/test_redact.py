"""Passwords out of recorded commands, and sysbench's private password file."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

from myaccel.artifacts import write_text
from myaccel.bench.run_record import CampaignIndex, private_dir
from myaccel.bench.runner import PASSWORD_MAX_BYTES, SecretArgs, password_file, with_args
from myaccel.errors import UsageError
from myaccel.redact import redact_argv, redact_command

PW = "S3cr3t-canary"


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        (["myaccel", "bench", "-p", PW, "-u", "x"], ["myaccel", "bench", "-p", "***", "-u", "x"]),
        (["myaccel", "bench", f"-p{PW}"], ["myaccel", "bench", "-p***"]),
        (["myaccel", "bench", "--password", PW], ["myaccel", "bench", "--password", "***"]),
        (["myaccel", "bench", f"--password={PW}"], ["myaccel", "bench", "--password=***"]),
        (
            ["sysbench", f"--mysql-password={PW}", "run"],
            ["sysbench", "--mysql-password=***", "run"],
        ),
        (["sysbench", f"--pgsql-password={PW}"], ["sysbench", "--pgsql-password=***"]),
        ([f"MYSQL_PWD={PW}", "myaccel", "bench"], ["MYSQL_PWD=***", "myaccel", "bench"]),
        # a password that looks like an option is still the value of -p
        (["myaccel", "bench", "-p", "--user"], ["myaccel", "bench", "-p", "***"]),
        # not secrets: -P (port), --profile, --pin-client, values of other options
        (
            ["myaccel", "bench", "-P", "3306", "--profile", "quick", "--pin-client", "1"],
            ["myaccel", "bench", "-P", "3306", "--profile", "quick", "--pin-client", "1"],
        ),
        (["myaccel", "bench", "-p"], ["myaccel", "bench", "-p"]),
    ],
)
def test_redact_argv(argv: list[str], want: list[str]) -> None:
    assert redact_argv(argv) == want
    assert all(PW not in w for w in redact_argv(argv))


def test_redact_command_string() -> None:
    out = redact_command(f"myaccel accelerate -S /s -u u --password={PW} -p '{PW}' --yes")
    assert PW not in out
    assert out == "myaccel accelerate -S /s -u u '--password=***' -p '***' --yes"
    assert PW not in redact_command(f"myaccel bench -p{PW} 'unbalanced")


def test_records_redact_when_written_and_when_read() -> None:
    """campaign.json of an older version held `-p PW`: reading it (as `myaccel report`
    does) already drops the password, as does recording a new one."""
    doc = {
        "campaign_id": "c",
        "kind": "bench",
        "created_at": "now",
        "profile": {},
        "command": ["myaccel", "bench", "-p", PW],
    }
    idx = CampaignIndex.model_validate(doc)
    assert idx.command == ["myaccel", "bench", "-p", "***"]
    assert PW not in idx.model_dump_json()


def test_report_renders_redacted_commands(tmp_path: Path) -> None:
    from myaccel.report.content import build_content
    from myaccel.report.load import load_artifacts
    from myaccel.report.render import render_html, render_markdown

    fixture = Path(__file__).parent.parent / "fixtures" / "report" / "accelerate-demo" / "ab"
    if not fixture.is_dir():
        pytest.skip("no report fixture")
    out = tmp_path / "ab"
    out.mkdir()
    for f in fixture.iterdir():
        text = f.read_text() if f.is_file() else None
        if text is None:
            continue
        if f.name == "campaign.json":
            text = text.replace('"myaccel",', f'"myaccel", "-p", "{PW}", "--password={PW}",', 1)
        text = text.replace('"--mysql-password=***"', f'"--mysql-password={PW}"')
        (out / f.name).write_text(text)
    assert PW in (out / "campaign.json").read_text()
    assert PW in (out / "run-001.json").read_text()
    content = build_content(load_artifacts([out]))
    for text in (render_markdown(content, with_html=False), render_html(content)):
        assert PW not in text


def _pipe_content(secret: SecretArgs) -> str:
    """What sysbench reads from its --config-file (the inherited pipe's read end)."""
    (fd,) = secret.pass_fds
    assert secret.args == (f"--config-file=/dev/fd/{fd}",)
    assert stat.S_ISFIFO(os.fstat(fd).st_mode)
    return os.read(fd, 4096).decode()


def test_password_goes_through_a_pipe_never_a_file(tmp_path: Path) -> None:
    before = set(os.listdir("/dev/shm")) | set(os.listdir(tempfile.gettempdir()))
    with password_file(PW) as secret:
        (fd,) = secret.pass_fds
        now = set(os.listdir("/dev/shm")) | set(os.listdir(tempfile.gettempdir()))
        assert now <= before, f"a file appeared: {now - before}"
        assert _pipe_content(secret) == f'mysql-password="{PW}"\n'
    with pytest.raises(OSError):  # the read end is closed once the block ends
        os.fstat(fd)
    with password_file(None) as none, password_file("") as empty:
        assert none == SecretArgs() and empty == SecretArgs()


def test_password_pipe_closed_on_error() -> None:
    with pytest.raises(KeyboardInterrupt), password_file(PW) as secret:
        (fd,) = secret.pass_fds
        raise KeyboardInterrupt
    with pytest.raises(OSError):
        os.fstat(fd)


def test_password_quoting_and_limits() -> None:
    with password_file('a"b,c#d e') as secret:
        assert _pipe_content(secret) == "mysql-password='a\"b,c#d e'\n"
    for bad in ("a\"b'c", "line\nbreak", "x" * (PASSWORD_MAX_BYTES + 1)):
        with pytest.raises(UsageError), password_file(bad):
            pass
    with password_file("x" * PASSWORD_MAX_BYTES):
        pass


def test_with_args_before_the_command() -> None:
    assert with_args(["sysbench", "x.lua", "--a=1", "run"], ["--config-file=F"]) == [
        "sysbench",
        "x.lua",
        "--a=1",
        "--config-file=F",
        "run",
    ]
    assert with_args(["sysbench", "run"], []) == ["sysbench", "run"]


def test_private_results(tmp_path: Path) -> None:
    d = private_dir(tmp_path / "a" / "b")
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    f = d / "x.json"
    f.write_text("{}")
    f.chmod(0o644)
    write_text(f, "{}", private=True)
    assert stat.S_IMODE(f.stat().st_mode) == 0o600
