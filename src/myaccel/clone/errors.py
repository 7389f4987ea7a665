"""The clone's errors: a one-line message and a hint.

- ``CloneError``: a clone cannot be made (exit code of a sandbox error, 5);
- ``MissingPrivileges``: the source's account lacks a privilege the copy (or a change)
  needs: the server refuses it what the work needs, as it would refuse a login (exit 3);
- ``NoDiskForCopy``: the file system of ``$MYACCEL_HOME`` cannot hold the copy (exit 8, as
  a full disk).

Each is raised before any side effect where it can be known then (``preflight``).
"""

from __future__ import annotations

from myaccel.errors import ConnectionFailed, ExitCode, MyaccelError, SandboxError


class CloneError(SandboxError, code="clone"):
    """A clone cannot be made (checked before any side effect where possible)."""


class MissingPrivileges(ConnectionFailed, code="privileges"):
    """The account lacks a privilege the work needs (``GRANT`` it, or use another)."""


class NoDiskForCopy(MyaccelError, code="clone-disk", exit_code=ExitCode.IO_ERROR):
    """The copy would not fit on the file system the clone goes to."""
