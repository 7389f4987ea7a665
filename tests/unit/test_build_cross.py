"""Cross builds and the installed server's source, each check on a fake runner
(``ReplayRunner``): the qemu command and its one root, the CMake emulator and pkg-config
directories, link checks that name the target's packages, the target CPU checked by the
compiler, ``--dry-run --json``, and ``--from-installed`` (dpkg, the private deb-src apt,
the version check, the reuse of a fetched tree)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from fake_runner import Recording, ReplayRunner

from myaccel import proc
from myaccel.builder import cross, deps, distsrc
from myaccel.builder.errors import BuildOptionError, DependencyMissing, TreeError
from myaccel.builder.flags import BuildRequest, TargetCpu, Toolchain, check_arch_flags
from myaccel.builder.tree import detect_tree
from myaccel.cli.main import cli
from myaccel.env import Environment, using

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "buildproj"
CROSS_TC = Toolchain(
    "/usr/bin/aarch64-linux-gnu-gcc",
    "/usr/bin/aarch64-linux-gnu-g++",
    "12.2.0",
    "aarch64",
    True,
    "aarch64-linux-gnu",
    "Ninja",
)
X86_TC = Toolchain("/usr/bin/gcc", "/usr/bin/g++", "12.2.0", "x86_64", False, "x86_64", "Ninja")
ROOT_LIB = "LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib:/usr/lib/aarch64-linux-gnu:"


def mariadb_tree(root: Path, version: str = "10.11.18", changelog: str | None = None) -> Path:
    """The marker files of a MariaDB release tree (Debian's, with a changelog)."""
    major, minor, patch = version.split(".")
    root.mkdir(parents=True)
    (root / "CMakeLists.txt").write_text("project(MySQL)\n")
    (root / "VERSION").write_text(
        f"MYSQL_VERSION_MAJOR={major}\nMYSQL_VERSION_MINOR={minor}\n"
        f"MYSQL_VERSION_PATCH={patch}\nSERVER_MATURITY=stable\n"
    )
    (root / "sql").mkdir()
    (root / "sql" / "yy_mariadb.cc").write_text("")
    if changelog:
        (root / "debian").mkdir()
        (root / "debian" / "changelog").write_text(
            f"mariadb ({changelog}) bookworm; urgency=medium\n\n  * x\n"
        )
    return root


# ---------------------------------------------------------------- one qemu command


def test_qemu_argv_has_one_root_and_the_cross_libc_first() -> None:
    fake = ReplayRunner().on(["qemu-aarch64"], Recording())
    with using(Environment(runner=fake)):
        argv = cross.qemu_argv("aarch64")
        assert cross.target_runner("aarch64", True) == argv
        assert cross.target_runner("x86_64", False) == []
    assert argv[:3] == ["/usr/bin/qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"]
    # the loader comes from the cross root: its C library must come first, not the one
    # the host's ld.so.cache names once libc6:arm64 is installed
    assert argv[3] == "-E" and argv[4].startswith(ROOT_LIB)


def test_missing_qemu_names_qemu_user() -> None:
    with using(Environment(runner=ReplayRunner())), pytest.raises(DependencyMissing) as exc:
        cross.qemu_argv("aarch64")
    assert "qemu-aarch64" in exc.value.message and exc.value.hint == "apt-get install qemu-user"


def test_cmake_gets_the_same_qemu_as_emulator_and_pkg_config_the_target_dirs() -> None:
    fake = ReplayRunner().on(["qemu-aarch64"], Recording())
    with using(Environment(runner=fake)):
        args = cross.cmake_args("aarch64")
        emulator = next(a for a in args if a.startswith("-DCMAKE_CROSSCOMPILING_EMULATOR="))
        assert emulator.split("=", 1)[1].split(";") == cross.qemu_argv("aarch64")
    assert "-DCMAKE_SYSTEM_PROCESSOR=aarch64" in args
    env = cross.build_env("aarch64", True)
    assert env["PKG_CONFIG_LIBDIR"] == "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig"
    assert env["PKG_CONFIG_PATH"] is None  # a host path there would be searched first
    assert cross.build_env("x86_64", False) == {}


# ---------------------------------------------------------------- link checks


def _link_fails_for(*libs: str, missing: tuple[str, ...] = ()) -> ReplayRunner:
    def answer(argv: tuple[str, ...]) -> Recording:
        missing = [a for a in argv if a in {f"-l{x}" for x in libs}]
        if missing:
            return Recording(stderr=f"ld: cannot find {missing[0]}: No such file", returncode=1)
        return Recording()

    fake = ReplayRunner(missing=missing)
    for tool in ("aarch64-linux-gnu-gcc", "aarch64-linux-gnu-g++", "gcc", "g++"):
        fake.on([tool], answer)
    for tool in ("cmake", "pkg-config", "qemu-aarch64"):
        fake.on([tool], Recording())
    return fake


@pytest.mark.parametrize(("foreign", "add_arch"), [("", True), ("arm64\n", False)])
def test_cross_link_check_names_the_arm64_packages(
    tmp_path: Path, foreign: str, add_arch: bool
) -> None:
    tree = detect_tree(mariadb_tree(tmp_path / "src"))
    fake = _link_fails_for("z", "ssl")
    fake.on(["dpkg", "--print-foreign-architectures"], Recording(stdout=foreign))
    with using(Environment(runner=fake)), pytest.raises(DependencyMissing) as exc:
        deps.ensure(tree, BuildRequest(cross="aarch64"), CROSS_TC)
    msg, hint = exc.value.message, exc.value.hint
    assert "zlib.h -lz" in msg and "openssl/ssl.h -lssl" in msg and msg.endswith("for aarch64")
    assert "apt-get install libssl-dev:arm64 zlib1g-dev:arm64" in hint
    assert hint.startswith("dpkg --add-architecture arm64 && apt-get update") is add_arch
    # the headers are checked by linking a program with the cross compiler, not by -E
    links = [a for a in fake.argvs("run") if a[0].endswith("aarch64-linux-gnu-gcc")]
    zlib = next(a for a in links if "-lz" in a)
    assert "-E" not in zlib and zlib[-3:] == ("-o", "/dev/null", "-lz")


def test_native_link_check_names_host_packages(tmp_path: Path) -> None:
    tree = detect_tree(mariadb_tree(tmp_path / "src"))
    with using(Environment(runner=_link_fails_for("uring"))), pytest.raises(DependencyMissing) as e:
        deps.ensure(tree, BuildRequest(), X86_TC)
    assert e.value.hint.startswith("apt-get install liburing-dev ")


def test_cross_preflight_needs_qemu(tmp_path: Path) -> None:
    tree = detect_tree(mariadb_tree(tmp_path / "src"))
    fake = _link_fails_for(missing=("qemu-aarch64",))
    with using(Environment(runner=fake)), pytest.raises(DependencyMissing) as exc:
        deps.ensure(tree, BuildRequest(cross="aarch64"), CROSS_TC)
    assert "qemu-aarch64" in exc.value.message and "qemu-user" in exc.value.hint


# ---------------------------------------------------------------- target CPU


def test_target_cpu_checked_by_the_compiler() -> None:
    bad = Recording(
        stderr="cc1: error: bad value \u2018tsv110\u2019 for \u2018-march=\u2019 switch\n"
        "cc1: note: valid arguments to \u2018-march=\u2019 switch are: nocona core2\n",
        returncode=1,
    )
    fake = ReplayRunner().on(["gcc"], bad)
    target = TargetCpu("x86_64", "tsv110", None, "--target-cpu tsv110")
    with using(Environment(runner=fake)), pytest.raises(BuildOptionError) as exc:
        check_arch_flags(X86_TC, ["-march=tsv110"], target)
    assert exc.value.message.startswith("--target-cpu tsv110 is not valid for x86_64")
    assert "bad value" in exc.value.message and "cc1" not in exc.value.message
    assert "--cross aarch64" in exc.value.hint
    assert fake.argvs("run")[0] == (
        "/usr/bin/gcc", "-march=tsv110", "-E", "-x", "c", "/dev/null", "-o", "/dev/null",
    )  # fmt: skip
    ok = ReplayRunner().on(["aarch64-linux-gnu-gcc"], Recording())
    with using(Environment(runner=ok)):
        check_arch_flags(CROSS_TC, ["-mcpu=neoverse-n1"], TargetCpu("aarch64", "x", True, ""))


# ---------------------------------------------------------------- --dry-run --json


def _need(*tools: str) -> None:
    for t in tools:
        if proc.which(t) is None:
            pytest.skip(f"{t} is not installed")


def test_dry_run_json_is_the_plan(tmp_path: Path, myaccel_home: Path) -> None:
    _need("cmake", "aarch64-linux-gnu-g++", "qemu-aarch64")
    out = tmp_path / "out"
    res = CliRunner().invoke(
        cli,
        ["build", "--source", str(FIXTURE), "--out", str(out), "--cross", "aarch64",
         "--opt", "lse", "--target-cpu", "neoverse-n1", "--dry-run", "--json"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    plan = json.loads(res.stdout)
    assert plan["stages"] == ["configure", "build", "install", "verify", "measure"]
    assert plan["flags"]["final"]["c_flags"] == ["-mcpu=neoverse-n1"]
    argv = plan["configure"]["final"]
    emu = next(a for a in argv if a.startswith("-DCMAKE_CROSSCOMPILING_EMULATOR="))
    assert emu.split("=", 1)[1].split(";") == plan["cross"]["emulator"]
    assert plan["cross"]["env"]["PKG_CONFIG_LIBDIR"].startswith("/usr/lib/aarch64-linux-gnu/")
    assert {d["name"] for d in plan["dependencies"]} >= {"cmake", "qemu-aarch64"}
    assert not out.exists() and not any(myaccel_home.iterdir())


# ---------------------------------------------------------------- --from-installed


VERSION_OUT = "mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)"
DEB_VERSION = "1:10.11.19-0+deb12u1"


def _installed(tmp_path: Path) -> tuple[Path, ReplayRunner]:
    binary = tmp_path / "sbin" / "mariadbd"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    fake = ReplayRunner()
    fake.on([str(binary), "--version"], Recording(stdout=VERSION_OUT))
    fake.on(["dpkg", "-S"], Recording(stdout=f"mariadb-server-core: {binary}\n"))
    fake.on(["dpkg-query"], Recording(stdout=f"{DEB_VERSION}\tmariadb\t{DEB_VERSION}"))
    return binary, fake


def test_describe_installed_reads_package_and_source(tmp_path: Path) -> None:
    binary, fake = _installed(tmp_path)
    with using(Environment(runner=fake)):
        s = distsrc.describe_installed(binary)
    assert (s.flavor, s.version, s.package) == ("mariadb", "10.11.19", "mariadb-server-core")
    assert (s.source_package, s.source_version) == ("mariadb", DEB_VERSION)
    assert distsrc.upstream_of(DEB_VERSION) == "10.11.19"


def test_deb_src_entries_mirror_the_hosts_deb_entries(tmp_path: Path) -> None:
    etc = tmp_path / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    (etc / "sources.list").write_text(
        "# comment\ndeb [arch=amd64] http://mirror/debian bookworm main contrib\n"
        "deb-src http://mirror/debian bookworm main\n"
    )
    (etc / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
        "Types: deb\n# http://snapshot\nURIs: http://deb.debian.org/debian-security\n"
        "Suites: bookworm-security\nComponents: main\nEnabled: no\n"
    )
    (etc / "sources.list.d" / "other.list.disabled").write_text("deb http://x/ y z\n")
    lines = distsrc.deb_src_lines(distsrc.host_deb_entries(etc))
    assert lines == [
        "deb-src [arch=amd64] http://mirror/debian bookworm main contrib",
        "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
        "http://deb.debian.org/debian bookworm main",
        "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
        "http://deb.debian.org/debian bookworm-updates main",
    ]


def test_tree_must_be_the_installed_version(tmp_path: Path) -> None:
    binary, fake = _installed(tmp_path)
    with using(Environment(runner=fake)):
        server = distsrc.describe_installed(binary)
    older = mariadb_tree(tmp_path / "old", "10.11.18", "1:10.11.18-0+deb12u1")
    with pytest.raises(TreeError) as exc:
        distsrc.check_tree_matches(older, server)
    assert "1:10.11.18-0+deb12u1 (debian/changelog)" in exc.value.message
    assert "--source DIR" in exc.value.hint
    plain = mariadb_tree(tmp_path / "plain", "10.11.18")
    with pytest.raises(TreeError, match=r"tree is MariaDB 10\.11\.18, the installed"):
        distsrc.check_tree_matches(plain, server)
    same = mariadb_tree(tmp_path / "same", "10.11.19")
    assert distsrc.check_tree_matches(same, server)["matched_by"] == "upstream version"


def _apt(fake: ReplayRunner, versions: list[str]) -> ReplayRunner:
    fake.on(["apt-get", "-c"], Recording())
    fake.on(["dpkg-source"], Recording())
    showsrc = "".join(f"Package: mariadb\nVersion: {v}\n\n" for v in versions)
    return fake.on(["apt-cache", "-c"], Recording(stdout=showsrc))


@pytest.mark.parametrize(
    ("versions", "needle"),
    [([], "no deb-src entry lists the source package mariadb"),
     (["1:10.11.18-0+deb12u1"], "list mariadb 1:10.11.18-0+deb12u1, not the installed")],
)  # fmt: skip
def test_fetch_without_the_version_is_one_clear_error(
    tmp_path: Path, versions: list[str], needle: str
) -> None:
    binary, fake = _installed(tmp_path)
    _apt(fake, versions)
    home = tmp_path / "home"
    with using(Environment(runner=fake)):
        server = distsrc.describe_installed(binary)
        with pytest.raises(DependencyMissing) as exc:
            distsrc.resolve_source(server, home, None)
    assert needle in exc.value.message and "--source DIR" in exc.value.hint
    # the private apt configuration: its own lists, never the host's
    conf = (home / "apt" / "apt.conf").read_text()
    assert f'Dir::State::Lists "{home / "apt" / "lists"}"' in conf
    assert any(a[:3] == ("apt-get", "-c", str(home / "apt" / "apt.conf")) for a in fake.argvs())


def test_fetched_tree_is_checked_and_reused(tmp_path: Path) -> None:
    binary, fake = _installed(tmp_path)
    _apt(fake, ["1:10.11.18-0+deb12u1", DEB_VERSION])
    home = tmp_path / "home"
    with using(Environment(runner=fake)):
        server = distsrc.describe_installed(binary)
        plan = distsrc.plan_fetch(server, home)
        assert plan.tree is None and plan.spec == f"mariadb={DEB_VERSION}"
        # what apt-get source unpacks (the fake runner does not write files)
        mariadb_tree(plan.dest / "mariadb-10.11.19", "10.11.19", DEB_VERSION)
        tree, origin = distsrc.resolve_source(server, home, None)
    assert tree == plan.dest / "mariadb-10.11.19"
    assert origin["check"]["matched_by"] == "debian/changelog" and origin["reused"] is False
    get = [a for a in fake.argvs() if "source" in a and a[0] == "apt-get"]
    assert get[0][-1] == f"mariadb={DEB_VERSION}"
    again = ReplayRunner()  # no apt, no network: the recorded tree is reused
    with using(Environment(runner=again)):
        tree2, origin2 = distsrc.resolve_source(server, home, None)
    assert tree2 == tree and origin2["reused"] is True and again.argvs() == []


def test_binary_without_a_package_needs_source(tmp_path: Path) -> None:
    server = distsrc.InstalledServer("/opt/x/bin/mariadbd", "mariadb", "10.11.19")
    with pytest.raises(Exception, match="does not belong to a Debian package"):
        distsrc.plan_fetch(server, tmp_path)


def test_a_version_the_mirror_does_not_serve_is_one_clear_error(tmp_path: Path) -> None:
    """Debian's security archive lists 10.11.19, the mirror answers 404 for its files."""
    binary, fake = _installed(tmp_path)
    _apt(fake, [DEB_VERSION])
    home = tmp_path / "home"
    conf = str(home / "apt" / "apt.conf")
    fake.on(
        ["apt-get", "-c", conf, "-q", "source"],
        Recording(
            stderr="E: Failed to fetch http://deb.debian.org/debian-security/pool/updates/main/"
            "m/mariadb/mariadb_10.11.19-0%2bdeb12u1.dsc  404  Not Found\n",
            returncode=100,
        ),
    )
    with using(Environment(runner=fake)):
        server = distsrc.describe_installed(binary)
        with pytest.raises(DependencyMissing) as exc:
            distsrc.resolve_source(server, home, None)
    assert "the mirror lists it but does not serve its files" in exc.value.message
    assert exc.value.hint == f"pass --source DIR with the {DEB_VERSION} tree"
    assert not (home / "sources" / "mariadb_1_10.11.19-0+deb12u1" / distsrc.MARKER).exists()
