"""Offline dependency check before anything is compiled.

Every tool and library a build needs is checked locally (PATH lookups and a preprocessor
run per header with the build's own compiler, so cross builds check the cross sysroot).
A missing one stops the build with the Debian package that provides it. Nothing is ever
downloaded: the adapters also pass the CMake options that turn downloads into configure
errors (``WITH_PCRE=system``, ``WITH_LIBFMT=system``, ``DOWNLOAD_BOOST=OFF``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from myaccel import proc
from myaccel.build.errors import DependencyMissing
from myaccel.build.flags import BuildRequest, Toolchain
from myaccel.build.tree import SourceTree, find_mysql_boost, mysql_boost_wanted

Kind = Literal["tool", "c-header", "cxx-header"]


@dataclass(frozen=True)
class Dependency:
    kind: Kind
    name: str  # command, or header as in #include <...>
    package: str  # Debian package
    why: str
    prelude: str = ""  # source lines the header needs before it (e.g. a required macro)


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
            Dependency("c-header", "openssl/ssl.h", "libssl-dev", "TLS (WITH_SSL=system)"),
            Dependency("c-header", "zlib.h", "zlib1g-dev", "compression"),
            Dependency("c-header", "ncurses.h", "libncurses-dev", "the command-line client"),
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
            ),
            Dependency("c-header", "libaio.h", "libaio-dev", "InnoDB asynchronous I/O"),
            Dependency("c-header", "liburing.h", "liburing-dev", "InnoDB io_uring"),
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
                Dependency("c-header", "curl/curl.h", "libcurl4-openssl-dev", "keyring vault")
            )
    if req.wants("pgo") and ad.trainer == "sandbox":
        deps.append(_tool("sysbench", "sysbench", "the training workload"))
    if req.wants("bolt"):
        deps.append(_tool("perf", "linux-perf", "profiles the workload for BOLT"))
    return deps


def _header_found(tc: Toolchain, header: str, cxx: bool, prelude: str = "") -> bool:
    argv = [tc.cxx if cxx else tc.cc, "-E", "-x", "c++" if cxx else "c", "-", "-o", "/dev/null"]
    done = proc.run(argv, timeout_s=60, input_text=f"{prelude}#include <{header}>\n")
    return done.ok


def check(deps: list[Dependency], tc: Toolchain) -> list[DepResult]:
    out = []
    for d in deps:
        if d.kind == "tool":
            where = proc.which(d.name)
            out.append(DepResult(d, where is not None, where or ""))
        else:
            ok = _header_found(tc, d.name, d.kind == "cxx-header", d.prelude)
            out.append(
                DepResult(d, ok, f"<{d.name}> via {tc.cxx if d.kind == 'cxx-header' else tc.cc}")
            )
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
        pkgs = sorted({d.package for d in missing})
        what = ", ".join(f"{d.name} ({d.why})" for d in missing)
        raise DependencyMissing(
            f"missing build dependencies: {what}",
            hint=f"apt-get install {' '.join(pkgs)}  (nothing is downloaded during the build)",
        )
    return results
