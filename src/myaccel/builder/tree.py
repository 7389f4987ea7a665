"""Source trees: which server (flavor, version) a directory holds, and how to build it.

``detect_tree(path)`` reads only marker files (nothing is built or written) and returns a
``SourceTree`` with the ``TreeAdapter`` for its flavor. The adapters carry what differs
between flavors, checked against each project's CMake files:

* MariaDB 10.6-11.x: ``VERSION`` (``MYSQL_VERSION_MAJOR/MINOR/PATCH`` plus
  ``SERVER_MATURITY``). No PGO option: ``-fprofile-*`` flags by hand; LTO through
  ``CMAKE_INTERPROCEDURAL_OPTIMIZATION`` (the top-level ``CMAKE_MINIMUM_REQUIRED(2.8...3.12)``
  sets policy CMP0069 to NEW, so CMake honours it and uses gcc-ar). Plugins are switched
  off with ``PLUGIN_<NAME>=NO`` (cmake/plugin.cmake). pcre2 and libfmt are downloaded by
  ExternalProject in ``auto`` mode when the -dev packages are missing, so we always pass
  ``WITH_PCRE=system`` and ``WITH_LIBFMT=system`` (configure then fails instead of
  downloading). ``CPU_LEVEL1_DCACHE_LINESIZE``: 10.11's config.h.cmake does not carry the
  CMake variable to the compiler; include/my_global.h honours a non-zero compiler define,
  so the cache line also goes into the compile flags.
* MySQL 5.7 (``VERSION``), 8.0/8.4/9.x (``MYSQL_VERSION``): ``cmake/fprofile.cmake``
  (8.0.19+) has ``FPROFILE_GENERATE``/``FPROFILE_USE``/``FPROFILE_DIR``; 8.0 has
  ``WITH_LTO``; boost comes with the tree (``mysql-boost`` tarballs, ``extra/boost``) and is
  never downloaded (``DOWNLOAD_BOOST`` off where the tree has that option; 9.7's
  cmake/boost.cmake always uses ``extra/boost`` and has neither ``DOWNLOAD_BOOST`` nor
  ``WITH_BOOST``). Only options the tree's CMake files declare are passed
  (``declared_cmake_options``): 9.7 has no ``WITH_RAPID`` either. InnoDB's cache line is a
  hard-coded constant (64 except POWER): only a source patch changes it.
* Percona Server: a MySQL tree with Percona markers (``MYSQL_VERSION_EXTRA=-N``, Percona
  plugins and docs).
* kvlab: the test fixture (``KVLAB_VERSION``), a few C++ files that build in seconds.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from myaccel.builder.errors import TreeError
from myaccel.paths import existing_dir

Flavor = Literal["mariadb", "mysql", "percona", "kvlab"]
CachelineMode = Literal["cmake", "cmake+define", "patch"]
LtoMode = Literal["ipo", "mysql-with-lto"]
PgoMode = Literal["flags", "mysql-fprofile"]
TrainerKind = Literal["fixture", "sandbox"]

_KV_RE = re.compile(r"^\s*([A-Z_]+)\s*=\s*(.*?)\s*$")


def _read_kv(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        m = _KV_RE.match(line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


@dataclass(frozen=True)
class CMakeOption:
    name: str
    value: str
    why: str = ""

    def arg(self) -> str:
        return f"-D{self.name}={self.value}"


# The lean and offline CMake options per flavor are data (data/cmake_options.json), like
# the knob catalog; the adapters below add what depends on the tree.
_CMAKE_DATA = Path(__file__).parent / "data" / "cmake_options.json"


@functools.cache
def cmake_table() -> dict[str, dict[str, list[list[str]]]]:
    """The per-flavor option rows of ``data/cmake_options.json`` (read once)."""
    raw: dict[str, Any] = json.loads(_CMAKE_DATA.read_text(encoding="utf-8"))
    return {k: v for k, v in raw.items() if isinstance(v, dict) and k != "notes"}


def options(rows: list[list[str]]) -> list[CMakeOption]:
    """``[name, value, why]`` rows as options."""
    return [CMakeOption(name, value, why) for name, value, why in rows]


@dataclass(frozen=True)
class TreeAdapter:
    """Everything the pipeline needs to know about one flavor/version."""

    flavor: Flavor
    version: tuple[int, int, int]
    # install-tree paths of the server binary (first match wins)
    server_binaries: tuple[str, ...]
    # the build system's name of the server executable target
    server_target: str = "mysqld"
    # the lean default: options that switch big optional parts off, with the reason
    lean_options: tuple[CMakeOption, ...] = ()
    # options that keep the build offline and reproducible (never download)
    offline_options: tuple[CMakeOption, ...] = ()
    # CMake cache entries to clear before configuring (-U): stale failed checks
    unset_cache: tuple[str, ...] = ()
    lto_mode: LtoMode = "ipo"
    pgo_mode: PgoMode = "flags"
    cacheline_mode: CachelineMode = "cmake"
    trainer: TrainerKind = "sandbox"
    # source files whose profiles must exist after training (relative to the tree)
    hot_sources: tuple[str, ...] = ()
    # directories whose objects count as "the server" for -Wmissing-profile
    hot_dirs: tuple[str, ...] = ()
    # generated headers (relative to the build dir) where a cache line define may live
    config_headers: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def version_str(self) -> str:
        return ".".join(str(p) for p in self.version)

    @property
    def label(self) -> str:
        names = {"mariadb": "MariaDB", "mysql": "MySQL", "percona": "Percona Server"}
        return f"{names.get(self.flavor, 'kvlab fixture')} {self.version_str}"

    @property
    def server_name(self) -> str:
        return Path(self.server_binaries[0]).name

    def left_out(self) -> list[str]:
        return [f"{o.name}={o.value}: {o.why}" for o in self.lean_options if o.why]


@dataclass(frozen=True)
class SourceTree:
    path: Path
    adapter: TreeAdapter
    markers: tuple[str, ...]  # files that identified it

    def fingerprint(self) -> str:
        """A digest of every file's path, size and mtime (not contents: a MariaDB tree has
        ~30,000 files; stat-ing them takes a fraction of a second). ``--resume`` rebuilds
        when it changes."""
        import hashlib
        import os

        h = hashlib.sha256()
        for root, dirs, files in os.walk(self.path):
            dirs[:] = sorted(d for d in dirs if d != ".git")
            for name in sorted(files):
                p = os.path.join(root, name)
                try:
                    st = os.lstat(p)
                except OSError:
                    continue
                h.update(
                    f"{os.path.relpath(p, self.path)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode()
                )
        return h.hexdigest()[:20]

    @property
    def flavor(self) -> Flavor:
        return self.adapter.flavor

    @property
    def version(self) -> str:
        return self.adapter.version_str


# The directories whose objects are the server proper, in MariaDB and MySQL trees alike.
_SERVER_HOT_DIRS = ("sql", "storage/innobase", "mysys", "strings", "vio", "sql-common")

# ---------------------------------------------------------------- MariaDB

MARIADB_SUPPORTED = ((10, 6), (11, 99))  # 10.6 LTS .. 11.x


# Plugins a lean server keeps: the storage engines and features a sysbench/OLTP server
# uses, the MANDATORY ones (which ignore PLUGIN_X=NO anyway) and Connector/C's client-side
# authentication plugins (the client tools need them).
_MARIADB_KEEP = frozenset(
    {
        "INNOBASE", "PARTITION", "PERFSCHEMA", "SEQUENCE", "THREAD_POOL_INFO",
        "USER_VARIABLES", "AUTH_SOCKET", "ARIA", "MYISAM", "MYISAMMRG", "CSV", "HEAP",
        "SQL_SEQUENCE", "TYPE_GEOM", "TYPE_INET", "TYPE_UUID", "USERSTAT", "WSREP",
        "DIALOG", "CLIENT_ED25519", "MYSQL_CLEAR_PASSWORD", "AUTH_GSSAPI_CLIENT",
        "AUTHENTICATION_WINDOWS_CLIENT", "AUTH_NAMED_PIPE", "PLUGIN_NAME",
    }
)  # fmt: skip
_ADD_PLUGIN_RE = re.compile(r"MYSQL_ADD_PLUGIN\(\s*(\w+)")


def declared_plugins(tree: Path) -> set[str]:
    """Plugin names the tree declares (``MYSQL_ADD_PLUGIN(name ...)`` in its CMake files)."""
    names: set[str] = set()
    for top in ("storage", "plugin", "sql", "extra"):
        d = tree / top
        if not d.is_dir():
            continue
        for cm in d.rglob("CMakeLists.txt"):
            for m in _ADD_PLUGIN_RE.finditer(_safe_text(cm)):
                names.add(m.group(1).upper())
    return names


def _mariadb_adapter(tree: Path, version: tuple[int, int, int]) -> TreeAdapter:
    table = cmake_table()["mariadb"]
    big = table["big_plugins"]
    known = {n for n, _ in big}
    lean = [CMakeOption(f"PLUGIN_{n}", "NO", why) for n, why in big]
    for name in sorted(declared_plugins(tree) - _MARIADB_KEEP - known):
        lean.append(
            CMakeOption(
                f"PLUGIN_{name}", "NO", "optional plugin (not used by the server's OLTP path)"
            )
        )
    lean += options(table["lean"])
    offline = options(table["offline"])
    if (tree / "cmake" / "libfmt.cmake").is_file():
        offline.append(CMakeOption("WITH_LIBFMT", "system", "else libfmt is downloaded"))
    config_h = tree / "config.h.cmake"
    carries = "CPU_LEVEL1_DCACHE_LINESIZE" in _safe_text(config_h)
    notes = []
    if not carries:
        notes.append(
            "config.h.cmake does not carry CPU_LEVEL1_DCACHE_LINESIZE: the cache line is "
            "passed as a compiler define (include/my_global.h honours it)"
        )
    return TreeAdapter(
        flavor="mariadb",
        version=version,
        server_binaries=("bin/mariadbd", "sbin/mariadbd", "bin/mysqld"),
        server_target="mariadbd",
        lean_options=tuple(lean),
        offline_options=tuple(offline),
        unset_cache=("HAVE_SYSTEM_LIBFMT", "HAVE_PCRE2_MATCH_8"),
        cacheline_mode="cmake" if carries else "cmake+define",
        hot_sources=(
            "sql/sql_parse.cc",
            "sql/sql_select.cc",
            "sql/handler.cc",
            "storage/innobase/btr/btr0cur.cc",
            "storage/innobase/buf/buf0buf.cc",
            "storage/innobase/row/row0sel.cc",
        ),
        hot_dirs=_SERVER_HOT_DIRS,
        config_headers=("include/my_config.h", "config.h"),
        notes=tuple(notes),
    )


# ---------------------------------------------------------------- MySQL / Percona

MYSQL_SERIES = ((5, 7), (8, 0), (8, 4), *((9, minor) for minor in range(8)))  # 9.0 .. 9.7 LTS


def _mysql_adapter(
    tree: Path, version: tuple[int, int, int], flavor: Literal["mysql", "percona"]
) -> TreeAdapter:
    table = cmake_table()
    lean = options(table["mysql"]["lean"])
    if flavor == "percona":
        lean += options(table["percona"]["lean"])
    offline = options(table["mysql"]["offline"])
    boost = find_mysql_boost(tree)
    if boost is not None:
        offline.append(
            CMakeOption("WITH_BOOST", str(boost), "the boost tree shipped with the source")
        )
    # Pass only what this tree declares: CMake ignores the others with a warning, and an
    # option that silently does nothing hides a wrong assumption (9.7: no WITH_BOOST).
    declared = declared_cmake_options(tree)
    lean = [o for o in lean if o.name in declared]
    offline = [o for o in offline if o.name in declared]
    has_fprofile = (tree / "cmake" / "fprofile.cmake").is_file()
    has_with_lto = "WITH_LTO" in _safe_text(tree / "CMakeLists.txt")
    hot: tuple[str, ...]
    if flavor == "percona":
        hot = (
            "sql/sql_parse.cc",
            "storage/innobase/btr/btr0cur.cc",
            "storage/innobase/buf/buf0buf.cc",
        )
    else:
        hot = (
            "sql/sql_parse.cc",
            "sql/handler.cc",
            "storage/innobase/btr/btr0cur.cc",
            "storage/innobase/buf/buf0buf.cc",
        )
    return TreeAdapter(
        flavor=flavor,
        version=version,
        server_binaries=("bin/mysqld", "sbin/mysqld"),
        lean_options=tuple(lean),
        offline_options=tuple(offline),
        lto_mode="mysql-with-lto" if has_with_lto else "ipo",
        pgo_mode="mysql-fprofile" if has_fprofile else "flags",
        cacheline_mode="patch",
        hot_sources=hot,
        hot_dirs=_SERVER_HOT_DIRS,
        config_headers=("include/my_config.h", "my_config.h"),
    )


_CMAKE_DECL_RES = (
    re.compile(r"\bOPTION\s*\(\s*(\w+)", re.IGNORECASE),
    re.compile(r"\bSET\s*\(\s*(\w+)\b[^)]*\bCACHE\b", re.IGNORECASE),
    re.compile(r"\bDEFINED\s+(\w+)", re.IGNORECASE),
    re.compile(r"\bIF\s*\(\s*(?:NOT\s+)?(\w+)\s*\)", re.IGNORECASE),
)


def _cmake_files(tree: Path) -> list[Path]:
    """The CMake files that declare a MySQL tree's build options: the top CMakeLists.txt,
    cmake/**/*.cmake, and the CMakeLists.txt of each plugin/storage/sql directory (the X
    plugin declares WITH_MYSQLX in plugin/x). Bundled libraries (extra/) are left out."""
    files = [tree / "CMakeLists.txt"]
    if (tree / "cmake").is_dir():
        files += sorted((tree / "cmake").rglob("*.cmake"))
    for top in ("plugin", "storage", "sql"):
        d = tree / top
        if d.is_dir():
            files += sorted(d.glob("CMakeLists.txt")) + sorted(d.glob("*/CMakeLists.txt"))
    return files


def declared_cmake_options(tree: Path) -> frozenset[str]:
    """Names a tree's CMake files declare or test: ``OPTION(X``, ``SET(X ... CACHE``,
    ``DEFINED X``, ``IF(X)``/``IF(NOT X)``. A ``-DX=...`` of another name does nothing."""
    names: set[str] = set()
    for f in _cmake_files(tree):
        text = _safe_text(f)
        for rx in _CMAKE_DECL_RES:
            names.update(m.group(1) for m in rx.finditer(text))
    return frozenset(names)


def find_mysql_boost(tree: Path) -> Path | None:
    """The boost tree shipped inside a MySQL source (mysql-boost tarballs: boost/boost_1_*,
    newer 8.0/8.4: extra/boost/boost_1_*)."""
    for parent in (tree / "extra" / "boost", tree / "boost"):
        if parent.is_dir():
            found = sorted(p for p in parent.glob("boost_1_*") if p.is_dir())
            if found:
                return found[-1]
    return None


def mysql_boost_wanted(tree: Path) -> str | None:
    """The boost package name the tree's cmake/boost.cmake asks for, or None if it needs none."""
    text = _safe_text(tree / "cmake" / "boost.cmake")
    if not text:
        return None
    m = re.search(r'BOOST_PACKAGE_NAME\s+"?(boost_1_\d+_\d+)', text)
    return m.group(1) if m else "boost (version named in cmake/boost.cmake)"


# ---------------------------------------------------------------- kvlab fixture


def _kvlab_adapter(version: tuple[int, int, int]) -> TreeAdapter:
    return TreeAdapter(
        flavor="kvlab",
        version=version,
        server_binaries=("bin/kvlabd",),
        server_target="kvlabd",
        trainer="fixture",
        hot_sources=("src/main.cpp", "src/store.cpp", "src/workload.cpp", "src/index.cpp"),
        hot_dirs=("src",),
        config_headers=("kvlab_config.h",),
    )


# ---------------------------------------------------------------- detection


def _safe_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _version_of(kv: dict[str, str], prefix: str, source: Path) -> tuple[int, int, int]:
    try:
        return (
            int(kv[f"{prefix}_MAJOR"]),
            int(kv[f"{prefix}_MINOR"]),
            int(kv[f"{prefix}_PATCH"]),
        )
    except (KeyError, ValueError):
        raise TreeError(
            f"'{source}' has no readable {prefix}_MAJOR/MINOR/PATCH lines",
            hint="the version file is damaged or not a server source tree's; use an unpacked "
            "release tarball or a git checkout",
        ) from None


def _is_percona(tree: Path, kv: dict[str, str]) -> bool:
    if re.fullmatch(r"-\d+(\.\d+)?", kv.get("MYSQL_VERSION_EXTRA", "")):
        return True
    markers = ("plugin/percona-udf", "plugin/percona-pam-for-mysql", "storage/tokudb")
    if any((tree / m).exists() for m in markers):
        return True
    readme = _safe_text(tree / "README.md")[:4000] + _safe_text(tree / "README")[:4000]
    return "Percona Server" in readme


def detect_tree(path: str | Path) -> SourceTree:
    """Identify the tree at ``path``; a clear ``TreeError`` for anything unsupported."""
    p = existing_dir(
        Path(path).expanduser(),
        "source",
        TreeError,
        hint="pass the top directory of an unpacked MariaDB/MySQL source (with CMakeLists.txt)",
        not_dir_hint="unpack the source tarball first (tar xf ...) and pass its top directory",
    ).resolve()
    if not (p / "CMakeLists.txt").is_file():
        raise TreeError(
            f"'{p}' is not a CMake source tree (no CMakeLists.txt)",
            hint="pass the top directory of a MariaDB, MySQL or Percona Server source tree",
        )
    if (p / "KVLAB_VERSION").is_file():
        kv = _read_kv(p / "KVLAB_VERSION")
        return SourceTree(
            p,
            _kvlab_adapter(_version_of(kv, "KVLAB_VERSION", p / "KVLAB_VERSION")),
            ("KVLAB_VERSION",),
        )
    version_file = p / "VERSION"
    mysql_file = p / "MYSQL_VERSION"
    if mysql_file.is_file() or version_file.is_file():
        src = mysql_file if mysql_file.is_file() else version_file
        kv = _read_kv(src)
        if "MYSQL_VERSION_MAJOR" not in kv:
            raise TreeError(
                f"'{src}' is not a MySQL/MariaDB version file",
                hint="pass the top directory of a MariaDB, MySQL or Percona Server source tree",
            )
        ver = _version_of(kv, "MYSQL_VERSION", src)
        is_mariadb = src.name == "VERSION" and (
            "SERVER_MATURITY" in kv
            or (p / "storage" / "maria").is_dir()
            or (p / "libmariadb").is_dir()
        )
        if is_mariadb:
            lo, hi = MARIADB_SUPPORTED
            if not lo <= ver[:2] <= hi:
                raise TreeError(
                    f"MariaDB {'.'.join(map(str, ver))} is not supported by myaccel build",
                    hint="supported: MariaDB 10.6 to 11.x (the build options of other series "
                    "were not checked); build it by hand or use a supported release",
                )
            return SourceTree(p, _mariadb_adapter(p, ver), (src.name,))
        flavor: Literal["mysql", "percona"] = "percona" if _is_percona(p, kv) else "mysql"
        if ver[0] >= 26:  # MySQL's calendar versions (YY.M.P, from 26.7.0, July 2026)
            raise TreeError(
                f"MySQL {'.'.join(map(str, ver))} is a calendar version (YY.M.P, from 26.7.0): "
                "not yet supported by myaccel build",
                hint="its build options were not checked yet; supported: MySQL/Percona 5.7, "
                "8.0, 8.4 and 9.x",
            )
        if ver[:2] not in MYSQL_SERIES:
            raise TreeError(
                f"{'Percona Server' if flavor == 'percona' else 'MySQL'} "
                f"{'.'.join(map(str, ver))} is not supported by myaccel build",
                hint="supported: MySQL/Percona 5.7, 8.0, 8.4 and 9.x",
            )
        return SourceTree(p, _mysql_adapter(p, ver, flavor), (src.name,))
    raise TreeError(
        f"'{p}' has a CMakeLists.txt but no VERSION/MYSQL_VERSION file: not a MySQL-family tree",
        hint="pass the top directory of a MariaDB (VERSION), MySQL 8.0+ (MYSQL_VERSION) or "
        "MySQL 5.7 (VERSION) source tree",
    )
