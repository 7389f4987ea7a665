"""PGO helpers, the MySQL cache line patch, the manifest and the verify helpers."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from fake_runner import Recording, ReplayRunner

from myaccel.builder import pgo
from myaccel.builder.bolt import perf_record_pid
from myaccel.builder.errors import BuildFailed, BuildOptionError, TreeError
from myaccel.builder.manifest import BuildManifest, StageRecord, load_manifest
from myaccel.builder.measure import parse_callgrind_total
from myaccel.builder.patch import apply_to_copy, make_cacheline_patch
from myaccel.builder.stages import find_downloads
from myaccel.builder.verify import cacheline_found
from myaccel.env import Environment, using


def test_missing_profile_lines() -> None:
    line = (
        "/src/sql/sql_parse.cc:120:5: warning: '/o/profile/#o#build#sql#sql_parse.cc.gcda' "
        "profile count data file not found [-Wmissing-profile]"
    )
    assert pgo.missing_profile_file(line) == "/src/sql/sql_parse.cc"
    assert pgo.missing_profile_file("a.cpp: In function 'int main()':") is None
    assert pgo.missing_profile_file("x.c:1:2: warning: unused variable [-Wunused]") is None


def gcda(d: Path, obj: str, size: int = 64) -> Path:
    p = d / (obj.replace("/", "#") + ".gcda")
    p.write_bytes(b"\0" * size)
    return p


def test_coverage(tmp_path: Path) -> None:
    prof = tmp_path / "profile"
    prof.mkdir()
    old = gcda(prof, "/o/build/sql/CMakeFiles/gen_lex_hash.dir/gen_lex_hash.cc.o")
    os.utime(old, (time.time() - 100, time.time() - 100))
    since = time.time() - 10
    gcda(prof, "/o/build/sql/CMakeFiles/sql.dir/sql_parse.cc.o")
    gcda(prof, "/o/build/storage/innobase/CMakeFiles/innobase.dir/btr/btr0cur.cc.o")
    cov = pgo.check_coverage(
        prof, ("sql/sql_parse.cc", "storage/innobase/btr/btr0cur.cc", "sql/handler.cc"), since
    )
    assert cov.profiles == 3 and cov.fresh == 2
    assert cov.hot_found == ["sql/sql_parse.cc", "storage/innobase/btr/btr0cur.cc"]
    assert cov.hot_missing == ["sql/handler.cc"]
    # profiles written before training began do not count
    assert pgo.check_coverage(prof, ("sql/sql_parse.cc",), time.time() + 5).fresh == 0


def test_split_hot_by_directory(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    files = [str(tree / "sql" / "tztime.cc"), str(tree / "client" / "mysql.cc")]
    hot, other, method = pgo.split_hot(files, tmp_path / "nobuild", "mariadbd", tree, ("sql",))
    assert hot == [files[0]] and other == [files[1]] and method == "server directories"


MYSQL80_HEADER = """namespace ut {
/** CPU cache line size */
#ifdef __powerpc__
constexpr size_t INNODB_CACHE_LINE_SIZE = 128;
#else
constexpr size_t INNODB_CACHE_LINE_SIZE = 64;
#endif /* __powerpc__ */
}
"""
MYSQL57_HEADER = """#ifdef __powerpc__
#define INNOBASE_CACHE_LINE_SIZE\t\t128
#else
#define INNOBASE_CACHE_LINE_SIZE\t\t64
#endif /* __powerpc__ */
"""


@pytest.mark.parametrize(
    ("rel", "text"),
    [
        ("storage/innobase/include/ut0cpu_cache.h", MYSQL80_HEADER),
        ("storage/innobase/include/ut0counter.h", MYSQL57_HEADER),
    ],
)
def test_cacheline_patch_on_a_linked_copy(tmp_path: Path, rel: str, text: str) -> None:
    tree = tmp_path / "tree"
    (tree / rel).parent.mkdir(parents=True)
    (tree / rel).write_text(text)
    (tree / "other.c").write_text("int x;\n")
    patch = make_cacheline_patch(tree, 128)
    assert patch.files == (rel,) and patch.lines_changed == 1
    assert patch.diff.startswith(f"--- a/{rel}\n+++ b/{rel}\n")
    assert "-" in patch.diff and "+" in patch.diff and "64" in patch.diff
    copy = tmp_path / "out" / "src"
    apply_to_copy(tree, copy, patch)
    assert (tree / rel).read_text() == text  # the original is untouched
    new = (copy / rel).read_text()
    assert "64" not in new.split("#else", 1)[1] and "128" in new.split("#else", 1)[1]
    assert os.stat(copy / "other.c").st_ino == os.stat(tree / "other.c").st_ino  # linked
    values, where = cacheline_found(tmp_path / "nobuild", [], copy)
    assert values == {128} and "compiled copy" in where[0]


def test_cacheline_patch_not_found(tmp_path: Path) -> None:
    with pytest.raises(BuildOptionError, match="cannot find InnoDB's cache line constant"):
        make_cacheline_patch(tmp_path, 128)


def test_cacheline_found_in_config_and_flags(tmp_path: Path) -> None:
    b = tmp_path / "build"
    (b / "include").mkdir(parents=True)
    (b / "include" / "my_config.h").write_text("#define CPU_LEVEL1_DCACHE_LINESIZE 64\n")
    (b / "compile_commands.json").write_text(
        '[{"directory": "/b", "command": "g++ -DCPU_LEVEL1_DCACHE_LINESIZE=128 -c x.cc", "file": "x.cc"}]'
    )
    values, where = cacheline_found(b, ["include/my_config.h"], None)
    assert values == {64, 128}
    assert len(where) == 2


def test_find_downloads(tmp_path: Path) -> None:
    stamp = tmp_path / "extra" / "libfmt" / "src" / "libfmt-stamp"
    stamp.mkdir(parents=True)
    assert find_downloads(tmp_path) == []
    (stamp / "download-libfmt.cmake").write_text("# file(DOWNLOAD ...)\n")
    assert find_downloads(tmp_path) == ["libfmt"]


def test_manifest_roundtrip_and_errors(tmp_path: Path) -> None:
    m = BuildManifest(out_dir=str(tmp_path))
    m.upsert(StageRecord(name="configure", status="done", inputs_digest="x"))
    m.upsert(StageRecord(name="configure", status="failed", inputs_digest="y"))
    assert len(m.stages) == 1 and m.stages[0].status == "failed"
    path = m.save(tmp_path)
    assert load_manifest(path).stages[0].inputs_digest == "y"
    with pytest.raises(TreeError, match="does not exist"):
        load_manifest(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": "myaccel.facts/1"}')
    with pytest.raises(
        TreeError, match=r"has schema 'myaccel\.facts/1', expected 'myaccel\.build/1'"
    ):
        load_manifest(bad)


def test_callgrind_totals() -> None:
    assert parse_callgrind_total("events: Ir\nsummary: 12345\n") == 12345
    assert parse_callgrind_total("events: Ir\ntotals: 99\n") == 99


def test_callgrind_branch_events() -> None:
    from myaccel.builder.measure import parse_callgrind_events

    text = (
        "events: Ir Bc Bcm Bi Bim\nfn=main\n1 2 3\nsummary: 15841036 1667968 70119 135617 21471\n"
    )
    ev = parse_callgrind_events(text)
    assert ev == {"Ir": 15841036, "Bc": 1667968, "Bcm": 70119, "Bi": 135617, "Bim": 21471}


def test_cacheline_patch_covers_every_copy(tmp_path: Path) -> None:
    inc = tmp_path / "storage" / "innobase" / "include"
    inc.mkdir(parents=True)
    (inc / "ut0cpu_cache.h").write_text(MYSQL80_HEADER)
    (inc / "ut0mpmcbq.h").write_text("constexpr size_t INNODB_CACHE_LINE_SIZE = 64;\n")
    patch = make_cacheline_patch(tmp_path, 128)
    assert patch.lines_changed == 2
    assert len(patch.files) == 2
    assert patch.diff.count("+++ b/storage/innobase/include/") == 2


def test_verify_fails_on_missing_profiles_of_server_sources(tmp_path: Path) -> None:
    import sys

    from myaccel.builder.verify import run_checks

    binary = Path(sys.executable).resolve()  # any ELF binary: not a PGO build
    man = BuildManifest(
        build_dir=str(tmp_path),
        request={"opts": ["pgo", "cacheline"], "cacheline_bytes": 128},
        pgo={
            "use_build_done": True,
            "missing_profile": {
                "warnings": 3,
                "hot": ["/src/sql/sql_parse.cc"],
                "other": ["/src/client/mysql.cc"],
            },
        },
        source={"config_headers": ["include/my_config.h"]},
    )
    _, checks = run_checks(binary, man)
    by_id = {c.id: c for c in checks}
    assert by_id["pgo-missing-profile"].status == "fail"
    assert "sql_parse.cc" in by_id["pgo-missing-profile"].evidence
    assert by_id["pgo-profile-use"].status in ("fail", "unknown")
    assert by_id["cacheline"].status == "fail"  # nothing in the (empty) build dir
    assert man.pgo.missing_profile is not None
    man.pgo.missing_profile.hot = []
    _, checks = run_checks(binary, man)
    ok = {c.id: c for c in checks}["pgo-missing-profile"]
    assert ok.status == "pass" and "1 warning(s) for objects outside the server" in ok.evidence


def test_missing_profiles_are_classified_by_object_not_by_source(tmp_path: Path) -> None:
    """Seen on MariaDB 10.11.18: innochecksum compiles its own buf0buf.cc object and
    libdbug's dbug.c is never linked into a release mariadbd; both warn in the optimized
    build, neither concerns the server. Only a profile linked into the instrumented server
    that is missing counts."""
    prof = "/o/profile/"
    linked = [
        prof + "#o#build#storage#innobase#CMakeFiles#innobase.dir#buf#buf0buf.cc.gcda",
        prof + "#o#build#sql#CMakeFiles#sql.dir#sql_parse.cc.gcda",
    ]
    binary = tmp_path / "mariadbd"
    binary.write_bytes(b"\x7fELF\x00junk\x00" + b"\x00".join(p.encode() for p in linked) + b"\x00")
    assert pgo.linked_profiles(binary) == set(linked)

    def warn(src: str, gcda: str) -> str:
        return (
            f"/src/{src}:819:1: warning: \u2018{prof}{gcda}\u2019 profile count data file "
            "not found [-Wmissing-profile]"
        )

    log = "\n".join(
        [
            "[1/9] Building CXX object extra/...",
            warn(
                "storage/innobase/buf/buf0buf.cc",
                "#o#build#extra#CMakeFiles#innochecksum.dir#__#storage#innobase#buf#buf0buf.cc.gcda",
            ),
            warn("dbug/dbug.c", "#o#build#dbug#CMakeFiles#dbug.dir#dbug.c.gcda"),
        ]
    )
    res = pgo.classify_missing_profiles(log, binary)
    assert res is not None
    hot, other, method = res
    assert hot == [] and len(other) == 2 and "innochecksum.dir" in other[0]
    assert method.startswith("profiles linked into the instrumented mariadbd (2 objects)")
    # the server's own object without a profile is a real gap; a repeated warning counts once
    log2 = log + "\n" + 2 * (warn("sql/sql_parse.cc", linked[1].removeprefix(prof)) + "\n")
    hot2, _, _ = pgo.classify_missing_profiles(log2, binary) or ([], [], "")
    assert hot2 == ["/src/sql/sql_parse.cc (#o#build#sql#CMakeFiles#sql.dir#sql_parse.cc.gcda)"]
    # no instrumented binary, or a warning naming no profile: fall back (None)
    assert pgo.classify_missing_profiles(log, tmp_path / "gone") is None
    bare = "x.c:1:1: warning: profile count data file not found [-Wmissing-profile]"
    assert pgo.classify_missing_profiles(bare, binary) is None


def test_perf_record_pid_samples_while_the_block_runs(tmp_path: Path) -> None:
    fake = ReplayRunner().on(
        ["perf", "record"], Recording("[ perf record: Captured and wrote 0.1 MB ]\n")
    )
    data = tmp_path / "perf.data"
    with using(Environment(runner=fake)), (tmp_path / "log").open("w") as log:
        with perf_record_pid("perf", 4321, data, log):
            (child,) = fake.children
            assert child.poll() is None  # recording while the workload runs
        with (
            pytest.raises(BuildFailed, match="no server pid"),
            perf_record_pid("perf", None, data, log),
        ):
            pass
    assert fake.argvs("spawn") == [
        ("perf", "record", "-e", "cpu-clock", "-p", "4321", "-o", str(data))
    ]
    assert child.stop_calls == [(300, signal.SIGINT)]
    assert "Captured and wrote" in (tmp_path / "log").read_text()
