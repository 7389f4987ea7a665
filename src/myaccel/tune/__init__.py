"""`myaccel tune`: a closed-loop search past the rules' plan that says honestly when it finds
nothing better.

A library does the optimizing (Optuna's TPE, in ``study``); this package does the parts
that make a search on a noisy machine trustworthy, one module each:

- ``space``: the knobs searched and their ranges, from the catalog (durability knobs only
  with ``--durability relaxed``);
- ``constraint``: the memory budget (the rule engine's sum) and the durability promise,
  checked before a configuration is measured;
- ``objective``: a trial is measured against the plan, interleaved, and scored with `ab`'s
  statistics; ``sandbox_objective`` does it on a sandbox with `ab`'s own code;
- ``noise``: the A/A noise floor; ``halving``: confirmation by successive halving;
- ``search``: the phases; ``study``: the resumable Optuna storage;
- ``result``: ``tune.json`` and the tuned plan `apply` accepts; ``session``: all of it on
  a sandbox (``run``), ``request``: its inputs and progress.

Importing this package does not import Optuna (only ``study`` does, when a study opens).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from myaccel.tune.request import TuneProgress, TuneRequest
    from myaccel.tune.result import TuneResult


def run(req: TuneRequest, progress: TuneProgress) -> TuneResult:
    """The whole of `myaccel tune` on a sandbox (see ``session``)."""
    from myaccel.tune.session import run as run_session

    return run_session(req, progress)
