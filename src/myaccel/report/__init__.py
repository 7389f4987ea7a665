"""Reports: one self-contained ``report.html`` (inline SVG plots, styles, script) and a
GitHub-flavored ``report.md`` from any mix of myaccel artifacts.

``write_report`` is the entry point for commands that finish with a report (accelerate,
ab, profile, build); ``myaccel report`` calls it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from myaccel.artifacts import write_text
from myaccel.errors import UsageError

HTML_NAME = "report.html"
MD_NAME = "report.md"


def write_report(dirs: Sequence[Path], out: Path, html: bool, md: bool) -> list[Path]:
    """Read the artifacts under ``dirs`` and write report.html and/or report.md into
    ``out`` (created if missing). Returns the files written.

    Raises UsageError when ``dirs`` hold no myaccel artifact or a file of an unknown schema.
    """
    from myaccel.report.content import build_content
    from myaccel.report.load import load_artifacts
    from myaccel.report.render import render_html, render_markdown

    if not html and not md:
        raise UsageError("nothing to write", hint="ask for --html, --md or both")
    arts = load_artifacts([Path(d) for d in dirs])
    content = build_content(arts)
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"cannot create the output directory '{out}': {exc.strerror}",
            hint="pass --out DIR with a writable directory",
        ) from None
    written: list[Path] = []
    if html:
        written.append(_write(out / HTML_NAME, render_html(content)))
    if md:
        written.append(_write(out / MD_NAME, render_markdown(content, with_html=html)))
    return written


def _write(path: Path, text: str) -> Path:
    try:
        write_text(path, text)
    except OSError as exc:
        raise UsageError(
            f"cannot write '{path}': {exc.strerror}",
            hint="pass --out DIR with a writable directory",
        ) from None
    return path


__all__ = ["HTML_NAME", "MD_NAME", "write_report"]
