"""Files the commands write on request (``--out``): whole or not at all.

A full disk or a missing permission ends in an ``OSError`` that names the file (a bare
``write()`` error does not), rendered by the error boundary as one line; no half-written
file and no temporary file are left behind.
"""

from __future__ import annotations

import os
from pathlib import Path


def write_output(path: Path | str, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (temporary file, fsync, rename)."""
    p = Path(path)
    tmp = p.with_name(f".{p.name}.tmp")
    try:
        with open(tmp, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.filename is None or Path(exc.filename) == tmp:
            raise OSError(exc.errno, exc.strerror, str(p)) from exc
        raise
    return p
