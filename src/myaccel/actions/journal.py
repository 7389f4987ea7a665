"""The apply journal: a durable, checksummed record of every change, written before it.

A journal is one JSON file, ``$MYACCEL_HOME/journals/<id>.json`` (id: ``00042-20250101T120000Z``, a
sequence number and the UTC start time) (schema
``myaccel.journal/1``)::

    status   open -> applied | failed -> rolled-back
    entries  in apply order; each one: target, kind, the setting's parameters (``spec``, to
             rebuild it for rollback in another process), the old state (value, and for
             files the old bytes in base64 with mode, owner and "did not exist"), the new
             value, state pending -> applied -> reverted (or failed) and timestamps.
    owner    set by a command whose changes last only while it runs (``capture``'s
             switches): its pid, start time and boot; an ``open`` journal whose owner is
             gone (killed by SIGKILL) is rolled back by the next myaccel command.
    server   how rollback reaches, stops and starts the server (``ServerTarget.describe()``:
             sandbox name and home, socket/host/port/user but never a password, systemd unit,
             option-file directory), recorded when the journal is created, before the first
             change; None for journals without server changes (and for journals written
             before this field existed, whose handle is in ``journals/servers/<id>.json``).
    checksum "sha256:<hex>" over the canonical JSON of everything else.

Write-ahead: an entry is saved (temporary file, fsync, rename, fsync of the directory)
*before* its change is made, and marked applied after the change was read back. A crash
therefore leaves an ``open`` journal whose entries describe every change that may have been
made; ``Journal.find_unfinished`` finds it, a new apply refuses to run, and rollback
reverts its applied *and* pending entries to their recorded old state (idempotently: a
pending change may or may not have happened).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from myaccel import __version__, artifacts
from myaccel.actions.crashpoint import crash_point
from myaccel.actions.errors import Busy, JournalCorrupt, JournalError
from myaccel.actions.files import FileState
from myaccel.artifacts import artifact, fsync_dir, remove_temporaries, save_document
from myaccel.model import Strict
from myaccel.owner import ProcessOwner
from myaccel.paths import Via, myaccel_home

JOURNAL_SCHEMA = "myaccel.journal/1"
JournalStatus = Literal["open", "applied", "failed", "rolled-back"]
EntryState = Literal["pending", "applied", "failed", "reverted"]
# A journal in one of these states may have left changes that nobody recorded as done.
UNFINISHED: tuple[str, ...] = ("open", "failed")
# A journal in one of these states has changes in effect (rollback can undo them).
ACTIVE: tuple[str, ...] = ("open", "failed", "applied")

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def journals_dir() -> Path:
    """Where journals live by default: ``$MYACCEL_HOME/journals``."""
    return myaccel_home() / "journals"


class OldState(Strict):
    """What a setting looked like before the change."""

    value: str | None = None  # runtime value (None = absent / NULL)
    files: list[FileState] = Field(default_factory=list)
    extra: dict[str, str | None] = Field(default_factory=dict)  # setting-specific


class JournalEntry(Strict):
    index: int
    target: str
    kind: str
    spec: dict[str, Any]  # constructor parameters: rebuilds the setting for rollback
    old: OldState
    new_value: str
    state: EntryState = "pending"
    read_back: str | None = None
    error: str | None = None
    pending_at: str
    applied_at: str | None = None
    reverted_at: str | None = None


# The process whose changes last only while it runs (a capture's general log): when it is
# gone and the journal is still open, the next myaccel command undoes them.
JournalOwner = ProcessOwner


@artifact(JOURNAL_SCHEMA)
class JournalData(Strict):
    schema_version: str = JOURNAL_SCHEMA
    id: str
    myaccel_version: str
    host: str
    created_at: str
    updated_at: str
    plan_id: str | None = None
    facts_digest: str | None = None
    status: JournalStatus = "open"
    error: str | None = None
    server: dict[str, Any] | None = None  # how to reach/stop/start the server; no password
    owner: JournalOwner | None = None  # changes that end with this process (capture)
    entries: list[JournalEntry] = Field(default_factory=list)
    checksum: str = ""


def canonical_checksum(doc: dict[str, Any]) -> str:
    """SHA-256 over the canonical JSON (sorted keys, no spaces) of ``doc`` minus its
    ``checksum`` key."""
    body = {k: v for k, v in doc.items() if k != "checksum"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


_WRITES = [0]  # durable journal writes by this process (for the journal-write crash point)


def write_json_durably(path: Path, doc: dict[str, Any]) -> None:
    """Save ``doc`` durably and privately (``myaccel.artifacts.save_document``: temporary
    sibling, fsync, rename, fsync of the directory; a full disk leaves the old file and no
    stray temporary), then count the write for the ``journal-write`` crash point."""
    save_document(path, doc, private=True)
    _WRITES[0] += 1
    crash_point("journal-write", _WRITES[0])


def _ensure_journal_dir(journal_dir: Path) -> None:
    if not journal_dir.is_dir():
        journal_dir.mkdir(parents=True, mode=0o700)
        fsync_dir(journal_dir.parent)


@contextlib.contextmanager
def journal_lock(journal_dir: Path) -> Iterator[None]:
    """One apply or rollback at a time per journal directory."""
    _ensure_journal_dir(journal_dir)
    lock = journal_dir / ".lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise Busy(
                "another myaccel apply or rollback is running",
                hint=f"wait for it to finish (lock: {lock})",
            ) from exc
        # a crash between a write's temporary file and its rename left it; the journal
        # itself still holds its previous, complete version
        remove_temporaries(journal_dir)
        yield
    finally:
        os.close(fd)


def _sequence(path: Path) -> int:
    head = path.name.split("-", 1)[0]
    return int(head) if head.isdigit() else 0


class Journal:
    """One journal file and its in-memory content; every mutation is saved durably."""

    def __init__(self, path: Path, data: JournalData, clock: Clock = utc_now) -> None:
        self.path = path
        self.data = data
        self.clock = clock

    # ------------------------------------------------------------ create / load

    @classmethod
    def create(
        cls,
        journal_dir: Path,
        *,
        plan_id: str | None = None,
        facts_digest: str | None = None,
        server: dict[str, Any] | None = None,
        owner: JournalOwner | None = None,
        clock: Clock = utc_now,
    ) -> Journal:
        """A new ``open`` journal, durable when this returns; ``server`` (see the module
        docstring) and ``owner`` are recorded before any change is made."""
        _ensure_journal_dir(journal_dir)
        now = clock()
        # A sequence number first: journals sort in apply order even if the clock jumps.
        seq = max((_sequence(p) for p in cls.list_paths(journal_dir)), default=0) + 1
        jid = f"{seq:05d}-" + now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
        data = JournalData(
            id=jid,
            myaccel_version=__version__,
            host=socket.gethostname(),
            created_at=_iso(now),
            updated_at=_iso(now),
            plan_id=plan_id,
            facts_digest=facts_digest,
            server=server,
            owner=owner,
        )
        journal = cls(journal_dir / f"{jid}.json", data, clock)
        journal.save()
        return journal

    @classmethod
    def load(cls, path: Path, *, verify_checksum: bool = True, clock: Clock = utc_now) -> Journal:
        """Read a journal; a checksum mismatch or a malformed file raises ``JournalCorrupt``."""

        def checksum_holds(doc: dict[str, Any]) -> None:
            if verify_checksum and doc.get("checksum") != canonical_checksum(doc):
                raise JournalCorrupt(
                    f"journal {path} fails its checksum: it was edited or damaged after "
                    "myaccel wrote it",
                    hint="do not trust its old values blindly: compare them with what you "
                    "expect, restore the journal from a backup, or (if you edited it on "
                    "purpose) roll back with --ignore-checksum",
                    context={"journal": str(path)},
                )

        data = artifacts.load(
            path,
            JournalData,
            what="journal",
            hint="it was damaged or written by another myaccel version: restore it from a "
            "backup, roll it back with the version that wrote it, or undo its changes by hand "
            "(the old values and file contents are readable in it)",
            error=JournalCorrupt,
            missing=JournalError,
            missing_hint="list journals with `myaccel rollback --list` (run as the user who "
            "applied it)",
            verify=checksum_holds,
        )
        return cls(path, data, clock)

    # ------------------------------------------------------------ discovery

    @staticmethod
    def list_paths(journal_dir: Path) -> list[Path]:
        """Journal files, oldest first (ids start with a sequence number)."""
        if not journal_dir.is_dir():
            return []
        found = [p for p in journal_dir.glob("*.json") if not p.name.startswith(".")]
        return sorted(found, key=lambda p: (_sequence(p), p.name))

    @staticmethod
    def peek_status(path: Path) -> str | None:
        """The recorded status without verifying the checksum; None if unreadable."""
        try:
            doc = json.loads(path.read_bytes())
        except (OSError, ValueError):
            return None
        status = doc.get("status") if isinstance(doc, dict) else None
        return status if isinstance(status, str) else None

    @classmethod
    def checked_status(cls, path: Path) -> str:
        """The status of a journal that loads and passes its checksum, else ``corrupt``
        (what `rollback --list` shows: a damaged journal is never reported as applied)."""
        try:
            return cls.load(path).status
        except JournalError:
            return "corrupt"

    @classmethod
    def find_unfinished(cls, journal_dir: Path) -> list[Path]:
        """Journals that an apply or rollback left half way (status open or failed), and
        unreadable ones (their state cannot be known), oldest first."""
        return [p for p in cls.list_paths(journal_dir) if cls.peek_status(p) in (*UNFINISHED, None)]

    @classmethod
    def find_active(cls, journal_dir: Path) -> list[Path]:
        """Journals whose changes may be in effect (not rolled back), oldest first."""
        return [p for p in cls.list_paths(journal_dir) if cls.peek_status(p) in (*ACTIVE, None)]

    # ------------------------------------------------------------ mutation

    id = Via[str]("data")
    status = Via[str]("data")
    entries = Via[list[JournalEntry]]("data")

    def now(self) -> str:
        return _iso(self.clock())

    def save(self) -> None:
        self.data.updated_at = self.now()
        doc = self.data.model_dump(mode="json")
        doc["checksum"] = canonical_checksum(doc)
        self.data.checksum = doc["checksum"]
        write_json_durably(self.path, doc)

    def add_pending(
        self, *, target: str, kind: str, spec: dict[str, Any], old: OldState, new_value: str
    ) -> JournalEntry:
        """Record a change that is about to be made; durable when this returns."""
        entry = JournalEntry(
            index=len(self.data.entries),
            target=target,
            kind=kind,
            spec=spec,
            old=old,
            new_value=new_value,
            pending_at=self.now(),
        )
        self.data.entries.append(entry)
        self.save()
        return entry

    def mark(
        self,
        index: int,
        state: EntryState,
        *,
        read_back: str | None = None,
        error: str | None = None,
    ) -> None:
        entry = self.data.entries[index]
        entry.state = state
        if state == "applied":
            entry.applied_at = self.now()
            entry.read_back = read_back
        elif state == "reverted":
            entry.reverted_at = self.now()
            entry.error = None
        if error is not None:
            entry.error = error
        self.save()

    def note_error(self, index: int, error: str) -> None:
        self.data.entries[index].error = error
        self.save()

    def set_status(self, status: JournalStatus, *, error: str | None = None) -> None:
        self.data.status = status
        self.data.error = error
        self.save()
