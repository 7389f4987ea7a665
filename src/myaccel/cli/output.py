"""Files the commands write on request (``--out``): whole or not at all; and tables on
stdout (a rich table on a terminal, plain aligned text in pipes).

``write_output`` is the artifact store's ``write_text``: a full disk or a missing
permission ends in an ``OSError`` that names the file (not its temporary sibling), rendered
by the error boundary as one line; no half-written file and no temporary file are left.
The store (with pydantic) is imported on the first write, not by a command's ``--help``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["print_table", "write_output"]


def write_output(path: Path | str, text: str, *, private: bool = False) -> Path:
    """``myaccel.artifacts.write_text``: ``text`` (UTF-8) written atomically to ``path``."""
    from myaccel.artifacts import write_text

    return write_text(path, text, private=private)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """``rows`` under ``headers``: a rich table on a terminal, aligned columns in a pipe."""
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.table import Table

        table = Table()
        for h in headers:
            table.add_column(h, overflow="fold")
        for row in rows:
            table.add_row(*row)
        Console().print(table)
        return
    all_rows = [list(headers), *[list(r) for r in rows]]
    widths = [max(len(r[i]) for r in all_rows) for i in range(len(all_rows[0]))]
    for r in all_rows:
        cells = [c.ljust(w) for c, w in zip(r, widths, strict=True)]
        click.echo("  ".join(cells).rstrip())
