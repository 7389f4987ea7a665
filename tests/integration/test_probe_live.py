"""`myaccel probe` against a real sandbox server, and its bad-input errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from myaccel.cli.main import cli
from myaccel.server.sandbox import Sandbox

pytestmark = pytest.mark.integration


def test_probe_sandbox_server_and_binary(sandbox_env: Sandbox) -> None:
    r = CliRunner().invoke(cli, ["probe", "--sandbox", "pytest", "--json"])
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    s = doc["server"]
    assert s["flavor"]["value"] == "mariadb"
    assert s["version"]["value"].startswith("10.")
    assert s["pid"]["value"] == sandbox_env.pid
    assert s["binary_path"]["value"].endswith(("mariadbd", "mysqld"))
    assert s["variables"]["value"]["port"] == str(sandbox_env.port)
    assert int(s["status"]["value"]["Uptime"]) >= 0
    assert s["cpus_allowed"]["value"]
    b = doc["binary"]
    assert b["machine"]["value"] == "x86_64" or b["machine"]["value"] == "aarch64"
    assert doc["storage"]["path"]["value"].startswith(str(sandbox_env.datadir).rstrip("/"))


def test_wrong_password_is_one_line_with_hint(sandbox_env: Sandbox) -> None:
    r = CliRunner().invoke(
        cli,
        [
            "probe",
            "--host",
            "127.0.0.1",
            "--port",
            str(sandbox_env.port),
            "--user",
            "sbtest",
            "--password",
            "wrong",
        ],
    )
    assert r.exit_code == 3
    lines = r.stderr.strip().splitlines()
    assert lines[0] == f"error: access denied for sbtest@127.0.0.1:{sandbox_env.port}"
    assert lines[1].startswith("hint: ")


def test_non_elf_binary(tmp_path: Path) -> None:
    f = tmp_path / "mysqld"
    f.write_text("#!/bin/sh\necho not a server\n")
    before = f.read_bytes()
    r = CliRunner().invoke(cli, ["probe", "--no-server", "--binary", str(f)])
    assert r.exit_code == 2
    assert r.stderr.startswith("error: ") and "\nhint: " in r.stderr
    assert len(r.stderr.strip().splitlines()) == 2
    assert f.read_bytes() == before  # nothing of the user's is modified


def test_unknown_sandbox(myaccel_home: Path) -> None:
    r = CliRunner().invoke(cli, ["probe", "--sandbox", "nope"])
    assert r.exit_code != 0
    assert r.stderr.startswith("error: no sandbox named 'nope'")
