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

By concern: ``model.py`` (flavors, errors, the data file's schema, ``Machine``,
``ResolvedKnob``), ``history.py`` (version resolution), ``server_knobs.py`` (one server:
defaults, typed values, option lines) and this module (loading and checking the data
file, lookups, ``for_server``); the names stay importable from here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from myaccel import artifacts
from myaccel.errors import UsageError
from myaccel.knobs.formula import MACHINE_NAMES, FormulaError
from myaccel.knobs.history import (
    change_applies,
    nearest_series,
    parse_version,
    resolve_history,
)
from myaccel.knobs.model import (
    FLAVOR_LABELS,
    FLAVORS,
    CatalogData,
    CatalogError,
    GroupSpec,
    InvalidKnobValue,
    KnobError,
    KnobSpec,
    ResolvedKnob,
    UnknownKnob,
    Version,
    compiled_formula,
    normalize_name,
)
from myaccel.knobs.server_knobs import ServerKnobs, coerce_value, option_line
from myaccel.knobs.values import KnobValue, ValueSyntaxError
from myaccel.server.flavor import ServerVersion, parse_server_version

# Names other modules import from here, wherever they are defined now.
__all__ = [
    "DATA_PATH",
    "FLAVOR_LABELS",
    "Catalog",
    "KnobError",
    "ResolvedKnob",
    "ServerKnobs",
    "change_applies",
    "parse_version",
]

log = logging.getLogger(__name__)

DATA_PATH = Path(__file__).parent / "data" / "knobs.json"


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
        data = artifacts.load(
            path,
            CatalogData,
            what="knob catalog",
            hint="this is a bug in myaccel's data; run the knob catalog tests",
            error=CatalogError,
            missing_hint="reinstall myaccel; the file ships with the package",
        )
        return cls(data, path)

    def _check(self) -> None:
        problems: list[str] = []
        if len(self._by_name) != len(self.data.knobs):
            problems.append("duplicate knob names")
        for spec in self.data.knobs:
            if spec.group not in self._groups:
                problems.append(f"{spec.name}: unknown group {spec.group}")
            if spec.name != normalize_name(spec.name):
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
                            f = compiled_formula(ch.auto.formula)
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
        return isinstance(name, str) and normalize_name(name) in self._by_name

    def __iter__(self) -> Iterator[KnobSpec]:
        return iter(self.data.knobs)

    def __len__(self) -> int:
        return len(self.data.knobs)

    def get(self, name: str) -> KnobSpec | None:
        """The knob's flavor-independent description, or None (names: ``_`` or ``-``)."""
        return self._by_name.get(normalize_name(name))

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
        series, exact, eval_v, warning = nearest_series(self.known_series(fl), fl, v)
        warnings: tuple[str, ...] = ()
        if warning:
            log.warning("%s", warning)
            warnings = (warning,)
        return ServerKnobs(self, fl, eval_v, series, exact, warnings)

    # -- resolution

    def resolve(self, spec: KnobSpec, flavor: str, v: Version, series: str) -> ResolvedKnob:
        return resolve_history(spec, flavor, v, self.source(spec, flavor, series))

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
            return coerce_value(spec, text, self._all_values(spec))
        except ValueSyntaxError as exc:
            raise InvalidKnobValue(f"invalid value for {spec.name}: {exc}") from exc

    def format_option(self, name: str, value: str | KnobValue) -> str:
        """Option-file line: ``innodb-buffer-pool-size = 8G``, ``skip-name-resolve = ON``,
        ``log-bin`` / ``skip-log-bin``."""
        spec = self.spec(name)
        return option_line(spec, self.parse_value(spec.name, value))

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
