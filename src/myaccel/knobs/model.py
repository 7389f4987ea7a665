"""The knob catalog's model: flavors, errors, the data file's schema (``myaccel.knobs/1``),
the machine defaults are computed from, and a knob as resolved for one server."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import (
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    model_validator,
)

from myaccel.artifacts import artifact
from myaccel.errors import MyaccelError, UsageError
from myaccel.knobs.formula import Formula, compile_formula
from myaccel.knobs.values import KnobValue
from myaccel.model import CpuFacts, Frozen, MemoryFacts
from myaccel.server.optionfile import normalize_key

CATALOG_SCHEMA = "myaccel.knobs/1"
DATA_PATH = Path(__file__).parent / "data" / "knobs.json"
FLAVORS = ("mysql", "mariadb", "percona")
FLAVOR_LABELS = {"mysql": "MySQL", "mariadb": "MariaDB", "percona": "Percona Server"}
# Whose histories a flavor's knobs follow, in order: Percona Server inherits MySQL's history
# and adds its own changes on top. (A plan's layers are ``rules.model.LAYERS``.)
FLAVOR_HISTORIES: Mapping[str, tuple[str, ...]] = {
    "mysql": ("mysql",),
    "mariadb": ("mariadb",),
    "percona": ("mysql", "percona"),
}

KnobType = Literal["int", "size", "bool", "enum", "float", "str"]
Scope = Literal["global", "session", "both"]
Version = tuple[int, int, int]
JsonValue = StrictBool | StrictInt | StrictFloat | StrictStr


# ------------------------------------------------------------------ errors


class KnobError(UsageError, code="knob"):
    pass


class UnknownKnob(KnobError, code="knob-unknown"):
    pass


class KnobNotAvailable(KnobError, code="knob-not-available"):
    pass


class InvalidKnobValue(KnobError, code="knob-value"):
    pass


class DefaultNotComputable(KnobError, code="knob-default"):
    pass


class CatalogError(MyaccelError, code="knob-catalog"):
    """The catalog data file is missing or inconsistent (a bug in myaccel, not the user's)."""


# ------------------------------------------------------------------ data file schema


class AutoSpec(Frozen):
    """A default the server computes at startup."""

    text: str  # how it is computed, in words
    formula: str | None = None  # expression (see formula.py); None = not computable here
    sentinel: JsonValue | None = None  # value that asks for the computation (-1, 0)


class Change(Frozen):
    since: str | list[str]
    present: bool | None = None  # False = removed from this version on
    deprecated: bool | None = None
    default: JsonValue | None = None
    auto: AutoSpec | None = None
    dynamic: bool | None = None
    min: StrictInt | StrictFloat | None = None
    max: StrictInt | StrictFloat | None = None
    values: list[str] | None = None  # enum values
    plugin: str | None = None  # exists only with this server plugin loaded ("" = built in)
    note: str | None = None

    @property
    def since_list(self) -> list[str]:
        return [self.since] if isinstance(self.since, str) else list(self.since)


class KnobSpec(Frozen):
    name: str
    group: str
    type: KnobType
    unit: str | None = None
    scope: Scope
    summary: str
    option: str | None = None  # option-file spelling when not the name with dashes
    option_style: Literal["value", "flag"] = "value"
    durability: bool = False  # changing it can lose committed data on a crash
    safe_values: list[JsonValue] = Field(default_factory=list)  # all others are unsafe
    unsafe_values: list[JsonValue] = Field(default_factory=list)  # only these are unsafe
    durability_note: str | None = None
    sources: dict[str, str] = Field(default_factory=dict)
    history: dict[str, list[Change]]  # flavor -> changes

    @property
    def option_name(self) -> str:
        return self.option or self.name.replace("_", "-")


class GroupSpec(Frozen):
    id: str
    title: str
    sources: dict[str, str]


@artifact(CATALOG_SCHEMA)
class CatalogData(Frozen):
    schema_version: str = CATALOG_SCHEMA
    known_series: dict[str, list[str]]  # flavor -> series ("8.0", "9" = every 9.x)
    doc_series: dict[str, dict[str, str]]  # flavor -> series -> manual version in URLs
    groups: list[GroupSpec]
    knobs: list[KnobSpec]

    @model_validator(mode="after")
    def _check(self) -> CatalogData:
        for mapping in (self.known_series, self.doc_series):
            bad = set(mapping) - set(FLAVORS)
            if bad:
                raise ValueError(f"unknown flavors {sorted(bad)}")
        for k in self.knobs:
            bad = (set(k.history) | set(k.sources)) - set(FLAVORS)
            if bad:
                raise ValueError(f"{k.name}: unknown flavors {sorted(bad)}")
        return self


# ------------------------------------------------------------------ machine


@dataclass(frozen=True)
class Machine:
    """What machine-dependent defaults are computed from."""

    logical_cpus: int
    ram_bytes: int

    def value(self, name: str) -> int:
        return int(getattr(self, name))

    @classmethod
    def from_facts(cls, cpu: CpuFacts, memory: MemoryFacts) -> Machine | None:
        """From probe facts (logical CPUs, physical RAM); None when either is unknown.

        The server sizes from physical RAM, not from a cgroup limit: a rule that budgets
        memory must apply the cgroup limit itself."""
        cpus, ram = cpu.logical_cpus.value, memory.total_bytes.value
        if cpus is None or ram is None:
            return None
        return cls(logical_cpus=cpus, ram_bytes=ram)


# ------------------------------------------------------------------ resolved knob


@dataclass(frozen=True)
class ResolvedKnob:
    """One knob as it is on one flavor and version."""

    spec: KnobSpec
    flavor: str
    version: Version
    exists: bool
    introduced: str | None = None  # first version of this flavor with the knob (None: never)
    deprecated: bool = False
    deprecated_in: str | None = None
    removed: bool = False  # existed in an earlier version of this flavor, gone now
    removed_in: str | None = None
    default_value: KnobValue | None = None  # documented value (or nominal one when auto)
    auto: AutoSpec | None = None
    dynamic: bool | None = None
    min: int | float | None = None
    max: int | float | None = None
    values: tuple[str, ...] = ()
    plugin: str | None = None  # exists only when this server plugin is loaded
    notes: tuple[str, ...] = ()
    source: str = ""

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def formula(self) -> Formula | None:
        if self.auto is None or self.auto.formula is None:
            return None
        return compiled_formula(self.auto.formula)


@cache
def compiled_formula(text: str) -> Formula:
    return compile_formula(text)


def normalize_name(name: str) -> str:
    return normalize_key(name)
