"""Errors of the build layer: each says what went wrong and what to do next."""

from __future__ import annotations

from myaccel.errors import ExitCode, MyaccelError, ToolMissing, UsageError


class TreeError(UsageError):
    """Not a supported source tree (checked before anything is built)."""

    code = "build-tree"


class BuildOptionError(UsageError):
    """A requested optimization that cannot work for this tree or target CPU."""

    code = "build-option"


class DependencyMissing(ToolMissing):
    """A tool or library the build needs is not installed (we never download)."""

    code = "build-deps"


class BuildFailed(MyaccelError):
    """A stage (configure, compile, training, BOLT, ...) failed; the log names the cause."""

    exit_code = ExitCode.APPLY_FAILED
    code = "build-failed"


class TrainingError(BuildFailed):
    code = "build-training"


class VerifyFailed(BuildFailed):
    code = "build-verify"
