"""The catalog resolved for one server (``ServerKnobs``): existence, defaults (computed
from the machine and other knobs), typed values, ranges and option-file lines."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from myaccel.knobs.formula import MACHINE_NAMES, FormulaError
from myaccel.knobs.history import version_text
from myaccel.knobs.model import (
    FLAVOR_LABELS,
    CatalogError,
    DefaultNotComputable,
    InvalidKnobValue,
    KnobNotAvailable,
    KnobSpec,
    Machine,
    ResolvedKnob,
    Version,
    normalize_name,
)
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


class KnobSource(Protocol):
    """What a ``ServerKnobs`` asks of its catalog (``Catalog`` is one)."""

    @property
    def specs(self) -> list[KnobSpec]: ...

    def __contains__(self, name: object) -> bool: ...

    def get(self, name: str) -> KnobSpec | None: ...

    def spec(self, name: str) -> KnobSpec: ...

    def resolve(self, spec: KnobSpec, flavor: str, v: Version, series: str) -> ResolvedKnob: ...


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


def coerce_value(
    spec: KnobSpec, value: KnobValue | int | float, values: Sequence[str]
) -> KnobValue:
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


def option_line(spec: KnobSpec, value: KnobValue) -> str:
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

    catalog: KnobSource
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
        key = normalize_name(name)
        if key not in self._cache:
            spec = self.catalog.spec(key)
            self._cache[key] = self.catalog.resolve(spec, self.flavor, self.version, self.series)
        return self._cache[key]

    def get(self, name: str) -> ResolvedKnob | None:
        """The knob if the catalog has it and it exists on this server, else None."""
        if normalize_name(name) not in self.catalog:
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
        norm = {normalize_name(k): v for k, v in (settings or {}).items()}
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
        return coerce_value(k.spec, result, k.values)

    def coerce(self, name: str, text: str | KnobValue) -> KnobValue:
        """Normalize a value by the knob's type on this server (this version's enum
        values), without the range check: ``InvalidKnobValue`` if it is not of the type."""
        k = self._existing(name)
        try:
            return coerce_value(k.spec, text, k.values)
        except ValueSyntaxError as exc:
            raise InvalidKnobValue(
                f"invalid value for {k.name}: {exc}", hint=value_hint(k)
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
                    hint=value_hint(k),
                )
            if k.max is not None and value > k.max:
                raise InvalidKnobValue(
                    f"{k.name} = {text} is above the maximum {k.max} on {self.label}",
                    hint=value_hint(k),
                )
        return value

    def format_option(self, name: str, value: str | KnobValue) -> str:
        """An option-file line for this server, e.g. ``innodb-io-capacity = 10000``."""
        k = self._existing(name)
        return option_line(k.spec, self.parse_value(k.name, value))


def value_hint(k: ResolvedKnob) -> str:
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
