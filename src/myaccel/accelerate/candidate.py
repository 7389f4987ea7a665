"""The candidate option file of `accelerate` on a sandbox: the plan's server layer as
``[mysqld]`` lines (each with its rule and rationale), and what was left out and why.
Host-wide layers (OS, NUMA, NIC) are listed but not applied to a sandbox run: they would
change the machine, not the sandbox, and need `myaccel apply` on a server."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from myaccel.model import Facts
from myaccel.rules.model import Plan, Recommendation


@dataclass(frozen=True)
class CandidateConfig:
    path: Path
    applied: list[Recommendation]
    not_applied: list[tuple[Recommendation, str]]


def server_option_lines(
    plan: Plan, facts: Facts
) -> tuple[list[str], list[Recommendation], list[tuple[Recommendation, str]]]:
    """Option-file lines for the plan's applicable server knobs, and what was left out."""
    from myaccel.knobs.catalog import Catalog, KnobError

    sk = None
    if facts.server is not None and facts.server.version_string.value:
        sk = Catalog.load().for_server(
            facts.server.flavor.value or "mysql", facts.server.version_string.value
        )
    lines: list[str] = []
    applied: list[Recommendation] = []
    left: list[tuple[Recommendation, str]] = []
    for r in plan.recommendations:
        if r.action != "apply":
            left.append((r, "advisory: needs a human (rebuild, firmware or a decision)"))
            continue
        if not r.target.startswith("mysql:"):
            left.append(
                (
                    r,
                    f"{r.layer} layer: host-wide, applied with `myaccel apply` on a server, not to a sandbox benchmark",
                )
            )
            continue
        name = r.target.removeprefix("mysql:")
        try:
            line = (
                sk.format_option(name, r.proposed)
                if sk is not None
                else f"{name.replace('_', '-')} = {r.proposed}"
            )
        except KnobError as exc:
            left.append((r, f"rejected by the knob catalog: {exc.message}"))
            continue
        lines.append(line)
        applied.append(r)
    return lines, applied, left


def write_candidate(plan: Plan, facts: Facts, path: Path) -> CandidateConfig:
    """Write the option file to ``path``: the applicable server recommendations."""
    lines, applied, left = server_option_lines(plan, facts)
    head = [
        "# Written by myaccel accelerate: the plan's server layer.",
        f"# plan created {plan.created_at} for {plan.hostname} (facts {plan.facts_digest}), durability {plan.durability}",
        "[mysqld]",
    ]
    body = []
    for r, line in zip(applied, lines, strict=True):
        body.append(f"# {r.id}: {r.rationale}")
        body.append(line)
    path.write_text("\n".join(head + body) + "\n")
    return CandidateConfig(path=path, applied=applied, not_applied=left)
