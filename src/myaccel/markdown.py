"""GitHub-flavored Markdown tables, drawn one way with one escaping policy.

Every cell, header cells included, goes through ``cell``: a ``|`` becomes ``\\|`` (GitHub
reads that as a pipe even inside a code span, where nothing else can be escaped) and a line
break a space (a row is one line). Nothing else is touched, so a cell may carry its own
markup (a code span, bold). The report templates add HTML escaping on top
(``report.fmt.md_cell``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def cell(value: object) -> str:
    """``value`` as the text of one table cell."""
    text = str(value).replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    return text.replace("|", "\\|")


def row(cells: Iterable[object]) -> str:
    """One table line: ``| a | b |``."""
    return "| " + " | ".join(cell(c) for c in cells) + " |"


def table(header: Sequence[str], rows: Iterable[Iterable[object]], align: str = "") -> list[str]:
    """The lines of a table: the header, the alignment line, one line per row.

    ``align`` has one letter a column, ``l`` (left) or ``r`` (right); a column without a
    letter is left-aligned (``|---|``, ``|---:|``)."""
    marks = ("---:" if align[i : i + 1] == "r" else "---" for i in range(len(header)))
    return [row(header), "|" + "|".join(marks) + "|", *(row(r) for r in rows)]
