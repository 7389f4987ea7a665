"""Files the commands write on request (``--out``): whole or not at all.

``write_output`` is the artifact store's ``write_text``: a full disk or a missing
permission ends in an ``OSError`` that names the file (not its temporary sibling), rendered
by the error boundary as one line; no half-written file and no temporary file are left.
The store (with pydantic) is imported on the first write, not by a command's ``--help``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["write_output"]


def write_output(path: Path | str, text: str, *, private: bool = False) -> Path:
    """``myaccel.artifacts.write_text``: ``text`` (UTF-8) written atomically to ``path``."""
    from myaccel.artifacts import write_text

    return write_text(path, text, private=private)
