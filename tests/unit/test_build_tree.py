"""Source tree detection and the per-flavor adapters (no compiler needed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from myaccel.builder.errors import TreeError
from myaccel.builder.tree import detect_tree, find_mysql_boost, mysql_boost_wanted

REAL_MARIADB = Path("/work/trees/mariadb-10.11.18")
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "buildproj"


def make_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in {"CMakeLists.txt": "project(x)\n", **files}.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def mariadb_version(major: int, minor: int, patch: int = 1) -> str:
    return (
        f"MYSQL_VERSION_MAJOR={major}\nMYSQL_VERSION_MINOR={minor}\n"
        f"MYSQL_VERSION_PATCH={patch}\nSERVER_MATURITY=stable\n"
    )


def test_fixture_is_kvlab() -> None:
    t = detect_tree(FIXTURE)
    assert t.flavor == "kvlab"
    assert t.version == "1.2.0"
    assert t.adapter.trainer == "fixture"
    assert t.adapter.server_binaries == ("bin/kvlabd",)


def test_synthetic_mariadb_11(tmp_path: Path) -> None:
    tree = make_tree(
        tmp_path,
        {
            "VERSION": mariadb_version(11, 8, 3),
            "cmake/libfmt.cmake": "# ExternalProject_Add(libfmt URL https://...)\n",
            "config.h.cmake": "#cmakedefine HAVE_FOO 1\n",
        },
    )
    t = detect_tree(tree)
    ad = t.adapter
    assert (t.flavor, t.version) == ("mariadb", "11.8.3")
    names = {o.name: o.value for o in ad.offline_options}
    assert names["WITH_LIBFMT"] == "system"  # else fmt is downloaded during the build
    assert names["WITH_PCRE"] == "system"
    lean = {o.name: o.value for o in ad.lean_options}
    assert lean["PLUGIN_ROCKSDB"] == "NO" and lean["PLUGIN_COLUMNSTORE"] == "NO"
    assert any("RocksDB" in s or "MyRocks" in s for s in ad.left_out())
    # config.h.cmake without the variable: the cache line must become a compiler define
    assert ad.cacheline_mode == "cmake+define"
    assert ad.lto_mode == "ipo" and ad.pgo_mode == "flags"


def test_mariadb_with_cacheline_in_config_h(tmp_path: Path) -> None:
    tree = make_tree(
        tmp_path,
        {
            "VERSION": mariadb_version(10, 6, 20),
            "config.h.cmake": "#cmakedefine CPU_LEVEL1_DCACHE_LINESIZE @CPU_LEVEL1_DCACHE_LINESIZE@\n",
        },
    )
    ad = detect_tree(tree).adapter
    assert ad.cacheline_mode == "cmake"
    assert "WITH_LIBFMT" not in {o.name for o in ad.offline_options}  # no libfmt.cmake


@pytest.mark.parametrize(("major", "minor"), [(5, 1), (10, 5), (12, 0)])
def test_unsupported_mariadb(tmp_path: Path, major: int, minor: int) -> None:
    tree = make_tree(tmp_path, {"VERSION": mariadb_version(major, minor)})
    with pytest.raises(TreeError, match=rf"MariaDB {major}\.{minor}\.1 is not supported"):
        detect_tree(tree)


def test_mysql_80_adapter(tmp_path: Path) -> None:
    tree = make_tree(
        tmp_path,
        {
            "MYSQL_VERSION": "MYSQL_VERSION_MAJOR=8\nMYSQL_VERSION_MINOR=0\nMYSQL_VERSION_PATCH=40\nMYSQL_VERSION_EXTRA=\n",
            "CMakeLists.txt": 'OPTION(WITH_LTO "Enable LTO" OFF)\n',
            "cmake/fprofile.cmake": "OPTION(FPROFILE_GENERATE ...)\n",
            "cmake/boost.cmake": 'SET(BOOST_PACKAGE_NAME "boost_1_77_0")\n',
        },
    )
    t = detect_tree(tree)
    assert (t.flavor, t.version) == ("mysql", "8.0.40")
    assert t.adapter.pgo_mode == "mysql-fprofile"
    assert t.adapter.lto_mode == "mysql-with-lto"
    assert t.adapter.cacheline_mode == "patch"
    assert mysql_boost_wanted(tree) == "boost_1_77_0"
    assert find_mysql_boost(tree) is None
    (tree / "boost" / "boost_1_77_0").mkdir(parents=True)
    assert find_mysql_boost(tree) == tree / "boost" / "boost_1_77_0"


def test_mysql_57_uses_version_file(tmp_path: Path) -> None:
    tree = make_tree(
        tmp_path,
        {"VERSION": "MYSQL_VERSION_MAJOR=5\nMYSQL_VERSION_MINOR=7\nMYSQL_VERSION_PATCH=44\n"},
    )
    t = detect_tree(tree)
    assert (t.flavor, t.version) == ("mysql", "5.7.44")
    assert t.adapter.pgo_mode == "flags"  # no cmake/fprofile.cmake in 5.7


def test_percona_marker(tmp_path: Path) -> None:
    tree = make_tree(
        tmp_path,
        {
            "MYSQL_VERSION": "MYSQL_VERSION_MAJOR=8\nMYSQL_VERSION_MINOR=0\nMYSQL_VERSION_PATCH=39\nMYSQL_VERSION_EXTRA=-30\n"
        },
    )
    t = detect_tree(tree)
    assert t.flavor == "percona"
    assert t.adapter.label == "Percona Server 8.0.39"


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({}, "no VERSION/MYSQL_VERSION file"),
        ({"VERSION": "hello\n"}, "not a MySQL/MariaDB version file"),
        (
            {
                "MYSQL_VERSION": "MYSQL_VERSION_MAJOR=5\nMYSQL_VERSION_MINOR=6\nMYSQL_VERSION_PATCH=51\n"
            },
            "MySQL 5.6.51 is not supported",
        ),
        (
            {"MYSQL_VERSION": "MYSQL_VERSION_MAJOR=8\nMYSQL_VERSION_MINOR=x\n"},
            "no readable MYSQL_VERSION",
        ),
    ],
)
def test_bad_trees(tmp_path: Path, files: dict[str, str], message: str) -> None:
    tree = make_tree(tmp_path, files)
    with pytest.raises(TreeError, match=message):
        detect_tree(tree)


def test_not_a_tree(tmp_path: Path) -> None:
    with pytest.raises(TreeError, match="not a CMake source tree"):
        detect_tree(tmp_path)
    with pytest.raises(TreeError, match="does not exist"):
        detect_tree(tmp_path / "nope")
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(TreeError, match="is not a directory"):
        detect_tree(f)


@pytest.mark.skipif(not REAL_MARIADB.is_dir(), reason="no real MariaDB tree at /work/trees")
def test_real_mariadb_tree() -> None:
    t = detect_tree(REAL_MARIADB)
    ad = t.adapter
    assert (t.flavor, t.version) == ("mariadb", "10.11.18")
    # 10.11.18's config.h.cmake does not carry the CMake variable (checked by grep)
    assert "CPU_LEVEL1_DCACHE_LINESIZE" not in (REAL_MARIADB / "config.h.cmake").read_text()
    assert ad.cacheline_mode == "cmake+define"
    assert {o.name for o in ad.offline_options} >= {"WITH_LIBFMT", "WITH_PCRE"}
    # every PLUGIN_X=NO names a plugin this tree declares with MYSQL_ADD_PLUGIN(x ...)
    # (TokuDB is gone since 10.6; ColumnStore is an empty submodule in tarballs; Mroonga
    # declares itself through its own CMake code)
    declared = set()
    for cm in REAL_MARIADB.rglob("CMakeLists.txt"):
        for m in re.finditer(r"MYSQL_ADD_PLUGIN\(\s*(\w+)", cm.read_text(errors="replace")):
            declared.add(m.group(1).upper())
    assert {"INNOBASE", "ROCKSDB", "SPIDER", "S3"} <= declared
    for o in ad.lean_options:
        if o.name.startswith("PLUGIN_"):
            name = o.name.removeprefix("PLUGIN_")
            assert name in declared or name in {"TOKUDB", "COLUMNSTORE", "MROONGA"}, name
    for src in ad.hot_sources:
        assert (REAL_MARIADB / src).is_file(), src


@pytest.mark.skipif(not REAL_MARIADB.is_dir(), reason="no real MariaDB tree at /work/trees")
def test_real_mariadb_preflight(tmp_path: Path, myaccel_home: Path) -> None:
    """Everything before compiling, on the real tree: flags, stages, nothing written to it."""
    from myaccel.builder.errors import DependencyMissing
    from myaccel.builder.flags import BuildRequest
    from myaccel.builder.pipeline import prepare, stages_for

    before = sorted(p.name for p in REAL_MARIADB.iterdir())
    req = BuildRequest(opts=("lto", "pgo", "cacheline"), jobs=2)
    try:
        ctx = prepare(REAL_MARIADB, req, tmp_path / "out")
    except DependencyMissing as exc:
        pytest.skip(f"MariaDB build dependencies missing here: {exc.message}")
    assert [s.name for s in stages_for(ctx)] == [
        "configure-instrumented", "build-instrumented", "install-instrumented", "train",
        "profile-check", "configure", "build", "install", "verify", "measure",
    ]  # fmt: skip
    gen = " ".join(ctx.phases["instrumented"].cmake_args())
    use = " ".join(ctx.phases["final"].cmake_args())
    assert f"-fprofile-generate={tmp_path / 'out' / 'profile'}" in gen
    assert "-DCMAKE_INTERPROCEDURAL_OPTIMIZATION=ON" in use
    assert "-DCPU_LEVEL1_DCACHE_LINESIZE=128 " in use  # the compiler define, in the flags
    for opt in (
        "-DWITH_LIBFMT=system",
        "-DWITH_PCRE=system",
        "-DPLUGIN_ROCKSDB=NO",
        "-DWITH_WSREP=OFF",
    ):
        assert opt in use
    man = ctx.manifest
    assert man.source.version == "10.11.18" and man.request.opts == [
        "lto",
        "pgo",
        "cacheline",
    ]
    assert any("PLUGIN_SPIDER=NO" in s for s in man.left_out)
    assert sorted(p.name for p in REAL_MARIADB.iterdir()) == before
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["manifest.json"]


def test_mysql_calendar_versions_are_refused_by_name(tmp_path: Path) -> None:
    """MySQL numbers releases YY.M.P from 26.7.0 (July 2026): a 26.x tree is refused as a
    calendar version whose build options were not checked, not as an unknown series."""
    tree = make_tree(
        tmp_path,
        {
            "MYSQL_VERSION": "MYSQL_VERSION_MAJOR=26\nMYSQL_VERSION_MINOR=7\nMYSQL_VERSION_PATCH=0\nMYSQL_VERSION_EXTRA=\n"
        },
    )
    with pytest.raises(TreeError, match=r"MySQL 26\.7\.0 is a calendar version"):
        detect_tree(tree)
