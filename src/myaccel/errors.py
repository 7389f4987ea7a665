"""One error hierarchy: every failure the user can cause or fix carries a hint.

Domain code raises these; only ``myaccel.cli`` renders them (``error: ...`` / ``hint: ...``)
and maps them to exit codes.
"""

from __future__ import annotations

from enum import IntEnum


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
    INTERRUPTED = 130  # SIGINT (Ctrl-C): 128 + 2
    TERMINATED = 143  # SIGTERM: 128 + 15


class Interrupted(KeyboardInterrupt):
    """A termination signal turned into an exception so that ``finally`` blocks run (a
    sandbox goes back to its base configuration) before the process exits."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class MyaccelError(Exception):
    """A failure with a one-line message and a hint telling the user what to do next."""

    exit_code: ExitCode = ExitCode.FAILURE
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

    exit_code = ExitCode.USAGE
    code = "usage"


class SysrootError(UsageError):
    code = "sysroot"


class BinaryError(UsageError):
    code = "binary"


class ConnectionFailed(MyaccelError):
    exit_code = ExitCode.CONNECTION
    code = "connection"


class ToolMissing(MyaccelError):
    exit_code = ExitCode.TOOL_MISSING
    code = "tool-missing"


class SandboxError(MyaccelError):
    exit_code = ExitCode.SANDBOX
    code = "sandbox"


class DataError(MyaccelError):
    """A file myaccel wrote itself and reads back is damaged or of another version."""

    exit_code = ExitCode.DATA_ERROR
    code = "data"


class ProcessFailed(MyaccelError):
    code = "process"


class NoValidRuns(MyaccelError):
    """Every benchmark run of a command was invalid: there is nothing to report."""

    exit_code = ExitCode.NO_VALID_RUNS
    code = "no-valid-runs"


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
