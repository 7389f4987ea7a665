"""Number formatting shared by the HTML and Markdown reports (so both say the same)."""

from __future__ import annotations

import math

from myaccel import markdown


def _bad(v: float | None) -> bool:
    return v is None or (isinstance(v, float) and not math.isfinite(v))


def tps(v: float | None) -> str:
    """Transactions per second: thousands separators, one decimal."""
    return "-" if _bad(v) else f"{v:,.1f}"


def ms(v: float | None) -> str:
    return "-" if _bad(v) else f"{v:.2f}"


def pct(v: float | None) -> str:
    """A signed change in percent, one decimal."""
    return "-" if _bad(v) else f"{v:+.1f}%"


def ci(low: float | None, high: float | None) -> str:
    if _bad(low) or _bad(high):
        return "-"
    return f"[{low:+.1f}%, {high:+.1f}%]"


def pval(v: float | None) -> str:
    return "-" if _bad(v) else f"{v:.3g}"


def num(v: float | None) -> str:
    if _bad(v):
        return "-"
    assert v is not None
    return f"{v:.4g}"


def share(v: float | None) -> str:
    return "-" if _bad(v) else f"{v:.1f}%"


def md_cell(text: object) -> str:
    """Text safe inside a GitHub-flavored Markdown table cell of a report: the table
    escaping (``markdown.cell``), with backslashes and HTML (``<``, ``>``) of artifact text
    escaped too."""
    s = markdown.cell(str(text).replace("\\", "\\\\"))
    return s.replace("<", "&lt;").replace(">", "&gt;")
