"""A tiny sysroot for a test: the given files (logical path -> text) under ``root``."""

from __future__ import annotations

from pathlib import Path

from myaccel.facts.sysroot import Sysroot


def sysroot_tree(root: Path, files: dict[str, str]) -> Sysroot:
    for rel, text in files.items():
        p = root / rel.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (root / "proc").mkdir(exist_ok=True)  # a sysroot holds proc/ or sys/
    return Sysroot(root)
