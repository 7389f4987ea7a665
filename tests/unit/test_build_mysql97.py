"""The MySQL build adapter on the shape of the real MySQL 9.7 tree.

``tests/fixtures/mysql97-cmake`` declares the CMake option names of Debian's ``mysql-9.7``
source (9.7.2) in the same files; every ``-D`` option of both PGO+LTO configures must be
among them. When the real tree is unpacked at ``$MYACCEL_MYSQL97_TREE`` (default
/work/srcs/mysql/mysql-9.7-9.7.2) the same check runs on it too.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from myaccel.builder import deps
from myaccel.builder.flags import BuildRequest, PhaseFlags, Toolchain, compose_phase
from myaccel.builder.tree import declared_cmake_options, detect_tree, find_mysql_boost

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mysql97-cmake"
REAL_TREE = Path(os.environ.get("MYACCEL_MYSQL97_TREE", "/work/srcs/mysql/mysql-9.7-9.7.2"))
X86_TC = Toolchain("gcc", "g++", "12.2.0", "x86_64", False, "x86_64-linux-gnu", "Ninja")
GONE_IN_97 = ("DOWNLOAD_BOOST", "WITH_BOOST", "WITH_RAPID")


def _phases(tree_path: Path, tmp_path: Path) -> list[PhaseFlags]:
    tree = detect_tree(tree_path)
    req = BuildRequest(opts=("pgo", "lto"))
    return [
        compose_phase(phase, tree, req, X86_TC, [], tmp_path / "profile")
        for phase in ("instrumented", "final")
    ]


def _undeclared(tree_path: Path, tmp_path: Path) -> set[str]:
    declared = declared_cmake_options(tree_path)
    passed = {name for f in _phases(tree_path, tmp_path) for name in f.cmake_defs}
    return {n for n in passed if not n.startswith("CMAKE_")} - declared


def test_fixture_is_mysql_97_with_its_own_pgo_and_lto(tmp_path: Path) -> None:
    t = detect_tree(FIXTURE)
    assert (t.flavor, t.version) == ("mysql", "9.7.2")
    assert t.adapter.pgo_mode == "mysql-fprofile"
    assert t.adapter.lto_mode == "mysql-with-lto"
    gen, final = _phases(FIXTURE, tmp_path)
    assert (gen.cmake_defs["FPROFILE_GENERATE"], gen.cmake_defs["FPROFILE_USE"]) == ("ON", "OFF")
    assert gen.cmake_defs["FPROFILE_DIR"] == str(tmp_path / "profile")
    assert gen.cmake_defs["WITH_LTO"] == "OFF"
    assert (final.cmake_defs["FPROFILE_GENERATE"], final.cmake_defs["FPROFILE_USE"]) == (
        "OFF",
        "ON",
    )
    assert final.cmake_defs["WITH_LTO"] == "ON"


def test_every_option_passed_is_declared_by_the_tree(tmp_path: Path) -> None:
    assert _undeclared(FIXTURE, tmp_path) == set()
    gen, final = _phases(FIXTURE, tmp_path)
    for name in GONE_IN_97:
        assert name not in gen.cmake_defs and name not in final.cmake_defs, name
    # without it configure stops: WITH_CURL=system needs libcurl4-openssl-dev
    assert final.cmake_defs["WITH_CURL"] == "none"
    assert final.cmake_defs["WITH_MYSQLX"] == "OFF"  # declared in plugin/x only


def test_declared_options_read_option_set_cache_and_tests(tmp_path: Path) -> None:
    (tmp_path / "cmake").mkdir()
    (tmp_path / "CMakeLists.txt").write_text(
        'OPTION(WITH_A "a" ON)\nset(WITH_B "x" CACHE STRING "")\nSET(NOT_CACHED 1)\n'
        "IF(DEFINED WITH_C)\nENDIF()\nIF(NOT WITH_D)\nENDIF()\n# WITH_E in a comment\n"
    )
    (tmp_path / "cmake" / "boost.cmake").write_text('OPTION(DOWNLOAD_BOOST "" OFF)\n')
    (tmp_path / "extra").mkdir()
    (tmp_path / "extra" / "CMakeLists.txt").write_text('OPTION(WITH_BUNDLED_ONLY "" ON)\n')
    names = declared_cmake_options(tmp_path)
    assert {"WITH_A", "WITH_B", "WITH_C", "WITH_D", "DOWNLOAD_BOOST"} <= names
    assert not names & {"NOT_CACHED", "WITH_E", "WITH_BUNDLED_ONLY"}


def test_bundled_boost_and_parser_need_no_download_and_no_bison() -> None:
    tree = detect_tree(FIXTURE)
    assert find_mysql_boost(FIXTURE) == FIXTURE / "extra" / "boost" / "boost_1_87_0"
    needed = {d.name for d in deps.required(tree, BuildRequest(opts=("pgo", "lto")))}
    assert "bison" not in needed  # sql/sql_yacc.cc ships with the tree
    assert "sysbench" in needed  # the PGO training workload


@pytest.mark.skipif(not (REAL_TREE / "MYSQL_VERSION").is_file(), reason=f"no tree at {REAL_TREE}")
def test_real_mysql_97_tree_declares_every_option(tmp_path: Path) -> None:
    t = detect_tree(REAL_TREE)
    assert t.flavor == "mysql" and t.version.startswith("9.7.")
    assert _undeclared(REAL_TREE, tmp_path) == set()
    declared = declared_cmake_options(REAL_TREE)
    assert not declared & set(GONE_IN_97)  # what the fixture leaves out is really gone
