"""Before each command: undo the server switches a killed command left behind.

``myaccel.actions.orphans`` finds the open journals whose owner process is gone (a
``capture`` killed by SIGKILL while the general log was on); each is rolled back here with
the server recorded in it and the password from the usual places (``MYSQL_PWD``,
``~/.my.cnf``; a sandbox needs none). What cannot be undone now (the server is down, no
password) is one warning line naming the command that finishes it; the command the user
asked for runs either way.
"""

from __future__ import annotations

from collections.abc import Callable

from myaccel.actions import rollback
from myaccel.actions.journal import Journal, journals_dir
from myaccel.actions.orphans import find_orphans
from myaccel.errors import MyaccelError
from myaccel.server.connection import ConnectionOptions

Note = Callable[[str], None]


def repair_orphans(note: Note) -> None:
    """Roll back every orphaned journal (see the module docstring)."""
    try:
        orphans = find_orphans(journals_dir())
    except OSError:
        return  # an unreadable home is the command's own error to report
    for journal in orphans:
        _repair(journal, note)


def _repair(journal: Journal, note: Note) -> None:
    from myaccel.cli.apply import _rollback_handle

    owner = journal.data.owner
    who = f"`myaccel {owner.command}` (pid {owner.pid})" if owner else "a command"
    targets = ", ".join(dict.fromkeys(e.target for e in journal.entries)) or "nothing"
    try:
        handle = _rollback_handle(journal.path, journal, ConnectionOptions())
        connect = handle.connector() if handle is not None and handle.params else None
        res = rollback(journal.path, connect=connect)
    except (MyaccelError, OSError) as exc:
        note(
            f"warning: {who} was killed and left {targets} switched on (journal "
            f"{journal.path.name}); undoing it failed: {exc}. Finish it with: myaccel rollback "
            f"--journal {journal.path} (with the server options and password)"
        )
        return
    note(
        f"note: {who} was killed and left {targets} switched on; switched back "
        f"({', '.join(res.reverted) or 'already back'}; journal {journal.path.name})"
    )
