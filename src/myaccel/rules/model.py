"""Plans: recommendations with their reasons, evidence, effect, risk and verification."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import Field

from myaccel.artifacts import artifact
from myaccel.model import Frozen
from myaccel.server.optionfile import normalize_key

PLAN_SCHEMA = "myaccel.plan/1"

Layer = Literal["server", "os", "numa", "nic", "build", "hardware"]
LAYERS: tuple[str, ...] = ("server", "os", "numa", "nic", "build", "hardware")
Risk = Literal["online", "restart", "reboot", "durability", "rebuild"]
Action = Literal["apply", "advisory"]


class Recommendation(Frozen):
    id: str  # stable kebab-case rule id, e.g. server-buffer-pool-size
    layer: Layer
    title: str
    target: str  # URI: mysql:innodb_io_capacity, sysctl:vm.swappiness, sysfs:/sys/..., build:lse
    current: str | None
    proposed: str
    action: Action = "apply"  # advisory: a human must act (rebuild, BIOS, hardware)
    rationale: str
    evidence: dict[str, str] = Field(default_factory=dict)  # fact path -> value used
    expected_effect: str
    effect_source: str
    risk: Risk
    reversible: bool = True
    verify: str
    group: str = "default"  # "durability" for the opt-in group
    confidence: Literal["high", "medium", "low"] = "medium"


# Option-file groups the server reads its own options from.
SERVER_GROUPS = ("mysqld", "server", "mariadb", "mariadbd")


def target_knob(target: str) -> str | None:
    """The server variable a ``mysql:NAME`` or ``mycnf:GROUP/OPTION`` target sets
    (``loose-``/``skip-`` prefixes dropped, dashes as underscores), else None."""
    if target.startswith("mysql:"):
        name = target.removeprefix("mysql:")
    elif target.startswith("mycnf:"):
        group, _, name = target.removeprefix("mycnf:").partition("/")
        g = group.strip().lower()
        if not name or not (g in SERVER_GROUPS or g.startswith(("mysqld-", "mariadb-"))):
            return None
    else:
        return None
    return normalize_key(name, drop_loose=True, drop_modifier=True) or None


class Skipped(Frozen):
    id: str
    layer: Layer
    reason: str


class MemoryBudget(Frozen):
    budget_bytes: int
    budget_source: str
    os_reserve_bytes: int
    global_buffers_bytes: int
    per_connection_bytes: int
    max_connections: int
    connections_bytes: int
    buffer_pool_bytes: int
    total_bytes: int

    @property
    def within(self) -> bool:
        return self.total_bytes <= self.budget_bytes


@artifact(PLAN_SCHEMA)
class Plan(Frozen):
    schema_version: str = PLAN_SCHEMA
    created_at: str
    myaccel_version: str
    facts_digest: str
    hostname: str | None
    server: dict[str, Any] = Field(default_factory=dict)
    durability: Literal["strict", "relaxed"] = "strict"
    layers: list[str] = Field(default_factory=lambda: list(LAYERS))
    recommendations: list[Recommendation] = Field(default_factory=list)
    skipped: list[Skipped] = Field(default_factory=list)
    memory: MemoryBudget | None = None
    # the NUMA placement, its policy then one line per node (rules/numa.py `table`); None
    # on one node, without the numa layer, and in plans made before myaccel showed it
    numa_placement: list[str] | None = None
    warnings: list[str] = Field(default_factory=list)
    # sha256 of everything above (durability included), set by `myaccel plan`: apply
    # accepts durability-knob changes only from a relaxed plan whose digest still matches.
    # None in plans made before myaccel recorded it.
    digest: str | None = None

    def content_digest(self) -> str:
        """The digest of this plan's content (every field but ``digest``)."""
        # a field a plan can lack (None) is left out, so that a plan made before it existed
        # keeps its digest
        skip = {"digest"} | ({"numa_placement"} if self.numa_placement is None else set())
        doc = self.model_dump(mode="json", exclude=skip)
        text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()

    def sealed(self) -> Plan:
        """This plan with ``digest`` set to its content digest."""
        return self.model_copy(update={"digest": self.content_digest()})

    @property
    def digest_ok(self) -> bool:
        return self.digest is not None and self.digest == self.content_digest()
