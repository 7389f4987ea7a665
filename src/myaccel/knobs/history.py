"""Version resolution: which changes of a knob's history apply to a server version, what
they leave, and which known series stands for a version the catalog was not checked against
(see the history model in ``catalog.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from myaccel.knobs.model import (
    FLAVOR_HISTORIES,
    FLAVOR_LABELS,
    AutoSpec,
    Change,
    KnobSpec,
    ResolvedKnob,
    Version,
)
from myaccel.knobs.values import KnobValue


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


def min_since(change: Change) -> Version:
    return min(parse_version(s) for s in change.since_list)


def resolve_history(spec: KnobSpec, flavor: str, v: Version, source: str) -> ResolvedKnob:
    """The knob as the changes of its history up to ``v`` leave it on ``flavor``."""
    layers = FLAVOR_HISTORIES[flavor]
    applicable: list[tuple[Version, int, int, Change]] = []
    upcoming: list[Version] = []
    for li, layer in enumerate(layers):
        for ci, ch in enumerate(spec.history.get(layer, [])):
            if change_applies(ch.since_list, v):
                applicable.append((effective_since(ch, v), li, ci, ch))
            elif ch.present is not False:
                upcoming.append(min_since(ch))
    # Order by the version that brought each change to this server's series, so a
    # backport (10.6.7) follows the baseline of its series (10.6.0).
    applicable.sort(key=lambda e: (e[0], e[1], e[2]))
    state = KnobState()
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
        plugin=state.plugin,
        notes=tuple(state.notes),
        source=source,
    )


def nearest_series(
    known_series: list[str], flavor: str, v: Version
) -> tuple[str, bool, Version, str | None]:
    """The known series for ``v`` (exact or the nearest lower one), whether it is exact,
    the version to evaluate and a warning when not exact."""
    known = sorted(known_series, key=series_key)
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


@dataclass
class KnobState:
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
    plugin: str | None = None
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
        if ch.plugin is not None:
            self.plugin = ch.plugin or None
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


def effective_since(ch: Change, v: Version) -> Version:
    """The ``since`` entry that made an applicable change apply to ``v``: the one of the
    same series, else the newest listed (all listed series are older than ``v``'s)."""
    versions = [parse_version(s) for s in ch.since_list]
    same = [s for s in versions if s[:2] == v[:2]]
    return same[0] if same else max(versions)
