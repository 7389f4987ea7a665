"""The artifact store: every JSON document myaccel writes and reads back goes through here.

- A registry from ``schema_version`` to the pydantic model of that artifact. A model
  registers itself where it is defined, with ``@artifact("myaccel.run/1")``; ``load_any``
  and ``model_for`` look the registry up when they are called, so every model module that
  the caller imported is known by then (this module imports no model: no import circle).
- ``save(path, model)`` (and ``save_document``, ``write_text``, ``write_atomic`` under it)
  with one durability policy: a temporary sibling (``.<name>.<random>.tmp``, created
  exclusively), written and fsynced, renamed over the target, then the directory fsynced.
  A crash leaves the old file or the new one, never a mix; a failed write (a full disk)
  removes its temporary file and leaves the old file as it was. ``private=True`` makes the
  file 0600 (results and journals name hosts and commands); otherwise the umask decides.
- ``load(path, Model)``: read, check the schema (migrating an older one), validate, with one
  line naming the file for each way it can fail: missing, not JSON, another schema (found
  and expected), a field that does not validate. The caller picks the error class, so an
  input file named on the command line stays a usage error (exit 2) while a damaged file
  myaccel wrote itself is a ``DataError`` (exit 9).
- Migrations: ``@artifact(SCHEMA, migrations={OLD: fn})``; ``fn`` takes the document of
  schema ``OLD`` and returns it in a newer schema (its ``schema_version`` set), applied in
  a chain until the current schema is reached.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from myaccel.errors import DataError, MyaccelError, validation_summary

log = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)
Document = dict[str, Any]
Migration = Callable[[Document], Document]
ErrorClass = type[MyaccelError]

SCHEMA_KEY = "schema_version"
TMP_SUFFIX = ".tmp"
PRIVATE_FILE_MODE = 0o600
_SHARED_FILE_MODE = 0o666  # minus the umask, as for any file the user creates


# ---------------------------------------------------------------- the registry


@dataclass(frozen=True)
class Kind:
    """One kind of artifact: its current schema, its model, and how older schemas become
    newer ones."""

    schema: str
    model: type[BaseModel]
    migrations: Mapping[str, Migration] = field(default_factory=dict)


_BY_SCHEMA: dict[str, Kind] = {}
_BY_MODEL: dict[type[BaseModel], Kind] = {}


def artifact(
    schema: str, *, migrations: Mapping[str, Migration] | None = None
) -> Callable[[type[M]], type[M]]:
    """Class decorator: register ``schema`` -> the model (whose ``schema_version`` field
    must default to ``schema``), with the ``migrations`` from older schemas."""

    def register(model: type[M]) -> type[M]:
        if _declared_schema(model) != schema:
            raise TypeError(f"{model.__name__}.{SCHEMA_KEY} must default to {schema!r}")
        known = _BY_SCHEMA.get(schema)
        if known is not None and known.model.__qualname__ != model.__qualname__:
            raise TypeError(f"schema {schema!r} is already {known.model.__name__}'s")
        kind = Kind(schema, model, dict(migrations or {}))
        _BY_SCHEMA[schema] = kind
        _BY_MODEL[model] = kind
        return model

    return register


def _declared_schema(model: type[BaseModel]) -> str | None:
    f = model.model_fields.get(SCHEMA_KEY)
    return f.default if f is not None and isinstance(f.default, str) else None


def kind_of(model: type[BaseModel]) -> Kind:
    """The registered kind of ``model``; an unregistered model with a ``schema_version``
    default is a kind without migrations."""
    kind = _BY_MODEL.get(model)
    if kind is not None:
        return kind
    schema = _declared_schema(model)
    if schema is None:
        raise TypeError(f"{model.__name__} has no {SCHEMA_KEY} default: it is not an artifact")
    return Kind(schema, model)


def model_for(schema: str) -> type[BaseModel] | None:
    """The model that reads documents of ``schema`` (its current schema or one it
    migrates from); None when no imported model does."""
    kind = _BY_SCHEMA.get(schema)
    if kind is not None:
        return kind.model
    return next((k.model for k in _BY_SCHEMA.values() if schema in k.migrations), None)


def known_schemas() -> list[str]:
    """The current schemas of the registered artifacts, sorted."""
    return sorted(_BY_SCHEMA)


# ---------------------------------------------------------------- writing


def fsync_dir(path: Path) -> None:
    """Make a rename or unlink in ``path`` durable (a file system that cannot sync a
    directory, EINVAL, has nothing to make durable)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
    finally:
        os.close(fd)


def replace_durably(
    target: Path,
    tmp: Path,
    data: bytes,
    *,
    mode: int,
    exact_mode: bool = True,
    owner: tuple[int | None, int | None] | None = None,
) -> None:
    """The one durable writer (artifacts here, the host's files in ``actions.files``):
    ``data`` into ``tmp`` (a sibling of ``target``, created exclusively after any stale one
    is removed), fsynced, renamed over ``target``, then the directory fsynced. ``mode``:
    the new file's mode (``exact_mode``: whatever the umask); ``owner``: the uid and gid it
    gets (None for either: as created; a refusal is a warning: the content matters more). On failure ``tmp`` is gone and
    ``target`` untouched; an ``OSError`` names ``target``, not the temporary file."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)  # a crashed writer's leftover of the same name
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    except OSError as exc:
        raise _naming(exc, tmp, target) from exc
    try:
        try:
            if exact_mode:
                os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if owner is not None:
                st = os.fstat(fd)
                want = (
                    st.st_uid if owner[0] is None else owner[0],
                    st.st_gid if owner[1] is None else owner[1],
                )
                if want != (st.st_uid, st.st_gid):
                    try:
                        os.fchown(fd, *want)
                    except PermissionError:
                        log.warning("cannot give %s to %s:%s", target, *want)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError):
            raise _naming(exc, tmp, target) from exc
        raise
    fsync_dir(target.parent)


def write_atomic(path: Path | str, data: bytes, *, private: bool = False) -> Path:
    """Replace ``path`` by ``data`` durably (see the module docstring). An ``OSError``
    names ``path``, not the temporary file."""
    p = Path(path)
    tmp = p.with_name(f".{p.name}.{secrets.token_hex(4)}{TMP_SUFFIX}")
    mode = PRIVATE_FILE_MODE if private else _SHARED_FILE_MODE
    replace_durably(p, tmp, data, mode=mode, exact_mode=private)
    return p


def _naming(exc: OSError, tmp: Path, target: Path) -> OSError:
    if exc.filename is None or str(exc.filename) == str(tmp):
        return OSError(exc.errno, exc.strerror, str(target))  # keeps the subclass (ENOSPC...)
    return exc


def write_text(path: Path | str, text: str, *, private: bool = False) -> Path:
    """``write_atomic`` for text (UTF-8): reports, option files, markdown."""
    return write_atomic(path, text.encode(), private=private)


def save_document(path: Path | str, doc: Document, *, private: bool = False) -> Path:
    """Save a JSON document that is not a model (a journal with its checksum)."""
    return write_text(path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n", private=private)


def save(path: Path | str, model: BaseModel, *, private: bool = False) -> Path:
    """Save an artifact: its JSON (two-space indent, a final newline), durably."""
    return write_text(path, model.model_dump_json(indent=2) + "\n", private=private)


def remove_temporaries(directory: Path) -> list[Path]:
    """Remove what writes interrupted by a crash left in ``directory`` (the targets still
    hold their previous, complete version). Only while no writer can be running there."""
    removed = []
    for p in directory.glob(f".*{TMP_SUFFIX}"):
        with contextlib.suppress(OSError):
            p.unlink()
            removed.append(p)
    return removed


# ---------------------------------------------------------------- reading


@dataclass(frozen=True)
class Source:
    """How to name a document in an error: the file (None for a document already in
    memory), ``what`` it should be ("facts file"), what to do (``hint``), the class to
    raise (``error``) and, for a file that is missing or cannot be read, another class and
    hint when they differ."""

    path: Path | None
    what: str
    hint: str
    error: ErrorClass = DataError
    missing: ErrorClass | None = None
    missing_hint: str | None = None

    @property
    def name(self) -> str:
        return self.what if self.path is None else f"{self.what} '{self.path}'"

    def fail(self, problem: str, *, missing: bool = False, **context: str) -> MyaccelError:
        cls = (self.missing or self.error) if missing else self.error
        hint = (self.missing_hint or self.hint) if missing else self.hint
        where = {} if self.path is None else {"file": str(self.path)}
        return cls(f"{self.name} {problem}", hint=hint, context={**where, **context})


# Every JSON file myaccel reads from the user goes through ``read_json``: bounded in size
# and in nesting (a document of 200,000 nested ``[`` makes ``json.loads`` recurse until
# it raises RecursionError), so that a hostile or broken file is one error line, never a
# crash or an exhausted machine.
MAX_JSON_BYTES = 64 * 2**20
MAX_JSON_DEPTH = 64


class JsonLimitError(ValueError):
    """A JSON document over a bound (its size or its nesting)."""


def decode_json(raw: bytes | str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` with a bound on nesting: deeper than ``max_depth`` arrays and
    objects is a ``JsonLimitError`` (a ``ValueError``, like any JSON that cannot be
    read), also where ``json.loads`` itself would recurse too deep."""
    try:
        doc = json.loads(raw)
    except RecursionError:
        raise JsonLimitError(f"nested deeper than {max_depth} levels") from None
    stack: list[tuple[Any, int]] = [(doc, 1)] if isinstance(doc, dict | list) else []
    while stack:
        node, depth = stack.pop()
        items = node.values() if isinstance(node, dict) else node
        for child in items:
            if isinstance(child, dict | list):
                if depth >= max_depth:
                    raise JsonLimitError(f"nested deeper than {max_depth} levels")
                stack.append((child, depth + 1))
    return doc


def read_bounded(path: Path, max_bytes: int = MAX_JSON_BYTES) -> bytes:
    """The bytes of ``path``, at most ``max_bytes`` (more is a ``JsonLimitError``; a pipe
    or a device is read up to the bound, never whole). ``OSError`` as ``open`` raises."""
    with path.open("rb") as f:
        raw = f.read(max_bytes + 1)
    if len(raw) > max_bytes:
        size = f"{max_bytes // 2**20} MiB" if max_bytes % 2**20 == 0 else f"{max_bytes:,} bytes"
        raise JsonLimitError(f"is larger than {size}")
    return raw


def read_json(
    path: Path, *, max_bytes: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH
) -> Any:
    """The decoded JSON of ``path`` within both bounds (``JsonLimitError`` beyond them,
    ``ValueError`` for JSON that cannot be read, ``OSError`` for a file that cannot)."""
    return decode_json(read_bounded(path, max_bytes), max_depth=max_depth)


def read_document(
    src: Source, *, max_bytes: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH
) -> Any:
    """The decoded JSON in ``src.path`` (not yet checked against a schema), within the
    bounds of ``read_json``."""
    if src.path is None:
        raise TypeError("read_document needs a Source with a path")
    try:
        raw = read_bounded(src.path, max_bytes)
    except FileNotFoundError:
        raise src.fail("does not exist", missing=True) from None
    except OSError as exc:
        why = (exc.strerror or str(exc)).lower()
        raise src.fail(f"cannot be read: {why}", missing=True) from None
    except JsonLimitError as exc:
        raise src.fail(str(exc)) from None
    try:
        return decode_json(raw, max_depth=max_depth)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, JsonLimitError
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise src.fail(f"is not readable JSON: {first}") from None


def schema_of(doc: Any) -> str | None:
    """The ``schema_version`` a decoded document declares (None: none, or not an object)."""
    found = doc.get(SCHEMA_KEY) if isinstance(doc, dict) else None
    return found if isinstance(found, str) else None


def validate(
    doc: Any,
    model: type[M],
    src: Source,
    *,
    verify: Callable[[Document], None] | None = None,
) -> M:
    """Check the schema of a decoded document, run ``verify`` on it as written (a
    checksum), migrate it to the current schema and validate it into ``model``."""
    kind = kind_of(model)
    found = schema_of(doc)
    if found is None or (found != kind.schema and found not in kind.migrations):
        declared = doc.get(SCHEMA_KEY) if isinstance(doc, dict) else None
        raise src.fail(
            f"has schema {declared!r}, expected {kind.schema!r}",
            schema=str(declared),
            expected=kind.schema,
        )
    if verify is not None:
        verify(doc)
    doc = _migrate(doc, kind)
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        raise src.fail(f"does not match {kind.schema}: {validation_summary(exc)}") from None


def _migrate(doc: Document, kind: Kind) -> Document:
    seen: set[str] = set()
    while (schema := doc.get(SCHEMA_KEY)) != kind.schema:
        if not isinstance(schema, str) or schema in seen or schema not in kind.migrations:
            raise TypeError(f"the migrations of {kind.schema} stop at {schema!r}")
        seen.add(schema)
        doc = kind.migrations[schema](dict(doc))
    return doc


def load(
    path: Path | str,
    model: type[M],
    *,
    what: str = "",
    hint: str = "",
    error: ErrorClass = DataError,
    missing: ErrorClass | None = None,
    missing_hint: str | None = None,
    verify: Callable[[Document], None] | None = None,
    max_bytes: int = MAX_JSON_BYTES,
    max_depth: int = MAX_JSON_DEPTH,
) -> M:
    """Read the artifact in ``path`` as ``model`` (see ``validate``); any failure is one
    ``error`` (``missing`` for a file that is not there or not readable) naming the file.
    ``max_bytes`` and ``max_depth`` bound the file (``read_json``)."""
    src = Source(
        Path(path),
        what or f"{model.__name__} file",
        hint or "write it again with this version of myaccel",
        error,
        missing,
        missing_hint,
    )
    doc = read_document(src, max_bytes=max_bytes, max_depth=max_depth)
    return validate(doc, model, src, verify=verify)


def load_any(path: Path | str, *, hint: str = "", error: ErrorClass = DataError) -> BaseModel:
    """Read an artifact of any registered kind, by the schema it declares."""
    src = Source(Path(path), "artifact", hint or "pass a file written by myaccel", error)
    doc = read_document(src)
    found = schema_of(doc)
    model = model_for(found) if found is not None else None
    if model is None:
        raise src.fail(
            f"has schema {found!r}, which is none of {', '.join(known_schemas())}",
            schema=str(found),
        )
    return validate(doc, model, src)
