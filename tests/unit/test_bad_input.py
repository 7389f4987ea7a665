"""Bad input, every command: one ``error:`` line, one ``hint:`` line, a documented exit
code (``myaccel.errors.ExitCode``), no traceback, and nothing changed.

Each case runs the CLI in-process (click's CliRunner, exceptions not caught by the runner:
the error boundary must catch them) and hashes every file under ``$MYACCEL_HOME``, a fake
server option-file directory, the input files and the working directory before and after.
No case reaches a server: the ones that need one are in
tests/integration/test_bad_input_live.py.
"""

from __future__ import annotations

import ast
import errno
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from myaccel.actions.journal import canonical_checksum
from myaccel.cli.main import COMMANDS, cli
from myaccel.errors import ExitCode, Interrupted, MyaccelError
from myaccel.model import FACTS_SCHEMA

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DEMO = FIXTURES / "report" / "accelerate-demo"
JOURNAL = FIXTURES / "report" / "journal" / "00001-20261122T050802Z.json"
THIS_VM = FIXTURES / "sysroots" / "this-vm"

USAGE, CONN, SANDBOX, APPLY, IO, DATA = (
    ExitCode.USAGE,
    ExitCode.CONNECTION,
    ExitCode.SANDBOX,
    ExitCode.APPLY_FAILED,
    ExitCode.IO_ERROR,
    ExitCode.DATA_ERROR,
)
NO_SERVER = ["--socket", "/nonexistent/mysqld.sock"]


# ------------------------------------------------------------------ the environment


def _write_json(path: Path, doc: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def make_inputs(d: Path) -> None:
    """The input files the cases name with ``{in}``."""
    d.mkdir()
    shutil.copy(DEMO / "facts.json", d / "facts.json")
    shutil.copy(DEMO / "plan.json", d / "plan.json")
    shutil.copytree(DEMO / "ab", d / "ab")
    plan = json.loads((DEMO / "plan.json").read_text())
    (d / "notjson.json").write_text("{not json")
    (d / "empty.json").write_text("")
    _write_json(d / "list.json", [1, 2])
    _write_json(d / "plan-schema-only.json", {"schema_version": "myaccel.plan/1"})
    _write_json(d / "plan-v9.json", {**plan, "schema_version": "myaccel.plan/9"})
    bad = json.loads(json.dumps(plan))
    bad["recommendations"][0]["proposed"] = {"value": 1}
    _write_json(d / "plan-proposed-object.json", bad)
    _write_json(d / "plan-recs-object.json", {**plan, "recommendations": {"a": 1}})
    bad = json.loads(json.dumps(plan))
    bad["recommendations"][0]["layer"] = "firmware"
    _write_json(d / "plan-bad-layer.json", bad)
    _write_json(d / "plan-no-digest.json", {k: v for k, v in plan.items() if k != "facts_digest"})
    _write_json(d / "facts-schema-only.json", {"schema_version": FACTS_SCHEMA})
    _write_json(d / "run-missing" / "run-001.json", {"schema_version": "myaccel.run/1"})
    (d / "run-notjson").mkdir()
    (d / "run-notjson" / "run-001.json").write_text('{"schema_version": ')
    _write_json(d / "run-otherschema.json", {"schema_version": "myaccel.thing/1"})
    runs = sorted((DEMO / "ab").glob("run-*.json"))
    (d / "baseline-only").mkdir()
    (d / "other-dataset").mkdir()
    for f in runs:
        doc = json.loads(f.read_text())
        if doc["arm"] == "baseline":
            shutil.copy(f, d / "baseline-only" / f.name)
        else:
            doc["dataset"]["table_size"] = 12345
            _write_json(d / "other-dataset" / f.name, doc)
    (d / "nonempty").mkdir()
    (d / "nonempty" / "notes.txt").write_text("someone's files\n")
    (d / "emptydir").mkdir()
    (d / "fleet" / "hosts" / "db1").mkdir(parents=True)
    (d / "fleet" / "hosts" / "db1" / "probe.json").write_text("{not json")
    (d / "a-file").write_text("not a directory\n")
    (d / "script.sh").write_text("#!/bin/sh\necho hi\n")
    (d / "bad.cnf").write_text("[mysqld]\ninnodb_buffer_pool_size = 1G\n")


def make_home(home: Path) -> None:
    """$MYACCEL_HOME with a results directory and an applied journal whose server record
    (journals/servers/<id>.json) is damaged."""
    shutil.copytree(DEMO, home / "results" / "demo")
    doc = json.loads(JOURNAL.read_text())
    doc["status"] = "applied"
    doc["checksum"] = canonical_checksum(doc)
    jdir = home / "journals"
    _write_json(jdir / JOURNAL.name, doc)
    (jdir / "servers").mkdir()
    (jdir / "servers" / JOURNAL.name).write_text('{"kind": "sandbox", "sandbox": ')


def make_conf(conf: Path) -> None:
    """A fake server option-file directory: must never be touched by a refused command."""
    (conf / "conf.d").mkdir(parents=True)
    (conf / "my.cnf").write_text("[mysqld]\n!includedir " + str(conf / "conf.d") + "\n")
    (conf / "conf.d" / "50-server.cnf").write_text("[mysqld]\nmax_connections = 50\n")


def snapshot(*roots: Path) -> dict[str, str]:
    """Path -> sha256 (files), 'dir' or 'link -> target' for everything under ``roots``."""
    out: dict[str, str] = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames:
                p = Path(dirpath) / name
                out[str(p)] = f"link -> {os.readlink(p)}" if p.is_symlink() else "dir"
            for name in filenames:
                p = Path(dirpath) / name
                if p.is_symlink():
                    out[str(p)] = f"link -> {os.readlink(p)}"
                else:
                    out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


class Env:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.conf = root / "conf"
        self.inputs = root / "in"
        self.cwd = root / "cwd"

    def roots(self) -> tuple[Path, ...]:
        return (self.home, self.conf, self.inputs, self.cwd)

    def fmt(self, args: list[str]) -> list[str]:
        return [
            a.format(in_=self.inputs, home=self.home, conf=self.conf, fixtures=FIXTURES)
            for a in args
        ]


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    e = Env(tmp_path)
    e.home.mkdir()
    make_home(e.home)
    make_conf(e.conf)
    make_inputs(e.inputs)
    e.cwd.mkdir()
    userhome = tmp_path / "user"
    userhome.mkdir()
    monkeypatch.setenv("MYACCEL_HOME", str(e.home))
    monkeypatch.setenv("HOME", str(userhome))  # no ~/.my.cnf of the machine
    monkeypatch.delenv("MYSQL_PWD", raising=False)
    monkeypatch.delenv("MYSQL_UNIX_PORT", raising=False)
    monkeypatch.delenv("MYSQL_TCP_PORT", raising=False)
    monkeypatch.chdir(e.cwd)
    yield e


def run_cli(args: list[str]) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, args, catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def assert_clean_error(code: int, out: str, err: str, want: int, needle: str) -> str:
    assert "Traceback" not in out + err, err
    lines = err.splitlines()
    errors = [line for line in lines if line.startswith("error:")]
    hints = [line for line in lines if line.startswith("hint:")]
    assert len(errors) == 1, err
    assert len(hints) == 1, err
    assert len(hints[0]) > len("hint: ") + 3, err
    assert code == want, f"exit {code}, expected {int(want)}: {err}"
    assert needle in errors[0], errors[0]
    return errors[0]


# ------------------------------------------------------------------ the cases

CASES: list[tuple[str, list[str], int, str]] = [
    # (id, argv with {in_} {home} {conf}, exit code, text in the error line)
    # --- the group itself
    ("no-such-command", ["frobnicate"], USAGE, "No such command"),
    ("top-bad-option", ["--frobnicate"], USAGE, "No such option"),
    # --- probe
    ("probe-sysroot-missing", ["probe", "--sysroot", "/nonexistent"], USAGE, "does not exist"),
    ("probe-sysroot-file", ["probe", "--sysroot", "{in_}/a-file"], USAGE, "sysroot"),
    (
        "probe-capture-with-sysroot",
        ["probe", "--sysroot", str(THIS_VM), "--capture", "{in_}/cap"],
        USAGE,
        "--capture",
    ),
    ("probe-port-zero", ["probe", "--port", "0"], USAGE, "--port"),
    ("probe-port-huge", ["probe", "--port", "70000"], USAGE, "--port"),
    ("probe-port-text", ["probe", "-P", "abc"], USAGE, "--port"),
    ("probe-bad-option", ["probe", "--frobnicate"], USAGE, "No such option"),
    ("probe-no-server-socket", ["probe", *NO_SERVER, "--no-binary"], CONN, "cannot reach"),
    (
        "probe-binary-missing",
        ["probe", "--no-server", "--binary", "/nonexistent/mariadbd"],
        USAGE,
        "does not exist",
    ),
    (
        "probe-binary-not-elf",
        ["probe", "--no-server", "--sysroot", str(THIS_VM), "--binary", "{in_}/script.sh"],
        USAGE,
        "ELF",
    ),
    (
        "probe-out-in-missing-dir",
        ["probe", "--no-server", "--sysroot", str(THIS_VM), "--out", "/nonexistent/f.json"],
        IO,
        "/nonexistent/f.json",
    ),
    ("probe-sandbox-missing", ["probe", "--sandbox", "nosuch"], SANDBOX, "nosuch"),
    # --- plan
    ("plan-facts-missing", ["plan", "--facts", "/nonexistent.json"], USAGE, "does not exist"),
    ("plan-facts-notjson", ["plan", "--facts", "{in_}/notjson.json"], USAGE, "not readable JSON"),
    ("plan-facts-empty", ["plan", "--facts", "{in_}/empty.json"], USAGE, "not readable JSON"),
    ("plan-facts-is-plan", ["plan", "--facts", "{in_}/plan.json"], USAGE, "schema"),
    ("plan-facts-list", ["plan", "--facts", "{in_}/list.json"], USAGE, "schema"),
    (
        "plan-facts-fields-missing",
        ["plan", "--facts", "{in_}/facts-schema-only.json"],
        USAGE,
        "does not match",
    ),
    ("plan-threads-zero", ["plan", "--facts", "{in_}/facts.json", "--threads", "0"], USAGE, ""),
    ("plan-threads-text", ["plan", "--threads", "many"], USAGE, "--threads"),
    ("plan-durability-bad", ["plan", "--durability", "lax"], USAGE, "--durability"),
    (
        "plan-profile-missing",
        ["plan", "--facts", "{in_}/facts.json", "--profile", "/nonexistent.json"],
        USAGE,
        "does not exist",
    ),
    (
        "plan-out-in-missing-dir",
        ["plan", "--facts", "{in_}/facts.json", "--out", "/nonexistent/plan.json"],
        IO,
        "/nonexistent/plan.json",
    ),
    ("plan-no-server", ["plan", *NO_SERVER], CONN, "cannot reach"),
    # --- explain
    ("explain-no-such-rule", ["explain", "no-such-rule"], USAGE, "no rule"),
    ("explain-bad-option", ["explain", "--frobnicate"], USAGE, "No such option"),
    # --- apply
    ("apply-no-plan-arg", ["apply"], USAGE, "PLAN"),
    ("apply-plan-missing", ["apply", "/nonexistent.json"], USAGE, "does not exist"),
    ("apply-plan-notjson", ["apply", "{in_}/notjson.json"], USAGE, "not readable JSON"),
    ("apply-plan-empty", ["apply", "{in_}/empty.json"], USAGE, "not readable JSON"),
    ("apply-plan-list", ["apply", "{in_}/list.json"], USAGE, "schema"),
    ("apply-plan-is-facts", ["apply", "{in_}/facts.json"], USAGE, "schema"),
    ("apply-plan-other-version", ["apply", "{in_}/plan-v9.json"], USAGE, "myaccel.plan/9"),
    (
        "apply-plan-schema-only",
        ["apply", "{in_}/plan-schema-only.json"],
        USAGE,
        "field 'created_at'",
    ),
    (
        "apply-plan-proposed-object",
        ["apply", "{in_}/plan-proposed-object.json"],
        USAGE,
        "recommendations.0.proposed",
    ),
    ("apply-plan-recs-object", ["apply", "{in_}/plan-recs-object.json"], USAGE, "recommendations"),
    (
        "apply-plan-bad-layer",
        ["apply", "{in_}/plan-bad-layer.json"],
        USAGE,
        "recommendations.0.layer",
    ),
    ("apply-plan-no-digest", ["apply", "{in_}/plan-no-digest.json"], USAGE, "facts_digest"),
    ("apply-port-zero", ["apply", "{in_}/plan.json", "--port", "0"], USAGE, "--port"),
    ("apply-sandbox-missing", ["apply", "{in_}/plan.json", "--sandbox", "nosuch"], SANDBOX, ""),
    (
        "apply-sandbox-bad-name",
        ["apply", "{in_}/plan.json", "--sandbox", "../etc"],
        USAGE,
        "invalid sandbox name",
    ),
    (
        "apply-no-server",
        ["apply", "{in_}/plan.json", *NO_SERVER, "--conf-dir", "{conf}/conf.d", "--yes"],
        CONN,
        "cannot reach",
    ),
    # --- rollback and verify
    ("rollback-journal-missing", ["rollback", "--journal", "/nonexistent.json"], APPLY, ""),
    ("rollback-journal-notjson", ["rollback", "--journal", "{in_}/notjson.json"], DATA, "JSON"),
    ("rollback-journal-is-plan", ["rollback", "--journal", "{in_}/plan.json"], DATA, "schema"),
    ("rollback-journal-list", ["rollback", "--journal", "{in_}/list.json"], DATA, ""),
    ("rollback-bad-option", ["rollback", "--frobnicate"], USAGE, "No such option"),
    ("rollback-damaged-server-record", ["rollback"], DATA, ""),
    ("verify-journal-missing", ["verify", "--journal", "/nonexistent.json"], APPLY, ""),
    ("verify-journal-notjson", ["verify", "--journal", "{in_}/notjson.json"], DATA, "JSON"),
    ("verify-damaged-server-record", ["verify"], DATA, ""),
    # --- bench (all refused before sysbench or a server is touched)
    ("bench-time-overflow", ["bench", "--time", "99999999999"], USAGE, "--time"),
    ("bench-time-zero", ["bench", "--time", "0"], USAGE, "--time"),
    ("bench-time-text", ["bench", "--time", "long"], USAGE, "--time"),
    ("bench-warmup-negative", ["bench", "--warmup", "-1"], USAGE, "--warmup"),
    ("bench-tables-zero", ["bench", "--tables", "0"], USAGE, "--tables"),
    ("bench-table-size-huge", ["bench", "--table-size", "99999999999"], USAGE, "--table-size"),
    ("bench-runs-zero", ["bench", "--runs", "0"], USAGE, "--runs"),
    ("bench-scale-five", ["bench", "--scale", "5"], USAGE, "--scale"),
    ("bench-scale-zero", ["bench", "--scale", "0"], USAGE, "--scale"),
    ("bench-scale-nan", ["bench", "--scale", "nan"], USAGE, "--scale"),
    ("bench-seed-negative", ["bench", "--seed", "-1"], USAGE, "--seed"),
    ("bench-report-interval-zero", ["bench", "--report-interval", "0"], USAGE, "--report-interval"),
    ("bench-percentile-zero", ["bench", "--percentile", "0"], USAGE, "--percentile"),
    ("bench-threads-zero", ["bench", "--threads", "0"], USAGE, "--threads"),
    ("bench-threads-text", ["bench", "--threads", "a,b"], USAGE, "--threads"),
    ("bench-threads-huge", ["bench", "--threads", "1,99999999999"], USAGE, "--threads"),
    ("bench-pin-client-absent-cpu", ["bench", "--pin-client", "99"], USAGE, "CPU 99"),
    ("bench-pin-client-text", ["bench", "--pin-client", "abc"], USAGE, "not a CPU list"),
    ("bench-pin-client-reversed", ["bench", "--pin-client", "1-0"], USAGE, "not a CPU list"),
    ("bench-pin-client-open", ["bench", "--pin-client", "0-"], USAGE, "not a CPU list"),
    ("bench-profile-missing", ["bench", "--profile", "nosuch"], USAGE, "nosuch"),
    ("bench-workload-unknown", ["bench", "-w", "oltp_nothing"], USAGE, "oltp_nothing"),
    ("bench-lua-missing", ["bench", "-w", "/nonexistent/x.lua"], USAGE, "does not exist"),
    ("bench-dataset-bad", ["bench", "--dataset", "huge"], USAGE, "--dataset"),
    ("bench-ps-mode-bad", ["bench", "--ps-mode", "sometimes"], USAGE, "--ps-mode"),
    ("bench-port-zero", ["bench", "--port", "0"], USAGE, "--port"),
    ("bench-sandbox-missing", ["bench", "--sandbox", "nosuch"], SANDBOX, "nosuch"),
    ("bench-no-server", ["bench", *NO_SERVER], CONN, "cannot reach"),
    ("bench-out-is-file", ["bench", "--out", "{in_}/a-file"], USAGE, "--out"),
    # --- ab
    ("tune-sandbox-typo", ["tune", "--sandbox", "nosuch"], USAGE, "no sandbox named 'nosuch'"),
    ("tune-trials-zero", ["tune", "--trials", "0"], USAGE, "--trials"),
    ("tune-final-runs-four", ["tune", "--final-runs", "4"], USAGE, "--final-runs"),
    ("tune-durability-bad", ["tune", "--durability", "none"], USAGE, "--durability"),
    ("tune-resume-without-out", ["tune", "--resume"], USAGE, "--resume needs --out"),
    ("tune-layers-without-server", ["tune", "--layers", "process"], USAGE, "include server"),
    ("tune-layer-unknown", ["tune", "--layers", "server,gpu"], USAGE, "unknown layer(s) gpu"),
    ("ab-sandbox-typo", ["ab", "--sandbox", "nosuch"], USAGE, "no sandbox named 'nosuch'"),
    ("ab-sandbox-bad-name", ["ab", "--sandbox", "a/b"], USAGE, "invalid sandbox name"),
    ("ab-runs-zero", ["ab", "--runs", "0"], USAGE, "--runs"),
    ("ab-scale-five", ["ab", "--scale", "5"], USAGE, "--scale"),
    ("ab-time-overflow", ["ab", "--time", "99999999999"], USAGE, "--time"),
    ("ab-threads-zero", ["ab", "--threads", "0"], USAGE, "--threads"),
    ("ab-candidate-missing", ["ab", "--candidate", "/nonexistent.cnf"], USAGE, "does not exist"),
    (
        "ab-basedir-missing",
        ["ab", "--candidate-basedir", "/nonexistent"],
        USAGE,
        "not a directory",
    ),
    ("ab-set-malformed", ["ab", "--candidate-set", "novalue"], USAGE, "novalue"),
    ("ab-pin-client-absent-cpu", ["ab", "--pin-client", "99"], USAGE, "CPU 99"),
    ("ab-out-not-empty", ["ab", "--out", "{in_}/nonempty"], USAGE, "not empty"),
    ("ab-out-holds-a-campaign", ["ab", "--out", "{in_}/ab"], USAGE, "cannot be extended"),
    # --- compare
    ("compare-missing", ["compare", "/nonexistent"], USAGE, "does not exist"),
    ("compare-empty-dir", ["compare", "{in_}/emptydir"], USAGE, "no runs"),
    (
        "compare-run-missing-fields",
        ["compare", "{in_}/run-missing"],
        USAGE,
        "does not match myaccel.run/1: field 'run_id'",
    ),
    ("compare-run-notjson", ["compare", "{in_}/run-notjson"], USAGE, "not readable JSON"),
    ("compare-run-other-schema", ["compare", "{in_}/run-otherschema.json"], USAGE, "schema"),
    ("compare-one-arm-only", ["compare", "{in_}/baseline-only"], USAGE, "two arms"),
    (
        "compare-other-dataset",
        ["compare", "{in_}/baseline-only", "{in_}/other-dataset"],
        USAGE,
        "different datasets",
    ),
    (
        "compare-second-missing",
        ["compare", "{in_}/baseline-only", "/nonexistent"],
        USAGE,
        "does not exist",
    ),
    ("compare-out-is-file", ["compare", "{in_}/ab", "--out", "{in_}/a-file"], USAGE, "--out"),
    # --- accelerate
    ("accelerate-sandbox-typo", ["accelerate", "--sandbox", "nosuch"], USAGE, "'nosuch'"),
    ("accelerate-sandbox-bad-name", ["accelerate", "--sandbox", ".."], USAGE, "invalid"),
    ("accelerate-scale-five", ["accelerate", "--scale", "5"], USAGE, "--scale"),
    ("accelerate-runs-zero", ["accelerate", "--runs", "0"], USAGE, "--runs"),
    ("accelerate-budget-alone", ["accelerate", "--budget", "5"], USAGE, "--target"),
    ("accelerate-target-build", ["accelerate", "--target", "5", "--build"], USAGE, "three"),
    ("accelerate-target-zero", ["accelerate", "--target", "0"], USAGE, "--target"),
    (
        "accelerate-versions-instructions",
        ["accelerate", "--versions", "--instructions"],
        USAGE,
        "--instructions",
    ),
    ("accelerate-time-overflow", ["accelerate", "--time", "99999999999"], USAGE, "--time"),
    ("accelerate-profile-missing", ["accelerate", "--profile", "nosuch"], USAGE, "nosuch"),
    ("accelerate-durability-bad", ["accelerate", "--durability", "lax"], USAGE, "--durability"),
    ("accelerate-out-not-empty", ["accelerate", "--out", "{in_}/nonempty"], USAGE, "not empty"),
    ("accelerate-no-server", ["accelerate", *NO_SERVER], CONN, "cannot reach"),
    # --- fleet-report
    ("fleet-report-no-args", ["fleet-report"], USAGE, "FLEET_DIR"),
    ("doctor-unknown-command", ["doctor", "nosuch"], USAGE, "doctor knows no command"),
    ("fleet-report-no-hosts", ["fleet-report", "{in_}/emptydir"], USAGE, "no hosts/"),
    ("fleet-report-damaged", ["fleet-report", "{in_}/fleet"], DATA, "cannot read"),
    # --- report
    ("report-no-args", ["report"], USAGE, "RUN_DIRS"),
    ("report-missing", ["report", "/nonexistent"], USAGE, ""),
    ("report-empty-dir", ["report", "{in_}/emptydir"], USAGE, "no myaccel artifacts"),
    ("report-notjson", ["report", "{in_}/notjson.json"], USAGE, ""),
    ("report-other-schema", ["report", "{in_}/run-otherschema.json"], USAGE, ""),
    ("report-out-is-file", ["report", "{in_}/ab", "--out", "{in_}/a-file"], USAGE, "--out"),
    # --- sandbox
    ("clone-no-name", ["clone", "--sandbox", "nosuch"], USAGE, "--name"),
    ("clone-bad-name", ["clone", "--sandbox", "nosuch", "--name", "a/b"], USAGE, "invalid"),
    ("clone-source-missing", ["clone", "--sandbox", "nosuch", "--name", "c"], SANDBOX, "nosuch"),
    ("clone-bad-cpus", ["clone", "--name", "c", "--cpus", "x-"], USAGE, "--cpus"),
    ("clone-nice-range", ["clone", "--name", "c", "--nice", "99"], USAGE, "--nice"),
    ("sandbox-bad-subcommand", ["sandbox", "frobnicate"], USAGE, "No such command"),
    ("sandbox-start-missing", ["sandbox", "start", "nosuch"], SANDBOX, "nosuch"),
    ("sandbox-stop-missing", ["sandbox", "stop", "nosuch"], SANDBOX, "nosuch"),
    ("sandbox-status-missing", ["sandbox", "status", "nosuch"], SANDBOX, "nosuch"),
    ("sandbox-destroy-missing", ["sandbox", "destroy", "nosuch", "--yes"], SANDBOX, "nosuch"),
    ("sandbox-init-bad-name", ["sandbox", "init", "a/b"], USAGE, "invalid sandbox name"),
    ("sandbox-init-port-zero", ["sandbox", "init", "x", "--port", "0"], USAGE, "--port"),
    ("sandbox-init-timeout-zero", ["sandbox", "init", "x", "--timeout", "0"], USAGE, "--timeout"),
    ("sandbox-stop-timeout-text", ["sandbox", "stop", "--timeout", "soon"], USAGE, "--timeout"),
    ("sandbox-start-set-malformed", ["sandbox", "start", "x", "--set", "novalue"], USAGE, ""),
    ("sandbox-snapshot-save-missing", ["sandbox", "snapshot", "save", "nosuch", "s"], SANDBOX, ""),
    ("sandbox-snapshot-list-missing", ["sandbox", "snapshot", "list", "nosuch"], SANDBOX, ""),
    ("sandbox-snapshot-no-args", ["sandbox", "snapshot", "restore"], USAGE, "NAME"),
    # --- profile and diagnose
    ("profile-no-target", ["profile"], USAGE, "no server to profile"),
    ("profile-pid-zero", ["profile", "--pid", "0"], USAGE, "--pid"),
    ("profile-pid-huge", ["profile", "--pid", "99999999999"], USAGE, "--pid"),
    ("profile-duration-zero", ["profile", "--pid", "1", "--duration", "0"], USAGE, "--duration"),
    ("profile-frequency-zero", ["profile", "--pid", "1", "--frequency", "0"], USAGE, "--frequency"),
    ("profile-top-zero", ["profile", "--pid", "1", "--top", "0"], USAGE, "--top"),
    ("profile-call-graph-bad", ["profile", "--call-graph", "lbr"], USAGE, "--call-graph"),
    ("profile-threads-zero", ["profile", "--pid", "1", "--threads", "0"], USAGE, "--threads"),
    ("diagnose-missing", ["diagnose", "/nonexistent.json"], USAGE, ""),
    ("diagnose-notjson", ["diagnose", "{in_}/notjson.json"], USAGE, ""),
    ("diagnose-other-schema", ["diagnose", "{in_}/plan.json"], USAGE, "schema"),
    # --- capture, and the replay of a workload file
    ("capture-duration-zero", ["capture", "--duration", "0"], USAGE, "--duration"),
    ("capture-check-missing", ["capture", "--check", "/nonexistent.json"], USAGE, "--check"),
    ("capture-sandbox-missing", ["capture", "--sandbox", "nosuch"], SANDBOX, "nosuch"),
    ("capture-source-bad", ["capture", "--source", "slowlog"], USAGE, "--source"),
    (
        "bench-workload-file-missing",
        ["bench", "--workload-file", "/nonexistent.json"],
        USAGE,
        "workload",
    ),
    (
        "ab-workload-file-notjson",
        ["ab", "--workload-file", "{in_}/notjson.json"],
        USAGE,
        "",
    ),
    # --- build and verify-build
    ("build-no-source", ["build"], USAGE, "--source"),
    ("build-source-missing", ["build", "--source", "/nonexistent"], USAGE, ""),
    ("build-source-not-cmake", ["build", "--source", "{in_}/emptydir"], USAGE, "CMake"),
    ("build-jobs-zero", ["build", "--source", "{in_}/emptydir", "--jobs", "0"], USAGE, "--jobs"),
    ("build-cacheline-bad", ["build", "--source", "x", "--cacheline-bytes", "7"], USAGE, ""),
    ("build-atomics-bad", ["build", "--source", "x", "--atomics", "magic"], USAGE, "--atomics"),
    (
        "build-target-cpu-of-another-arch",  # an aarch64 core for an x86 build: the compiler says
        ["build", "--source", "{fixtures}/buildproj", "--target-cpu", "tsv110"],
        USAGE,
        "--target-cpu tsv110 is not valid for x86_64",
    ),
    (
        "build-target-cpu-unknown-dry-run-json",
        [
            "build",
            "--source",
            "{fixtures}/buildproj",
            "--target-cpu",
            "nosuchcpu",
            "--dry-run",
            "--json",
        ],
        USAGE,
        "--target-cpu nosuchcpu is not valid",
    ),
    ("build-basedir-without-installed", ["build", "--basedir", "/usr"], USAGE, "--from-installed"),
    ("build-fetch-only-alone", ["build", "--fetch-only"], USAGE, "--from-installed"),
    ("verify-build-missing", ["verify-build", "/nonexistent/mariadbd"], USAGE, ""),
    ("verify-build-not-elf", ["verify-build", "{in_}/script.sh"], USAGE, "ELF"),
    (
        "verify-build-manifest-notjson",
        ["verify-build", "/bin/true", "--manifest", "{in_}/notjson.json"],
        USAGE,
        "",
    ),
]


def _param(i: str, a: list[str], w: int, n: str) -> object:
    return pytest.param(a, w, n, id=i)


@pytest.mark.parametrize(("args", "want", "needle"), [_param(*c) for c in CASES])
def test_bad_input(env: Env, args: list[str], want: int, needle: str) -> None:
    before = snapshot(*env.roots())
    code, out, err = run_cli(env.fmt(args))
    assert_clean_error(code, out, err, want, needle)
    assert snapshot(*env.roots()) == before, "a refused command changed files"


def test_the_battery_covers_every_command() -> None:
    assert len(CASES) >= 80
    assert len({c[0] for c in CASES}) == len(CASES)
    firsts = {c[1][0] for c in CASES}
    assert set(COMMANDS) <= firsts, set(COMMANDS) - firsts


def test_every_error_class_has_a_documented_exit_code() -> None:
    import myaccel.actions.errors
    import myaccel.builder.errors
    import myaccel.knobs.catalog
    import myaccel.profile.perfstat  # noqa: F401

    def subclasses(c: type) -> list[type]:
        return [c, *(s for sub in c.__subclasses__() for s in subclasses(sub))]

    classes = subclasses(MyaccelError)
    assert len(classes) > 20
    for c in classes:
        assert isinstance(c.exit_code, ExitCode), c
    doc = (Path(__file__).resolve().parents[2] / "docs" / "safety.md").read_text()
    for member in ExitCode:
        assert f"| {int(member)} |" in doc, f"exit code {member!r} not documented"


def test_debug_shows_the_traceback(env: Env) -> None:
    with pytest.raises(MyaccelError):
        CliRunner().invoke(cli, ["--debug", "apply", "/nonexistent.json"], catch_exceptions=False)


def test_an_unexpected_exception_is_one_line(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    import myaccel.facts.load as facts_load  # `myaccel plan` imports it when it runs

    def boom(*_a: object, **_k: object) -> None:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(facts_load, "load_facts", boom)
    code, out, err = run_cli(["plan", "--facts", str(env.inputs / "facts.json")])
    line = assert_clean_error(code, out, err, ExitCode.INTERNAL, "internal error")
    assert "ZeroDivisionError" in line and "--debug" in err


@pytest.mark.parametrize(
    ("exc", "want", "needle"),
    [
        pytest.param(KeyboardInterrupt(), ExitCode.INTERRUPTED, "interrupted", id="sigint"),
        pytest.param(
            Interrupted(signal.SIGTERM), ExitCode.TERMINATED, "interrupted by SIGTERM", id="sigterm"
        ),
        pytest.param(
            OSError(errno.EACCES, "Permission denied", "/etc/x"),
            ExitCode.IO_ERROR,
            "'/etc/x'",
            id="eacces",
        ),
        pytest.param(
            OSError(errno.ENOSPC, "No space left on device"),
            ExitCode.IO_ERROR,
            "MYACCEL_HOME",
            id="enospc-no-filename",
        ),
        pytest.param(
            json.JSONDecodeError("Expecting value", "{", 1), ExitCode.DATA_ERROR, "JSON", id="json"
        ),
    ],
)
def test_exceptions_escaping_a_command_are_one_line(
    env: Env, monkeypatch: pytest.MonkeyPatch, exc: BaseException, want: int, needle: str
) -> None:
    import myaccel.facts.load as facts_load  # `myaccel plan` imports it when it runs

    def raise_it(*_a: object, **_k: object) -> None:
        raise exc

    monkeypatch.setattr(facts_load, "load_facts", raise_it)
    code, out, err = run_cli(["plan", "--facts", str(env.inputs / "facts.json")])
    assert_clean_error(code, out, err, want, needle)


def test_a_group_without_its_subcommand_prints_its_help(env: Env) -> None:
    code, _, err = run_cli(["sandbox"])
    assert code == ExitCode.USAGE and err.startswith("Usage: ") and "error:" not in err


def _hint_texts() -> list[tuple[str, int, str]]:
    """Every string constant in a ``hint=`` argument in src/ (f-string parts included)."""
    out: list[tuple[str, int, str]] = []
    for f in sorted((Path(__file__).resolve().parents[2] / "src" / "myaccel").rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "hint":
                for c in ast.walk(node.value):
                    if isinstance(c, ast.Constant) and isinstance(c.value, str):
                        out.append((f.name, c.lineno, c.value))
    return out


def test_hints_name_only_commands_and_options_that_exist() -> None:
    """`myaccel CMD [SUB] --opt` in a hint must be a real command and option of that
    command; a bare `--opt` must be an option of some myaccel command or of a tool the
    hint names."""
    ctx = click.Context(cli)
    options: dict[str, set[str]] = {}
    every: set[str] = {"--help", "--debug", "--version"}

    def walk(cmd: click.Command, path: str) -> None:
        names = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}
        options[path] = names
        every.update(n for n in names if n.startswith("--"))
        if isinstance(cmd, click.Group):
            for sub in cmd.list_commands(ctx):
                sc = cmd.get_command(ctx, sub)
                assert sc is not None
                walk(sc, f"{path} {sub}")

    for name in COMMANDS:
        c = cli.get_command(ctx, name)
        assert c is not None
        walk(c, name)
    hints = _hint_texts()
    assert len(hints) > 100
    bad = []
    for fname, line, text in hints:
        for m in re.finditer(r"\bmyaccel ([a-z][a-z-]*)((?: [a-z][a-z-]*)?)([^`;,)]*)", text):
            cmd = m.group(1)
            if cmd not in COMMANDS:
                continue  # prose ("myaccel never edits ...")
            path = f"{cmd}{m.group(2)}" if f"{cmd}{m.group(2)}" in options else cmd
            for opt in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", m.group(3)):
                if opt not in options[path]:
                    bad.append(f"{fname}:{line}: `myaccel {path}` has no {opt}: {text!r}")
        for cmd in re.findall(r"`myaccel ([a-z][a-z-]*)", text):
            if cmd not in COMMANDS:
                bad.append(f"{fname}:{line}: no command `myaccel {cmd}`: {text!r}")
        tools = ("cmake", "mysqld", "valgrind", "perf", "-Wl", "sysbench", "mariadb")
        for opt in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", text):
            if opt not in every and not any(t in text for t in tools):
                bad.append(f"{fname}:{line}: no option {opt} anywhere: {text!r}")
    assert bad == []


def test_compare_a_directory_with_itself_warns(env: Env) -> None:
    ab = str(env.inputs / "ab")
    code, out, err = run_cli(["compare", ab, ab])
    assert code == 0, err
    assert "compared with itself" in err
    assert "same 20 run(s)" in out


# ------------------------------------------------------------------ cross builds


def _cross_tools(d: Path, *names: str) -> None:
    d.mkdir()
    for name in names:
        real = shutil.which(name)
        if real is None:
            pytest.skip(f"{name} is not installed")
        (d / name).symlink_to(real)


def test_cross_build_without_qemu_is_one_line(
    env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = tmp_path / "tools"
    _cross_tools(tools, "aarch64-linux-gnu-gcc", "aarch64-linux-gnu-g++", "cmake", "ninja", "dpkg")
    monkeypatch.setenv("PATH", str(tools))  # everything but qemu-aarch64
    before = snapshot(*env.roots())
    code, out, err = run_cli(
        ["build", "--source", str(FIXTURES / "buildproj"), "--cross", "aarch64"]
    )
    assert_clean_error(code, out, err, ExitCode.TOOL_MISSING, "qemu-aarch64")
    assert "apt-get install qemu-user" in err
    assert snapshot(*env.roots()) == before


def test_cross_build_without_arm64_libraries_is_one_line(env: Env, tmp_path: Path) -> None:
    """A MariaDB tree whose arm64 libraries do not link: the hint names the :arm64 packages
    (the fake runner plays a cross compiler whose links fail, on a host without arm64)."""
    from fake_runner import Recording, ReplayRunner

    from myaccel.env import Environment, using

    src = env.inputs / "mariadb"
    src.mkdir()
    (src / "CMakeLists.txt").write_text("project(MySQL)\n")
    (src / "VERSION").write_text(
        "MYSQL_VERSION_MAJOR=10\nMYSQL_VERSION_MINOR=11\nMYSQL_VERSION_PATCH=18\n"
        "SERVER_MATURITY=stable\n"
    )
    (src / "sql").mkdir()
    (src / "sql" / "yy_mariadb.cc").write_text("")

    def compiler(argv: tuple[str, ...]) -> Recording:
        if "--version" in argv:
            return Recording(stdout="aarch64-linux-gnu-g++ (Debian 12.2.0-14) 12.2.0\n")
        if "-dumpmachine" in argv:
            return Recording(stdout="aarch64-linux-gnu\n")
        if "-dumpfullversion" in argv:
            return Recording(stdout="12.2.0\n")
        if any(a.startswith("-l") for a in argv):
            return Recording(stderr="ld: cannot find -lz", returncode=1)
        return Recording()

    fake = ReplayRunner()
    for tool in ("aarch64-linux-gnu-gcc", "aarch64-linux-gnu-g++"):
        fake.on([tool], compiler)
    for tool in ("cmake", "ninja", "pkg-config", "qemu-aarch64", "dpkg"):
        fake.on([tool], Recording())
    before = snapshot(*env.roots())
    with using(Environment(runner=fake)):
        code, out, err = run_cli(
            ["build", "--source", str(src), "--cross", "aarch64", "--opt", "lse",
             "--target-cpu", "neoverse-n1"]
        )  # fmt: skip
    assert_clean_error(code, out, err, ExitCode.TOOL_MISSING, "zlib.h -lz")
    assert "hint: dpkg --add-architecture arm64 && apt-get update && apt-get install" in err
    assert "libssl-dev:arm64" in err and "zlib1g-dev:arm64" in err
    assert snapshot(*env.roots()) == before


# ------------------------------------------------------------------ a full disk


def mount_tmpfs(d: Path) -> None:
    d.mkdir(exist_ok=True)
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(d)],
        capture_output=True,
        check=False,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")


def fill(d: Path) -> None:
    with open(d / "filler", "wb", buffering=0) as fh, pytest.raises(OSError):
        while True:
            fh.write(b"\0" * 4096)


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs, filled up by ``fill``: writes fail with ENOSPC (empty files and
    directories can still be created). Skips where mounting is not permitted."""
    d = tmp_path / "full"
    mount_tmpfs(d)
    try:
        yield d
    finally:
        subprocess.run(["umount", str(d)], check=False)


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(
            ["probe", "--no-server", "--sysroot", str(THIS_VM), "--out", "{full}/facts.json"],
            id="probe-out",
        ),
        pytest.param(
            ["plan", "--facts", "{in_}/facts.json", "--out", "{full}/plan.json"], id="plan-out"
        ),
        pytest.param(["compare", "{in_}/ab", "--out", "{full}/cmp"], id="compare-out"),
    ],
)
def test_full_disk_is_one_line(env: Env, full_disk: Path, args: list[str]) -> None:
    fill(full_disk)
    argv = env.fmt([a.replace("{full}", str(full_disk)) for a in args])
    code, out, err = run_cli(argv)
    assert_clean_error(code, out, err, ExitCode.IO_ERROR, "no space left on device")
    leftovers = [p.name for p in full_disk.rglob("*") if p.is_file() and p.name != "filler"]
    assert leftovers == [], "a half-written or temporary file was left on the full disk"


def test_rollback_with_home_on_a_full_disk(
    env: Env, full_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$MYACCEL_HOME on a full disk: rollback fails with one line, leaves the journal as it
    was and no temporary file."""
    home = full_disk / "home"
    (home / "journals").mkdir(parents=True)
    shutil.copy(env.home / "journals" / JOURNAL.name, home / "journals" / JOURNAL.name)
    fill(full_disk)
    monkeypatch.setenv("MYACCEL_HOME", str(home))
    before = snapshot(home)
    code, out, err = run_cli(["rollback"])
    assert "Traceback" not in out + err
    assert code != 0
    assert len([line for line in err.splitlines() if line.startswith("error:")]) == 1, err
    assert not [p for p in home.rglob("*") if p.name.endswith(".tmp")], "a stray temporary file"
    after = snapshot(home)
    assert {k: v for k, v in after.items() if not k.endswith(".lock")} == before
