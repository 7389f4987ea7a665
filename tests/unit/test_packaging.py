"""The Debian package's pieces that need no build (packaging/, docs/packaging.md): man pages
and completion generated from the CLI cover every command, completion answers through
myaccel's lazy command group, the lock holds pyproject's pins, every tool `myaccel doctor`
names is in Depends/Recommends/Suggests, and the ELF scan that writes Depends."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "packaging"))

cli_docs = pytest.importorskip("cli_docs", reason="click-man is a dev dependency")
import debian_files  # noqa: E402
import depends  # noqa: E402

from myaccel.cli.main import COMMANDS  # noqa: E402


def _walk(cmd: click.Command, path: str) -> list[str]:
    """Every command path, found from the commands' own modules (not cli_docs)."""
    out = [path]
    if isinstance(cmd, click.Group):
        for name, sub in cmd.commands.items():
            out += _walk(sub, f"{path} {name}")
    return out


def test_a_man_page_for_every_command_and_subcommand(tmp_path: Path) -> None:
    import importlib

    expected = {"myaccel"}
    for name, target in COMMANDS.items():
        mod, _, attr = target.partition(":")
        expected |= set(_walk(getattr(importlib.import_module(mod), attr), f"myaccel {name}"))
    assert {"myaccel sandbox init", "myaccel sandbox snapshot save", "myaccel doctor"} <= expected

    pages = cli_docs.write_man(tmp_path, "9.9", "2026-01-02")
    assert {p.name.removesuffix(".1.gz") for p in pages} == {e.replace(" ", "-") for e in expected}
    text = gzip.decompress((tmp_path / "myaccel-doctor.1.gz").read_bytes()).decode()
    assert text.startswith('.TH "MYACCEL DOCTOR" "1" "2026-01-02" "9.9"')
    assert r"\fB\-\-json\fP" in text  # its options, from click
    top = gzip.decompress((tmp_path / "myaccel.1.gz").read_bytes()).decode()
    for name in COMMANDS:  # the top page lists every command
        assert f"\\fB{name}\\fP" in top, name


def test_man_pages_are_reproducible(tmp_path: Path) -> None:
    a = cli_docs.write_man(tmp_path / "a", "1", "2026-01-02")
    b = cli_docs.write_man(tmp_path / "b", "1", "2026-01-02")
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]


@pytest.mark.parametrize("shell", sorted(cli_docs.COMPLETION_PATHS))
def test_completion_scripts_call_myaccel_back(shell: str, tmp_path: Path) -> None:
    written = cli_docs.write_completions(tmp_path)
    path = tmp_path / cli_docs.COMPLETION_PATHS[shell]
    assert path in written
    text = path.read_text()
    assert "_MYACCEL_COMPLETE" in text and "myaccel" in text


def _complete(words: str, cword: int) -> list[str]:
    env = {
        **os.environ,
        "COMP_WORDS": words,
        "COMP_CWORD": str(cword),
        "_MYACCEL_COMPLETE": "bash_complete",
        "PYTHONPATH": str(ROOT / "src"),
    }
    r = subprocess.run(
        [sys.executable, "-m", "myaccel"],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return [line.partition(",")[2] for line in r.stdout.splitlines()]


def test_bash_completion_answers_commands_subcommands_and_options() -> None:
    """What the installed bash script asks myaccel at a TAB (click's protocol)."""
    assert set(_complete("myaccel ", 1)) >= set(COMMANDS)
    assert _complete("myaccel doc", 1) == ["doctor"]
    assert set(_complete("myaccel sandbox ", 2)) >= {"init", "start", "snapshot"}
    assert "--json" in _complete("myaccel doctor --", 2)


def test_the_lock_holds_pyprojects_pins() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    norm = lambda s: s.split("#")[0].strip().lower().replace("_", "-")  # noqa: E731
    lock = {norm(line) for line in (ROOT / "packaging/requirements.lock").read_text().splitlines()}
    lock.discard("")
    missing = {norm(dep) for dep in project["dependencies"]} - lock
    assert not missing, f"packaging/requirements.lock lacks {missing}: run build_deb.py --relock"
    assert all("==" in line for line in lock if not line.startswith("#"))


def test_every_doctor_tool_package_is_placed() -> None:
    depends.check_tool_packages()
    pkgs = depends.tool_packages()
    assert {"sysbench", "linux-perf", "fio", "numactl", "mariadb-backup"} <= pkgs
    assert set(depends.RECOMMENDS) <= pkgs and not set(depends.RECOMMENDS) & set(depends.SUGGESTS)


def test_library_depends_from_elf_headers() -> None:
    """This interpreter's own shared objects: libc6 with a glibc version, the machine
    checked; a foreign machine fails."""
    import math  # an extension module of this python, linked to libm and libc

    so = Path(math.__file__)
    line = depends.library_depends([so], "EM_X86_64")
    assert line.startswith("libc6 (>= 2.") or ", libc6 (>= 2." in line, line
    with pytest.raises(SystemExit, match="not EM_AARCH64"):
        depends.library_depends([so], "EM_AARCH64")


def test_pip_platforms_cover_manylinux_tags_debian12_loads() -> None:
    import build_deb

    tags = build_deb.pip_platforms(build_deb.ARCHES["arm64"])
    assert tags[0] == "manylinux_2_36_aarch64"  # Debian 12's glibc first
    assert {"manylinux_2_28_aarch64", "manylinux_2_17_aarch64", "manylinux2014_aarch64"} <= set(
        tags
    )
    assert "manylinux_2_37_aarch64" not in tags


def test_the_launcher_runs_from_an_unpacked_tree(tmp_path: Path) -> None:
    """/usr/bin/myaccel finds its library directory from its own place (dpkg-deb -x works)."""
    lib = "usr/lib/myaccel/python"
    launcher = tmp_path / "usr/bin/myaccel"
    debian_files.write_launcher(launcher, lib)
    assert launcher.read_text().startswith("#!/usr/bin/python3 -I\n")
    (tmp_path / lib).parent.mkdir(parents=True)
    (tmp_path / lib).symlink_to(ROOT / "src", target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run(
        [sys.executable, "-I", str(launcher), "--version"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    from myaccel import __version__

    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"myaccel, version {__version__}"
