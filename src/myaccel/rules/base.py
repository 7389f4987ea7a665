"""What every rule module needs: the rule context, ``Skip``, the registry and its
``@rule`` decorator, and how a rule spells a size and builds a server recommendation.

The rule modules (``server_rules``, ``os_rules``, ``build_rules``) import this module;
``engine`` imports them (to register their rules) and runs them. Nothing here imports a
rule module or the engine, so the dependencies run one way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from myaccel.facts.resources import ServerResources, server_resources
from myaccel.model import Facts
from myaccel.rules.model import Layer, Recommendation
from myaccel.server.flavor import ServerVersion, parse_server_version
from myaccel.units import format_size, size_or_none


class Skip(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class KnobView(Protocol):
    """What rules need from the knob catalog for the running server's version."""

    def exists(self, name: str) -> bool: ...

    def dynamic(self, name: str) -> bool: ...


@dataclass(frozen=True)
class Hints:
    """Optional workload knowledge: from a benchmark profile, status counters or a profile."""

    threads: int | None = None
    write_heavy: bool | None = None
    findings: tuple[str, ...] = ()  # finding ids from `myaccel diagnose`
    effects: tuple[FindingEffect, ...] = ()  # what each finding says about a rule


@dataclass(frozen=True)
class FindingEffect:
    """A diagnose finding raising or lowering one rule (``myaccel plan --profile``)."""

    finding: str
    rule: str
    direction: str  # "raise" or "lower"
    reason: str = ""


def format_plan_size(n: int) -> str:
    """A size as plans spell it, with K, M or G (plans never used T and up: older option
    parsers, MySQL 5.7's among them, do not read them)."""
    return format_size(n, largest="G")


@dataclass
class RuleContext:
    facts: Facts
    durability: str = "strict"
    hints: Hints = field(default_factory=Hints)
    knobs: KnobView | None = None
    proposed: dict[str, str] = field(default_factory=dict)  # server knob -> proposed value
    rule: RuleSpec | None = None  # the rule running now (the engine sets it)
    _resources: ServerResources | None = field(default=None, init=False, repr=False)

    @property
    def resources(self) -> ServerResources:
        """The CPUs and memory the server may use (``facts/resources.py``)."""
        got = self._resources
        if got is None:
            got = self._resources = server_resources(self.facts)
        return got

    @property
    def server(self) -> Any:
        if self.facts.server is None:
            raise Skip("no server facts: probe with server options (or --sandbox) first")
        return self.facts.server

    @property
    def version(self) -> ServerVersion:
        s = self.server
        sv = parse_server_version(s.version_string.value or "", s.version_comment.value or "")
        if sv is None:
            raise Skip(f"unrecognized server version {s.version_string.value!r}")
        return sv

    @property
    def flavor(self) -> str:
        return self.version.flavor

    def variables(self) -> dict[str, str]:
        v = self.server.variables
        if not v.known or v.value is None:
            raise Skip("server variables unknown")
        return dict(v.value)

    def status(self) -> dict[str, str]:
        v = self.server.status
        return dict(v.value or {})

    def var(self, name: str) -> str | None:
        return self.variables().get(name)

    def var_int(self, name: str) -> int | None:
        return size_or_none(self.var(name))

    def planned_bytes(self, name: str) -> int:
        """The knob's value as planned so far (an earlier rule's proposal, else the
        server's), 0 when unset or not a number."""
        return size_or_none(self.proposed.get(name) or self.var(name)) or 0

    def has(self, name: str) -> bool:
        if self.knobs is not None:
            return self.knobs.exists(name)
        return name in self.variables()

    def is_dynamic(self, name: str) -> bool:
        if self.knobs is not None:
            return self.knobs.dynamic(name)
        return False

    def cpus(self) -> int:
        """The CPUs the server can use (its affinity and cgroup quota bind before the
        host's count: ``facts/cpulimits.py``)."""
        n = self.resources.usable_cpus.value
        if not n:
            raise Skip("CPU count unknown")
        return n

    def memory_budget(self) -> tuple[int, str]:
        """The memory the server may use and what binds: its own cgroup limit, the probe's
        (a container's) limit, or the RAM. Host-wide rules judge the server's share of a
        machine by it, not by the host's RAM (a 2 GiB container on a 124 GiB host)."""
        m = self.resources.memory_bytes
        if not m.known or not m.value:
            raise Skip("memory size unknown")
        return m.value, m.source

    def visible_cpus(self) -> int:
        """The CPUs the server sees (its affinity, not its quota): what it sizes itself by."""
        n = self.resources.visible_cpus.value
        if not n:
            raise Skip("CPU count unknown")
        return n

    def host_cpus(self) -> int:
        """The host's logical CPUs, for host-wide settings (IRQs, NIC queues)."""
        n = self.facts.cpu.logical_cpus.value
        if not n:
            raise Skip("CPU count unknown")
        return n

    def cpus_evidence(self) -> str:
        """``cpus()`` with what it rests on, for a recommendation's evidence."""
        b = self.resources.usable_cpus
        return f"{b.value} ({b.source})"

    def numa_nodes(self) -> int:
        nodes = self.facts.cpu.numa_nodes.value
        return len(nodes) if nodes else 1

    def require_2mib_pmd(self) -> None:
        """Skip unless the kernel's PMD huge page is 2 MiB: code huge pages and 2 MiB text
        alignment assume it, and a 64K-page arm64 kernel's PMD page is 512 MiB (16K: 32
        MiB), more than a server's whole text (kernel: arm64 hugetlbpage documentation)."""
        pmd = self.facts.memory.pmd_page_bytes
        if not pmd.known or not pmd.value:
            raise Skip(f"PMD huge page size unknown ({pmd.unknown})")
        if pmd.value != 2 * 1024 * 1024:
            text = ""
            b = self.facts.binary
            if b is not None and b.size_bytes.known and b.size_bytes.value:
                text = f" (the whole server binary is {b.size_bytes.value / 2**20:.0f} MiB)"
            raise Skip(
                f"the PMD huge page is {pmd.value / 2**20:.0f} MiB on this kernel (base pages "
                f"larger than 4K){text}: text cannot fill one, so no code huge pages"
            )


def recommend(ctx: RuleContext, **fields: object) -> Recommendation:
    """A recommendation; its id and layer, unless given, are those of the rule running, and
    its risk, unless given, is ``online`` for a server knob that ``SET GLOBAL`` changes and
    ``restart`` otherwise."""
    if ctx.rule is not None:
        fields.setdefault("id", ctx.rule.id)
        fields.setdefault("layer", ctx.rule.layer)
    if "risk" not in fields:
        name = str(fields["target"]).removeprefix("mysql:")
        fields["risk"] = "online" if ctx.is_dynamic(name) else "restart"
    return Recommendation.model_validate(fields)


RuleFn = Callable[[RuleContext], list[Recommendation]]


@dataclass(frozen=True)
class RuleSpec:
    id: str
    layer: Layer
    title: str
    rationale: str
    source: str
    fn: RuleFn
    order: int = 50


REGISTRY: dict[str, RuleSpec] = {}


def rule(
    id: str, layer: Layer, title: str, source: str, *, order: int = 50
) -> Callable[[RuleFn], RuleFn]:
    """Register a rule. Within a layer rules run by ``order`` then id: a rule that reads
    other rules' proposals (the buffer pool reads every memory knob) runs later."""

    def deco(fn: RuleFn) -> RuleFn:
        if id in REGISTRY:
            raise RuntimeError(f"duplicate rule id {id}")
        REGISTRY[id] = RuleSpec(
            id, layer, title, " ".join((fn.__doc__ or "").split()), source, fn, order
        )
        return fn

    return deco
