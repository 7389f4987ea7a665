"""Plans: recommendations with their reasons, evidence, effect, risk and verification."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from myaccel.model import Frozen

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
    warnings: list[str] = Field(default_factory=list)
