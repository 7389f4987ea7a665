"""What the detectors read: a profile and (optionally) the machine's facts, with the shares,
CPU loads, topology and counters taken from whichever of the two has them."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from myaccel.model import Facts
from myaccel.profile.folded import SYMBOL_GROUPS
from myaccel.profile.records import (
    CpuSummary,
    GroupShare,
    NodeCpus,
    Profile,
    parse_cpulist,
    summarize_cpu,
)


@dataclass(frozen=True)
class Context:
    profile: Profile
    facts: Facts | None

    # ---- stacks
    @property
    def stack_source(self) -> str:
        r = self.profile.recording
        st = self.profile.stacks
        n = st.total_samples if st else 0
        who = f"pid {r.pid}" if r.pid else ("system wide" if r.system_wide else "")
        return f"perf record -e {r.event} {who}, {r.duration_s:g} s, {n} samples".replace("  ", " ")

    def group(self, gid: str) -> GroupShare | None:
        """The group's share; estimated from the symbol list when the summary lacks it."""
        st = self.profile.stacks
        if st is None or st.total_samples <= 0:
            return None
        if gid in st.groups:
            return st.groups[gid]
        g = SYMBOL_GROUPS.get(gid)
        if g is None:
            return None
        members = [s for s in st.symbols if g.matches(s.symbol)]
        # self shares are disjoint (one leaf per stack); the inclusive union is at least
        # the largest member's inclusive share.
        return GroupShare(
            group=gid,
            description=g.description + " (estimated from the symbol list)",
            self_pct=round(sum(s.self_pct for s in members), 3),
            inclusive_pct=max((s.inclusive_pct for s in members), default=0.0),
            top_self={
                s.symbol: s.self_pct
                for s in sorted(members, key=lambda s: -s.self_pct)[:5]
                if s.self_pct
            },
        )

    def self_pct(self, gid: str) -> float:
        g = self.group(gid)
        return g.self_pct if g else 0.0

    def incl_pct(self, gid: str) -> float:
        g = self.group(gid)
        return g.inclusive_pct if g else 0.0

    def top(self, *gids: str) -> str:
        items: list[tuple[str, float]] = []
        for gid in gids:
            g = self.group(gid)
            if g:
                items += list(g.top_self.items())
        items.sort(key=lambda kv: -kv[1])
        return ", ".join(f"{s} {v:.1f}%" for s, v in items[:5])

    # ---- CPU and topology
    @cached_property
    def nodes(self) -> list[NodeCpus]:
        if self.profile.numa_nodes:
            return list(self.profile.numa_nodes)
        if self.facts is not None and self.facts.cpu.numa_nodes.value:
            out = []
            for n in self.facts.cpu.numa_nodes.value:
                try:
                    out.append(NodeCpus(node=n.node, cpus=parse_cpulist(n.cpus)))
                except ValueError:
                    continue
            return out
        return []

    @property
    def nodes_source(self) -> str:
        if self.profile.numa_nodes:
            return "profile numa_nodes (/sys/devices/system/node)"
        return "facts cpu.numa_nodes"

    @cached_property
    def cpu(self) -> CpuSummary | None:
        p = self.profile
        if p.cpu is not None and (p.cpu.nodes or not self.nodes):
            return p.cpu
        if p.cpu_series:
            return summarize_cpu(p.cpu_series, self.nodes)
        return p.cpu

    @property
    def cpu_source(self) -> str:
        c = self.cpu
        n = c.intervals + 1 if c else 0
        d = c.duration_s if c else 0.0
        return f"/proc/stat, {n} samples over {d:g} s"

    @property
    def cpu_count(self) -> int | None:
        if self.cpu is not None and self.cpu.cpu_count:
            return self.cpu.cpu_count
        if self.facts is not None:
            return self.facts.cpu.logical_cpus.value
        return None

    def allowed_cpus(self) -> set[int] | None:
        f = self.facts
        if f is None or f.server is None or not f.server.cpus_allowed.value:
            return None
        try:
            return set(parse_cpulist(f.server.cpus_allowed.value))
        except ValueError:
            return None

    # ---- facts
    @property
    def arch(self) -> str | None:
        return self.facts.cpu.arch.value if self.facts else None

    @property
    def flavor(self) -> str | None:
        f = self.facts
        return f.server.flavor.value if f and f.server else None

    def variable(self, name: str) -> str | None:
        f = self.facts
        if f is None or f.server is None or not f.server.variables.value:
            return None
        return f.server.variables.value.get(name)

    def status_counters(self) -> tuple[dict[str, float], str]:
        """Status deltas over the window, else cumulative counters since server start."""
        st = self.profile.status
        if st is not None and st.deltas:
            return dict(st.deltas), f"{st.source} delta over {st.duration_s:g} s"
        f = self.facts
        if f is not None and f.server is not None and f.server.status.value:
            out: dict[str, float] = {}
            for k, v in f.server.status.value.items():
                try:
                    out[k] = float(v)
                except ValueError:
                    continue
            return out, "facts server.status (cumulative since server start)"
        return {}, ""
