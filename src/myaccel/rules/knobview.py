"""Bind the knob catalog to the rules: existence and dynamic-ness for the running server."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from myaccel.model import Facts


@dataclass
class CatalogKnobView:
    server_knobs: Any  # myaccel.knobs.catalog.ServerKnobs
    variables: dict[str, str]
    warnings: list[str] = field(default_factory=list)

    def _known(self, name: str) -> bool:
        try:
            self.server_knobs.knob(name)
            return True
        except Exception:  # the catalog does not list this knob at all
            return False

    def exists(self, name: str) -> bool:
        if self._known(name):
            return bool(self.server_knobs.exists(name))
        return name in self.variables

    def dynamic(self, name: str) -> bool:
        if self._known(name) and self.server_knobs.exists(name):
            return bool(self.server_knobs.dynamic(name))
        return False


def knob_view_for(facts: Facts) -> CatalogKnobView | None:
    """The catalog view for the probed server, or None without server facts."""
    s = facts.server
    if s is None or not s.version_string.value:
        return None
    from myaccel.knobs.catalog import Catalog

    sv_text = s.version_string.value
    flavor = s.flavor.value or "mysql"
    sk = Catalog.load().for_server(flavor, sv_text)
    return CatalogKnobView(
        server_knobs=sk,
        variables=dict(s.variables.value or {}),
        warnings=list(getattr(sk, "warnings", [])),
    )
