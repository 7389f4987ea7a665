"""The existing-server rollout of ``myaccel accelerate`` as a process of its own, for the
crash-injection tests: ``python rollout_driver.py PLAN SANDBOX`` applies PLAN to the running
sandbox as ``accelerate`` applies a plan to an existing server, after its clone's A/B:
the server target from the preflight's restart method (a myaccel sandbox:
``existing._server_target``), the server layer's changes (``build_changes``) and
``rollout.guarded_apply`` between two short windows of the server's counters. The process
then sends itself SIGKILL at ``MYACCEL_CRASH_AT`` like ``myaccel apply`` does.

(The clone, its A/B and the report are what ``accelerate`` does before and after; they
change nothing on the server and take minutes, so they are left out.)
"""

from __future__ import annotations

import sys

from myaccel.accelerate.existing import _server_target
from myaccel.accelerate.request import ExistingServer
from myaccel.accelerate.rollout import guarded_apply
from myaccel.actions.journal import journals_dir
from myaccel.actions.plan_apply import build_changes
from myaccel.actions.session import load_plan, refuse_unfinished
from myaccel.actions.target import SandboxServer
from myaccel.clone.preflight import RestartMethod
from myaccel.server.sandbox import Sandbox


def main(plan_file: str, name: str) -> int:
    plan = load_plan(plan_file)
    refuse_unfinished(journals_dir())  # as run_on_server's preflight does
    existing = ExistingServer(params=Sandbox.load(name).connect_params(), yes=True)
    restart = RestartMethod(SandboxServer, name, "the server is a myaccel sandbox")
    server = _server_target(existing, restart)
    pc = build_changes(plan, server, layers=["server"])
    guarded_apply(plan, pc, server, window_s=1.0, settle_s=0, say=print)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
