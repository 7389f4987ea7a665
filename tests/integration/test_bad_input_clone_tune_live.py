"""Bad input for ``clone``, ``tune`` and ``accelerate`` that needs a running server
(issue 38, item 5): refused *before* any side effect, with one error line, one hint and
the documented exit code. "Nothing changed" is checked on the files under
``$MYACCEL_HOME`` outside the running source sandbox's own directory (its server writes
there), on the sandboxes that exist (no clone is registered) and on the source sandbox's
server process (the same pid: not restarted; stopped when it was stopped).

One MariaDB sandbox ``src`` for the module, its schema ``sbtest`` holding a dataset of
1 x 1,000 rows (prepared by myaccel's marker) that the commands below do not want.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from myaccel.cli.main import cli
from myaccel.errors import ExitCode
from myaccel.server.sandbox import Sandbox

pytestmark = pytest.mark.integration

WEAK_USER, WEAK_PASSWORD = "weak", "weak-pw-1"
# tiny runs, and a dataset of 2 x 1,000 rows: not the 1 x 1,000 in the source's sbtest
TUNE = ["--time", "1", "--warmup", "0", "--trials", "1", "-w", "ro", "-t", "1"]
TWO_TABLES = ["--tables", "2", "--table-size", "1000"]


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    home = tmp_path_factory.mktemp("bad-live-home")
    sb = Sandbox.init("src", home=home, timeout_s=120, flavor="mariadb")
    try:
        for sql in (
            "CREATE TABLE sbtest.sbtest1 (id INT PRIMARY KEY, k INT, c CHAR(120), pad CHAR(60))",
            "INSERT INTO sbtest.sbtest1 SELECT seq, seq, 'c', 'p' FROM sbtest.seq_1_to_1000",
            "CREATE TABLE sbtest.myaccel_dataset (k VARCHAR(64) PRIMARY KEY, v VARCHAR(255))",
            "INSERT INTO sbtest.myaccel_dataset VALUES ('tables', '1'), ('table_size', '1000')",
            f"CREATE USER '{WEAK_USER}'@'localhost' IDENTIFIED BY '{WEAK_PASSWORD}'",
            f"GRANT PROCESS ON *.* TO '{WEAK_USER}'@'localhost'",
        ):
            sb.query(sql)
        yield sb
    finally:
        sb.destroy()


@pytest.fixture
def home(src: Sandbox, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MYACCEL_HOME", str(src.home))
    monkeypatch.delenv("MYSQL_PWD", raising=False)
    if not src.is_running():
        src.start(timeout_s=120)
    return src.home


def outside_source(home: Path, src: Sandbox) -> dict[str, str]:
    """Every file under ``home`` but the running source's own directory."""
    return {
        str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "d"
        for p in sorted(home.rglob("*"))
        if src.dir not in p.parents and p != src.dir
    }


def refused(home: Path, src: Sandbox, args: list[str], want: int, needle: str) -> str:
    """Run ``args``; it must be refused with one error line containing ``needle`` and one
    hint, exit ``want``, nothing created in ``home``, the source's server untouched."""
    before_files = outside_source(home, src)
    before_pid = src.status().pid
    r = CliRunner().invoke(cli, args, catch_exceptions=False)
    err = r.stderr
    assert "Traceback" not in r.output + err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    hints = [line for line in err.splitlines() if line.startswith("hint:")]
    assert len(errors) == 1 and len(hints) == 1, err
    assert r.exit_code == want, f"exit {r.exit_code}, expected {int(want)}: {err}"
    assert needle in errors[0], errors[0]
    assert outside_source(home, src) == before_files, "a refused command wrote files"
    assert [sb.name for sb in Sandbox.list_all(home=home)] == ["src"]
    assert src.status().pid == before_pid, "the source sandbox was restarted or stopped"
    return hints[0]


def socket_args(src: Sandbox, user: str = "root") -> list[str]:
    return ["-S", str(src.socket), "-u", user]


def test_clone_refused_for_missing_privileges_exits_3(home: Path, src: Sandbox) -> None:
    args = ["clone", *socket_args(src, WEAK_USER), "-p", WEAK_PASSWORD, "--name", "c"]
    hint = refused(home, src, args, ExitCode.CONNECTION, f"the account {WEAK_USER} lacks RELOAD")
    assert "GRANT RELOAD" in hint


def test_clone_without_disk_for_the_copy_is_refused_not_schema_only(
    home: Path, src: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy that does not fit (the margin raised past any disk) is refused with exit 8
    and the options that help; it never falls back to the schema only on its own."""
    import importlib

    pf = importlib.import_module("myaccel.clone.preflight")
    monkeypatch.setattr(pf, "COPY_MARGIN_BYTES", 1 << 60)
    hint = refused(
        home,
        src,
        ["clone", "--sandbox", "src", "--name", "c"],
        ExitCode.IO_ERROR,
        "not enough disk",
    )
    assert "--schema-only" in hint and "MYACCEL_HOME" in hint
    hint = refused(
        home,
        src,
        ["clone", "--sandbox", "src", "--name", "c", "--schema-only"],
        ExitCode.IO_ERROR,
        "an empty datadir with the source's redo log needs",
    )


def test_clone_cpus_outside_the_affinity(home: Path, src: Sandbox) -> None:
    refused(
        home,
        src,
        ["clone", "--sandbox", "src", "--name", "c", "--cpus", "99"],
        ExitCode.USAGE,
        "CPU 99",
    )


def test_accelerate_refuses_a_dataset_mismatch_before_the_clone(home: Path, src: Sandbox) -> None:
    """The server's sbtest holds 1 x 1,000 rows, the A/B needs 8 tables: refused in the
    preflight (no clone made, no results directory), the hint naming accelerate's own
    options, not --cleanup."""
    args = [
        "accelerate",
        *socket_args(src),
        "--restart-command",
        "/bin/true",
        "--runs",
        "1",
        "--time",
        "5",
        "--scale",
        "0.01",
    ]
    hint = refused(home, src, args, ExitCode.USAGE, "holds a dataset of 1 x 1,000 rows")
    assert "--cleanup" not in hint and "--scale" in hint


# What docs/existing-server.md lists for accelerate on a MariaDB server: the copy's
# (BINLOG MONITOR is also given by SUPER, so it is not lacking while SUPER is held), SET
# GLOBAL's, and SELECT on the sysbench schema for the dataset check; the guard's SELECT
# on performance_schema is asked only where it is on (test_accelerate_existing.py).
MARIADB_ACCELERATE = ("RELOAD", "PROCESS", "LOCK TABLES", "SUPER")
ON_SBTEST = "SELECT ON sbtest.*"


@pytest.mark.parametrize("lacking", [*MARIADB_ACCELERATE, ON_SBTEST])
def test_accelerate_refuses_each_missing_privilege_first(
    home: Path, src: Sandbox, lacking: str
) -> None:
    """An account holding every documented privilege but one: refused in the preflight
    (exit 3, the privilege named, the GRANT in the hint), before any clone or file."""
    user = "lacks_" + lacking.rsplit(" ON ", maxsplit=1)[-1].replace(" ", "_").strip(".*").lower()
    src.query(f"CREATE USER IF NOT EXISTS '{user}'@'localhost' IDENTIFIED BY '{WEAK_PASSWORD}'")
    held = ", ".join(p for p in MARIADB_ACCELERATE if p != lacking)
    src.query(f"GRANT {held}, BINLOG MONITOR ON *.* TO '{user}'@'localhost'")
    if lacking != ON_SBTEST:
        src.query(f"GRANT SELECT ON sbtest.* TO '{user}'@'localhost'")
    args = ["accelerate", *socket_args(src, user), "-p", WEAK_PASSWORD]
    args += ["--restart-command", "/bin/true", "--runs", "1", "--time", "5", "--scale", "0.01"]
    needle = (
        f"the account {user} cannot read schema 'sbtest'"
        if lacking == ON_SBTEST
        else f"the account {user} lacks {lacking}"
    )
    hint = refused(home, src, args, ExitCode.CONNECTION, needle)
    grant = "GRANT SELECT ON sbtest.* TO" if lacking == ON_SBTEST else f"GRANT {lacking} ON *.*"
    assert grant in hint, hint


def test_accelerate_without_disk_for_the_clone_is_refused_first(
    home: Path, src: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Too little disk for the clone (the margin raised past any disk): refused with exit
    8 in the preflight, before the clone, the plan's results or the A/B."""
    import importlib

    pf = importlib.import_module("myaccel.clone.preflight")
    monkeypatch.setattr(pf, "COPY_MARGIN_BYTES", 1 << 60)
    args = ["accelerate", *socket_args(src), "--restart-command", "/bin/true", "--runs", "1"]
    hint = refused(home, src, args, ExitCode.IO_ERROR, "not enough disk for the clone")
    assert "MYACCEL_HOME" in hint


def test_tune_refuses_a_dataset_mismatch_before_restarting(home: Path, src: Sandbox) -> None:
    refused(
        home,
        src,
        ["tune", "--sandbox", "src", *TUNE, *TWO_TABLES],
        ExitCode.USAGE,
        "holds a dataset of 1 x 1,000 rows; this run needs 2 x 1,000 rows",
    )


def test_tune_refuses_bad_knobs_and_outs_on_a_running_sandbox(
    home: Path, src: Sandbox, tmp_path: Path
) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("someone's\n")
    cases = [
        (["--knob", "nosuch"], "--knob nosuch"),
        (["--knob", "innodb_redo_log_capacity"], "not a knob of MariaDB 10.11"),
        (["--out", str(tmp_path / "full")], "is not empty"),
        (["--resume", "--out", "/nonexistent/x"], "there is no tune study to resume"),
        (["--resume", "--out", str(tmp_path / "full")], "holds no study.db"),
    ]
    for extra, needle in cases:
        refused(home, src, ["tune", "--sandbox", "src", *TUNE, *extra], ExitCode.USAGE, needle)


def test_tune_on_a_stopped_sandbox_leaves_it_stopped(home: Path, src: Sandbox) -> None:
    """A stopped sandbox's dataset is read once it runs: started, refused, stopped again,
    nothing written."""
    src.stop()
    try:
        before = outside_source(home, src)
        r = CliRunner().invoke(cli, ["tune", "--sandbox", "src", *TUNE, *TWO_TABLES])
        assert r.exit_code == ExitCode.USAGE, r.output
        assert "holds a dataset of 1 x 1,000 rows" in r.stderr
        assert not src.is_running()
        assert outside_source(home, src) == before
    finally:
        src.start(timeout_s=120)


def test_accelerate_on_a_sandbox_refuses_a_dataset_mismatch_first(home: Path, src: Sandbox) -> None:
    """Sandbox mode: the sandbox's sbtest holds 1 x 1,000 rows: refused before the sandbox
    is restarted or probed, the hint naming what accelerate's user can do (bench's
    --cleanup as a bench command, not as an option of accelerate)."""
    args = ["accelerate", "--sandbox", "src", "--runs", "1", "--time", "5", "--scale", "0.01"]
    hint = refused(home, src, args, ExitCode.USAGE, "holds a dataset of 1 x 1,000 rows")
    assert "myaccel bench --sandbox src --cleanup" in hint and "--scale" in hint
