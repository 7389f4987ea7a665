"""One error hierarchy: every failure the user can cause or fix carries a hint.

Domain code raises these; only ``myaccel.cli`` renders them (``error: ...`` / ``hint: ...``)
and maps them to exit codes.
"""

from __future__ import annotations


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
