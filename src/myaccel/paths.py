"""Where myaccel keeps its state: ``$MYACCEL_HOME`` (default ``~/.local/share/myaccel``)."""

from __future__ import annotations

import os
from pathlib import Path


def myaccel_home() -> Path:
    env = os.environ.get("MYACCEL_HOME")
    if env:
        return Path(env).expanduser().resolve()
    return Path.home() / ".local" / "share" / "myaccel"
