"""PGO helpers: where GCC writes profiles, whether training covered the server, and the
``-Wmissing-profile`` warnings of the optimized build.

GCC names a profile after the absolute path of its object file: with
``-fprofile-generate=DIR`` the object ``/o/build/sql/CMakeFiles/sql.dir/sql_parse.cc.o``
writes ``DIR/#o#build#sql#CMakeFiles#sql.dir#sql_parse.cc.gcda``. So the optimized build
must compile the same objects at the same paths: the pipeline reuses one build directory.
Profiles are written when the program exits normally (``exit``/return from main), never
on SIGKILL: training ends with a clean shutdown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_MISSING_RE = re.compile(r"^(?P<file>[^:\s][^:]*):(?:\d+:\d+:)?\s*warning: .*\[-Wmissing-profile\]")
# the profile the warning looked for, quoted with GCC's typographic or plain quotes
_GCDA_RE = re.compile(r"[\u2018'`\"](?P<gcda>[^\u2018\u2019'`\"]+\.gcda)[\u2019'`\"]")


@dataclass(frozen=True)
class ProfileFile:
    path: Path
    object_path: str  # the object path GCC encoded in the name ('#' -> '/')
    size_bytes: int
    mtime: float


def list_profiles(profile_dir: Path) -> list[ProfileFile]:
    out: list[ProfileFile] = []
    if not profile_dir.is_dir():
        return out
    for p in profile_dir.rglob("*.gcda"):
        try:
            st = p.stat()
        except OSError:
            continue
        rel = str(p.relative_to(profile_dir))
        decoded = rel.replace("#", "/")
        out.append(ProfileFile(p, decoded.removesuffix(".gcda"), st.st_size, st.st_mtime))
    return sorted(out, key=lambda f: f.object_path)


def matches_source(profile: ProfileFile, source: str) -> bool:
    """Whether a profile belongs to the object compiled from ``source`` (tree-relative,
    e.g. ``sql/sql_parse.cc``): CMake names objects ``<dir>/CMakeFiles/<t>.dir/<file>.o``
    (or keeps the subdirectory: ``CMakeFiles/<t>.dir/src/main.cpp.o``)."""
    parts = source.split("/")
    obj = profile.object_path
    if not obj.endswith("/" + parts[-1]) and not obj.endswith("/" + parts[-1] + ".o"):
        return False
    comps = obj.split("/")
    return all(d in comps for d in parts[:-1])


@dataclass(frozen=True)
class Coverage:
    profiles: int
    nonempty: int
    fresh: int  # written after training started
    hot_found: list[str]
    hot_missing: list[str]


def check_coverage(profile_dir: Path, hot_sources: tuple[str, ...], since: float) -> Coverage:
    files = list_profiles(profile_dir)
    # only profiles written after training began count (the install check's `--version`
    # run and build-time tools write some too)
    fresh = [f for f in files if f.mtime >= since and f.size_bytes > 0]
    found, missing = [], []
    for src in hot_sources:
        if any(matches_source(f, src) for f in fresh):
            found.append(src)
        else:
            missing.append(src)
    return Coverage(
        profiles=len(files),
        nonempty=sum(1 for f in files if f.size_bytes > 0),
        fresh=len(fresh),
        hot_found=found,
        hot_missing=missing,
    )


def missing_profile_file(line: str) -> str | None:
    """The source file of a ``-Wmissing-profile`` warning line, or None."""
    if "[-Wmissing-profile]" not in line:
        return None
    m = _MISSING_RE.match(line.strip())
    if m:
        return m.group("file")
    # "lto1: warning: ..." style lines name no file
    return line.strip().split(":", 1)[0] or "?"


def missing_profile_gcda(line: str) -> str | None:
    """The profile path a ``-Wmissing-profile`` warning looked for (it names the object:
    one source compiled into several programs has one profile per object), or None."""
    if "[-Wmissing-profile]" not in line:
        return None
    m = _GCDA_RE.search(line)
    return m.group("gcda") if m else None


def linked_profiles(instrumented: Path) -> set[str] | None:
    """The profile paths compiled into an instrumented binary: exactly the objects the
    linker put into it (libgcov writes one profile per object at exit, run or not). An
    object of a static library that the linker did not pull in has none. None when the
    binary cannot be read."""
    try:
        data = instrumented.read_bytes()
    except OSError:
        return None
    out: set[str] = set()
    end = data.find(b".gcda\x00")
    while end != -1:
        start = data.rfind(b"\x00", 0, end) + 1
        out.add(data[start : end + 5].decode(errors="replace"))
        end = data.find(b".gcda\x00", end + 6)
    return out or None


def classify_missing_profiles(
    log_text: str, instrumented: Path | None
) -> tuple[list[str], list[str], str] | None:
    """Warnings of the optimized build's log split by object: those whose profile the
    instrumented server binary carries (linked into the server, yet no profile: a real gap)
    and the rest (objects of other programs, such as innochecksum's own copy of
    buf0buf.cc, or archive members the server never links). Entries read "source (profile
    file)". None when the binary is not there or warnings name no profile path."""
    if instrumented is None or not instrumented.is_file():
        return None
    linked = linked_profiles(instrumented)
    if linked is None:
        return None
    hot: list[str] = []
    other: list[str] = []
    seen: set[str] = set()
    for line in log_text.splitlines():
        gcda = missing_profile_gcda(line)
        if gcda is None:
            if missing_profile_file(line) is not None:
                return None  # a warning without a profile path: cannot classify by object
            continue
        if gcda in seen:
            continue
        seen.add(gcda)
        entry = f"{missing_profile_file(line)} ({Path(gcda).name})"
        (hot if gcda in linked else other).append(entry)
    method = f"profiles linked into the instrumented {instrumented.name} ({len(linked)} objects)"
    return hot, other, method


def server_sources(build_dir: Path, target: str) -> set[str] | None:
    """Every source file the server executable is built from (``ninja -t inputs`` walks
    the static libraries too), or None when that cannot be asked (Makefiles, old ninja)."""
    from myaccel import proc

    ninja = proc.which("ninja")
    if ninja is None or not (build_dir / "build.ninja").is_file():
        return None
    done = proc.run([ninja, "-C", str(build_dir), "-t", "inputs", target], timeout_s=300)
    if not done.ok:
        return None
    out = set()
    for line in done.stdout.splitlines():
        p = Path(line.strip())
        if not p.is_absolute():
            p = build_dir / p
        out.add(str(p.resolve()))
    return out or None


def split_hot(
    files: list[str], build_dir: Path, target: str, tree: Path, hot_dirs: tuple[str, ...]
) -> tuple[list[str], list[str], str]:
    """Warned sources that belong to the server (hot) and the rest, with the method used."""
    sources = server_sources(build_dir, target)
    hot: list[str] = []
    for f in files:
        p = Path(f) if Path(f).is_absolute() else build_dir / f
        if sources is not None:
            if str(p.resolve()) in sources:
                hot.append(f)
        elif is_hot(str(p), tree, hot_dirs):
            hot.append(f)
    method = f"ninja -t inputs {target}" if sources is not None else "server directories"
    return hot, [f for f in files if f not in hot], method


def is_hot(file: str, tree: Path, hot_dirs: tuple[str, ...]) -> bool:
    p = Path(file)
    try:
        rel = p.resolve().relative_to(tree.resolve()) if p.is_absolute() else p
    except ValueError:
        return False
    top = str(rel).replace("\\", "/")
    return any(top == d or top.startswith(d.rstrip("/") + "/") for d in hot_dirs)
