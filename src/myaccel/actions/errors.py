"""Errors raised while applying, rolling back or verifying settings.

They extend the one hierarchy in ``myaccel.errors`` (message + hint + context); the CLI
renders them like every other ``MyaccelError``.
"""

from __future__ import annotations

from myaccel.errors import ExitCode, MyaccelError


class ApplyError(MyaccelError, code="apply", exit_code=ExitCode.APPLY_FAILED):
    """A change could not be made (or read back); the context names the journal."""


class JournalError(MyaccelError, code="journal", exit_code=ExitCode.APPLY_FAILED):
    """A journal cannot be used as asked (missing, another host, a newer one in effect)."""


class JournalCorrupt(JournalError, code="journal-corrupt", exit_code=ExitCode.DATA_ERROR):
    """A journal's checksum or structure does not match: it was edited or damaged."""


class UnfinishedJournal(JournalError, code="journal-unfinished"):
    """An earlier apply or rollback stopped half way (crash, power loss, kill -9)."""


class RollbackIncomplete(JournalError, code="rollback-incomplete"):
    """Some entries could not be reverted; the journal stays unfinished so a retry resumes."""


class Busy(JournalError, code="busy"):
    """Another apply or rollback holds the journal lock."""
