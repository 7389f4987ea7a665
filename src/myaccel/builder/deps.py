"""Offline dependency check before anything is compiled.

Every tool and library a build needs is checked locally: PATH lookups, and per library a
tiny program that includes its header and links it (``-lz``), compiled with the build's own
compiler. For a cross build that is the cross compiler, which finds the target's libraries
in the multiarch directories (``/usr/lib/aarch64-linux-gnu``): the host's ``-dev`` packages
satisfy its headers but not its links, so a missing library names the target's package
(``libssl-dev:arm64``, after ``dpkg --add-architecture arm64``). A missing one stops the
build with the Debian package that provides it. Nothing is ever
downloaded: the adapters also pass the CMake options that turn downloads into configure
errors (``WITH_PCRE=system``, ``WITH_LIBFMT=system``, ``DOWNLOAD_BOOST=OFF``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from myaccel import proc
from myaccel.builder.cross import deb_arch, install_hint
from myaccel.builder.errors import DependencyMissing
from myaccel.builder.flags import BuildRequest, Toolchain
from myaccel.builder.tree import SourceTree, find_mysql_boost, mysql_boost_wanted

Kind = Literal["tool", "c-header", "cxx-header"]


@dataclass(frozen=True)
class Dependency:
    kind: Kind
    name: str  # command, or header as in #include <...>
    package: str  # Debian package
    why: str
    prelude: str = ""  # source lines the header needs before it (e.g. a required macro)
    lib: str = ""  # library linked with -l<lib> (empty: header only, e.g. header-only fmt)


@dataclass(frozen=True)
class DepResult:
    dep: Dependency
    found: bool
    where: str = ""


def _tool(name: str, package: str, why: str) -> Dependency:
    return Dependency("tool", name, package, why)


def required(tree: SourceTree, req: BuildRequest) -> list[Dependency]:
    ad = tree.adapter
    deps = [_tool("cmake", "cmake", "configures the build")]
    if ad.flavor == "kvlab":
        pass
    else:
        deps.append(_tool("pkg-config", "pkg-config", "CMake finds libraries through it"))
        deps += [
            Dependency(
                "c-header", "openssl/ssl.h", "libssl-dev", "TLS (WITH_SSL=system)", lib="ssl"
            ),
            Dependency("c-header", "zlib.h", "zlib1g-dev", "compression", lib="z"),
            Dependency(
                "c-header", "ncurses.h", "libncurses-dev", "the command-line client", lib="ncurses"
            ),
        ]
    if ad.flavor == "mariadb":
        if not (tree.path / "sql" / "yy_mariadb.cc").is_file():
            deps.append(_tool("bison", "bison", "generates the SQL parser (git trees)"))
        deps += [
            Dependency(
                "c-header",
                "pcre2.h",
                "libpcre2-dev",
                "regexp functions (else downloaded)",
                "#define PCRE2_CODE_UNIT_WIDTH 8\n",
                lib="pcre2-8",
            ),
            Dependency("c-header", "libaio.h", "libaio-dev", "InnoDB asynchronous I/O", lib="aio"),
            Dependency("c-header", "liburing.h", "liburing-dev", "InnoDB io_uring", lib="uring"),
        ]
        if (tree.path / "cmake" / "libfmt.cmake").is_file():
            deps.append(
                Dependency(
                    "cxx-header", "fmt/args.h", "libfmt-dev", "SFORMAT (else fmt is downloaded)"
                )
            )
    if ad.flavor in ("mysql", "percona"):
        if not (tree.path / "sql" / "sql_yacc.cc").is_file():
            deps.append(_tool("bison", "bison", "generates the SQL parser"))
        if ad.flavor == "percona":
            deps.append(
                Dependency(
                    "c-header", "curl/curl.h", "libcurl4-openssl-dev", "keyring vault", lib="curl"
                )
            )
    if req.wants("pgo") and ad.trainer == "sandbox":
        deps.append(_tool("sysbench", "sysbench", "the training workload"))
    if req.wants("bolt"):
        deps.append(_tool("perf", "linux-perf", "profiles the workload for BOLT"))
    if req.cross:
        deps.append(
            _tool(
                f"qemu-{req.cross}",
                "qemu-user",
                "runs target programs: cmake's try-run checks, the install check",
            )
        )
    return deps


def package_for(dep: Dependency, tc: Toolchain) -> str:
    """The Debian package to install: the target's (``zlib1g-dev:arm64``) for a library of
    a cross build, the host's otherwise."""
    if tc.cross and dep.kind != "tool":
        return f"{dep.package}:{deb_arch(tc.target_arch)}"
    return dep.package


def _library_found(tc: Toolchain, dep: Dependency) -> bool:
    """Include the header and, when the dependency has a library, link it."""
    cxx = dep.kind == "cxx-header"
    compiler = tc.cxx if cxx else tc.cc
    lang = "c++" if cxx else "c"
    source = f"{dep.prelude}#include <{dep.name}>\n"
    if dep.lib:
        argv = [compiler, "-x", lang, "-", "-o", "/dev/null", f"-l{dep.lib}"]
        source += "int main(void) { return 0; }\n"
    else:
        argv = [compiler, "-E", "-x", lang, "-", "-o", "/dev/null"]
    return proc.run(argv, timeout_s=60, input_text=source).ok


def check(deps: list[Dependency], tc: Toolchain) -> list[DepResult]:
    out = []
    for d in deps:
        if d.kind == "tool":
            where = proc.which(d.name)
            out.append(DepResult(d, where is not None, where or ""))
        else:
            ok = _library_found(tc, d)
            compiler = tc.cxx if d.kind == "cxx-header" else tc.cc
            how = f"<{d.name}>" + (f" -l{d.lib}" if d.lib else "")
            out.append(DepResult(d, ok, f"{how} via {compiler}"))
    return out


def ensure(tree: SourceTree, req: BuildRequest, tc: Toolchain) -> list[DepResult]:
    """Check everything; raise one ``DependencyMissing`` naming all missing packages."""
    results = check(required(tree, req), tc)
    missing = [r.dep for r in results if not r.found]
    if tree.flavor in ("mysql", "percona"):
        wanted = mysql_boost_wanted(tree.path)
        if wanted and find_mysql_boost(tree.path) is None:
            raise DependencyMissing(
                f"{tree.adapter.label} needs {wanted} and the tree does not ship it",
                hint="use the mysql-boost-VERSION source tarball (boost inside) or add "
                "--cmake-arg -DWITH_BOOST=DIR of an unpacked boost of that exact version; "
                "myaccel never downloads it",
            )
    if missing:
        pkgs = sorted({package_for(d, tc) for d in missing})
        target = tc.target_arch if any(":" in p for p in pkgs) else None
        what = ", ".join(
            f"{d.name}{f' -l{d.lib}' if d.lib and tc.cross else ''} ({d.why})" for d in missing
        )
        if target is not None:
            what += f" for {tc.target_arch}"
        raise DependencyMissing(
            f"missing build dependencies: {what}",
            hint=f"{install_hint(pkgs, target)}  (nothing is downloaded during the build)",
        )
    return results
