"""Output locations checked before a server is touched (issue 38), on a real sandbox:
``bench --cleanup`` whose results cannot be written leaves the prepared ``sbtest`` tables
as they were (same checksum, same creation time: not dropped and prepared again), and
``capture --out`` into a missing directory switches nothing on and journals nothing.

The results directory is made read-only by a tmpfs remounted read-only (root ignores
permissions), else by mode 0500. Only ``$MYACCEL_HOME/results`` is made read-only, not the
whole home: the sandbox's datadir lives under the home and its server must keep writing.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from myaccel.cli.main import cli
from myaccel.errors import ExitCode
from myaccel.server.connection import connect, query_rows
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


def rows(sb: Sandbox, sql: str) -> list[tuple[object, ...]]:
    conn = connect(sb.connect_params())
    try:
        return query_rows(conn, sql)
    finally:
        conn.close()


def dataset_state(sb: Sandbox) -> list[tuple[object, ...]]:
    """Checksum, row count and creation time of every sbtest table: a drop and prepare
    changes the creation time even where the data came out the same."""
    tables = rows(
        sb,
        "SELECT TABLE_NAME, CREATE_TIME FROM information_schema.TABLES "
        "WHERE TABLE_SCHEMA = 'sbtest' ORDER BY TABLE_NAME",
    )
    assert tables, "no sbtest table prepared"
    out: list[tuple[object, ...]] = []
    for name, created in tables:
        (_, checksum), *_ = rows(sb, f"CHECKSUM TABLE sbtest.`{name}`")
        ((count,),) = rows(sb, f"SELECT COUNT(*) FROM sbtest.`{name}`")
        out.append((name, created, checksum, count))
    return out


@pytest.fixture
def own_sandbox(myaccel_home: Path) -> Iterator[Sandbox]:
    sb = Sandbox.init("outcheck", timeout_s=120)
    try:
        yield sb
    finally:
        sb.destroy()


@pytest.fixture
def readonly_results(myaccel_home: Path) -> Iterator[Path]:
    """$MYACCEL_HOME/results that cannot be written (also by root)."""
    d = myaccel_home / "results"
    d.mkdir(exist_ok=True)
    if os.geteuid() == 0:
        r = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", str(d)],
            capture_output=True,
            check=False,
        )
        if r.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
        try:
            yield d
        finally:
            subprocess.run(["umount", str(d)], check=False)
    else:
        d.chmod(0o500)
        try:
            yield d
        finally:
            d.chmod(0o700)


def test_bench_cleanup_with_unwritable_results_leaves_the_dataset(
    own_sandbox: Sandbox, readonly_results: Path, tmp_path: Path
) -> None:
    # --prepare-only writes no results: it runs with the results directory read-only
    code, _, err = run(["bench", "--sandbox", "outcheck", "--prepare-only", "--cleanup", *TINY])
    assert code == 0, err
    before = dataset_state(own_sandbox)

    # the default results directory ($MYACCEL_HOME/results) is read-only
    args = ["bench", "--sandbox", "outcheck", "-w", "ps", "--runs", "1", "--cleanup", *TINY]
    code, _, err = run(args)
    assert dataset_state(own_sandbox) == before, "the dataset was dropped and prepared again"
    assert "dropping" not in err and "prepared" not in err
    line = one_error(err)
    assert code == ExitCode.IO_ERROR, err
    assert "results directory" in line and "cannot be written" in line

    # --out on the same read-only file system
    code, _, err = run([*args, "--out", str(readonly_results / "campaign")])
    assert code == ExitCode.IO_ERROR, err
    assert "--out" in one_error(err)
    assert dataset_state(own_sandbox) == before

    # a writable --out: the same command runs
    code, _, err = run([*args, "--out", str(tmp_path / "res")])
    assert code == 0, err
    assert (tmp_path / "res" / "run-001.json").is_file()


def test_capture_out_in_a_missing_directory_switches_nothing_on(
    own_sandbox: Sandbox, myaccel_home: Path
) -> None:
    consumers = "SELECT NAME, ENABLED FROM performance_schema.setup_consumers ORDER BY NAME"
    before = (rows(own_sandbox, "SELECT @@GLOBAL.general_log"), rows(own_sandbox, consumers))
    code, _, err = run(
        ["capture", "--sandbox", "outcheck", "--duration", "1", "--out", "/nonexistent/d/w.json"]
    )
    assert code == ExitCode.USAGE, err
    assert "the directory '/nonexistent/d' does not exist" in one_error(err)
    assert "captured" not in err
    after = (rows(own_sandbox, "SELECT @@GLOBAL.general_log"), rows(own_sandbox, consumers))
    assert after == before
    assert not list((myaccel_home / "journals").glob("*.json"))
    assert not (myaccel_home / "workloads").exists()
