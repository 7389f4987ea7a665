"""The search space of `tune`: which server knobs a trial may change, and over which values.

The catalog (``knobs/``) says which knobs exist on this flavor and version, their type,
documented range and enum values; it has no notion of a *useful* range (innodb_io_capacity
goes to 2^32). ``SEARCH_RANGES`` adds that: one row per performance knob worth searching,
with the range a search explores. ``build_space`` keeps the rows whose knob exists on the
server, clips each range to the catalog's, widens it to include the plan's value (the first
trial is the plan) and leaves durability knobs out unless ``durability == "relaxed"``.

Values cross Optuna as plain numbers and strings; sizes are searched in MiB (``unit``) so a
log-scale search over 8 MiB..4 GiB is an integer range (per-connection buffers in KiB). ``value_text`` turns a sampled value
into the text a plan and an option file carry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

from myaccel.knobs.catalog import Catalog
from myaccel.knobs.model import KnobError
from myaccel.knobs.server_knobs import ServerKnobs
from myaccel.knobs.values import KnobValue, format_bool, format_float
from myaccel.units import KiB, MiB

DimKind = Literal["int", "float", "choice"]
ParamValue = int | float | str


@dataclass(frozen=True)
class Dim:
    """One searched knob: ``int``/``float`` in [low, high] (``log``: sampled on a log
    scale; ``unit``: the knob's value is the sampled value times it), or ``choice``."""

    name: str
    kind: DimKind
    low: float = 0
    high: float = 0
    log: bool = False
    unit: int = 1
    choices: tuple[str, ...] = ()
    durability: bool = False
    needs: tuple[str, str] | None = None  # (dim, value): a change only while that dim has it

    def knob_value(self, sampled: ParamValue) -> KnobValue:
        """The knob's value for a sampled parameter."""
        if self.kind == "int":
            return int(sampled) * self.unit
        if self.kind == "float":
            return float(sampled)
        return str(sampled)

    def param_of(self, value: KnobValue) -> ParamValue:
        """The parameter that stands for the knob ``value`` (the plan's value as a trial)."""
        if self.kind == "int":
            return round(int(value) / self.unit)
        if self.kind == "float":
            return float(value)
        return _choice_text(value)


def _choice_text(value: KnobValue) -> str:
    if isinstance(value, bool):
        return format_bool(value)
    return str(value)


def value_text(value: KnobValue) -> str:
    """The value as a plan's ``proposed`` text (parsed back by the catalog)."""
    if isinstance(value, bool):
        return format_bool(value)
    if isinstance(value, float):
        return format_float(value)
    return str(value)


def _int(name: str, low: int, high: int, *, log: bool = False, unit: int = 1) -> Dim:
    return Dim(name, "int", low, high, log, unit)


def _float(name: str, low: float, high: float) -> Dim:
    return Dim(name, "float", low, high)


def _choice(name: str, *values: str) -> Dim:
    return Dim(name, "choice", choices=values)


# The ranges searched (values in the catalog's spelling; sizes in MiB where ``unit`` says).
# Durability knobs (catalog ``durability``) are searched only with --durability relaxed.
# Left out on purpose: max_connections (a capacity decision, not a speed knob),
# innodb_io_capacity_max (the server derives it from innodb_io_capacity when unset),
# thread_handling and thread_pool_size (the process layer: ``tune.process``).
SEARCH_RANGES: dict[str, Dim] = {
    d.name: d
    for d in (
        _int("innodb_buffer_pool_size", 128, 64 * 1024, log=True, unit=MiB),  # budget caps it
        _int("innodb_log_file_size", 48, 4096, log=True, unit=MiB),
        _int("innodb_redo_log_capacity", 48, 4096, log=True, unit=MiB),
        _int("innodb_log_buffer_size", 8, 256, log=True, unit=MiB),
        _int("innodb_io_capacity", 100, 20000, log=True),
        _choice("innodb_flush_neighbors", "0", "1", "2"),
        _int("innodb_lru_scan_depth", 128, 4096, log=True),
        _float("innodb_max_dirty_pages_pct", 10.0, 99.0),
        _float("innodb_adaptive_flushing_lwm", 0.0, 70.0),
        _choice("innodb_adaptive_hash_index", "ON", "OFF"),
        _choice("innodb_change_buffering", "none", "inserts", "all"),
        _int("innodb_read_io_threads", 1, 16),
        _int("innodb_write_io_threads", 2, 16),
        _int("innodb_purge_threads", 1, 8),
        _int("innodb_spin_wait_delay", 0, 64),
        _int("innodb_sync_spin_loops", 0, 200),
        _int("innodb_buffer_pool_instances", 1, 8),
        _int("table_open_cache", 400, 8000, log=True),
        _int("table_open_cache_instances", 1, 16),
        _int("thread_cache_size", 0, 256),
        _int("sort_buffer_size", 256, 8 * 1024, log=True, unit=KiB),
        _int("join_buffer_size", 128, 4 * 1024, log=True, unit=KiB),
        _int("tmp_table_size", 16, 256, log=True, unit=MiB),
        _int("max_heap_table_size", 16, 256, log=True, unit=MiB),
        # durability knobs: only with --durability relaxed
        _choice("innodb_flush_log_at_trx_commit", "0", "1", "2"),
        _choice("sync_binlog", "0", "1", "1000"),
        _choice("innodb_doublewrite", "ON", "OFF"),
        _choice("innodb_flush_method", "fsync", "O_DIRECT", "O_DIRECT_NO_FSYNC"),
    )
}


@dataclass(frozen=True)
class Space:
    dims: tuple[Dim, ...]
    base: dict[str, KnobValue]  # the plan's value of each knob (proposed, else the server's)
    left_out: dict[str, str]  # knob -> why it is not searched

    def names(self) -> list[str]:
        return [d.name for d in self.dims]

    def dim(self, name: str) -> Dim:
        return next(d for d in self.dims if d.name == name)

    def base_params(self) -> dict[str, ParamValue]:
        return {d.name: d.param_of(self.base[d.name]) for d in self.dims}

    def changes(self, params: Mapping[str, ParamValue]) -> dict[str, str]:
        """The knobs whose sampled value differs from the plan's, as value texts."""
        out: dict[str, str] = {}
        for d in self.dims:
            if d.name not in params or not self._needs_met(d, params):
                continue
            v = d.knob_value(params[d.name])
            if not _same(v, self.base[d.name]):
                out[d.name] = value_text(v)
        return out

    def _needs_met(self, d: Dim, params: Mapping[str, ParamValue]) -> bool:
        if d.needs is None:
            return True
        name, value = d.needs
        if name in params:
            return _choice_text(self.dim(name).knob_value(params[name])) == value
        return name in self.base and _choice_text(self.base[name]) == value


def _same(a: KnobValue, b: KnobValue) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    return _choice_text(a).lower() == _choice_text(b).lower()


def build_space(
    sk: ServerKnobs,
    base_texts: Mapping[str, str],
    *,
    durability: str = "strict",
    only: tuple[str, ...] = (),
    catalog: Catalog | None = None,
) -> Space:
    """The dims for the server ``sk`` (``base_texts``: knob -> the plan's value, else the
    server's variable; the catalog's default for a knob in neither). ``only`` restricts the
    search to these knobs."""
    cat = catalog or Catalog.load()
    dims: list[Dim] = []
    base: dict[str, KnobValue] = {}
    left: dict[str, str] = {}
    for name, row in SEARCH_RANGES.items():
        why = _left_out_reason(sk, cat, name, base_texts, durability, only)
        if why:
            left[name] = why
            continue
        value = _base_value(sk, name, base_texts)
        if value is None:
            left[name] = "its value on the server is unknown (not reported, no default)"
            continue
        dim = _fit(sk, replace(row, durability=cat.is_durability(name)), value)
        if dim is None:
            left[name] = "the catalog's range leaves nothing to search"
            continue
        dims.append(dim)
        base[name] = dim.knob_value(dim.param_of(value)) if dim.kind != "int" else value
    return Space(dims=tuple(dims), base=base, left_out=left)


def _left_out_reason(
    sk: ServerKnobs,
    cat: Catalog,
    name: str,
    base_texts: Mapping[str, str],
    durability: str,
    only: tuple[str, ...],
) -> str | None:
    if only and name not in only:
        return "not asked for (--knob)"
    if not sk.exists(name):
        return f"not on {sk.label}"
    if cat.is_durability(name) and durability != "relaxed":
        return "durability knob: searched only with --durability relaxed"
    return None


def _base_value(sk: ServerKnobs, name: str, base_texts: Mapping[str, str]) -> KnobValue | None:
    """The plan's (or the server's) value, else the catalog's default for this version."""
    if name in base_texts:
        return sk.coerce(name, base_texts[name])
    try:
        return sk.default(name)
    except KnobError:
        return None


def _fit(sk: ServerKnobs, d: Dim, value: KnobValue) -> Dim | None:
    """``d`` clipped to the catalog's range (or enum values) and widened to hold ``value``."""
    k = sk.knob(d.name)
    if d.kind == "choice":
        allowed = [c for c in d.choices if _allowed_choice(sk, d.name, c)]
        cur = _choice_text(value)
        if cur not in allowed and _allowed_choice(sk, d.name, cur):
            allowed.append(cur)
        return replace(d, choices=tuple(allowed)) if len(allowed) > 1 else None
    low, high = d.low, d.high
    if k.min is not None:
        low = max(low, _ceil_div(k.min, d.unit))
    if k.max is not None:
        high = min(high, k.max // d.unit)
    p = d.param_of(value)
    if isinstance(p, (int, float)) and _in_catalog(k.min, k.max, d.knob_value(p)):
        low, high = min(low, p), max(high, p)
    if d.log and low <= 0:
        low = 1
    if high <= low:
        return None
    if d.kind == "int":
        return replace(d, low=int(low), high=int(high))
    return replace(d, low=float(low), high=float(high))


def _ceil_div(a: float, b: int) -> float:
    return -(-a // b) if b > 1 else a


def _in_catalog(lo: float | None, hi: float | None, v: KnobValue) -> bool:
    if not isinstance(v, (int, float)):
        return False
    return (lo is None or v >= lo) and (hi is None or v <= hi)


def _allowed_choice(sk: ServerKnobs, name: str, text: str) -> bool:
    try:
        sk.parse_value(name, text)
    except Exception:
        return False
    return True


def cap_dim(space: Space, name: str, high_value: int) -> Space:
    """``space`` with the int dim ``name`` capped at the knob value ``high_value`` (the
    buffer pool at what the memory budget allows), never below the plan's value."""
    if name not in space.names():
        return space
    d = space.dim(name)
    p = d.param_of(space.base[name])
    high = max(int(high_value) // d.unit, int(p), int(d.low) + 1)
    dims = tuple(replace(x, high=min(x.high, high)) if x.name == name else x for x in space.dims)
    return replace(space, dims=dims)
