"""Bad input for ``build``, ``verify-build``, ``fleet-report``, ``bench`` and ``capture``
output locations, and ``report`` (issue 38): one ``error:`` line, one ``hint:`` line, the
documented exit code, no traceback, and nothing changed.

The cases reuse the environment and helpers of tests/unit/test_bad_input.py (``env``,
``run_cli``, ``assert_clean_error``, ``snapshot``). None reaches a server: the cases run
with ``--socket`` pointing nowhere, so an output check that came after connecting would
show up as exit 3 instead of the expected code. The ones that need a live server are in
tests/integration/test_bad_input_build_fleet_live.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_bad_input import (  # noqa: F401  (env is a fixture)
    FIXTURES,
    Env,
    assert_clean_error,
    env,
    run_cli,
    snapshot,
)

from myaccel.builder.manifest import BuildManifest
from myaccel.errors import ExitCode

USAGE, SANDBOX, IO, DATA = ExitCode.USAGE, ExitCode.SANDBOX, ExitCode.IO_ERROR, ExitCode.DATA_ERROR
NO_SERVER = ["--socket", "/nonexistent/mysqld.sock"]
KVLAB = "{fixtures}/buildproj"
DEEP = "[" * 200_000  # deeper than any JSON decoder recurses

# ------------------------------------------------------------------ the inputs

GOOD_PROBE = {
    "class": "x86_64__xeon__2c__24g__mariadb__10_11",
    "arch": "x86_64",
    "cpu_part": "Xeon",
    "logical_cpus": 2,
    "memory_gib": 24,
    "flavor": "mariadb",
    "version": "10.11.19",
    "canary": True,
}

# fleet directory name -> (file under hosts/db1/ or plans/ or holds/, its text). Every
# fleet has db1 with a good probe.json unless the case replaces it.
FLEETS: dict[str, tuple[str, str]] = {
    "probe-string-for-number": ("probe.json", json.dumps({**GOOD_PROBE, "logical_cpus": "two"})),
    "probe-list": ("probe.json", json.dumps([GOOD_PROBE])),
    "probe-no-class": (
        "probe.json",
        json.dumps({k: v for k, v in GOOD_PROBE.items() if k != "class"}),
    ),
    "probe-class-object": ("probe.json", json.dumps({**GOOD_PROBE, "class": {"a": 1}})),
    "probe-class-path": ("probe.json", json.dumps({**GOOD_PROBE, "class": "../../etc/x"})),
    "probe-deep": ("probe.json", DEEP),
    "probe-empty": ("probe.json", ""),
    "probe-not-utf8": ("probe.json", "\udcff\udcfe{"),
    "verify-list-for-object": (
        "verify.json",
        json.dumps({"verify": [1], "journals_in_effect": []}),
    ),
    "verify-journals-string": ("verify.json", json.dumps({"journals_in_effect": "/j/1.json"})),
    "verify-drift-strings": ("verify.json", json.dumps({"verify": {"drift": ["mysql:x"]}})),
    "canary-cells-numbers": ("canary.json", json.dumps({"cells": [1, 2]})),
    "canary-delta-string": ("canary.json", json.dumps({"cells": [{"delta_pct": "big"}]})),
    "apply-changes-object": ("apply.json", json.dumps({"changed": True, "changes": {"a": 1}})),
    "apply-journal-number": ("apply.json", json.dumps({"changed": True, "journal": 17})),
    "rollback-journals-numbers": ("rollback.json", json.dumps({"changed": True, "journals": [1]})),
    "health-error-object": ("health.json", json.dumps({"error": {"msg": "x"}})),
    "plan-recommendations-strings": (
        "../../plans/x86_64__xeon__2c__24g__mariadb__10_11.json",
        json.dumps({"recommendations": ["server-log-buffer"]}),
    ),
    "hold-deep": ("../../holds/x86_64__xeon__2c__24g__mariadb__10_11.json", DEEP),
}


def _surrogate_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def make_more_inputs(d: Path) -> None:
    """The inputs these cases name with ``{in_}``, next to those of test_bad_input."""
    for name, (rel, text) in FLEETS.items():
        host = d / "fleets" / name / "hosts" / "db1"
        host.mkdir(parents=True)
        (host / "probe.json").write_text(json.dumps(GOOD_PROBE))
        target = (host / rel).resolve()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(_surrogate_bytes(text))
    good = d / "fleets" / "good" / "hosts" / "db1"
    good.mkdir(parents=True)
    (good / "probe.json").write_text(json.dumps(GOOD_PROBE))

    (d / "deep.json").write_text(DEEP)
    (d / "manifest-wrong-types.json").write_text(
        json.dumps({"schema_version": "myaccel.build/1", "stages": "configure"})
    )
    other = d / "otherbuild"
    other.mkdir()
    BuildManifest(out_dir=str(other), install_dir=str(other / "install")).save(other)
    damaged = d / "damagedbuild"
    damaged.mkdir()
    (damaged / "manifest.json").write_text('{"schema_version": "myaccel.build/1", "stages": ')
    deep_build = d / "deepbuild"
    deep_build.mkdir()
    (deep_build / "manifest.json").write_text(DEEP)
    (d / "truncated-elf").write_bytes(Path("/bin/true").read_bytes()[:100])


@pytest.fixture
def more(env: Env) -> Env:  # noqa: F811
    make_more_inputs(env.inputs)
    return env


# ------------------------------------------------------------------ the cases

CASES: list[tuple[str, list[str], int, str]] = [
    # (id, argv with {in_} {home} {conf} {fixtures}, exit code, text in the error line)
    # --- build: every path checked, also in a dry run, before anything is fetched or built
    (
        "build-dry-run-out-unwritable",
        ["build", "--source", KVLAB, "--dry-run", "--out", "/proc/x"],
        IO,
        "--out '/proc/x' cannot be written",
    ),
    (
        "build-out-unwritable",
        ["build", "--source", KVLAB, "--out", "/proc/x"],
        IO,
        "--out '/proc/x' cannot be written",
    ),
    (
        "build-dry-run-out-below-a-file",
        ["build", "--source", KVLAB, "--dry-run", "--out", "{in_}/a-file/out"],
        USAGE,
        "a file",
    ),
    (
        "build-dry-run-compare-with-missing",
        ["build", "--source", KVLAB, "--dry-run", "--compare-with", "/nonexistent"],
        USAGE,
        "--compare-with '/nonexistent' does not exist",
    ),
    (
        "build-compare-with-missing",
        ["build", "--source", KVLAB, "--compare-with", "/nonexistent"],
        USAGE,
        "--compare-with",
    ),
    (
        "build-dry-run-compare-with-no-server",
        ["build", "--source", KVLAB, "--dry-run", "--compare-with", "{in_}/emptydir"],
        USAGE,
        "holds no kvlabd",
    ),
    (
        "build-compare-with-file",
        ["build", "--source", KVLAB, "--compare-with", "{in_}/a-file"],
        USAGE,
        "--compare-with",
    ),
    (
        "build-from-installed-compare-with-missing",  # refused before any fetch
        ["build", "--from-installed", "--compare-with", "/nonexistent"],
        USAGE,
        "--compare-with",
    ),
    (
        "build-train-unknown-profile-plain",  # a typo is refused even when nothing trains
        ["build", "--source", KVLAB, "--dry-run", "--train", "nosuch"],
        USAGE,
        "--train nosuch: unknown profile",
    ),
    (
        "build-train-unknown-profile-pgo",
        ["build", "--source", KVLAB, "--opt", "pgo", "--train", "nosuch"],
        USAGE,
        "--train nosuch",
    ),
    (
        "build-train-path-missing",
        ["build", "--source", KVLAB, "--dry-run", "--train", "/nonexistent/w"],
        USAGE,
        "does not exist",
    ),
    (
        "build-train-notjson",
        ["build", "--source", KVLAB, "--dry-run", "--train", "{in_}/notjson.json"],
        USAGE,
        "",
    ),
    ("build-source-is-file", ["build", "--source", "{in_}/a-file"], USAGE, "not a directory"),
    ("build-jobs-huge", ["build", "--source", KVLAB, "--jobs", "999"], USAGE, "--jobs"),
    ("build-cross-unknown", ["build", "--source", KVLAB, "--cross", "sparc"], USAGE, "--cross"),
    (
        "build-sysroot-missing",
        ["build", "--source", KVLAB, "--dry-run", "--sysroot", "/nonexistent"],
        USAGE,
        "sysroot",
    ),
    (
        "build-from-installed-basedir-missing",
        ["build", "--from-installed", "--basedir", "/nonexistent", "--dry-run"],
        USAGE,
        "basedir",
    ),
    (
        "build-from-installed-sandbox-missing",
        ["build", "--from-installed", "--sandbox", "nosuch", "--dry-run"],
        SANDBOX,
        "nosuch",
    ),
    (
        "build-resume-damaged-manifest",
        ["build", "--source", KVLAB, "--out", "{in_}/damagedbuild", "--resume", "--dry-run"],
        USAGE,
        "not readable JSON",
    ),
    (
        "build-resume-deep-manifest",
        ["build", "--source", KVLAB, "--out", "{in_}/deepbuild", "--resume", "--dry-run"],
        USAGE,
        "nested",
    ),
    # --- verify-build: an ELF file that is not a server is refused, not checked (exit 0)
    ("verify-build-bin-true", ["verify-build", "/bin/true"], USAGE, "not a MySQL/MariaDB server"),
    (
        "verify-build-python",  # a real program, not a server
        ["verify-build", str(Path(sys.executable).resolve())],
        USAGE,
        "not a MySQL/MariaDB server",
    ),
    (
        "verify-build-bin-true-json",
        ["verify-build", "/bin/true", "--json"],
        USAGE,
        "not a MySQL/MariaDB server",
    ),
    (
        "verify-build-bin-true-smoke",  # refused before a smoke datadir is created
        ["verify-build", "/bin/true", "--smoke"],
        USAGE,
        "not a MySQL/MariaDB server",
    ),
    (
        "verify-build-bin-true-other-build",  # a manifest of a build it does not belong to
        ["verify-build", "/bin/true", "--manifest", "{in_}/otherbuild/manifest.json"],
        USAGE,
        "not a MySQL/MariaDB server",
    ),
    ("verify-build-directory", ["verify-build", "{in_}"], USAGE, "is a directory"),
    ("verify-build-empty-file", ["verify-build", "{in_}/empty.json"], USAGE, "not an ELF"),
    ("verify-build-truncated", ["verify-build", "{in_}/truncated-elf"], USAGE, "truncated"),
    ("verify-build-device", ["verify-build", "/dev/null"], USAGE, "not a regular file"),
    (
        "verify-build-manifest-deep",
        ["verify-build", "/bin/true", "--manifest", "{in_}/deep.json"],
        USAGE,
        "nested",
    ),
    (
        "verify-build-manifest-wrong-types",
        ["verify-build", "/bin/true", "--manifest", "{in_}/manifest-wrong-types.json"],
        USAGE,
        "field 'stages'",
    ),
    (
        "verify-build-manifest-list",
        ["verify-build", "/bin/true", "--manifest", "{in_}/list.json"],
        USAGE,
        "schema",
    ),
    (
        "verify-build-manifest-directory",
        ["verify-build", "/bin/true", "--manifest", "{in_}/emptydir"],
        USAGE,
        "cannot be read",
    ),
    # --- fleet-report: every malformed host file is a data error naming the file
    *[
        (
            f"fleet-report-{name}",
            ["fleet-report", f"{{in_}}/fleets/{name}"],
            DATA,
            f"cannot read {{in_}}/fleets/{name}/{Path('hosts/db1', rel).as_posix()}".replace(
                "hosts/db1/../../", ""
            ),
        )
        for name, (rel, _) in FLEETS.items()
    ],
    (
        "fleet-report-out-unwritable",
        ["fleet-report", "{in_}/fleets/good", "--out", "/proc/x"],
        IO,
        "/proc/x",
    ),
    ("fleet-report-missing", ["fleet-report", "/nonexistent"], USAGE, "no hosts/"),
    ("fleet-report-a-file", ["fleet-report", "{in_}/a-file"], USAGE, "a-file"),
    # --- bench: the results directory is checked before the server is reached
    ("bench-out-unwritable", ["bench", *NO_SERVER, "--out", "/proc/x"], IO, "--out '/proc/x'"),
    (
        "bench-cleanup-out-unwritable",
        ["bench", *NO_SERVER, "--cleanup", "--out", "/proc/x"],
        IO,
        "cannot be written",
    ),
    ("bench-out-below-a-file", ["bench", *NO_SERVER, "--out", "{in_}/a-file/r"], USAGE, "a file"),
    # --- capture --out: its directory, before anything is captured
    (
        "capture-out-dir-missing",
        ["capture", *NO_SERVER, "--out", "/nonexistent/d/w.json"],
        USAGE,
        "the directory '/nonexistent/d' does not exist",
    ),
    (
        "capture-out-below-a-file",
        ["capture", *NO_SERVER, "--out", "{in_}/a-file/w.json"],
        USAGE,
        "not a directory",
    ),
    (
        "capture-out-unwritable",
        ["capture", *NO_SERVER, "--out", "/proc/w.json"],
        IO,
        "--out '/proc/w.json' cannot be written",
    ),
    ("capture-out-is-dir", ["capture", *NO_SERVER, "--out", "{in_}/emptydir"], USAGE, "--out"),
    # --- report: files named on the command line with wrong types
    ("report-run-wrong-types", ["report", "{in_}/run-wrong-types.json"], USAGE, "summary.tps"),
    ("report-campaign-wrong-types", ["report", "{in_}/campaign-wrong-types.json"], USAGE, "runs"),
    ("report-run-list", ["report", "{in_}/list.json"], USAGE, ""),
    ("report-deep-named-file", ["report", "{in_}/deep.json"], USAGE, "nested"),
    ("report-deep-manifest-named", ["report", "{in_}/deepbuild/manifest.json"], USAGE, "nested"),
    ("report-out-unwritable", ["report", "{in_}/ab", "--out", "/proc/x"], USAGE, "/proc/x"),
]


def _param(i: str, a: list[str], w: int, n: str) -> object:
    return pytest.param(a, w, n, id=i)


@pytest.fixture
def report_inputs(more: Env) -> Env:
    run = json.loads(next(iter(sorted((more.inputs / "ab").glob("run-*.json")))).read_text())
    run["summary"]["tps"] = "fast"
    (more.inputs / "run-wrong-types.json").write_text(json.dumps(run))
    camp = json.loads((more.inputs / "ab" / "campaign.json").read_text())
    camp["runs"] = {"a": 1}
    (more.inputs / "campaign-wrong-types.json").write_text(json.dumps(camp))
    return more


@pytest.mark.parametrize(("args", "want", "needle"), [_param(*c) for c in CASES])
def test_bad_input(report_inputs: Env, args: list[str], want: int, needle: str) -> None:
    e = report_inputs
    before = snapshot(*e.roots())
    code, out, err = run_cli(e.fmt(args))
    assert_clean_error(code, out, err, want, e.fmt([needle])[0])
    assert snapshot(*e.roots()) == before, "a refused command changed files"


def test_the_battery_is_large_and_covers_the_commands() -> None:
    assert len(CASES) >= 30
    assert len({c[0] for c in CASES}) == len(CASES)
    firsts = {c[1][0] for c in CASES}
    assert {"build", "verify-build", "fleet-report", "bench", "capture", "report"} <= firsts


# ------------------------------------------------------------------ what is still accepted


def test_verify_build_accepts_a_server_of_another_machine(more: Env, tmp_path: Path) -> None:
    """An ELF file for aarch64 holding a server's strings is checked (read, never run)."""
    data = bytearray(Path("/bin/true").read_bytes())
    data[18:20] = (183).to_bytes(2, "little")  # e_machine: EM_AARCH64
    data += b"\0innodb_buffer_pool_size\0skip-grant-tables\0"
    binary = tmp_path / "mariadbd"
    binary.write_bytes(bytes(data))
    code, out, err = run_cli(["verify-build", str(binary)])
    assert code == 0, err
    assert "atomics" in out and "error:" not in err


def test_verify_build_accepts_a_binary_of_a_myaccel_build(more: Env, tmp_path: Path) -> None:
    """kvlabd of the fixture (no server strings) is accepted inside its build directory,
    with or without --manifest."""
    out_dir = tmp_path / "build"
    binary = out_dir / "train-install" / "bin" / "kvlabd"
    binary.parent.mkdir(parents=True)
    shutil.copy("/bin/true", binary)
    BuildManifest(out_dir=str(out_dir), install_dir=str(out_dir / "install")).save(out_dir)
    code, _, err = run_cli(["verify-build", str(binary)])
    assert code == 0, err
    code, _, err = run_cli(
        ["verify-build", str(binary), "--manifest", str(out_dir / "manifest.json")]
    )
    assert code == 0, err
    # the same bytes elsewhere: accepted by --manifest when recorded among its binaries
    copy = tmp_path / "elsewhere" / "kvlabd"
    copy.parent.mkdir()
    shutil.copy(binary, copy)
    code, _, err = run_cli(
        ["verify-build", str(copy), "--manifest", str(out_dir / "manifest.json")]
    )
    assert code == ExitCode.USAGE, err
    man = BuildManifest.model_validate_json((out_dir / "manifest.json").read_text())
    from myaccel.builder.manifest import sha256_file

    man.binaries = {str(binary): sha256_file(binary)}
    man.save(out_dir)
    code, _, err = run_cli(
        ["verify-build", str(copy), "--manifest", str(out_dir / "manifest.json")]
    )
    assert code == 0, err


def test_build_dry_run_still_writes_nothing(more: Env) -> None:
    """The writability probe of --out leaves nothing (the dry run of the battery's env)."""
    out = more.home / "builds" / "kvlab"
    before = snapshot(*more.roots())
    code, stdout, err = run_cli(
        ["build", "--source", str(FIXTURES / "buildproj"), "--dry-run", "--out", str(out)]
    )
    if code == ExitCode.TOOL_MISSING:
        pytest.skip(f"no toolchain here: {err.strip()}")
    assert code == 0, err
    assert "configure" in stdout
    assert snapshot(*more.roots()) == before
    assert not out.exists()


def test_fleet_report_takes_what_the_playbooks_write(more: Env, tmp_path: Path) -> None:
    """Ansible's own fields, nulls and numbers as strings are not errors; a host not probed
    yet has the class '?'."""
    fleet = tmp_path / "fleet"
    h = fleet / "hosts"
    h.mkdir(parents=True)
    (h / "db1").mkdir()
    (h / "db1" / "probe.json").write_text(
        json.dumps({**GOOD_PROBE, "logical_cpus": "2", "datadir": None, "hostname": "db1"})
    )
    (h / "db1" / "apply.json").write_text(
        json.dumps({"changed": False, "changes": None, "journal": None, "invocation": {}})
    )
    (h / "db1" / "verify.json").write_text(
        json.dumps({"verify": {"drift": [], "journal": None, "changed": False}})
    )
    (h / "db1" / "canary.json").write_text(json.dumps({"skipped": True, "msg": "check mode"}))
    (h / "db2").mkdir()  # nothing collected yet
    code, _, err = run_cli(["fleet-report", str(fleet)])
    assert code == 0, err
    md = (fleet / "fleet-report.md").read_text()
    assert "check mode" in md and "db2" in md


# ------------------------------------------------------------------ read-only homes


@pytest.fixture
def readonly_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory that cannot be written, also by root: a tmpfs remounted read-only (as
    root: permissions do not stop root), else mode 0500. Populate it with the ``fill``
    callback before it is made read-only."""
    d = tmp_path / "ro"
    d.mkdir()
    mounted = False
    if os.geteuid() == 0:
        r = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(d)],
            capture_output=True,
            check=False,
        )
        if r.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
        mounted = True
    try:
        yield d
    finally:
        if mounted:
            subprocess.run(["umount", str(d)], check=False)
        else:
            d.chmod(0o700)


def make_readonly(d: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["mount", "-o", "remount,ro", str(d)], check=True)
    else:
        for p in [d, *d.rglob("*")]:
            if p.is_dir():
                p.chmod(0o500)
    assert not os.access(d, os.W_OK) or os.statvfs(d).f_flag & os.ST_RDONLY


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        pytest.param(
            ["bench", *NO_SERVER, "--cleanup"], "the results directory", id="bench-cleanup"
        ),
        pytest.param(["bench", *NO_SERVER], "the results directory", id="bench"),
        pytest.param(
            ["build", "--source", str(FIXTURES / "buildproj"), "--dry-run"],
            "the build directory",
            id="build-dry-run",
        ),
        pytest.param(
            ["build", "--source", str(FIXTURES / "buildproj")],
            "the build directory",
            id="build",
        ),
        pytest.param(
            ["build", "--from-installed", "--fetch-only"],
            "the source directory",
            id="build-fetch-only",
        ),
    ],
)
def test_a_read_only_home_is_refused_first(
    more: Env, readonly_dir: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], needle: str
) -> None:
    """$MYACCEL_HOME read-only: refused with exit 8 before the server is reached (not 3)
    and before anything is fetched or built."""
    (readonly_dir / "results").mkdir()
    make_readonly(readonly_dir)
    monkeypatch.setenv("MYACCEL_HOME", str(readonly_dir))
    before = snapshot(readonly_dir, *more.roots())
    code, out, err = run_cli(args)
    line = assert_clean_error(code, out, err, ExitCode.IO_ERROR, needle)
    assert "cannot be written" in line and str(readonly_dir) in line
    assert snapshot(readonly_dir, *more.roots()) == before


def test_capture_out_on_a_read_only_file_system(more: Env, readonly_dir: Path) -> None:
    make_readonly(readonly_dir)
    code, out, err = run_cli(["capture", *NO_SERVER, "--out", str(readonly_dir / "w.json")])
    assert_clean_error(code, out, err, ExitCode.IO_ERROR, "cannot be written")
    assert list(readonly_dir.iterdir()) == []
