"""Capture the files the probe reads into a sysroot tree (for bug reports and fixtures).

The probe runs with a tracing sysroot; every logical path it touched is copied, with
symlinks re-created as symlinks so that device resolution works inside the copy."""

from __future__ import annotations

import os
from pathlib import Path

from myaccel.errors import UsageError
from myaccel.facts.sysroot import KEEP, Sysroot


def _copy_logical(
    logical: str, dest: Path, done: set[str], depth: int = 0, *, name_only: bool = False
) -> None:
    if depth > 40 or logical in done:
        return
    done.add(logical)
    parts = [c for c in logical.split("/") if c]
    cur = "/"
    for i, comp in enumerate(parts):
        nxt = os.path.join(cur, comp)
        target = dest / nxt.lstrip("/")
        if nxt == "/proc/self":
            nxt = f"/proc/{os.getpid()}"
            target.mkdir(parents=True, exist_ok=True)
            rest = "/".join(parts[i + 1 :])
            if rest:
                _copy_from(os.path.join(nxt, rest), dest / "proc" / "self" / rest)
            return
        if os.path.islink(nxt):
            link = os.readlink(nxt)
            if not target.is_symlink() and not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(link, target)
            resolved = os.path.normpath(os.path.join(os.path.dirname(nxt), link))
            rest = "/".join(parts[i + 1 :])
            _copy_logical(
                resolved + ("/" + rest if rest else ""), dest, done, depth + 1, name_only=name_only
            )
            return
        if i == len(parts) - 1:
            if name_only:
                if os.path.isdir(nxt):
                    target.mkdir(parents=True, exist_ok=True)
                elif not target.exists():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.touch()
            else:
                _copy_from(nxt, target)
            return
        cur = nxt


def _copy_from(src: str, target: Path) -> None:
    if os.path.isdir(src):
        target.mkdir(parents=True, exist_ok=True)
        return
    try:
        with open(src, "rb") as fh:
            data = fh.read(1 << 20)
    except OSError:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def capture_sysroot(paths: list[str], dest: str | Path) -> int:
    """Copy ``paths`` (logical, from a live machine) into ``dest``; returns files written."""
    d = Path(dest)
    if d.exists() and any(d.iterdir()):
        raise UsageError(
            f"capture directory '{dest}' is not empty", hint="pass a new or empty directory"
        )
    d.mkdir(parents=True, exist_ok=True)
    done: set[str] = set()
    unique = list(dict.fromkeys(paths))
    # Files read first, then names that were only listed (created empty if still absent).
    for p in unique:
        if not p.startswith("?"):
            _copy_logical(p, d, done)
    for p in unique:
        if p.startswith("?"):
            _copy_logical(p[1:], d, done, name_only=True)
    # git keeps no empty directories, and a listed-but-empty one (queues/rx-0, a driver
    # directory a symlink points at) must survive a commit of the tree.
    for dirpath, dirnames, filenames in os.walk(d):
        if not dirnames and not filenames:
            (Path(dirpath) / KEEP).touch()
    return sum(1 for _ in d.rglob("*") if _.is_file())


def tracing_sysroot() -> Sysroot:
    sr = Sysroot("/")
    sr.trace = []
    return sr
