"""The lab's error: a step failed, and the message says which and why in one line. A
machine that cannot run the lab at all is not an error: `preflight.missing_reason` says why,
and the tests skip with that reason."""

from __future__ import annotations


class LabError(Exception):
    """A lab step failed; the message is one line saying which and why."""
