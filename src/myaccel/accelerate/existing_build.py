"""`accelerate --build [--swap-binary]` on an existing server: the hooks the existing-server
flow (``existing.run_on_server``) calls when ``--build`` is given.

1. ``check`` (after the flow's preflight, before anything runs): the binary the clone will
   run (the server's own, = the distro arm) is the running server's version; a build
   directory already holding a build, or a ``--source`` tree, is of that version; with
   ``--swap-binary``: a systemd unit (the preflight's, or ``--server-unit``) whose
   ``ExecStart`` runs the server's binary, systemd running, and, for a build already
   complete, the swap itself planned (``systemd-binary:UNIT``: same version, a drop-in
   path that is not someone else's).
2. ``make``: the PGO+LTO build of that binary's version (``build_arm.ensure_build``), before
   the clone is made.
3. ``arms``: the three arms interleaved on the clone, the sandbox-mode campaign
   (``sandbox_mode.ab_against_base`` with the build): distro defaults (the clone's own
   binary and configuration, i.e. the server's), distro + plan, build + plan.
4. ``measured``: the result carries the other comparisons and the build; whether build +
   plan beats distro + plan (``existing.plan_improves``, the plan's own rule) decides the swap.
5. ``after_apply`` (only after the plan was applied and passed its guard): the journaled
   swap (``swap_unit.swap_unit_binary``: restart, health check, its own rollback on a failed
   start), then the live guard over it as over the plan (a window before, one after,
   ``live.judge``); a breach or a failed start rolls back the swap, then the plan.

Figures from the clone are causal (interleaved arms on a copy), figures from the live
server observational (its own counters); ``existing-build.json`` records both by source.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from myaccel.accelerate.build_arm import BuildSpec, BuiltServer, complete_build, ensure_build
from myaccel.accelerate.existing import CLONE_FIGURES, plan_improves
from myaccel.accelerate.live import Verdict, Window, judge, safe_window
from myaccel.accelerate.request import AccelerateRequest, AccelerateResult, Progress
from myaccel.accelerate.rollout import GuardrailBreach
from myaccel.accelerate.sandbox_mode import ab_against_base
from myaccel.accelerate.swap_unit import swap_unit_binary
from myaccel.actions import ApplyError
from myaccel.actions.files import host_path
from myaccel.actions.plan_apply import PlannedChanges, health_check
from myaccel.actions.protocol import rollback_with_restart
from myaccel.actions.settings.base import Runner
from myaccel.actions.settings.server_binary import (
    DROPIN_NAME,
    ServerBinarySetting,
    exec_start,
    server_path,
)
from myaccel.actions.target import SandboxServer, ServerTarget, SystemdServer, server_target
from myaccel.artifacts import write_text
from myaccel.bench.ab import AbResult
from myaccel.bench.compare import Comparison
from myaccel.builder.manifest import MANIFEST, load_manifest
from myaccel.clone.make import choose_install
from myaccel.clone.preflight import RestartMethod
from myaccel.clone.source import SourceServer
from myaccel.errors import UsageError
from myaccel.server.sandbox import ServerInstall

CLONE_ARMS_FIGURES = (
    "from the clone: three arms interleaved round-robin (distro defaults = the server's own "
    "binary and configuration, distro + plan, build + plan), causal"
)
LIVE_SWAP_FIGURES = (
    "from the live server: its own counters before and after the binary swap, observational"
)
NO_SWAP_HINT = "leave out --swap-binary: the three arms are measured on the clone all the same"

WindowFn = Callable[[ServerTarget, str, float], tuple[Window, list[str]]]
HealthFn = Callable[[ServerTarget, dict[str, str]], list[str]]


def live_window(target: ServerTarget, label: str, seconds: float) -> tuple[Window, list[str]]:
    """The guard's window of the live server's counters (``live.safe_window``)."""
    if target.params is None:
        return Window(label, 0.0), ["no connection to the server"]
    return safe_window(target.params, label, seconds)


def swap_unit(restart: RestartMethod, server_unit: str | None) -> str:
    """The systemd unit whose binary ``--swap-binary`` swaps: ``--server-unit``, else the
    one the preflight found; refused (before any work) when there is none."""
    if server_unit:
        return server_unit
    if restart.kind is SystemdServer:
        return restart.detail
    if restart.kind is SandboxServer:
        raise UsageError(
            f"--swap-binary on a server that is myaccel sandbox '{restart.detail}': its binary "
            "is a sandbox basedir, not a systemd unit",
            hint=f"myaccel accelerate --sandbox {restart.detail} --build --swap-binary, or "
            + NO_SWAP_HINT,
        )
    raise UsageError(
        "--swap-binary swaps the binary of the systemd unit that runs the server, and this "
        f"server has none known (restart method: {restart.kind.record_kind}, {restart.detail})",
        hint="pass --server-unit UNIT when systemd runs it; else " + NO_SWAP_HINT,
    )


def check_unit_runs(root: Path, unit: str, binary: Path | None) -> str:
    """``unit``'s own ``ExecStart`` (without myaccel's drop-in) runs the server ``binary``
    (when known); returns the binary it names. Needs systemd running (the swap restarts
    the unit)."""
    if not host_path(root, "/run/systemd/system").is_dir():
        raise UsageError(
            "--swap-binary restarts a systemd unit, and systemd is not running on this host "
            "(no /run/systemd/system)",
            hint=NO_SWAP_HINT,
        )
    command = exec_start(root, unit, skip=DROPIN_NAME)
    named = server_path(command) if command else None
    if named is None:
        raise UsageError(
            f"systemd unit {unit} is not installed or its ExecStart names no server binary",
            hint="pass --server-unit with the unit that runs the server "
            "(systemctl status PID names it)",
        )
    if binary is not None and host_path(root, named).resolve() != binary.resolve():
        raise UsageError(
            f"systemd unit {unit} runs {named}, the server's process runs {binary}",
            hint="pass --server-unit with the unit that runs this server",
        )
    return named


def check_build_version(spec: BuildSpec, install: ServerInstall) -> None:
    """A build directory that already holds a build, or a ``--source`` tree, must be of the
    exact version of the binary the server runs (the datadir is never upgraded)."""
    version = install.version.text
    if spec.build_dir is not None and (spec.build_dir / MANIFEST).is_file():
        built = load_manifest(spec.build_dir / MANIFEST).source.version
        if built and built != version:
            raise UsageError(
                f"{spec.build_dir} holds a build of {built}, the server runs {version}",
                hint="pass the --build-dir of a build of the server's exact version, or a new one",
            )
    if spec.source is not None:
        from myaccel.builder.distsrc import check_tree_matches, describe_installed

        check_tree_matches(Path(spec.source).resolve(), describe_installed(install.binary))


@dataclass
class ServerBuild:
    """``--build`` on an existing server (see the module doc). ``root``, ``runner``,
    ``window`` and ``health`` reach systemd's files, ``daemon-reload``, the guard's windows
    and the health check: the real ones unless a test gives others."""

    spec: BuildSpec
    server_unit: str | None = None
    window_s: float = 30.0
    settle_s: float = 30.0
    force: bool = False  # --force: swap without a win on the clone too, under the same guard
    root: Path = Path("/")
    runner: Runner | None = None
    window: WindowFn = live_window
    health: HealthFn = health_check
    install: ServerInstall | None = None  # the distro arm: the binary the clone runs
    unit: str | None = None  # --swap-binary: the unit swapped
    built: BuiltServer | None = None
    ab: AbResult | None = None
    swap_gate: tuple[bool, str] = (False, "not measured")

    # ------------------------------------------------------------------ the hooks

    def check(self, src: SourceServer, restart: RestartMethod, progress: Progress) -> None:
        """Everything about ``--build``/``--swap-binary`` that can be known before any work."""
        install, choice = choose_install(src, None)
        self.install = install
        if not choice.same_binary:
            progress.note(f"distro arm: {choice.note}")
        check_build_version(self.spec, install)
        done = None
        if self.spec.build_dir is not None:
            done = complete_build(self.spec.build_dir, install.version.text)
            if done is not None:
                self._refuse_running(done)
        if self.spec.swap_binary:
            self.unit = swap_unit(restart, self.server_unit)
            check_unit_runs(self.root, self.unit, src.binary)
            if done is not None:
                self._plan_swap(done)
            progress.note(f"--swap-binary: systemd unit {self.unit}, after the plan, if it wins")

    def make(self, progress: Progress) -> None:
        """The build (reused, resumed or made), before the clone."""
        assert self.install is not None, "check() first"
        progress.step("optimized build (PGO+LTO) of the server's version")
        self.built = ensure_build(self.spec, self.install.binary, progress.note)
        self._refuse_running(self.built)
        if self.unit is not None:
            self._plan_swap(self.built)

    def arms(
        self, req: AccelerateRequest, clone: str, candidate: Path, out: Path, progress: Progress
    ) -> Comparison:
        """The sandbox mode's three-arm campaign on the clone; distro + plan vs distro."""
        assert self.built is not None, "make() first"
        self.ab = ab_against_base(req, clone, candidate, out, progress, built=self.built)
        return self.ab.comparison

    def measured(self, result: AccelerateResult, progress: Progress) -> AccelerateResult:
        """The result with the build's comparisons; the swap's gate decided."""
        assert self.ab is not None and self.built is not None
        vs_plan = self.ab.more.get("build-vs-plan")
        self.swap_gate = plan_improves(vs_plan) if vs_plan else (False, "not measured")
        if self.spec.swap_binary:
            ok, why = self.swap_gate
            if ok:
                then = "it wins: the binary is swapped after the plan, if the plan is applied"
            elif self.force:
                then = f"no win ({why}): swapped anyway after the plan (--force), guarded"
            else:
                then = f"no win ({why}): the binary will not be swapped"
            progress.note("build + plan vs distro + plan on the clone: " + then)
        done = replace(
            result,
            more=dict(self.ab.more),
            build=self.built,
            # the clone's A/B had three arms: its figures say so (any note after it kept)
            figures=[f.replace(CLONE_FIGURES, CLONE_ARMS_FIGURES) for f in result.figures],
        )
        self.save(done, None, None)
        return done

    def after_apply(
        self,
        result: AccelerateResult,
        server: ServerTarget,
        pc: PlannedChanges,
        progress: Progress,
    ) -> AccelerateResult:
        """After the plan was applied and passed its guard: the guarded swap (only with
        ``--swap-binary`` and a win on the clone)."""
        if self.unit is None or self.built is None:
            return result
        ok, why = self.swap_gate
        if not ok and not self.force:
            progress.note(f"binary not swapped: build + plan does not beat distro + plan ({why})")
            return result
        progress.step(f"swap the binary of {self.unit}, guarded")
        try:
            jswap, verdict = self._guarded_swap(result, server, pc, progress)
        except ApplyError as exc:
            if result.journal is not None:
                progress.note("the swap failed: rolling back the plan too")
                undo(result.journal, server, pc.restart_needed, progress.note, self.runner)
            raise GuardrailBreach(
                f"{exc.message}; the plan was rolled back too: the server runs as before",
                hint=exc.hint,
            ) from exc
        done = replace(
            result,
            swap_journal=jswap,
            swap_live=None if verdict is None else verdict.summary(),
            figures=[*result.figures, LIVE_SWAP_FIGURES] if verdict is not None else result.figures,
        )
        self.save(done, jswap, verdict)
        return done

    # ------------------------------------------------------------------ the swap

    def _binary(self, built: BuiltServer) -> Path:
        """The build's server binary, by the distro arm's flavor."""
        assert self.install is not None
        for rel in self.install.adapter.binary_candidates():
            if host_path(self.root, str(built.install / rel)).is_file():
                return built.install / rel
        raise UsageError(
            f"no server binary under the build's install tree {built.install}",
            hint="build again into a new --build-dir",
        )

    def _refuse_running(self, built: BuiltServer) -> None:
        """The distro arm must not be the build itself (a server swapped earlier)."""
        assert self.install is not None
        if self.install.binary.resolve().is_relative_to(built.install.resolve()):
            raise UsageError(
                f"the server already runs the build {built.install} ({self.install.binary})",
                hint="undo the earlier --swap-binary with `myaccel rollback` first",
            )

    def _plan_swap(self, built: BuiltServer) -> None:
        """The swap planned without changing anything: the build's binary is executable,
        the same version as the unit's, the drop-in path free or myaccel's."""
        assert self.unit is not None
        ServerBinarySetting(self.unit, root=self.root, runner=self.runner).plan(
            str(self._binary(built))
        )

    def _guarded_swap(
        self,
        result: AccelerateResult,
        server: ServerTarget,
        pc: PlannedChanges,
        progress: Progress,
    ) -> tuple[Path | None, Verdict | None]:
        assert self.built is not None and self.unit is not None
        say = progress.note
        # the same server, restarted through the unit whose binary is swapped
        unit_server = server_target(
            server.params,
            conf_dir=server.conf_dir,
            conf_dir_reason=server.conf_dir_reason,
            unit=self.unit,
        )
        say(f"live server: the before window of the swap ({self.window_s:.0f} s)")
        before, problems = self.window(unit_server, "before swap", self.window_s)
        if problems:
            raise ApplyError(
                "the server is not healthy before the swap: " + "; ".join(problems),
                hint="the binary was not swapped; check the server",
            )
        jswap = swap_unit_binary(
            unit_server,
            self._binary(self.built),
            plan_id=result.plan.created_at,
            facts_digest=result.plan.facts_digest,
            note=say,
            root=self.root,
            runner=self.runner,
        )  # restarts and health-checks; a failed start is rolled back there (ApplyError)
        if jswap is None:
            return None, None
        if self.settle_s > 0:
            say(f"letting the server warm up for {self.settle_s:.0f} s")
            time.sleep(self.settle_s)
        say(f"live server: the after window of the swap ({self.window_s:.0f} s)")
        after, problems = self.window(unit_server, "after swap", self.window_s)
        if not problems:
            problems = self.health(unit_server, pc.server_values)  # the plan's values hold
        verdict = judge(before, after, problems)
        for n in verdict.notes:
            say(f"guard: {n}")
        if verdict.ok:
            say("guard: no breach, the build stays (undo with: myaccel rollback, twice)")
            return jswap, verdict
        self.save(replace(result, swap_journal=jswap), jswap, verdict)
        say("guard: " + verdict.line() + ": rolling back the swap")
        undo(jswap, unit_server, True, say, self.runner)
        raise ApplyError(
            "guardrail breach after the binary swap (" + verdict.line()[:300] + ")",
            hint=f"the journal {jswap} records what was tried",
        )

    # ------------------------------------------------------------------ the record

    def save(self, result: AccelerateResult, jswap: Path | None, verdict: Verdict | None) -> None:
        """``existing-build.json``: the clone's comparisons and the swap, each with its source."""

        def cmp(c: Comparison | None) -> dict[str, Any] | None:
            if c is None:
                return None
            return {
                "baseline": c.baseline_label,
                "candidate": c.candidate_label,
                "geomean_delta_pct": c.geomean_delta_pct,
                "ci_low_pct": c.geomean_ci_low_pct,
                "ci_high_pct": c.geomean_ci_high_pct,
            }

        b = self.built
        doc = {
            "build": None
            if b is None
            else {"install": str(b.install), "manifest": str(b.manifest), "reused": b.reused},
            "distro_binary": str(self.install.binary) if self.install else None,
            "clone": {
                "source": CLONE_ARMS_FIGURES,
                "plan": cmp(result.comparison),
                **{k: cmp(v) for k, v in result.more.items()},
            },
            "swap": {
                "requested": self.spec.swap_binary,
                "unit": self.unit,
                "gate": {"ok": self.swap_gate[0], "why": self.swap_gate[1]},
                "journal": str(jswap) if jswap else None,
                "live": None
                if verdict is None
                else {**verdict.summary(), "source": LIVE_SWAP_FIGURES},
            },
        }
        write_text(
            result.out_dir / "existing-build.json", json.dumps(doc, indent=2) + "\n", private=True
        )


def undo(
    journal: Path,
    server: ServerTarget,
    restart: bool,
    say: Callable[[str], None],
    runner: Runner | None = None,
) -> None:
    """Roll ``journal`` back, restarting the server when it restarted for it."""
    rollback_with_restart(server, journal, restart=restart, note=say, runner=runner)
