"""The common stage runner: each stage is a small unit with declared inputs; the runner
times it, logs its commands to ``OUT/logs/<stage>.log``, records it in the manifest, and on
``--resume`` skips a stage that is done with unchanged inputs (inputs chain: a stage's
digest includes the digest of the stage before it, so a change re-runs everything after).
"""

from __future__ import annotations

import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from myaccel import proc
from myaccel.builder.errors import BuildFailed
from myaccel.builder.flags import BuildRequest, PhaseFlags, TargetCpu, Toolchain
from myaccel.builder.manifest import BuildManifest, StageRecord, digest_of, now_iso
from myaccel.builder.tree import SourceTree
from myaccel.errors import MyaccelError, ToolMissing
from myaccel.paths import Below


class ProgressSink(Protocol):
    def stage_started(self, name: str, title: str) -> None: ...
    def stage_progress(self, done: int | None, total: int | None, text: str) -> None: ...
    def stage_finished(self, name: str, status: str, duration_s: float, note: str) -> None: ...
    def note(self, message: str) -> None: ...


class NullProgress:
    def stage_started(self, name: str, title: str) -> None:
        pass

    def stage_progress(self, done: int | None, total: int | None, text: str) -> None:
        pass

    def stage_finished(self, name: str, status: str, duration_s: float, note: str) -> None:
        pass

    def note(self, message: str) -> None:
        pass


@dataclass
class Layout:
    """Where everything lives under ``--out`` (nothing is written outside it)."""

    out: Path

    build = Below("out", "build")  # ONE build path for the instrumented and the final build
    profile = Below("out", "profile")
    train_install = Below("out", "train-install")
    install = Below("out", "install")
    logs = Below("out", "logs")
    work = Below("out", "work")  # sandboxes, perf data, callgrind output
    patches = Below("out", "patches")
    bolt = Below("out", "bolt")


@dataclass
class BuildContext:
    tree: SourceTree
    request: BuildRequest
    toolchain: Toolchain
    target: TargetCpu
    layout: Layout
    manifest: BuildManifest
    phases: dict[str, PhaseFlags]
    progress: ProgressSink = field(default_factory=NullProgress)
    source_dir: Path | None = None  # a patched copy of the tree, when --allow-patch applied one
    resume: bool = False
    timeout_s: float = 6 * 3600.0

    _fingerprint: str | None = None

    @property
    def src(self) -> Path:
        return self.source_dir or self.tree.path

    def tree_fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = self.tree.fingerprint()
        return self._fingerprint

    def save(self) -> None:
        self.manifest.save(self.layout.out)

    def comparison_inputs(self) -> dict[str, Any]:
        """What a stage measuring this build against ``--compare-with``'s depends on: the
        baseline tree and this build's binaries."""
        return {"compare_with": self.request.compare_with, "binaries": dict(self.manifest.binaries)}

    def run_logged(
        self,
        argv: Sequence[str],
        log: IO[str],
        *,
        cwd: Path | None = None,
        env: proc.EnvChanges | None = None,
        what: str = "",
        timeout_s: float | None = None,
        on_line: Callable[[str], None] | None = None,
    ) -> int:
        """Run a command, streaming its output into ``log``; raise ``BuildFailed`` with the
        first error lines and the log's path on a non-zero exit."""
        return run_streamed(
            argv,
            log,
            cwd=cwd,
            env=env,
            what=what or Path(argv[0]).name,
            timeout_s=timeout_s or self.timeout_s,
            on_line=on_line,
        )


_ERROR_LINE = re.compile(r"(\berror\b|\bError\b|CMake Error|FAILED:|fatal:|undefined reference)")


def run_streamed(
    argv: Sequence[str],
    log: IO[str],
    *,
    cwd: Path | None,
    env: proc.EnvChanges | None,
    what: str,
    timeout_s: float,
    on_line: Callable[[str], None] | None = None,
    check: bool = True,
) -> int:
    args = [str(a) for a in argv]
    log.write(f"$ {' '.join(args)}\n")
    log.flush()
    errors: list[str] = []
    tail: list[str] = []

    def _line(line: str) -> None:
        nonlocal tail
        log.write(line + "\n")
        s = line.rstrip()
        tail = [*tail[-19:], s]
        if len(errors) < 6 and _ERROR_LINE.search(s) and "warning" not in s.lower():
            errors.append(s.strip())
        if on_line is not None:
            on_line(s)

    try:
        done = proc.stream(args, timeout_s=timeout_s, on_line=_line, env=env, cwd=cwd)
    except ToolMissing:
        raise BuildFailed(
            f"{what}: cannot execute '{args[0]}'", hint="install it (see the dependency check)"
        ) from None
    rc = done.returncode
    log.write(f"# exit {rc}\n")
    log.flush()
    if done.timed_out:
        raise BuildFailed(
            f"{what} did not finish within {timeout_s:.0f} s",
            hint=f"see {getattr(log, 'name', 'the log')}; the machine may be overloaded",
        )
    if check and rc != 0:
        first = errors[0] if errors else (tail[-1] if tail else "no output")
        raise BuildFailed(
            f"{what} failed (exit {rc}): {first[:300]}",
            hint=f"full output: {getattr(log, 'name', 'the log')}"
            + ("\n  " + "\n  ".join(e[:200] for e in errors[1:4]) if len(errors) > 1 else ""),
        )
    return rc


class Stage(ABC):
    """One unit of the pipeline."""

    name: str = ""
    title: str = ""

    @abstractmethod
    def inputs(self, ctx: BuildContext) -> dict[str, Any]:
        """What the stage's result depends on (digested for --resume)."""

    def outputs_ok(self, ctx: BuildContext) -> bool:
        """Whether what the stage produced is still there (resume check)."""
        return True

    def skip_reason(self, ctx: BuildContext) -> str | None:
        """A reason to skip the stage (e.g. BOLT not installed), or None to run it."""
        return None

    @abstractmethod
    def run(self, ctx: BuildContext, log: IO[str]) -> dict[str, Any]:
        """Do the work; return details for the manifest. Raise MyaccelError on failure."""


def run_stages(ctx: BuildContext, stages: Sequence[Stage]) -> None:
    prev = ""
    for st in stages:
        rec_old = ctx.manifest.stage(st.name)
        inputs = {"prev": prev, **st.inputs(ctx)}
        digest = digest_of(inputs)
        prev = digest
        log_path = ctx.layout.logs / f"{st.name}.log"
        if (
            ctx.resume
            and rec_old is not None
            and rec_old.status in ("done", "skipped")
            and rec_old.inputs_digest == digest
            and st.outputs_ok(ctx)
        ):
            rec_old.resumed = True
            ctx.manifest.upsert(rec_old)
            ctx.save()
            ctx.progress.stage_finished(st.name, "resumed", 0.0, "done earlier, inputs unchanged")
            continue
        reason = st.skip_reason(ctx)
        if reason:
            rec = StageRecord(
                name=st.name, title=st.title, status="skipped", inputs_digest=digest, reason=reason
            )
            ctx.manifest.upsert(rec)
            ctx.save()
            ctx.progress.stage_finished(st.name, "skipped", 0.0, reason)
            continue
        rec = StageRecord(
            name=st.name,
            title=st.title,
            status="running",
            inputs_digest=digest,
            started_at=now_iso(),
            log=str(log_path),
        )
        ctx.manifest.upsert(rec)
        ctx.save()
        ctx.progress.stage_started(st.name, st.title)
        t0 = time.monotonic()
        ctx.layout.logs.mkdir(parents=True, exist_ok=True)
        with log_path.open("w") as log:
            log.write(f"# myaccel build stage {st.name}: {st.title} ({now_iso()})\n")
            try:
                detail = st.run(ctx, log)
            except BaseException as exc:
                rec.status = "failed"
                if isinstance(exc, MyaccelError):
                    rec.reason = exc.message
                    log.write(f"# FAILED: {exc.message}\n# hint: {exc.hint}\n")
                else:
                    rec.reason = f"{type(exc).__name__}: {exc}"[:300]
                rec.duration_s = round(time.monotonic() - t0, 2)
                ctx.manifest.upsert(rec)
                ctx.manifest.status = "failed"
                ctx.manifest.error = f"{st.name}: {rec.reason}"
                ctx.save()
                ctx.progress.stage_finished(st.name, "failed", rec.duration_s, rec.reason)
                raise
        rec.status = "done"
        rec.duration_s = round(time.monotonic() - t0, 2)
        rec.detail = detail
        ctx.manifest.upsert(rec)
        ctx.save()
        ctx.progress.stage_finished(st.name, "done", rec.duration_s, str(detail.get("summary", "")))
