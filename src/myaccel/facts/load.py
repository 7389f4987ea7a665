"""Read a facts file (``myaccel probe --out``) through the artifact store."""

from __future__ import annotations

from myaccel.artifacts import load
from myaccel.errors import UsageError
from myaccel.model import Facts


def load_facts(path: str) -> Facts:
    return load(
        path,
        Facts,
        what="facts file",
        hint="probe (again, with this version): myaccel probe --out facts.json",
        error=UsageError,
    )
