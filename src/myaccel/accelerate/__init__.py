"""`accelerate`: probe, plan, measure the server's own configuration against the plan's
server layer, and compare, as plain function calls (the cli draws the progress and writes
the report).

On a sandbox (``sandbox_mode``) the two configurations run interleaved A B B A; on an
existing server (``existing``) they run so on a clone of it (the plan memory-scaled like
the clone: ``clone_plan``), then the plan is applied with a journal and guarded with the
server's own counters (``rollout``, ``live``); with ``--build``, ``existing_build`` adds the
build's arm on the clone and the guarded binary swap. ``candidate`` writes the tuned option
file."""

from __future__ import annotations

from myaccel import proc
from myaccel.accelerate.build_arm import BuildSpec, BuiltServer
from myaccel.accelerate.common import check_new_out_dir
from myaccel.accelerate.request import (
    AccelerateRequest,
    AccelerateResult,
    ExistingServer,
    Progress,
    SandboxTarget,
)

__all__ = [
    "AccelerateRequest",
    "AccelerateResult",
    "BuildSpec",
    "BuiltServer",
    "ExistingServer",
    "Progress",
    "SandboxTarget",
    "run",
]


def run(req: AccelerateRequest, progress: Progress) -> AccelerateResult:
    """Checks first (a new ``--out``, sysbench, the sandbox name), then the pipeline.
    An arm or phase without one valid run raises ``NoValidRuns`` after ``progress`` was
    told its results."""
    check_new_out_dir(req.out_dir)
    proc.require("sysbench")
    if isinstance(req.target, ExistingServer):
        from myaccel.accelerate.existing import run_on_server

        if req.build is None:
            return run_on_server(req, req.target, progress)
        from myaccel.accelerate.existing_build import ServerBuild

        t = req.target
        hooks = ServerBuild(
            req.build, t.unit, window_s=t.window_s, settle_s=t.settle_s, force=t.force
        )
        return run_on_server(req, t, progress, hooks)
    from myaccel.accelerate.sandbox_mode import run_on_sandbox

    return run_on_sandbox(req, req.target, progress)
