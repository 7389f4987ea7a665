"""One error hierarchy: every failure the user can cause or fix carries a hint.

Domain code raises these; only ``myaccel.cli`` renders them (``error: ...`` / ``hint: ...``)
and maps them to exit codes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class MyaccelError(Exception):
    """A failure with a one-line message and a hint telling the user what to do next."""

    exit_code = 1
    code = "myaccel-error"

    def __init__(self, message: str, hint: str = "", *, context: dict[str, str] | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.context = dict(context or {})

    def __str__(self) -> str:
        return self.message


class UsageError(MyaccelError):
    """Bad input from the command line or an input file."""

    exit_code = 2
    code = "usage"


class SysrootError(UsageError):
    code = "sysroot"


class BinaryError(UsageError):
    code = "binary"


class ConnectionFailed(MyaccelError):
    exit_code = 3
    code = "connection"


class ToolMissing(MyaccelError):
    exit_code = 4
    code = "tool-missing"


class SandboxError(MyaccelError):
    exit_code = 5
    code = "sandbox"


class ProcessFailed(MyaccelError):
    code = "process"


def read_json_file(
    path: Path | str,
    *,
    what: str,
    hint: str,
    error: type[MyaccelError] = UsageError,
) -> Any:
    """The parsed JSON of an input file, or ``error`` with one line naming ``what`` it was
    meant to be: the shared first step of every artifact loader (facts, plan, profile,
    build manifest), which then check the schema themselves."""
    p = Path(path)
    try:
        return json.loads(p.read_text())
    except FileNotFoundError:
        raise error(f"{what} '{p}' does not exist", hint=hint) from None
    except (OSError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise error(f"{what} '{p}' is not readable JSON: {first}", hint=hint) from None
