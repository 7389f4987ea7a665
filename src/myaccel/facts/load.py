"""Read a facts file (``myaccel probe --out``): schema check, then validation."""

from __future__ import annotations

from myaccel.errors import UsageError, read_json_file, validation_summary
from myaccel.model import FACTS_SCHEMA, Facts


def load_facts(path: str) -> Facts:
    doc = read_json_file(
        path, what="facts file", hint="write one with `myaccel probe --out facts.json`"
    )
    schema = doc.get("schema_version") if isinstance(doc, dict) else None
    if schema != FACTS_SCHEMA:
        raise UsageError(
            f"facts file '{path}' has schema {schema!r}, this myaccel reads {FACTS_SCHEMA!r}",
            hint="probe again with this version: myaccel probe --out facts.json",
        )
    try:
        return Facts.model_validate(doc)
    except ValueError as exc:
        raise UsageError(
            f"facts file '{path}' does not match its schema: {validation_summary(exc)}",
            hint="probe again",
        ) from None
