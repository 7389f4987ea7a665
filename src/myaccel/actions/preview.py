"""The files an apply writes, before and after, as text: what ``apply --json`` reports
(a dry run predicts the after side from the managed file's own rendering; a real apply
reads it back), so automation can show an option-file diff (Ansible's ``--diff``)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from myaccel.actions.files import ManagedFile, host_path
from myaccel.actions.settings.base import Change, Setting
from myaccel.errors import MyaccelError
from myaccel.rules.model import Recommendation


def _text(raw: bytes | None) -> str:
    return "" if raw is None else raw.decode("utf-8", errors="replace")


# kernel values, not files: their change is the change's own current -> desired
_PSEUDO = ("/proc/", "/sys/")


def written_paths(planned: Iterable[tuple[Setting, str, Change]]) -> list[Path]:
    """Host paths of the files the planned changes write, in first-seen order (not the
    kernel's /proc and /sys values)."""
    out: list[Path] = []
    for s, _desired, ch in planned:
        root = getattr(s, "root", Path("/"))
        for w in ch.writes:
            if w.startswith("/") and not w.startswith(_PSEUDO):
                p = host_path(Path(root), w)
                if p not in out:
                    out.append(p)
    return out


def read_texts(paths: Iterable[Path]) -> dict[str, str]:
    """Path -> current content ("" when absent or unreadable)."""
    out: dict[str, str] = {}
    for p in paths:
        try:
            out[str(p)] = p.read_text(errors="replace")
        except OSError:
            out[str(p)] = ""
    return out


def predict_texts(planned: Iterable[tuple[Setting, str, Change]]) -> dict[str, str]:
    """Path -> the content a managed file would have after the planned changes (files
    myaccel regenerates: option files, sysctl.d and tmpfiles.d, systemd drop-ins). Files it
    does not regenerate, or that are not its own, are left out."""
    files: dict[str, tuple[ManagedFile, dict[str, dict[str, str]]]] = {}
    for s, desired, _ch in planned:
        entry = s.managed_entry()
        if entry is None:
            continue
        managed, section, key = entry
        path = str(host_path(managed.root, managed.path))
        if path not in files:
            try:
                files[path] = (managed, managed.load())
            except MyaccelError:
                continue  # not ours: apply refuses it anyway
        files[path][1].setdefault(section, {})[managed.normalize_key(key)] = desired
    return {p: _text(m.render(e)) for p, (m, e) in files.items()}


def file_diffs(before: dict[str, str], after: dict[str, str]) -> list[dict[str, str]]:
    """``[{path, before, after}]`` for the files whose content differs."""
    return [
        {"path": p, "before": before.get(p, ""), "after": a}
        for p, a in after.items()
        if a != before.get(p, "")
    ]


def apply_document(
    planned: list[tuple[Setting, str, Change]],
    unchanged: list[str],
    skipped: list[tuple[Recommendation, str]],
    *,
    dry_run: bool,
) -> dict[str, Any]:
    """``apply --json``'s document before the apply (``files`` and ``journal`` are filled
    in once known)."""
    return {
        "dry_run": dry_run,
        "changed": bool(planned),
        "changes": [
            {
                "target": s.target,
                "current": ch.current,
                "desired": d,
                "takes_effect": ch.takes_effect,
            }
            for s, d, ch in planned
        ],
        "unchanged": unchanged,
        "skipped": [{"id": r.id, "why": why} for r, why in skipped],
        "files": [],
        "journal": None,
    }
