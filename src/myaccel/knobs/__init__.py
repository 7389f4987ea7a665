"""Knob catalog: server variables per flavor and version (see ``catalog.py``)."""

from myaccel.knobs.catalog import (
    Catalog,
    CatalogError,
    DefaultNotComputable,
    InvalidKnobValue,
    KnobError,
    KnobNotAvailable,
    KnobSpec,
    Machine,
    ResolvedKnob,
    ServerKnobs,
    UnknownKnob,
)
from myaccel.knobs.render import render_markdown
from myaccel.knobs.values import KnobValue

__all__ = [
    "Catalog",
    "CatalogError",
    "DefaultNotComputable",
    "InvalidKnobValue",
    "KnobError",
    "KnobNotAvailable",
    "KnobSpec",
    "KnobValue",
    "Machine",
    "ResolvedKnob",
    "ServerKnobs",
    "UnknownKnob",
    "render_markdown",
]
