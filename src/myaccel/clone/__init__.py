"""``myaccel clone``: a sandbox that reproduces a running server on the same host (its
binary, its effective configuration rewritten to run beside it, a consistent copy of its
data taken without stopping it), fenced so that it does not starve the source, registered
like any sandbox (``--sandbox NAME``, ``ab``, ``profile``, ``report``, ``sandbox destroy``).

One concern per module: ``source`` (the source, read-only), ``preflight`` (restart method,
privileges, disk: before any side effect), ``defaults`` (the binary's compiled defaults),
``config`` (the clone's option lines) and ``rewrite`` (what changes and why), ``fence``
(CPU set and priority), ``copy`` (mariadb-backup, the clone plugin), ``schema`` (schema-only
clones) and ``generate`` (their rows of the source's shape), ``accounts`` (the first start's init_file), ``verify`` (variables after the
start), ``record`` (``clone.json``), ``incomplete`` (the marker of a clone being made; what a
killed one left is removed by the next clone), ``make`` (the command as one function).
"""

from myaccel.clone.errors import CloneError
from myaccel.clone.make import CloneRequest, CloneResult, make_clone
from myaccel.clone.preflight import Preflight, RestartMethod, detect_restart, preflight
from myaccel.clone.record import CLONE_SCHEMA, CloneRecord, load_record

__all__ = [
    "CLONE_SCHEMA",
    "CloneError",
    "CloneRecord",
    "CloneRequest",
    "CloneResult",
    "Preflight",
    "RestartMethod",
    "detect_restart",
    "load_record",
    "make_clone",
    "preflight",
]
