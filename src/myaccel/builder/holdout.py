"""``build --train W.json --holdout``: the check that a build trained on part of a captured
workload does not regress on the rest.

The capture is split by example (``Workload.split_examples``): every class keeps its count
(the same mix), training replays the even-numbered examples of every class, and this stage
replays the odd-numbered ones (literals training never issued) on a sandbox of the final
install tree, then on ``--compare-with``'s tree when given (a baseline build), and records
the statements per second of both in the manifest (``measurements.holdout``). One run each:
a warning, not a failure, when the build is more than ``REGRESSION_PCT`` slower.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

from myaccel.builder.runner import BuildContext, Stage
from myaccel.builder.train import ReplayWorkload, train_sandbox, workload_inputs

REGRESSION_PCT = 5.0


def holdout_verdict(this_qps: float | None, base_qps: float | None) -> dict[str, Any]:
    """The comparison of the held-out replay on this build against the baseline build."""
    if not this_qps or not base_qps:
        return {"delta_pct": None, "regressed": None}
    delta = 100.0 * (this_qps - base_qps) / base_qps
    return {"delta_pct": round(delta, 2), "regressed": delta < -REGRESSION_PCT}


class HoldoutStage(Stage):
    name = "holdout"
    title = "replay the held-out part of the captured workload"

    def inputs(self, ctx: BuildContext) -> dict[str, Any]:
        return {**workload_inputs(ctx.request), **ctx.comparison_inputs()}

    def skip_reason(self, ctx: BuildContext) -> str | None:
        if ctx.toolchain.cross:
            return "cross build: the held-out replay runs host binaries only"
        return None

    def run(self, ctx: BuildContext, log: IO[str]) -> dict[str, Any]:
        req = ctx.request
        assert req.train_workload is not None  # preflight: --holdout needs --train W.json
        wl = ReplayWorkload(req.train_workload, "holdout")
        arms = [("this_build", ctx.layout.install)]
        if req.compare_with:
            arms.append(("baseline", Path(req.compare_with)))
        res: dict[str, Any] = {
            "workload": req.train_workload,
            "split": "examples: training the even-numbered of every class, held out the odd",
        }
        for label, basedir in arms:
            detail = train_sandbox(
                basedir,
                ctx.layout.work / "home",
                wl,
                log,
                name=f"build-holdout-{label.replace('_', '-')}",
                say=ctx.progress.note,
            )
            run = detail["runs"][0]
            res[label] = {"basedir": str(basedir), "statements_per_s": run["statements_per_s"]}
        base = res.get("baseline", {}).get("statements_per_s")
        res.update(holdout_verdict(res["this_build"]["statements_per_s"], base))
        ctx.manifest.measurements.holdout = res
        qps = res["this_build"]["statements_per_s"]
        summary = f"held-out replay: {qps or 0:,.0f} statements/s"
        if res["delta_pct"] is not None:
            summary += f" vs {base:,.0f} baseline ({res['delta_pct']:+.1f}%)"
            if res["regressed"]:
                summary += f": slower by more than {REGRESSION_PCT:.0f}% outside the training part"
        return {"summary": summary, **res}
