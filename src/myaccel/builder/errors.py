"""Errors of the build layer: each says what went wrong and what to do next."""

from __future__ import annotations

from myaccel.errors import ExitCode, MyaccelError, ToolMissing, UsageError


class TreeError(UsageError, code="build-tree"):
    """Not a supported source tree (checked before anything is built)."""


class BuildOptionError(UsageError, code="build-option"):
    """A requested optimization that cannot work for this tree or target CPU."""


class DependencyMissing(ToolMissing, code="build-deps"):
    """A tool or library the build needs is not installed (we never download)."""


class BuildFailed(MyaccelError, code="build-failed", exit_code=ExitCode.APPLY_FAILED):
    """A stage (configure, compile, training, BOLT, ...) failed; the log names the cause."""


class TrainingError(BuildFailed, code="build-training"):
    pass


class VerifyFailed(BuildFailed, code="build-verify"):
    pass


class SmokeFailed(BuildFailed, code="build-smoke"):
    """The built server did not start or did not answer its smoke queries."""
