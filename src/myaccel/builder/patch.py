"""MySQL's InnoDB cache line: a reviewable source patch (applied only with --allow-patch).

MySQL pads InnoDB's hot structures with a hard-coded constant: 64 bytes except on POWER
(``ut::INNODB_CACHE_LINE_SIZE`` in storage/innobase/include/ut0cpu_cache.h since 8.0.2x,
``INNOBASE_CACHE_LINE_SIZE`` in ut0counter.h in 5.7 and early 8.0). No CMake option changes
it (seeds/004 and upstream PR #66 are about exactly this). We write a unified diff under
``OUT/patches/``; with ``--allow-patch`` the build compiles a copy of the tree made of hard
links with only the patched files replaced by new files, so the original tree is never
written to.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from myaccel.builder.errors import BuildOptionError

CANDIDATES = (
    "storage/innobase/include/ut0cpu_cache.h",
    "storage/innobase/include/ut0counter.h",
    "storage/innobase/include/ut0ut.h",
    "storage/innobase/include/ut0mpmcbq.h",  # an older private copy of the constant
)
# the non-POWER definition: "constexpr size_t INNODB_CACHE_LINE_SIZE = 64;" or
# "#define INNOBASE_CACHE_LINE_SIZE 64"
_DEF_RE = re.compile(
    r"^(?P<head>\s*(?:constexpr\s+(?:std::)?size_t\s+INNODB_CACHE_LINE_SIZE\s*=\s*|"
    r"#\s*define\s+INNOBASE_CACHE_LINE_SIZE\s+))64(?P<tail>\s*;?.*)$"
)


@dataclass(frozen=True)
class CachelinePatch:
    files: tuple[str, ...]  # tree-relative
    diff: str
    new_texts: dict[str, str]
    lines_changed: int


def make_cacheline_patch(tree: Path, line_bytes: int) -> CachelinePatch:
    """One unified diff changing every non-POWER definition of the constant."""
    diffs: list[str] = []
    new_texts: dict[str, str] = {}
    total = 0
    for rel in CANDIDATES:
        path = tree / rel
        if not path.is_file():
            continue
        old = path.read_text(errors="replace")
        new_lines, changed = [], 0
        for ln in old.splitlines(keepends=True):
            m = _DEF_RE.match(ln.rstrip("\n"))
            if m:
                new_lines.append(f"{m.group('head')}{line_bytes}{m.group('tail')}\n")
                changed += 1
            else:
                new_lines.append(ln)
        if not changed:
            continue
        new = "".join(new_lines)
        new_texts[rel] = new
        total += changed
        diffs.append(
            "".join(
                difflib.unified_diff(
                    old.splitlines(keepends=True),
                    new.splitlines(keepends=True),
                    fromfile=f"a/{rel}",
                    tofile=f"b/{rel}",
                )
            )
        )
    if not new_texts:
        raise BuildOptionError(
            "cannot find InnoDB's cache line constant (INNODB_CACHE_LINE_SIZE / "
            "INNOBASE_CACHE_LINE_SIZE = 64) in this tree",
            hint="drop 'cacheline' from --opt, or patch the tree by hand; looked in "
            + ", ".join(CANDIDATES),
        )
    return CachelinePatch(tuple(new_texts), "".join(diffs), new_texts, total)


def linked_copy(src: Path, dst: Path) -> None:
    """A copy of ``src`` made of hard links (same file system) or plain copies."""
    if dst.exists():
        shutil.rmtree(dst)
    try:
        shutil.copytree(src, dst, symlinks=True, copy_function=os.link)
    except OSError:
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(src, dst, symlinks=True)


def apply_to_copy(tree: Path, copy: Path, patch: CachelinePatch) -> None:
    linked_copy(tree, copy)
    for rel, text in patch.new_texts.items():
        target = copy / rel
        target.unlink()  # break the hard link: the original file keeps its content
        target.write_text(text)
