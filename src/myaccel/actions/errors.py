"""Errors raised while applying, rolling back or verifying settings.

They extend the one hierarchy in ``myaccel.errors`` (message + hint + context); the CLI
renders them like every other ``MyaccelError``.
"""

from __future__ import annotations

from myaccel.errors import ExitCode, MyaccelError


class ApplyError(MyaccelError):
    """A change could not be made (or read back); the context names the journal."""

    exit_code = ExitCode.APPLY_FAILED
    code = "apply"


class JournalError(MyaccelError):
    """A journal cannot be used as asked (missing, another host, a newer one in effect)."""

    exit_code = ExitCode.APPLY_FAILED
    code = "journal"


class JournalCorrupt(JournalError):
    """A journal's checksum or structure does not match: it was edited or damaged."""

    exit_code = ExitCode.DATA_ERROR
    code = "journal-corrupt"


class UnfinishedJournal(JournalError):
    """An earlier apply or rollback stopped half way (crash, power loss, kill -9)."""

    code = "journal-unfinished"


class RollbackIncomplete(JournalError):
    """Some entries could not be reverted; the journal stays unfinished so a retry resumes."""

    code = "rollback-incomplete"


class Busy(JournalError):
    """Another apply or rollback holds the journal lock."""

    code = "busy"
