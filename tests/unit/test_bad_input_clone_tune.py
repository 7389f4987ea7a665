"""Bad input for ``clone``, ``tune`` and ``accelerate`` (issue 38, items 3 and 5): one
``error:`` line, one ``hint:`` line, the documented exit code, no traceback, and nothing
changed (every file under ``$MYACCEL_HOME``, the inputs, a fake option-file directory and
the working directory hashed before and after).

The cases reuse the environment and helpers of tests/unit/test_bad_input.py (``env``,
``run_cli``, ``assert_clean_error``, ``snapshot``), plus a sandbox ``fake`` (a valid
``state.json`` of a stopped MariaDB 10.11.19 sandbox with no datadir: a command that
started, restarted or probed it before refusing would fail with another exit code, and
its files would change) and tune study directories. None reaches a server: the cases
that need one are in tests/integration/test_bad_input_clone_tune_live.py.

Also here: the parts of the fixes that need no server (the in-memory option file handed
to mariadb-backup, the half-made clone's marker and its removal, the preflight's exit
codes for privileges and disk).
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from test_bad_input import (  # noqa: F401  (env is a fixture)
    DEMO,
    Env,
    assert_clean_error,
    env,
    run_cli,
    snapshot,
)

from myaccel.errors import ExitCode

USAGE, CONN, SANDBOX, IO, DATA = (
    ExitCode.USAGE,
    ExitCode.CONNECTION,
    ExitCode.SANDBOX,
    ExitCode.IO_ERROR,
    ExitCode.DATA_ERROR,
)
NO_SERVER = ["--socket", "/nonexistent/mysqld.sock"]
FAKE = "fake"  # the stopped sandbox without a datadir


def fake_sandbox(home: Path, name: str = FAKE) -> Path:
    """A registered, stopped MariaDB 10.11.19 sandbox with no datadir."""
    sdir = home / "sandboxes" / name
    sdir.mkdir(parents=True)
    version = "/usr/sbin/mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu"
    state = {
        "schema_version": "myaccel.sandbox/1",
        "name": name,
        "flavor": "mariadb",
        "version": "10.11.19",
        "version_string": version,
        "binary": "/usr/sbin/mariadbd",
        "basedir": "/usr",
        "port": 19999,
        "socket": str(sdir / "mysqld.sock"),
        "datadir": str(sdir / "data"),
        "created_at": "2026-11-27T00:00:00+00:00",
        "bench_password": "x",
    }
    (sdir / "state.json").write_text(json.dumps(state))
    os.chmod(sdir / "state.json", 0o600)
    return sdir


def study_dir(d: Path, searched: list[str] | None) -> Path:
    """A tune results directory: facts and rules' plan of the demo, a study.db whose only
    table is Optuna's study attributes (``searched``), or an empty study.db (None)."""
    d.mkdir()
    shutil.copy(DEMO / "facts.json", d / "facts.json")
    shutil.copy(DEMO / "plan.json", d / "rules-plan.json")
    if searched is None:
        (d / "study.db").write_bytes(b"")
        return d
    with sqlite3.connect(d / "study.db") as db:
        db.execute(
            "CREATE TABLE study_user_attributes (study_user_attribute_id INTEGER PRIMARY KEY, "
            "study_id INTEGER, key VARCHAR(512), value_json TEXT)"
        )
        db.execute(
            "INSERT INTO study_user_attributes (study_id, key, value_json) VALUES (1, ?, ?)",
            ("searched", json.dumps(searched)),
        )
    db.close()
    return d


@pytest.fixture
def more(env: Env) -> Env:  # noqa: F811
    fake_sandbox(env.home)
    study_dir(env.inputs / "study", ["innodb_flush_neighbors"])
    study_dir(env.inputs / "study-empty-db", None)
    bad = study_dir(env.inputs / "study-bad-facts", None)
    (bad / "facts.json").write_text('{"schema_version": ')
    nofacts = study_dir(env.inputs / "study-no-facts", None)
    (nofacts / "facts.json").unlink()
    return env


# ------------------------------------------------------------------ the cases

CASES: list[tuple[str, list[str], int, str]] = [
    # (id, argv with {in_} {home} {conf} {fixtures}, exit code, text in the error line)
    # --- clone: the CPUs, the generator's cap, names and numbers, before the source is read
    ("clone-cpus-not-ours", ["clone", "--name", "c", "--cpus", "99"], USAGE, "CPU 99 is not"),
    ("clone-cpus-range-not-ours", ["clone", "--name", "c", "--cpus", "0-64"], USAGE, "--cpus"),
    ("clone-cpus-empty", ["clone", "--name", "c", "--cpus", ""], USAGE, "names no CPU"),
    ("clone-cpus-garbage", ["clone", "--name", "c", "--cpus", "1,x"], USAGE, "--cpus '1,x'"),
    ("clone-cpus-reversed", ["clone", "--name", "c", "--cpus", "1-0"], USAGE, "--cpus '1-0'"),
    (
        "clone-generate-max-without-schema-only",
        ["clone", *NO_SERVER, "--name", "c", "--generate-max", "4M"],
        USAGE,
        "--generate-max",
    ),
    (
        "clone-generate-max-not-a-size",
        ["clone", *NO_SERVER, "--name", "c", "--schema-only", "--generate-max", "12Q"],
        USAGE,
        "--generate-max '12Q'",
    ),
    ("clone-name-dotdot", ["clone", *NO_SERVER, "--name", ".."], USAGE, "invalid"),
    ("clone-name-slash", ["clone", *NO_SERVER, "--name", "x/y"], USAGE, "invalid"),
    (
        "clone-name-taken",  # refused before the source is read (no server there)
        ["clone", *NO_SERVER, "--name", FAKE],
        SANDBOX,
        f"a sandbox named '{FAKE}' already exists",
    ),
    ("clone-port-zero", ["clone", "--name", "c", "--clone-port", "0"], USAGE, "--clone-port"),
    ("clone-port-high", ["clone", "--name", "c", "--clone-port", "70000"], USAGE, "--clone-port"),
    ("clone-timeout-zero", ["clone", "--name", "c", "--timeout", "0"], USAGE, "--timeout"),
    ("clone-nice-negative", ["clone", "--name", "c", "--nice", "-5"], USAGE, "--nice"),
    ("clone-no-server", ["clone", *NO_SERVER, "--name", "c"], CONN, "cannot reach"),
    (
        "clone-defaults-file-missing",
        ["clone", "--defaults-file", "/nonexistent.cnf", "--name", "c"],
        USAGE,
        "does not exist",
    ),
    # --- tune: the results directory, the knobs, a resumed study; before the sandbox
    # ('tune' does not exist: it would be created; 'fake' would be started) is touched
    (
        "tune-resume-out-missing",
        ["tune", "--resume", "--out", "/nonexistent/x"],
        USAGE,
        "there is no tune study to resume",
    ),
    (
        "tune-resume-out-empty",
        ["tune", "--resume", "--out", "{in_}/emptydir"],
        USAGE,
        "holds no study.db",
    ),
    (
        "tune-resume-out-foreign",
        ["tune", "--sandbox", FAKE, "--resume", "--out", "{in_}/nonempty"],
        USAGE,
        "holds no study.db",
    ),
    ("tune-resume-out-file", ["tune", "--resume", "--out", "{in_}/a-file"], USAGE, "is a file"),
    ("tune-out-file", ["tune", "--out", "{in_}/a-file"], USAGE, "is a file"),
    ("tune-out-not-empty", ["tune", "--out", "{in_}/nonempty"], USAGE, "is not empty"),
    (
        "tune-out-not-empty-fake",
        ["tune", "--sandbox", FAKE, "--out", "{in_}/nonempty"],
        USAGE,
        "is not empty",
    ),
    (
        "tune-out-holds-a-study",
        ["tune", "--sandbox", FAKE, "--out", "{in_}/study"],
        USAGE,
        "holds a tune study",
    ),
    ("tune-knob-unknown", ["tune", "--knob", "nosuch"], USAGE, "--knob nosuch: not a knob tune"),
    (
        "tune-knob-unknown-fake",
        ["tune", "--sandbox", FAKE, "--knob", "innodb_io_capacity", "--knob", "nosuch"],
        USAGE,
        "--knob nosuch",
    ),
    (
        "tune-knob-two-unknown",
        ["tune", "--sandbox", FAKE, "--knob", "nosuch", "--knob", "max_connections"],
        USAGE,
        "(and 1 more)",
    ),
    (
        "tune-knob-durability-strict",
        ["tune", "--sandbox", FAKE, "--knob", "innodb_flush_log_at_trx_commit"],
        USAGE,
        "is a durability knob",
    ),
    (
        "tune-knob-process-layer",
        ["tune", "--sandbox", FAKE, "--knob", "cpu_affinity", "--layers", "server,process"],
        USAGE,
        "a parameter of the process layer",
    ),
    (
        "tune-knob-not-on-this-server",
        ["tune", "--sandbox", FAKE, "--knob", "innodb_redo_log_capacity"],
        USAGE,
        "not a knob of MariaDB 10.11",
    ),
    (
        "tune-resume-another-search",
        [
            "tune",
            "--sandbox",
            FAKE,
            "--resume",
            "--out",
            "{in_}/study",
            "--knob",
            "innodb_io_capacity",
        ],
        USAGE,
        "this study searched innodb_flush_neighbors",
    ),
    (
        "tune-resume-damaged-facts",
        ["tune", "--sandbox", FAKE, "--resume", "--out", "{in_}/study-bad-facts"],
        DATA,
        "facts.json",
    ),
    (
        "tune-resume-facts-missing",
        ["tune", "--sandbox", FAKE, "--resume", "--out", "{in_}/study-no-facts"],
        DATA,
        "facts.json",
    ),
    ("tune-minutes-zero", ["tune", "--minutes", "0"], USAGE, "--minutes"),
    ("tune-aa-runs-two", ["tune", "--aa-runs", "2"], USAGE, "--aa-runs"),
    ("tune-screen-runs-zero", ["tune", "--screen-runs", "0"], USAGE, "--screen-runs"),
    ("tune-seed-text", ["tune", "--seed", "x"], USAGE, "--seed"),
    ("tune-basedir-missing", ["tune", "--basedir", "/nonexistent"], USAGE, "--basedir"),
    ("tune-layers-empty", ["tune", "--layers", ""], USAGE, "include server"),
    ("tune-pin-client-not-ours", ["tune", "--pin-client", "99"], USAGE, "--pin-client"),
    ("tune-dataset-unknown", ["tune", "--dataset", "huge"], USAGE, "--dataset"),
    ("tune-create-bad-name", ["tune", "--sandbox", "..", "--create"], USAGE, "invalid"),
    # --- accelerate on an existing server: every option checked before connecting
    (
        "accelerate-out-file",
        ["accelerate", *NO_SERVER, "--out", "{in_}/a-file"],
        USAGE,
        "is a file",
    ),
    (
        "accelerate-out-file-sandbox",
        ["accelerate", "--sandbox", FAKE, "--out", "{in_}/a-file"],
        USAGE,
        "is a file",
    ),
    (
        "accelerate-out-not-empty-fake",
        ["accelerate", "--sandbox", FAKE, "--out", "{in_}/nonempty"],
        USAGE,
        "not empty",
    ),
    (
        "accelerate-existing-basedir",
        ["accelerate", *NO_SERVER, "--basedir", "{in_}/emptydir"],
        USAGE,
        "--basedir",
    ),
    (
        "accelerate-existing-workload-file",
        ["accelerate", *NO_SERVER, "--workload-file", "{in_}/facts.json"],
        USAGE,
        "--workload-file",
    ),
    (
        "accelerate-workload-unknown",
        ["accelerate", *NO_SERVER, "-w", "oltp_nothing"],
        USAGE,
        "oltp_nothing",
    ),
    ("accelerate-warmup-negative", ["accelerate", *NO_SERVER, "--warmup", "-1"], USAGE, "--warmup"),
    (
        "accelerate-workload-and-workload-file",
        ["accelerate", "--sandbox", FAKE, "-w", "rw", "--workload-file", "{in_}/facts.json"],
        USAGE,
        "cannot be combined with --workload",
    ),
    (
        "accelerate-build-dir-without-build",
        ["accelerate", *NO_SERVER, "--build-dir", "{in_}/emptydir"],
        USAGE,
        "--build-dir",
    ),
    (
        "accelerate-swap-without-build",
        ["accelerate", *NO_SERVER, "--swap-binary"],
        USAGE,
        "--swap-binary",
    ),
    (
        "accelerate-train-unknown",
        ["accelerate", *NO_SERVER, "--build", "--train", "nosuch"],
        USAGE,
        "nosuch",
    ),
    ("accelerate-window-one", ["accelerate", *NO_SERVER, "--window", "1"], USAGE, "--window"),
    ("accelerate-settle-huge", ["accelerate", *NO_SERVER, "--settle", "9999"], USAGE, "--settle"),
    ("accelerate-jobs-zero", ["accelerate", *NO_SERVER, "--build", "--jobs", "0"], USAGE, "--jobs"),
    (
        "accelerate-existing-no-server",
        ["accelerate", *NO_SERVER, "-u", "someone", "--restart-command", "/bin/true"],
        CONN,
        "cannot reach",
    ),
]


def _param(i: str, a: list[str], w: int, n: str) -> object:
    return pytest.param(a, w, n, id=i)


@pytest.mark.parametrize(("args", "want", "needle"), [_param(*c) for c in CASES])
def test_bad_input(more: Env, args: list[str], want: int, needle: str) -> None:
    before = snapshot(*more.roots())
    code, out, err = run_cli(more.fmt(args))
    assert_clean_error(code, out, err, want, needle)
    assert snapshot(*more.roots()) == before, "a refused command changed files"


def test_the_battery_covers_clone_tune_and_accelerate() -> None:
    assert len(CASES) >= 30
    assert len({c[0] for c in CASES}) == len(CASES)
    for command in ("clone", "tune", "accelerate"):
        assert sum(1 for c in CASES if c[1][0] == command) >= 10, command


def test_tune_resume_of_a_busy_study_is_refused_before_the_sandbox(more: Env) -> None:
    """Another tune holds the study's lock: refused before the sandbox is restarted under
    it (the lock file is only tested)."""
    import filelock

    out = more.inputs / "study"
    (out / "study.lock").touch()
    lock = filelock.FileLock(str(out / "study.lock"))
    lock.acquire(timeout=0)
    try:
        before = snapshot(*more.roots())
        code, o, err = run_cli(["tune", "--sandbox", FAKE, "--resume", "--out", str(out)])
        assert_clean_error(code, o, err, USAGE, "another tune is running")
        assert snapshot(*more.roots()) == before
    finally:
        lock.release()


# ------------------------------------------------------------------ the parts


def test_cpus_are_checked_against_this_process_affinity() -> None:
    from myaccel.cli.clone import _cpus
    from myaccel.errors import UsageError

    assert _cpus("1", allowed={0, 1}) == [1]
    assert _cpus("0-1", allowed={0, 1}) == [0, 1]
    assert _cpus(None) is None
    with pytest.raises(UsageError, match=r"CPU 2, 3 is not one this process may run on \(0,1\)"):
        _cpus("0-3", allowed={0, 1})
    with pytest.raises(UsageError) as err:
        _cpus("5", allowed={2, 3, 4})
    assert "--cpus 4 or --cpus 3-4" in err.value.hint


def test_secret_option_file_is_read_twice_and_never_on_disk(tmp_path: Path) -> None:
    """The option file mariadb-backup gets: a memfd, mode 0400 (a world-writable option
    file is ignored), readable from the start at every open of /dev/fd/N (the tool reads
    it once per group list), and nowhere on a file system."""
    from myaccel import proc
    from myaccel.clone.copy import secret_option_file

    text = "[mariadb-backup]\npassword=canary-secret-1\n"
    with secret_option_file(text) as fd:
        assert os.fstat(fd).st_mode & 0o777 == 0o400
        assert os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:")
        done = proc.run(
            ["sh", "-c", f"cat /dev/fd/{fd}; cat /dev/fd/{fd}"], pass_fds=(fd,), timeout_s=10
        )
        assert done.ok, done.stderr
        assert done.stdout == text + text
    with pytest.raises(OSError):
        os.fstat(fd)  # closed


@pytest.mark.skipif(shutil.which("my_print_defaults") is None, reason="no my_print_defaults")
@pytest.mark.parametrize(
    "password", ["plain", 'qu"ote', "back\\slash", "hash # x", "single'quote", "tab\tand space"]
)
def test_password_survives_the_option_file(password: str) -> None:
    """The option-file reader of the server's own tools (my_print_defaults, the same code
    as mariadb-backup's) reads back exactly the password myaccel wrote."""
    from myaccel.clone.copy import option_value, secret_option_file

    text = f"[mariadb-backup]\npassword={option_value(password)}\n"
    with secret_option_file(text) as fd:
        done = subprocess.run(
            ["my_print_defaults", f"--defaults-file=/dev/fd/{fd}", "mariadb-backup"],
            pass_fds=(fd,),
            capture_output=True,
            text=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"--password={password}"]


def test_a_clone_left_by_a_killed_process_is_removed(myaccel_home: Path) -> None:
    from myaccel.clone import incomplete

    sdir = fake_sandbox(myaccel_home, "half")
    incomplete.mark(sdir)
    [mine] = incomplete.incomplete_clones(myaccel_home)
    assert mine.alive and mine.pid == os.getpid()  # being made: left alone
    assert incomplete.remove_abandoned(myaccel_home, lambda _m: None) == []
    assert sdir.is_dir()
    doc = json.loads((sdir / incomplete.MARKER).read_text())
    doc["started"] = 1.0  # the pid's start time no longer matches: not the maker
    (sdir / incomplete.MARKER).write_text(json.dumps(doc))
    said: list[str] = []
    assert incomplete.remove_abandoned(myaccel_home, said.append) == ["half"]
    assert not sdir.exists()
    assert said and "left half-made by pid" in said[0]
    complete = fake_sandbox(myaccel_home, "whole")
    incomplete.mark(complete)
    incomplete.unmark(complete)
    assert incomplete.incomplete_clones(myaccel_home) == []


def test_preflight_exit_codes_for_privileges_and_disk(tmp_path: Path) -> None:
    """A missing privilege is the server refusing the work (exit 3); a copy that does not
    fit is a full disk (exit 8), never a silent schema-only fallback; --schema-only asks
    for an empty datadir with the source's redo log only."""
    pf = importlib.import_module("myaccel.clone.preflight")  # the package re-exports a function
    from myaccel.clone.errors import MissingPrivileges, NoDiskForCopy
    from myaccel.clone.source import SourceServer
    from myaccel.server.connection import ConnectParams
    from myaccel.server.flavor import parse_server_version

    version = parse_server_version("10.11.19-MariaDB", "")
    assert version is not None
    datadir = tmp_path / "data"
    datadir.mkdir()
    src = SourceServer(
        params=ConnectParams(host=None, port=3306, socket="/s", user="bk", password=None),
        version=version,
        variables={"datadir": str(datadir), "innodb_log_file_size": str(96 << 20)},
        pid=os.getpid(),
        data_bytes=1 << 60,  # an exabyte of data: no disk holds a copy
    )
    from unittest import mock

    with mock.patch.object(pf, "check_privileges", return_value=["RELOAD"]):
        pre = pf.preflight(src, purpose="clone", target=tmp_path)
    with pytest.raises(MissingPrivileges) as err:
        pre.require()
    assert err.value.exit_code == ExitCode.CONNECTION and "GRANT RELOAD" in err.value.hint
    with mock.patch.object(pf, "check_privileges", return_value=[]):
        pre = pf.preflight(src, purpose="clone", target=tmp_path)
        with pytest.raises(NoDiskForCopy) as disk:
            pre.require()
        assert disk.value.exit_code == ExitCode.IO_ERROR and "--schema-only" in disk.value.hint
        pre = pf.preflight(src, purpose="clone", target=tmp_path, schema_only=True)
        pre.require()  # the copy is not made: an empty datadir fits
        assert pre.disk is not None and pre.disk.need_bytes == (96 << 20) + pf.COPY_MARGIN_BYTES
        pre = pf.preflight(src, purpose="clone", target=tmp_path, disk_hint="elsewhere")
        with pytest.raises(NoDiskForCopy, match="not enough disk") as disk:
            pre.require()
        assert disk.value.hint == "elsewhere"


def test_the_preflight_s_privilege_refusal_is_documented_with_its_code() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "safety.md").read_text()
    row = next(line for line in doc.splitlines() if line.startswith("| 3 |"))
    assert "privilege" in row
