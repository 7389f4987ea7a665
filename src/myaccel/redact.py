"""Passwords out of recorded commands: one function for every command myaccel records
(its own argv in campaign.json, sysbench's in the run records) and for every command a
report renders, also from artifacts written by older versions."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

MASK = "***"

# Long options whose value is a secret: --password, --mysql-password, --pgsql-password, ...
_SECRET_LONG = re.compile(r"^(--?[\w-]*(?:password|passwd|pwd)[\w-]*)(=.*)?$", re.IGNORECASE)
# Environment assignments written before a command: MYSQL_PWD=..., PGPASSWORD=...
_SECRET_ENV = re.compile(r"^([A-Z_]*(?:PWD|PASSWORD|PASSWD))=.*$")


def redact_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` with every password replaced by ``***``: ``-p X``, ``-pX``, ``--password X``,
    ``--password=X``, ``--mysql-password=X`` (any ``--*password*`` option) and
    ``MYSQL_PWD=X`` prefixes. A bare ``-p`` or ``--password`` masks the next word: myaccel's
    own ``-p`` always takes a value, and over-masking a command is harmless."""
    out: list[str] = []
    mask_next = False
    for word in argv:
        if mask_next:
            out.append(MASK)
            mask_next = False
            continue
        if word == "-p":
            out.append(word)
            mask_next = True
        elif word.startswith("-p") and not word.startswith("--"):
            out.append("-p" + MASK)
        elif m := _SECRET_LONG.match(word):
            if m.group(2) is None:
                out.append(word)
                mask_next = True
            else:
                out.append(f"{m.group(1)}={MASK}")
        elif m := _SECRET_ENV.match(word):
            out.append(f"{m.group(1)}={MASK}")
        else:
            out.append(word)
    return out


def redact_command(command: str) -> str:
    """A command line written as one string, redacted word by word (``redact_argv``)."""
    try:
        words = shlex.split(command)
    except ValueError:  # unbalanced quotes: fall back to whitespace
        words = command.split()
    return shlex.join(redact_argv(words))
