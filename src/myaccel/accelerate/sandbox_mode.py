"""`accelerate` on a sandbox: its base configuration against the plan's server layer
(``tuned.cnf``), interleaved A B B A with the dataset restored from a snapshot."""

from __future__ import annotations

from pathlib import Path

from myaccel.accelerate.candidate import write_candidate
from myaccel.accelerate.common import probe_and_plan
from myaccel.accelerate.request import (
    AccelerateRequest,
    AccelerateResult,
    Progress,
    SandboxTarget,
)
from myaccel.bench import ab
from myaccel.errors import UsageError
from myaccel.server.sandbox import Sandbox


def run_on_sandbox(
    req: AccelerateRequest, target: SandboxTarget, progress: Progress
) -> AccelerateResult:
    name = target.name
    if ab.sandbox_needs_creation(name, create=target.create, explicit=target.explicit):
        progress.note(f"creating sandbox '{name}' with the distribution's default configuration")
        sb = Sandbox.init(name, progress=progress.note)
    else:
        sb = Sandbox.load(name)
        ab.restore_base_config(sb, progress.note)  # its own (base) configuration
    progress.note("probing the machine, the server and its binary")
    facts, plan, out = probe_and_plan(req, sb.connect_params(), progress.note)
    cand = write_candidate(plan, facts, out / "tuned.cnf")
    if not cand.applied:
        raise UsageError(
            "the plan has no server change to measure on this sandbox",
            hint=f"see {out / 'plan.json'} (everything may already be tuned)",
        )
    progress.note(
        f"plan: {len(cand.applied)} server change(s) to measure, {len(cand.not_applied)} not applied here (see report)"
    )
    for r in cand.applied:
        progress.note(f"  {r.id}: {r.target} {r.current} -> {r.proposed}")
    result = ab_against_base(req, name, cand.path, out, progress)
    return AccelerateResult(
        out_dir=out, facts=facts, plan=plan, comparison=result.comparison, candidate=cand
    )


def ab_against_base(
    req: AccelerateRequest, sandbox: str, candidate: Path, out: Path, progress: Progress
) -> ab.AbResult:
    """The interleaved A/B of ``accelerate``: the sandbox's base configuration against the
    ``candidate`` option file, in ``out/ab``; arms without a valid run raise."""
    result = ab.run(
        ab.AbRequest(
            sandbox=sandbox,
            profile=req.profile,
            baseline=ab.make_arm("baseline", None, (), None),
            candidate=ab.make_arm("candidate", str(candidate), (), None),
            command=req.command,
            out_dir=out / "ab",
            candidate_label="tuned",
        ),
        progress,
    )
    progress.ab_done(result)
    ab.require_valid_arms(result.records, result.out_dir)
    return result
