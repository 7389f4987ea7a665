"""The clone's error: a one-line message and a hint (exit code: the sandbox's)."""

from __future__ import annotations

from myaccel.errors import SandboxError


class CloneError(SandboxError, code="clone"):
    """A clone cannot be made (checked before any side effect where possible)."""
