"""What the knob catalog says changes between two versions of one flavor: the knobs the
newer one removed, deprecated or added, and the documented defaults it changed (the
advice beside `accelerate --versions`; read from each knob's history, ``history.py``)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from myaccel.knobs.catalog import Catalog
from myaccel.knobs.model import ResolvedKnob, normalize_name
from myaccel.knobs.values import KnobValue


@dataclass(frozen=True)
class DefaultChange:
    name: str
    old: str
    new: str


@dataclass(frozen=True)
class VersionDiff:
    """The catalog's knobs between ``old`` and ``new`` (labels: ``MariaDB 10.11.19``)."""

    old: str
    new: str
    removed: tuple[tuple[str, str | None], ...]  # (knob, version it was removed in)
    deprecated: tuple[tuple[str, str | None], ...]  # deprecated in new, not in old
    added: tuple[str, ...]
    defaults: tuple[DefaultChange, ...]
    configured: frozenset[str] = frozenset()  # knobs the server's configuration sets

    def configured_removed(self) -> list[str]:
        """Removed knobs the configuration sets: the newer server refuses to start on it."""
        return [n for n, _ in self.removed if n in self.configured]

    def lines(self) -> list[str]:
        """One line per kind of change (none when the catalog records none)."""

        def set_here(name: str) -> str:
            return f"{name} (set in this configuration)" if name in self.configured else name

        out: list[str] = []
        if self.removed:
            out.append(
                "removed: "
                + ", ".join(f"{set_here(n)}{f' in {v}' if v else ''}" for n, v in self.removed)
            )
        if self.deprecated:
            out.append(
                "deprecated: "
                + ", ".join(f"{set_here(n)}{f' in {v}' if v else ''}" for n, v in self.deprecated)
            )
        if self.defaults:
            out.append(
                "changed defaults: "
                + ", ".join(f"{set_here(d.name)} {d.old} -> {d.new}" for d in self.defaults)
            )
        if self.added:
            out.append("new: " + ", ".join(self.added))
        return out


def _shown(k: ResolvedKnob) -> str:
    if k.auto is not None and k.auto.formula:
        return f"auto ({k.auto.formula})"
    v: KnobValue | None = k.default_value
    if isinstance(v, bool):
        return "ON" if v else "OFF"
    return "-" if v is None else str(v)


def version_diff(
    flavor: str,
    old: str,
    new: str,
    *,
    configured: Collection[str] = (),
    catalog: Catalog | None = None,
) -> VersionDiff:
    """The catalog's differences between versions ``old`` and ``new`` of ``flavor``
    (version strings, ``10.11.19``); ``configured``: the option names a server's
    configuration sets (any spelling), marked in the lines."""
    cat = catalog or Catalog.load()
    a, b = cat.for_server(flavor, old), cat.for_server(flavor, new)
    removed: list[tuple[str, str | None]] = []
    deprecated: list[tuple[str, str | None]] = []
    added: list[str] = []
    defaults: list[DefaultChange] = []
    for spec in cat.specs:
        ka, kb = a.knob(spec.name), b.knob(spec.name)
        if ka.exists and not kb.exists:
            removed.append((spec.name, kb.removed_in))
        elif kb.exists and not ka.exists:
            added.append(spec.name)
        elif ka.exists and kb.exists:
            if kb.deprecated and not ka.deprecated:
                deprecated.append((spec.name, kb.deprecated_in))
            if (ka.default_value, ka.auto) != (kb.default_value, kb.auto):
                defaults.append(DefaultChange(spec.name, _shown(ka), _shown(kb)))
    return VersionDiff(
        old=a.label,
        new=b.label,
        removed=tuple(removed),
        deprecated=tuple(deprecated),
        added=tuple(added),
        defaults=tuple(defaults),
        configured=frozenset(normalize_name(c) for c in configured),
    )
