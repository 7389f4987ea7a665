"""One error hierarchy: every failure the user can cause or fix carries a hint.

Domain code raises these; only ``myaccel.cli`` renders them (``error: ...`` / ``hint: ...``)
and maps them to exit codes.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any


class ExitCode(IntEnum):
    """Every exit status of ``myaccel`` (docs/safety.md, "Exit codes", lists them).

    Each ``MyaccelError`` subclass names one of these as its ``exit_code``; the error
    boundary in ``myaccel.cli.main`` maps anything else that escapes to one of them too.
    """

    OK = 0
    FAILURE = 1  # a check failed (verify found drift), the user declined, a generic failure
    USAGE = 2  # bad command line or input file: nothing was done
    CONNECTION = 3  # the server cannot be reached or refused the login
    TOOL_MISSING = 4  # a required program (sysbench, perf, a compiler) is not installed
    SANDBOX = 5  # a sandbox cannot be created, started or stopped
    APPLY_FAILED = 6  # apply, rollback, a journal, a build or a build check failed
    NO_VALID_RUNS = 7  # a benchmark ended without one valid run
    IO_ERROR = 8  # disk full, permission denied, read-only file system
    DATA_ERROR = 9  # a file myaccel reads is damaged or of another version
    INTERNAL = 70  # a bug in myaccel (sysexits EX_SOFTWARE): rerun with --debug, report it
    HANGUP = 129  # SIGHUP (the terminal or ssh session went away): 128 + 1
    INTERRUPTED = 130  # SIGINT (Ctrl-C): 128 + 2
    TERMINATED = 143  # SIGTERM: 128 + 15


class Interrupted(KeyboardInterrupt):
    """A termination signal turned into an exception so that ``finally`` blocks run (a
    sandbox goes back to its base configuration) before the process exits."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class MyaccelError(Exception):
    """A failure with a one-line message and a hint telling the user what to do next.

    A subclass names its ``code`` (a stable slug) and ``exit_code`` in its header, e.g.
    ``class Busy(JournalError, code="busy")``; what it leaves out it inherits.
    """

    exit_code: ExitCode = ExitCode.FAILURE
    code: str = "myaccel-error"

    def __init_subclass__(
        cls, *, code: str | None = None, exit_code: ExitCode | None = None, **kwargs: Any
    ) -> None:
        super().__init_subclass__(**kwargs)
        if code is not None:
            cls.code = code
        if exit_code is not None:
            cls.exit_code = exit_code

    def __init__(self, message: str, hint: str = "", *, context: dict[str, str] | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.context = dict(context or {})

    def __str__(self) -> str:
        return self.message


class UsageError(MyaccelError, code="usage", exit_code=ExitCode.USAGE):
    """Bad input from the command line or an input file."""


class SysrootError(UsageError, code="sysroot"):
    pass


class BinaryError(UsageError, code="binary"):
    pass


class ConnectionFailed(MyaccelError, code="connection", exit_code=ExitCode.CONNECTION):
    pass


class ToolMissing(MyaccelError, code="tool-missing", exit_code=ExitCode.TOOL_MISSING):
    pass


class SandboxError(MyaccelError, code="sandbox", exit_code=ExitCode.SANDBOX):
    pass


class DataError(MyaccelError, code="data", exit_code=ExitCode.DATA_ERROR):
    """A file myaccel wrote itself and reads back is damaged or of another version."""


class ProcessFailed(MyaccelError, code="process"):
    pass


class NoValidRuns(MyaccelError, code="no-valid-runs", exit_code=ExitCode.NO_VALID_RUNS):
    """Every benchmark run of a command was invalid: there is nothing to report."""


def validation_summary(exc: Exception) -> str:
    """One line naming the first invalid field of a pydantic ``ValidationError`` (and how
    many more there are), e.g. ``proposed: Input should be a valid string``."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    errs = errors()
    if not errs:
        return type(exc).__name__
    first = errs[0]
    loc = ".".join(str(x) for x in first.get("loc", ())) or "(top level)"
    more = f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""
    return f"field '{loc}': {first.get('msg', 'invalid')}{more}"
