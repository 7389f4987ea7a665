"""Knob catalog: server variables per flavor and version (see ``catalog.py``)."""

from myaccel.knobs.catalog import Catalog
from myaccel.knobs.model import (
    CatalogError,
    DefaultNotComputable,
    InvalidKnobValue,
    KnobError,
    KnobNotAvailable,
    KnobSpec,
    Machine,
    ResolvedKnob,
    UnknownKnob,
)
from myaccel.knobs.render import render_markdown
from myaccel.knobs.server_knobs import ServerKnobs
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
