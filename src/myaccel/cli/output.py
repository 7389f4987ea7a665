"""Files the commands write on request (``--out``): whole or not at all.

``write_output`` is the artifact store's ``write_text``: a full disk or a missing
permission ends in an ``OSError`` that names the file (not its temporary sibling), rendered
by the error boundary as one line; no half-written file and no temporary file are left.
"""

from __future__ import annotations

from myaccel.artifacts import write_text as write_output

__all__ = ["write_output"]
