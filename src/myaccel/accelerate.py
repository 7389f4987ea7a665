"""`accelerate` on a sandbox: probe -> plan -> candidate configuration -> interleaved A/B
(baseline = the server's own defaults, candidate = the plan's server layer) -> comparison
-> report. Host-wide layers (OS, NUMA, NIC) are listed but not applied to a sandbox run:
they would change the machine, not the sandbox, and need `myaccel apply` on a server."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from myaccel.bench.compare import Comparison, format_markdown
from myaccel.model import Facts
from myaccel.redact import redact_command
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


def report_markdown(
    facts: Facts,
    plan: Plan,
    cand: CandidateConfig,
    cmp: Comparison,
    *,
    command: str,
    duration_s: float,
    profile_name: str,
) -> str:
    f = facts
    s = f.server
    out = [
        "# myaccel accelerate report",
        "",
        f"{dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}: {f.hostname.value} "
        f"({f.cpu.model.value}, {f.cpu.logical_cpus.value} CPUs), "
        f"{s.flavor.value if s else '?'} {s.version.value if s else '?'}, profile `{profile_name}`, "
        f"{duration_s / 60:.1f} min.",
        "",
        "Baseline: the server's own defaults. Tuned: the plan's server layer "
        f"(`{cand.path.name}`). Arms interleaved A B B A, paired seeds, data restored from a "
        "snapshot before every write run; verdicts use exact Mann-Whitney p (Holm) and a 95% CI.",
        "",
        "## Results",
        "",
        format_markdown(cmp).rstrip(),
        "",
        "## What was applied",
        "",
        "| id | target | before | after | why |",
        "|---|---|---|---|---|",
    ]
    for r in cand.applied:
        out.append(f"| {r.id} | `{r.target}` | {r.current} | {r.proposed} | {r.rationale} |")
    out += ["", "## Not applied", "", "| id | target | proposed | why not |", "|---|---|---|---|"]
    for r, why in cand.not_applied:
        out.append(f"| {r.id} | `{r.target}` | {r.proposed} | {why} |")
    for sk in plan.skipped:
        out.append(f"| {sk.id} | - | - | {sk.reason} |")
    out += [
        "",
        "## Environment",
        "",
        f"- CPU: {f.cpu.model.value} ({f.cpu.arch.value}), {f.cpu.logical_cpus.value} logical CPUs, "
        f"{len(f.cpu.numa_nodes.value or [])} NUMA node(s)",
        f"- Memory: {(f.memory.total_bytes.value or 0) / 2**30:.1f} GiB, budget {(f.memory.effective_limit_bytes.value or 0) / 2**30:.1f} GiB",
        f"- Kernel: {f.kernel.release.value}; THP {f.memory.thp_enabled.value}",
        f"- Storage: {f.storage.fs_type.value} on {f.storage.block_device.value} (rotational {f.storage.rotational.value})",
    ]
    if s is not None:
        out.append(
            f"- Server: {s.version_string.value} ({s.version_comment.value}), binary {s.binary_path.value}"
        )
    if f.binary is not None and f.binary.atomics.value is not None:
        out.append(f"- Binary atomics: {f.binary.atomics.value.klass}")
    out += ["", "Reproduce:", "", f"    {redact_command(command)}", ""]
    return "\n".join(out)
