"""The knob catalog: server variables a tuning tool reads or changes, per flavor and version.

The knowledge lives in ``data/knobs.json`` (schema ``myaccel.knobs/1``); this module loads
and checks it and answers questions about one server::

    cat = Catalog.load()
    srv = cat.for_server("mysql", "8.4.3")          # or a VERSION() string
    srv.default("innodb_io_capacity")                # 10000
    srv.default("innodb_read_io_threads", machine=Machine(logical_cpus=64, ram_bytes=...))
    srv.dynamic("innodb_buffer_pool_size")           # True
    srv.exists("innodb_buffer_pool_instances")       # True (MariaDB 10.6+: False, removed)
    srv.parse_value("innodb_buffer_pool_size", "8G") # 8589934592
    srv.format_option("innodb_buffer_pool_size", 8 << 30)  # 'innodb-buffer-pool-size = 8G'

History model
-------------
Each knob has, per flavor (``mysql``, ``mariadb``, ``percona``), a list of changes. A change
applies from ``since`` on; later changes override earlier ones field by field (a change that
sets ``default`` or ``auto`` replaces both). ``since`` is either one version (applies to every
later version) or a list of versions for a change released in several maintained series at
once (MariaDB backports, MySQL 8.0/8.4/9.x): it then applies to a version of a listed series
from the listed patch on, and to every series newer than all listed ones; older or skipped
series do not get it. Percona Server is MySQL plus the ``percona`` changes.

Versions of a series the catalog was not checked against (MariaDB 10.8, MySQL 5.6, Percona
9.1) resolve to the nearest lower known series, with a warning on ``ServerKnobs.warnings``
and in the log; changes recorded for versions up to the real one still apply.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)

from myaccel.errors import MyaccelError, UsageError
from myaccel.knobs.formula import MACHINE_NAMES, Formula, FormulaError, compile_formula
from myaccel.knobs.values import (
    KnobValue,
    ValueSyntaxError,
    format_bool,
    format_float,
    format_size,
    parse_bool,
    parse_enum,
    parse_float,
    parse_int,
)
from myaccel.model import CpuFacts, MemoryFacts
from myaccel.server.flavor import ServerVersion, parse_server_version

log = logging.getLogger(__name__)

CATALOG_SCHEMA = "myaccel.knobs/1"
DATA_PATH = Path(__file__).parent / "data" / "knobs.json"
FLAVORS = ("mysql", "mariadb", "percona")
FLAVOR_LABELS = {"mysql": "MySQL", "mariadb": "MariaDB", "percona": "Percona Server"}
# Percona Server inherits MySQL's history and adds its own changes on top.
LAYERS: Mapping[str, tuple[str, ...]] = {
    "mysql": ("mysql",),
    "mariadb": ("mariadb",),
    "percona": ("mysql", "percona"),
}

KnobType = Literal["int", "size", "bool", "enum", "float", "str"]
Scope = Literal["global", "session", "both"]
Version = tuple[int, int, int]
JsonValue = StrictBool | StrictInt | StrictFloat | StrictStr


# ------------------------------------------------------------------ errors


class KnobError(UsageError):
    code = "knob"


class UnknownKnob(KnobError):
    code = "knob-unknown"


class KnobNotAvailable(KnobError):
    code = "knob-not-available"


class InvalidKnobValue(KnobError):
    code = "knob-value"


class DefaultNotComputable(KnobError):
    code = "knob-default"


class CatalogError(MyaccelError):
    """The catalog data file is missing or inconsistent (a bug in myaccel, not the user's)."""

    code = "knob-catalog"


# ------------------------------------------------------------------ data file schema


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AutoSpec(_Frozen):
    """A default the server computes at startup."""

    text: str  # how it is computed, in words
    formula: str | None = None  # expression (see formula.py); None = not computable here
    sentinel: JsonValue | None = None  # value that asks for the computation (-1, 0)


class Change(_Frozen):
    since: str | list[str]
    present: bool | None = None  # False = removed from this version on
    deprecated: bool | None = None
    default: JsonValue | None = None
    auto: AutoSpec | None = None
    dynamic: bool | None = None
    min: StrictInt | StrictFloat | None = None
    max: StrictInt | StrictFloat | None = None
    values: list[str] | None = None  # enum values
    note: str | None = None

    @property
    def since_list(self) -> list[str]:
        return [self.since] if isinstance(self.since, str) else list(self.since)


class KnobSpec(_Frozen):
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


class GroupSpec(_Frozen):
    id: str
    title: str
    sources: dict[str, str]


class CatalogData(_Frozen):
    schema_version: str
    known_series: dict[str, list[str]]  # flavor -> series ("8.0", "9" = every 9.x)
    doc_series: dict[str, dict[str, str]]  # flavor -> series -> manual version in URLs
    groups: list[GroupSpec]
    knobs: list[KnobSpec]

    @model_validator(mode="after")
    def _check(self) -> CatalogData:
        if self.schema_version != CATALOG_SCHEMA:
            raise ValueError(f"schema_version {self.schema_version!r} != {CATALOG_SCHEMA!r}")
        for mapping in (self.known_series, self.doc_series):
            bad = set(mapping) - set(FLAVORS)
            if bad:
                raise ValueError(f"unknown flavors {sorted(bad)}")
        for k in self.knobs:
            bad = (set(k.history) | set(k.sources)) - set(FLAVORS)
            if bad:
                raise ValueError(f"{k.name}: unknown flavors {sorted(bad)}")
        return self


# ------------------------------------------------------------------ versions


def parse_version(text: str) -> Version:
    parts = text.strip().split(".")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"version {text!r} is not N[.N[.N]]")
    nums = [int(p) for p in parts] + [0] * (3 - len(parts))
    return (nums[0], nums[1], nums[2])


def version_text(v: Version) -> str:
    return f"{v[0]}.{v[1]}.{v[2]}"


def series_matches(series: str, v: Version) -> bool:
    """``"8.0"`` matches 8.0.x; ``"9"`` matches every 9.x.y."""
    parts = [int(p) for p in series.split(".")]
    return list(v[: len(parts)]) == parts


def series_key(series: str) -> tuple[int, int]:
    parts = [int(p) for p in series.split(".")]
    return (parts[0], parts[1] if len(parts) > 1 else 0)


def series_label(series: str) -> str:
    return f"{series}.x" if "." not in series else series


def change_applies(since: Sequence[str], v: Version) -> bool:
    """See the module docstring: one version, or a set of backport versions."""
    versions = [parse_version(s) for s in since]
    if len(versions) == 1:
        return v >= versions[0]
    for s in versions:
        if v[:2] == s[:2]:
            return v >= s
    return v[:2] > max(s[:2] for s in versions)


def _min_since(change: Change) -> Version:
    return min(parse_version(s) for s in change.since_list)


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
    notes: tuple[str, ...] = ()
    source: str = ""

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def formula(self) -> Formula | None:
        if self.auto is None or self.auto.formula is None:
            return None
        return _compiled(self.auto.formula)


@cache
def _compiled(text: str) -> Formula:
    return compile_formula(text)


def _normalize_name(name: str) -> str:
    return name.strip().replace("-", "_").lower()


# ------------------------------------------------------------------ value handling


def _parse_typed(spec: KnobSpec, text: str, values: Sequence[str]) -> KnobValue:
    if spec.type in ("int", "size"):
        return parse_int(text)
    if spec.type == "bool":
        return parse_bool(text)
    if spec.type == "float":
        return parse_float(text)
    if spec.type == "enum":
        return parse_enum(text, values)
    return text.strip()


def _coerce(spec: KnobSpec, value: KnobValue | int | float, values: Sequence[str]) -> KnobValue:
    """A Python value (or text) as the knob's normalized type."""
    if isinstance(value, str):
        return _parse_typed(spec, value, values)
    if spec.type in ("int", "size"):
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueSyntaxError(f"{value!r} is not an integer")
        return int(value)
    if spec.type == "bool":
        if isinstance(value, bool):
            return value
        if value in (0, 1):
            return bool(value)
        raise ValueSyntaxError(f"{value!r} is not a boolean")
    if spec.type == "float":
        if isinstance(value, bool):
            raise ValueSyntaxError(f"{value!r} is not a number")
        return float(value)
    if spec.type == "enum":
        if isinstance(value, int) and not isinstance(value, bool):
            return parse_enum(str(value), values)
        raise ValueSyntaxError(f"{value!r} is not one of {', '.join(values)}")
    return str(value)


def _format_value(spec: KnobSpec, value: KnobValue) -> str:
    if spec.type == "size" and isinstance(value, int):
        return format_size(value)
    if spec.type == "bool" and isinstance(value, bool):
        return format_bool(value)
    if spec.type == "float" and isinstance(value, float):
        return format_float(value)
    return str(value)


def _format_line(spec: KnobSpec, value: KnobValue) -> str:
    if spec.option_style == "flag":
        if value is True:
            return spec.option_name
        if value is False:
            return f"skip-{spec.option_name}"
    return f"{spec.option_name} = {_format_value(spec, value)}"


# ------------------------------------------------------------------ one server


@dataclass(frozen=True)
class ServerKnobs:
    """The catalog resolved for one server flavor and version."""

    catalog: Catalog
    flavor: str
    version: Version
    series: str  # the known series used (nearest lower one when not exact)
    exact: bool  # the version's own series is a known one
    warnings: tuple[str, ...] = ()
    _cache: dict[str, ResolvedKnob] = field(default_factory=dict, repr=False, compare=False)

    @property
    def label(self) -> str:
        return f"{FLAVOR_LABELS[self.flavor]} {version_text(self.version)}"

    def knob(self, name: str) -> ResolvedKnob:
        """The resolved knob (existing or not); ``UnknownKnob`` if not in the catalog."""
        key = _normalize_name(name)
        if key not in self._cache:
            spec = self.catalog.spec(key)
            self._cache[key] = self.catalog.resolve(spec, self.flavor, self.version, self.series)
        return self._cache[key]

    def get(self, name: str) -> ResolvedKnob | None:
        """The knob if the catalog has it and it exists on this server, else None."""
        if _normalize_name(name) not in self.catalog:
            return None
        k = self.knob(name)
        return k if k.exists else None

    def knobs(self) -> list[ResolvedKnob]:
        """Every catalog knob that exists on this server, in catalog order."""
        return [k for k in (self.knob(s.name) for s in self.catalog.specs) if k.exists]

    def exists(self, name: str) -> bool:
        return self.get(name) is not None

    def removed(self, name: str) -> bool:
        return self.knob(name).removed

    def deprecated(self, name: str) -> bool:
        k = self.knob(name)
        return k.exists and k.deprecated

    def _existing(self, name: str) -> ResolvedKnob:
        k = self.knob(name)
        if not k.exists:
            if k.removed:
                why = f"was removed in {FLAVOR_LABELS[self.flavor]} {k.removed_in}"
            elif k.introduced:
                why = f"only exists from {FLAVOR_LABELS[self.flavor]} {k.introduced} on"
            else:
                why = f"does not exist in {FLAVOR_LABELS[self.flavor]}"
            raise KnobNotAvailable(
                f"{k.name} {why} (server: {self.label})",
                hint="leave it out of the configuration for this server; "
                "see `docs/knobs.md` for the equivalent knob, if any",
            )
        return k

    def dynamic(self, name: str) -> bool:
        """True when ``SET GLOBAL`` changes it at run time (False: restart needed)."""
        k = self._existing(name)
        return bool(k.dynamic)

    def machine_dependent(self, name: str, _seen: frozenset[str] = frozenset()) -> bool:
        """True when the default depends on the machine (CPUs, memory, OS limits, disks)."""
        k = self._existing(name)
        if k.auto is None:
            return False
        f = k.formula
        if f is None or f.machine_dependent:
            return True
        seen = _seen | {k.name}
        return any(
            self.machine_dependent(n, seen) for n in f.names - MACHINE_NAMES if n not in seen
        )

    def default(
        self,
        name: str,
        machine: Machine | None = None,
        settings: Mapping[str, KnobValue] | None = None,
    ) -> KnobValue:
        """The value the server uses when nothing sets the knob.

        Computed defaults are evaluated from ``machine`` and from ``settings`` (values other
        knobs are set to; unset ones use their own defaults). A computed default whose inputs
        are not known here (OS limits, disk block size) gives the documented nominal value
        if there is one, else ``DefaultNotComputable``.
        """
        norm = {_normalize_name(k): v for k, v in (settings or {}).items()}
        return self._default(self._existing(name), machine, norm, ())

    def _default(
        self,
        k: ResolvedKnob,
        machine: Machine | None,
        settings: Mapping[str, KnobValue],
        stack: tuple[str, ...],
    ) -> KnobValue:
        f = k.formula
        if f is None:
            if k.default_value is None:
                raise DefaultNotComputable(
                    f"the default of {k.name} on {self.label} depends on things myaccel "
                    f"cannot compute here: {k.auto.text if k.auto else 'undocumented'}",
                    hint=f"read the running server's value (SELECT @@GLOBAL.{k.name})",
                )
            return k.default_value
        if k.name in stack:
            raise CatalogError(f"default formulas loop: {' -> '.join((*stack, k.name))}")

        def resolve(ref: str) -> int | float | bool:
            if ref in MACHINE_NAMES:
                if machine is None:
                    raise DefaultNotComputable(
                        f"the default of {k.name} on {self.label} depends on the machine "
                        f"({k.auto.text if k.auto else ref})",
                        hint="pass machine=Machine(logical_cpus=..., ram_bytes=...)",
                    )
                return machine.value(ref)
            if ref in settings:
                v = settings[ref]
            else:
                v = self._default(self._existing(ref), machine, settings, (*stack, k.name))
            if isinstance(v, str):
                raise CatalogError(f"formula of {k.name} uses non-numeric knob {ref}")
            return v

        try:
            result = f.evaluate(resolve)
        except (ZeroDivisionError, TypeError, FormulaError) as exc:
            raise CatalogError(f"formula of {k.name} failed: {exc}") from exc
        return _coerce(k.spec, result, k.values)

    def coerce(self, name: str, text: str | KnobValue) -> KnobValue:
        """Normalize a value by the knob's type on this server (this version's enum
        values), without the range check: ``InvalidKnobValue`` if it is not of the type."""
        k = self._existing(name)
        try:
            return _coerce(k.spec, text, k.values)
        except ValueSyntaxError as exc:
            raise InvalidKnobValue(
                f"invalid value for {k.name}: {exc}", hint=_value_hint(k)
            ) from exc

    def parse_value(self, name: str, text: str | KnobValue) -> KnobValue:
        """Normalize a value for this server and check it against the documented range."""
        k = self._existing(name)
        value = self.coerce(name, text)
        sentinel = k.auto.sentinel if k.auto else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value != sentinel:
            if k.min is not None and value < k.min:
                raise InvalidKnobValue(
                    f"{k.name} = {text} is below the minimum {k.min} on {self.label}",
                    hint=_value_hint(k),
                )
            if k.max is not None and value > k.max:
                raise InvalidKnobValue(
                    f"{k.name} = {text} is above the maximum {k.max} on {self.label}",
                    hint=_value_hint(k),
                )
        return value

    def format_option(self, name: str, value: str | KnobValue) -> str:
        """An option-file line for this server, e.g. ``innodb-io-capacity = 10000``."""
        k = self._existing(name)
        return _format_line(k.spec, self.parse_value(k.name, value))


def _value_hint(k: ResolvedKnob) -> str:
    if k.spec.type == "enum":
        return f"use one of: {', '.join(k.values)}"
    if k.spec.type == "bool":
        return "use ON or OFF"
    rng = []
    if k.min is not None:
        rng.append(f"min {k.min}")
    if k.max is not None:
        rng.append(f"max {k.max}")
    suffix = " (suffixes K, M, G allowed)" if k.spec.type in ("size", "int") else ""
    return f"use a number{suffix}" + (f", {', '.join(rng)}" if rng else "")


# ------------------------------------------------------------------ catalog


class Catalog:
    """All knobs, all flavors. Load once with ``Catalog.load()`` (cached)."""

    def __init__(self, data: CatalogData, path: Path | None = None):
        self.data = data
        self.path = path
        self._by_name = {k.name: k for k in data.knobs}
        self._groups = {g.id: g for g in data.groups}
        self._check()

    # -- loading

    @classmethod
    def load(cls, path: str | Path | None = None) -> Catalog:
        if path is None:
            return _default_catalog()
        return cls._load(Path(path))

    @classmethod
    def _load(cls, path: Path) -> Catalog:
        try:
            raw: Any = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CatalogError(
                f"cannot read the knob catalog {path}: {exc}",
                hint="reinstall myaccel; the file ships with the package",
            ) from exc
        try:
            data = CatalogData.model_validate(raw)
        except ValidationError as exc:
            raise CatalogError(
                f"knob catalog {path} is invalid: {exc.error_count()} errors, first: "
                f"{exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}",
                hint="this is a bug in myaccel's data; run the knob catalog tests",
            ) from exc
        return cls(data, path)

    def _check(self) -> None:
        problems: list[str] = []
        if len(self._by_name) != len(self.data.knobs):
            problems.append("duplicate knob names")
        for spec in self.data.knobs:
            if spec.group not in self._groups:
                problems.append(f"{spec.name}: unknown group {spec.group}")
            if spec.name != _normalize_name(spec.name):
                problems.append(f"{spec.name}: names are lower case with underscores")
            for flavor, changes in spec.history.items():
                if not changes:
                    problems.append(f"{spec.name}/{flavor}: empty history")
                for ch in changes:
                    try:
                        for s in ch.since_list:
                            parse_version(s)
                    except ValueError as exc:
                        problems.append(f"{spec.name}/{flavor}: {exc}")
                    if ch.auto and ch.auto.formula:
                        try:
                            f = _compiled(ch.auto.formula)
                        except FormulaError as exc:
                            problems.append(f"{spec.name}/{flavor}: {exc}")
                            continue
                        unknown = f.names - MACHINE_NAMES - set(self._by_name)
                        if unknown:
                            problems.append(
                                f"{spec.name}/{flavor}: formula uses unknown names "
                                f"{sorted(unknown)}"
                            )
        if problems:
            raise CatalogError(
                "knob catalog is inconsistent: " + "; ".join(problems[:10]),
                hint="this is a bug in myaccel's data; run the knob catalog tests",
            )

    # -- lookup

    @property
    def specs(self) -> list[KnobSpec]:
        return list(self.data.knobs)

    @property
    def groups(self) -> list[GroupSpec]:
        return list(self.data.groups)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and _normalize_name(name) in self._by_name

    def __iter__(self) -> Iterator[KnobSpec]:
        return iter(self.data.knobs)

    def __len__(self) -> int:
        return len(self.data.knobs)

    def get(self, name: str) -> KnobSpec | None:
        """The knob's flavor-independent description, or None (names: ``_`` or ``-``)."""
        return self._by_name.get(_normalize_name(name))

    def is_durability(self, name: str) -> bool:
        """True when changing the knob can lose committed data on a crash (any value)."""
        s = self.get(name)
        return s is not None and s.durability

    def spec(self, name: str) -> KnobSpec:
        s = self.get(name)
        if s is None:
            raise UnknownKnob(
                f"'{name}' is not in myaccel's knob catalog",
                hint="check the spelling; `docs/knobs.md` lists the knobs myaccel knows",
            )
        return s

    def group(self, group_id: str) -> GroupSpec:
        return self._groups[group_id]

    # -- versions

    def known_series(self, flavor: str) -> list[str]:
        return list(self.data.known_series.get(_check_flavor(flavor), []))

    def for_server(self, flavor: str, version: str | ServerVersion) -> ServerKnobs:
        """Resolve for a server: ``("mariadb", "10.11.6")``, ``("mysql", "8.0.36-0ubuntu...")``.

        ``version`` may be a VERSION() string or a ``ServerVersion``; an unknown series
        resolves to the nearest lower known one, with a warning."""
        fl = _check_flavor(flavor)
        if isinstance(version, ServerVersion):
            sv: ServerVersion | None = version
        else:
            sv = parse_server_version(version)
            if sv is None:
                raise UsageError(
                    f"cannot read a server version from {version!r}",
                    hint="pass x.y.z or the server's VERSION() string",
                )
        assert sv is not None
        if sv.flavor == "mariadb" and fl != "mariadb":
            raise UsageError(
                f"version {sv.text} is a MariaDB version but flavor {fl} was given",
                hint="pass flavor 'mariadb'",
            )
        v: Version = (sv.major, sv.minor, sv.patch)
        series, exact, eval_v, warning = self._nearest_series(fl, v)
        warnings: tuple[str, ...] = ()
        if warning:
            log.warning("%s", warning)
            warnings = (warning,)
        return ServerKnobs(self, fl, eval_v, series, exact, warnings)

    def _nearest_series(self, flavor: str, v: Version) -> tuple[str, bool, Version, str | None]:
        known = sorted(self.known_series(flavor), key=series_key)
        label = FLAVOR_LABELS[flavor]
        for s in known:
            if series_matches(s, v):
                return s, True, v, None
        lower = [s for s in known if series_key(s) < v[:2]]
        if lower:
            s = lower[-1]
            return (
                s,
                False,
                v,
                f"{label} {v[0]}.{v[1]} is not a series the knob catalog was checked "
                f"against; using the nearest lower known series {series_label(s)} "
                f"(changes recorded up to {version_text(v)} still apply)",
            )
        s = known[0]
        first = parse_version(s)
        return (
            s,
            False,
            first,
            f"{label} {v[0]}.{v[1]} is older than every series in the knob catalog; "
            f"using {label} {series_label(s)} rules",
        )

    # -- resolution

    def resolve(self, spec: KnobSpec, flavor: str, v: Version, series: str) -> ResolvedKnob:
        layers = LAYERS[flavor]
        applicable: list[tuple[Version, int, int, Change]] = []
        upcoming: list[Version] = []
        for li, layer in enumerate(layers):
            for ci, ch in enumerate(spec.history.get(layer, [])):
                if change_applies(ch.since_list, v):
                    applicable.append((_effective_since(ch, v), li, ci, ch))
                elif ch.present is not False:
                    upcoming.append(_min_since(ch))
        # Order by the version that brought each change to this server's series, so a
        # backport (10.6.7) follows the baseline of its series (10.6.0).
        applicable.sort(key=lambda e: (e[0], e[1], e[2]))
        state = _KnobState()
        for since_v, _li, _ci, ch in applicable:
            state.apply(ch, version_text(since_v))
        if state.introduced is None and upcoming:
            # never existed up to v: report when it appears in this flavor
            state.introduced = version_text(min(upcoming))
        gone = state.ever and not state.exists
        return ResolvedKnob(
            spec=spec,
            flavor=flavor,
            version=v,
            exists=state.exists,
            introduced=state.introduced,
            deprecated=state.deprecated and state.exists,
            deprecated_in=state.deprecated_in,
            removed=gone,
            removed_in=state.removed_in if gone else None,
            default_value=state.default,
            auto=state.auto,
            dynamic=state.dynamic,
            min=state.lo,
            max=state.hi,
            values=state.values,
            notes=tuple(state.notes),
            source=self.source(spec, flavor, series),
        )

    def source(self, spec: KnobSpec, flavor: str, series: str) -> str:
        """The documentation URL for the knob on this flavor and series ('' if none).

        Percona Server pages are used where the catalog has one, MySQL's otherwise."""
        for fl in (flavor, "mysql") if flavor == "percona" else (flavor,):
            template = spec.sources.get(fl) or self._groups[spec.group].sources.get(fl)
            if template:
                doc = self.data.doc_series.get(fl, {}).get(series, series)
                return template.format(name=spec.name, doc=doc)
        return ""

    # -- flavor-independent value handling

    def _all_values(self, spec: KnobSpec) -> list[str]:
        out: list[str] = []
        for changes in spec.history.values():
            for ch in changes:
                for v in ch.values or []:
                    if v.lower() not in (x.lower() for x in out):
                        out.append(v)
        return out

    def parse_value(self, name: str, text: str | KnobValue) -> KnobValue:
        """Normalize a value by the knob's type (no version-specific range check; use
        ``for_server(...).parse_value`` for that)."""
        spec = self.spec(name)
        try:
            return _coerce(spec, text, self._all_values(spec))
        except ValueSyntaxError as exc:
            raise InvalidKnobValue(f"invalid value for {spec.name}: {exc}") from exc

    def format_option(self, name: str, value: str | KnobValue) -> str:
        """Option-file line: ``innodb-buffer-pool-size = 8G``, ``skip-name-resolve = ON``,
        ``log-bin`` / ``skip-log-bin``."""
        spec = self.spec(name)
        return _format_line(spec, self.parse_value(spec.name, value))

    def is_unsafe(self, name: str, value: str | KnobValue) -> bool:
        """True when ``value`` weakens crash safety (a durability knob's unsafe value)."""
        spec = self.spec(name)
        if not spec.durability:
            return False
        v = self.parse_value(name, value)
        safe = [self.parse_value(name, u) for u in spec.safe_values]
        unsafe = [self.parse_value(name, u) for u in spec.unsafe_values]
        if safe:
            return v not in safe
        return v in unsafe


@dataclass
class _KnobState:
    """A knob as the changes applied so far (oldest first) leave it."""

    exists: bool = False
    ever: bool = False
    introduced: str | None = None
    deprecated: bool = False
    deprecated_in: str | None = None
    removed_in: str | None = None
    default: KnobValue | None = None
    auto: AutoSpec | None = None
    dynamic: bool | None = None
    lo: int | float | None = None
    hi: int | float | None = None
    values: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)

    def apply(self, ch: Change, applied: str) -> None:
        """One change, brought to this server's series by version ``applied``."""
        self._presence(ch, applied)
        if ch.deprecated is not None:
            self.deprecated = ch.deprecated
            self.deprecated_in = applied if ch.deprecated else None
        if ch.default is not None or ch.auto is not None:
            self.default, self.auto = ch.default, ch.auto
        if ch.dynamic is not None:
            self.dynamic = ch.dynamic
        if ch.min is not None:
            self.lo = ch.min
        if ch.max is not None:
            self.hi = ch.max
        if ch.values is not None:
            self.values = tuple(ch.values)
        if ch.note:
            self.notes.append(f"{applied}: {ch.note}")

    def _presence(self, ch: Change, applied: str) -> None:
        if ch.present is False:
            if self.exists:
                self.removed_in = applied
            self.exists = False
        elif not self.exists and (ch.present is True or not self.ever):
            self.exists, self.ever = True, True
            self.removed_in = None
            if self.introduced is None:
                self.introduced = applied


def _effective_since(ch: Change, v: Version) -> Version:
    """The ``since`` entry that made an applicable change apply to ``v``: the one of the
    same series, else the newest listed (all listed series are older than ``v``'s)."""
    versions = [parse_version(s) for s in ch.since_list]
    same = [s for s in versions if s[:2] == v[:2]]
    return same[0] if same else max(versions)


def _check_flavor(flavor: str) -> str:
    fl = flavor.strip().lower()
    if fl not in FLAVORS:
        raise UsageError(
            f"unknown server flavor '{flavor}'", hint=f"use one of: {', '.join(FLAVORS)}"
        )
    return fl


@cache
def _default_catalog() -> Catalog:
    return Catalog._load(DATA_PATH)
