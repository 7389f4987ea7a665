"""`myaccel build` on bad input: one clear error before anything is compiled, and nothing
written outside --out (usually not even --out)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from myaccel import proc
from myaccel.cli.main import cli

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "buildproj"
A72_CPUINFO = (
    "processor\t: 0\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 cpuid\n"
    "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd08\n"
    "CPU revision\t: 3\n\n"
)


def digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(str(p.relative_to(root)).encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["build", *args])


def error_lines(res: Result) -> list[str]:
    return [ln for ln in res.output.splitlines() if ln.startswith(("error:", "hint:"))]


def test_not_a_tree(tmp_path: Path, myaccel_home: Path) -> None:
    (tmp_path / "src").mkdir()
    res = run("--source", str(tmp_path / "src"), "--out", str(tmp_path / "out"))
    assert res.exit_code == 2
    assert (
        error_lines(res)[0]
        == f"error: '{tmp_path / 'src'}' is not a CMake source tree (no CMakeLists.txt)"
    )
    assert not (tmp_path / "out").exists()
    assert not any(myaccel_home.iterdir())


@pytest.mark.parametrize("version", [(5, 1, 73), (12, 0, 2)])
def test_unsupported_version(tmp_path: Path, version: tuple[int, int, int]) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text("project(MySQL)\n")
    (src / "VERSION").write_text(
        "MYSQL_VERSION_MAJOR={}\nMYSQL_VERSION_MINOR={}\nMYSQL_VERSION_PATCH={}\n"
        "SERVER_MATURITY=stable\n".format(*version)
    )
    before = digest(src)
    res = run("--source", str(src), "--out", str(tmp_path / "out"), "--opt", "pgo,lto")
    assert res.exit_code == 2
    assert "is not supported by myaccel build" in error_lines(res)[0]
    assert "10.6 to 11.x" in error_lines(res)[1]
    assert digest(src) == before and not (tmp_path / "out").exists()


def test_missing_compiler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    res = run("--source", str(FIXTURE), "--out", str(tmp_path / "out"))
    assert res.exit_code == 4
    assert error_lines(res)[0] == "error: no C/C++ compiler: gcc, g++ not found on PATH"
    assert "apt-get install gcc g++" in error_lines(res)[1]
    assert not (tmp_path / "out").exists()


def test_missing_dependency_names_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    for t in ("gcc", "g++", "ninja"):
        real = proc.which(t)
        if real is None:
            pytest.skip(f"{t} not installed")
        os.symlink(real, tools / t)
    monkeypatch.setenv("PATH", str(tools))  # no cmake
    before = digest(FIXTURE)
    res = run("--source", str(FIXTURE), "--out", str(tmp_path / "out"))
    assert res.exit_code == 4
    assert error_lines(res)[0] == "error: missing build dependencies: cmake (configures the build)"
    assert error_lines(res)[1].startswith("hint: apt-get install cmake")
    assert not (tmp_path / "out").exists()
    assert digest(FIXTURE) == before


def test_inline_lse_on_a_cpu_without_atomics(tmp_path: Path) -> None:
    if proc.which("aarch64-linux-gnu-g++") is None:
        pytest.skip("aarch64-linux-gnu-g++ not installed (apt-get install g++-aarch64-linux-gnu)")
    sysroot = tmp_path / "a72"
    (sysroot / "proc").mkdir(parents=True)
    (sysroot / "proc" / "cpuinfo").write_text(A72_CPUINFO)
    res = run(
        "--source", str(FIXTURE), "--out", str(tmp_path / "out"), "--cross", "aarch64",
        "--sysroot", str(sysroot), "--opt", "lse",
    )  # fmt: skip
    assert res.exit_code == 2
    first = error_lines(res)[0]
    assert "inline LSE atomics requested, but the target CPU has no LSE atomics" in first
    assert "SIGILL" in first
    assert not (tmp_path / "out").exists()


def test_out_inside_tree_refused(tmp_path: Path) -> None:
    res = run("--source", str(FIXTURE), "--out", str(FIXTURE / "build"))
    assert res.exit_code == 2
    assert "inside the source tree" in error_lines(res)[0]
    assert not (FIXTURE / "build").exists()


def test_foreign_out_dir_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    res = run("--source", str(FIXTURE), "--out", str(out))
    assert res.exit_code == 2
    assert "holds no myaccel build" in error_lines(res)[0]
    assert sorted(p.name for p in out.iterdir()) == ["precious.txt"]


def test_mysql_cacheline_needs_allow_patch(tmp_path: Path) -> None:
    src = tmp_path / "mysql"
    hdr = src / "storage" / "innobase" / "include" / "ut0cpu_cache.h"
    hdr.parent.mkdir(parents=True)
    hdr.write_text(
        "#ifdef __powerpc__\nconstexpr size_t INNODB_CACHE_LINE_SIZE = 128;\n#else\n"
        "constexpr size_t INNODB_CACHE_LINE_SIZE = 64;\n#endif\n"
    )
    (src / "CMakeLists.txt").write_text("project(MySQL)\n")
    (src / "sql").mkdir()
    (src / "sql" / "sql_yacc.cc").write_text("// generated\n")
    (src / "MYSQL_VERSION").write_text(
        "MYSQL_VERSION_MAJOR=8\nMYSQL_VERSION_MINOR=0\nMYSQL_VERSION_PATCH=40\n"
    )
    before = digest(src)
    out = tmp_path / "out"
    res = run("--source", str(src), "--out", str(out), "--opt", "cacheline")
    if res.exit_code == 4:
        pytest.skip("MySQL build dependencies missing here: " + error_lines(res)[0])
    assert res.exit_code == 2, res.output
    assert "InnoDB's cache line is a source constant" in error_lines(res)[0]
    assert "--allow-patch" in error_lines(res)[1]
    patch = out / "patches" / "innodb-cacheline-128.patch"
    assert "+constexpr size_t INNODB_CACHE_LINE_SIZE = 128;" in patch.read_text()
    assert digest(src) == before
    assert sorted(p.name for p in out.iterdir()) == ["patches"]


def test_configure_failure_names_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A configure error of a system-library check becomes the package to install."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for t in ("gcc", "g++", "ninja"):
        real = proc.which(t)
        if real is None:
            pytest.skip(f"{t} not installed")
        os.symlink(real, tools / t)
    fake = tools / "cmake"
    fake.write_text(
        "#!/bin/sh\necho 'CMake Error at cmake/libfmt.cmake:42 (MESSAGE):'\n"
        "echo '  system libfmt library is not found or unusable'\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tools))
    out = tmp_path / "out"
    res = run("--source", str(FIXTURE), "--out", str(out))
    assert res.exit_code == 6
    assert "system libfmt library is not found or unusable" in error_lines(res)[0]
    assert error_lines(res)[1].startswith("hint: apt-get install libfmt-dev")
    man = (out / "manifest.json").read_text()
    assert '"status": "failed"' in man


def test_dry_run_prints_and_writes_nothing(tmp_path: Path) -> None:
    if proc.which("g++") is None or proc.which("cmake") is None:
        pytest.skip("g++/cmake not installed")
    out = tmp_path / "out"
    res = run("--source", str(FIXTURE), "--out", str(out), "--opt", "pgo,lto", "--dry-run")
    assert res.exit_code == 0, res.output
    assert "# stages: configure-instrumented -> build-instrumented" in res.output
    assert f"-fprofile-generate={out.resolve() / 'profile'}" in res.output
    assert "-DCMAKE_INTERPROCEDURAL_OPTIMIZATION=ON" in res.output
    assert not out.exists()
