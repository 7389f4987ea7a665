"""Bad input that needs a running server: refused early with one error line and a hint,
the documented exit code, and nothing changed; a benchmark that measured nothing fails; an
interrupt leaves the sandbox on its base configuration. Runs are tiny (a few seconds)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from myaccel.cli.main import cli
from myaccel.errors import ExitCode
from myaccel.server.connection import connect, query_value
from myaccel.server.sandbox import Sandbox

pytestmark = pytest.mark.integration

TINY = ["--tables", "1", "--table-size", "1000", "--time", "2", "--warmup", "1", "-t", "1"]


def run(args: list[str]) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, args, catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def one_error(err: str) -> str:
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    assert len([line for line in err.splitlines() if line.startswith("hint:")]) == 1, err
    return errors[0]


def tree_hash(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "d"
        for p in sorted(root.rglob("*"))
    }


def var(sb: Sandbox, name: str) -> str:
    conn = connect(sb.connect_params())
    try:
        return str(query_value(conn, f"SELECT @@GLOBAL.{name}"))
    finally:
        conn.close()


def test_bench_whose_every_run_is_invalid_fails(sandbox_env: Sandbox, tmp_path: Path) -> None:
    lua = tmp_path / "broken.lua"
    lua.write_text("this is not lua (\n")
    out = tmp_path / "res"
    code, _, err = run(
        [
            *("bench", "--sandbox", "pytest", "-w", str(lua), "--runs", "1", "--cleanup"),
            *("--out", str(out), *TINY),
        ]
    )
    line = one_error(err)
    assert code == ExitCode.NO_VALID_RUNS, err
    assert "every run was invalid (1 of 1)" in line
    assert (out / "run-001.json").is_file()  # the failed run is kept for the post-mortem


def test_bench_out_extends_the_same_campaign_and_refuses_another(
    sandbox_env: Sandbox, tmp_path: Path
) -> None:
    out = tmp_path / "res"
    base = ["bench", "--sandbox", "pytest", "-w", "ps", "--runs", "1", "--out", str(out)]
    code, _, err = run([*base, "--cleanup", *TINY])
    assert code == 0, err
    first = tree_hash(out)

    # another dataset into the same directory: refused before the dataset is touched
    other = [a if a != "1000" else "1500" for a in TINY]
    code, _, err = run([*base, *other])
    assert code == ExitCode.USAGE
    assert "another dataset or configuration" in one_error(err) and "table_size" in err
    assert tree_hash(out) == first
    conn = connect(sandbox_env.connect_params())
    try:
        assert query_value(conn, "SELECT COUNT(*) FROM sbtest.sbtest1") == 1000
    finally:
        conn.close()

    # a directory of someone else's files: refused
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine\n")
    code, _, err = run([*base[:-1], str(foreign), *TINY])
    assert code == ExitCode.USAGE and "holds no myaccel campaign" in one_error(err)
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]

    # the same campaign: extended, run-001 kept as it was
    code, _, err = run([*base, *TINY])
    assert code == 0, err
    index = json.loads((out / "campaign.json").read_text())
    assert index["runs"] == ["run-001.json", "run-002.json"]
    assert tree_hash(out)["run-001.json"] == first["run-001.json"]


def test_named_sandbox_typo_is_refused_and_lists_sandboxes(sandbox_env: Sandbox) -> None:
    pid = sandbox_env.pid
    for cmd in ("ab", "accelerate"):
        code, _, err = run([cmd, "--sandbox", "pytset", "--runs", "1"])
        line = one_error(err)
        assert code == ExitCode.USAGE, err
        assert "no sandbox named 'pytset'" in line and "pytest" in line
        assert "--create" in err
    assert not Sandbox.exists("pytset")
    assert sandbox_env.pid == pid


def test_accelerate_bad_scale_is_refused_before_the_sandbox_restarts(
    sandbox_env: Sandbox, tmp_path: Path
) -> None:
    pid = sandbox_env.pid
    out = tmp_path / "acc"
    code, _, err = run(["accelerate", "--sandbox", "pytest", "--scale", "5", "--out", str(out)])
    assert code == ExitCode.USAGE and "--scale" in one_error(err)
    assert not out.exists()
    assert sandbox_env.pid == pid and sandbox_env.is_running()


@pytest.fixture
def own_sandbox(myaccel_home: Path) -> Sandbox:
    sb = Sandbox.init("errs", timeout_s=120)
    yield sb
    sb.destroy()


def test_sigterm_during_ab_puts_the_sandbox_back_on_its_base_config(
    own_sandbox: Sandbox, tmp_path: Path
) -> None:
    base_pool = var(own_sandbox, "innodb_buffer_pool_size")
    err_file = tmp_path / "ab.err"
    with open(err_file, "w") as err_fh:
        p = subprocess.Popen(
            [
                *(sys.executable, "-c", "from myaccel.cli.main import main; main()"),
                *("ab", "--sandbox", "errs", "-w", "ps", "--runs", "2"),
                *("--candidate-set", "innodb_buffer_pool_size=64M"),
                *("--out", str(tmp_path / "ab"), *TINY),
            ],
            stdout=subprocess.DEVNULL,
            stderr=err_fh,
            env=dict(os.environ),
        )
        try:
            deadline = time.monotonic() + 180
            while "candidate oltp_point_select" not in err_file.read_text():
                assert p.poll() is None, err_file.read_text()
                assert time.monotonic() < deadline, err_file.read_text()
                time.sleep(0.2)
            assert "innodb_buffer_pool_size=64M" in own_sandbox.status().active_config.describe()
            p.send_signal(signal.SIGTERM)
            code = p.wait(timeout=120)
        finally:
            if p.poll() is None:
                p.kill()
    err = err_file.read_text()
    assert code == ExitCode.TERMINATED, err
    assert "interrupted by SIGTERM" in one_error(err)
    sb = Sandbox.load("errs")
    assert sb.is_running()
    assert sb.status().active_config.describe() == "base"
    assert var(sb, "innodb_buffer_pool_size") == base_pool


def test_apply_with_the_journal_directory_on_a_full_disk(
    own_sandbox: Sandbox, myaccel_home: Path, tmp_path: Path
) -> None:
    plan = tmp_path / "plan.json"
    code, _, err = run(["plan", "--sandbox", "errs", "--layers", "server", "--out", str(plan)])
    assert code == 0, err
    jdir = myaccel_home / "journals"
    jdir.mkdir(exist_ok=True)
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(jdir)],
        capture_output=True,
        check=False,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    try:
        with open(jdir / "filler", "wb", buffering=0) as fh, pytest.raises(OSError):
            while True:
                fh.write(b"\0" * 4096)
        before_vars = {
            n: var(own_sandbox, n) for n in ("innodb_buffer_pool_size", "innodb_log_buffer_size")
        }
        conf = own_sandbox.dir / "conf.d"
        before_files = tree_hash(conf) if conf.is_dir() else {}
        code, _, err = run(["apply", str(plan), "--sandbox", "errs", "--yes"])
        line = one_error(err)
        assert code == ExitCode.IO_ERROR, err
        assert "no space left on device" in line
        assert not [p for p in jdir.rglob("*") if p.name.endswith(".tmp")]
        assert {n: var(own_sandbox, n) for n in before_vars} == before_vars
        assert (tree_hash(conf) if conf.is_dir() else {}) == before_files
    finally:
        subprocess.run(["umount", str(jdir)], check=False)
