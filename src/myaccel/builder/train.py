"""Training workloads for PGO (and the profiled run for BOLT).

* kvlab fixture: its own deterministic driver (``kvlabd --bench``), run to a normal exit.
* Real servers: a sandbox (``myaccel.server.sandbox.Sandbox``) created from the install tree
  (``basedir``), under ``OUT/work/home`` so nothing lands in the user's MYACCEL_HOME; the
  tree's own ``mariadb-install-db`` initializes it; sysbench runs each workload of the
  chosen bench profile once, or (``build --train W.json``) replays the training part of a
  captured workload (``ReplayWorkload``: its schemas created from the capture's DDL); then
  the server is shut down cleanly (profiles are written at clean exit only; a SIGKILL after
  the stop timeout is an error: the profiles are partial).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from myaccel.builder.errors import TrainingError
from myaccel.builder.flags import BuildRequest
from myaccel.builder.manifest import sha256_file
from myaccel.builder.runner import run_streamed

if TYPE_CHECKING:
    from myaccel.bench.workload import Workload
    from myaccel.server.sandbox import Sandbox


@dataclass(frozen=True)
class FixtureWorkload:
    ops: int
    threads: int
    seed: int = 7

    def argv(self, binary: Path) -> list[str]:
        return [
            str(binary),
            "--bench",
            "--ops",
            str(self.ops),
            "--threads",
            str(self.threads),
            "--seed",
            str(self.seed),
        ]


def train_fixture(
    binary: Path, workload: FixtureWorkload, log: IO[str], prefix: list[str], cwd: Path
) -> dict[str, Any]:
    t0 = time.monotonic()
    lines: list[str] = []
    run_streamed(
        [*prefix, *workload.argv(binary)],
        log,
        cwd=cwd,
        env=None,
        what="training run (kvlabd --bench)",
        timeout_s=600,
        on_line=lines.append,
    )
    summary = next((ln for ln in lines if ln.startswith("kvlabd bench")), "")
    return {
        "workload": f"kvlabd --bench ops={workload.ops} threads={workload.threads} seed={workload.seed}",
        "duration_s": round(time.monotonic() - t0, 2),
        "output": summary,
    }


# ---------------------------------------------------------------- real servers


@dataclass(frozen=True)
class SandboxWorkload:
    profile: str
    runs: list[tuple[str, int]]  # (workload, threads)
    tables: int
    table_size: int
    duration_s: int


@dataclass(frozen=True)
class ReplayWorkload:
    """A captured workload (``myaccel.workload/1``) replayed through sysbench: ``part`` is
    "train" (the even-numbered examples of every class), "holdout" (the odd-numbered ones)
    or "all"."""

    path: str
    part: str = "train"
    duration_s: int = 60

    @property
    def profile(self) -> str:
        return f"workload {Path(self.path).name} ({self.part})"

    def load(self) -> Workload:
        from myaccel.bench.workload import load_replayable

        w = load_replayable(Path(self.path))
        train, held = w.split_examples()
        return {"train": train, "holdout": held}.get(self.part, w)


def replay_runs(
    sb: Sandbox, workload: ReplayWorkload, log: IO[str], note: Callable[[str], None]
) -> list[dict[str, Any]]:
    """Replay ``workload`` once on ``sb`` (as its admin user: the schemas are not sbtest),
    creating the schemas it touches from the capture's DDL when the sandbox lacks them."""
    from myaccel.bench.replay import check_schemas, create_schemas, write_replay_script
    from myaccel.bench.runner import RunSpec, execute, run_argv
    from myaccel.bench.sysbench_output import parse_output

    w = workload.load()
    admin = sb.connect_params()
    made = create_schemas(admin, w)
    if made:
        note(f"schemas {', '.join(made)} created from the capture's DDL (no data)")
    check_schemas(admin, w)
    script = write_replay_script(w, sb.dir / "replay")
    spec = RunSpec(
        workload=str(script),
        threads=w.replay_threads,
        duration_s=workload.duration_s,
        warmup_s=0,
        tables=1,
        table_size=1,
        seed=1,
        ignore_errors="all",
    )
    argv, env = run_argv(spec, admin)
    note(f"replay of {workload.profile} at {spec.threads} threads for {spec.duration_s} s")
    raw = execute(argv, env, timeout_s=spec.duration_s * 3 + 120, password=admin.password)
    log.write(raw.output)
    if raw.exit_code != 0:
        raise TrainingError(
            f"the replay of {workload.path} failed (sysbench exit {raw.exit_code})",
            hint=f"see {getattr(log, 'name', 'the log')} and {sb.error_log}",
        )
    summary = parse_output(raw.output, exit_code=raw.exit_code).summary
    qps = summary.queries_per_s if summary is not None else None
    return [
        {
            "workload": workload.profile,
            "threads": spec.threads,
            "wall_s": round(raw.wall_s, 1),
            "statements_per_s": qps,
        }
    ]


def training_workload(
    profile_name: str, workload_file: str | None, holdout: bool
) -> SandboxWorkload | ReplayWorkload:
    """What PGO/BOLT training runs: the captured workload (its training part when a part
    is held out) or the bench profile."""
    if workload_file is not None:
        return ReplayWorkload(workload_file, "train" if holdout else "all")
    return sandbox_workload(profile_name)


def workload_inputs(r: BuildRequest) -> dict[str, Any]:
    """A captured training workload as stage inputs: its path, its content and the split."""
    if r.train_workload is None:
        return {}
    path = Path(r.train_workload)
    digest = sha256_file(path) if path.is_file() else None
    return {"workload": r.train_workload, "workload_sha256": digest, "holdout": r.holdout}


def sandbox_workload(profile_name: str) -> SandboxWorkload:
    from myaccel.bench.profiles import get_profile

    prof = get_profile(profile_name)
    return SandboxWorkload(
        profile=prof.name,
        runs=prof.cells,
        tables=prof.tables,
        table_size=prof.table_size,
        duration_s=prof.duration_s + prof.warmup_s,
    )


def train_sandbox(
    basedir: Path,
    home: Path,
    workload: SandboxWorkload | ReplayWorkload,
    log: IO[str],
    *,
    name: str = "build-train",
    during: Callable[[int | None], contextlib.AbstractContextManager[Any]] | None = None,
    say: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run ``workload`` against a sandbox of the server at ``basedir``; stop it cleanly.

    ``during(pid)`` wraps the measured runs (BOLT uses it to run perf record on the server).
    """
    from myaccel.server.sandbox import Sandbox

    def note(msg: str) -> None:
        log.write(f"# {msg}\n")
        log.flush()
        if say:
            say(msg)

    home.mkdir(parents=True, exist_ok=True)
    if Sandbox.exists(name, home=home):
        with contextlib.suppress(Exception):
            Sandbox.load(name, home=home).destroy()
    note(f"creating sandbox '{name}' from {basedir} (home {home})")
    try:
        sb = Sandbox.init(name, basedir=basedir, home=home, timeout_s=600, progress=note)
    except Exception as exc:
        inner = getattr(exc, "hint", "")
        raise TrainingError(
            f"the training sandbox did not start from {basedir}: {exc}",
            hint="the install tree must hold the server, its install-db script and share/ "
            "(`myaccel sandbox init NAME --basedir DIR` shows the same error)"
            + (f"; {inner}" if inner else ""),
        ) from exc
    try:
        ctx = during(sb.pid) if during else contextlib.nullcontext()
        if isinstance(workload, ReplayWorkload):
            with ctx:
                results = replay_runs(sb, workload, log, note)
        else:
            results = _sysbench_runs(sb, workload, log, note, ctx)
    finally:
        stop = sb.stop_result(timeout_s=900)
        note(stop.message)
        with contextlib.suppress(Exception):
            log.write("# server error log tail:\n" + "\n".join(sb.error_log_tail(30)) + "\n")
    if stop.killed:
        raise TrainingError(
            "the training server did not shut down cleanly (killed with SIGKILL): its "
            "profiles are missing or partial",
            hint="profiles are written at clean exit only; see the error log in the sandbox "
            f"under {home} and raise the shutdown timeout",
        )
    with contextlib.suppress(Exception):
        sb.destroy()
    return {"profile": workload.profile, "runs": results, "sandbox_home": str(home)}


def _sysbench_runs(
    sb: Sandbox,
    workload: SandboxWorkload,
    log: IO[str],
    note: Callable[[str], None],
    ctx: contextlib.AbstractContextManager[Any],
) -> list[dict[str, Any]]:
    """Each workload of the bench profile once, on its prepared dataset."""
    from myaccel.bench.runner import RunSpec, execute, prepare_dataset, run_argv

    results: list[dict[str, Any]] = []
    bench = sb.bench_params(tcp=False)
    secs = prepare_dataset(bench, workload.tables, workload.table_size, log=note)
    note(f"dataset {workload.tables} x {workload.table_size:,} rows prepared in {secs:.0f} s")
    with ctx:
        for w, t in workload.runs:
            spec = RunSpec(
                workload=w,
                threads=t,
                duration_s=workload.duration_s,
                warmup_s=0,
                tables=workload.tables,
                table_size=workload.table_size,
                seed=1,
            )
            argv, env = run_argv(spec, bench)
            note(f"training run: {w} at {t} threads for {workload.duration_s} s")
            raw = execute(
                argv, env, timeout_s=workload.duration_s * 3 + 120, password=bench.password
            )
            log.write(raw.output)
            if raw.exit_code != 0:
                raise TrainingError(
                    f"sysbench {w} failed during training (exit {raw.exit_code})",
                    hint=f"see {getattr(log, 'name', 'the log')} and {sb.error_log}",
                )
            results.append({"workload": w, "threads": t, "wall_s": round(raw.wall_s, 1)})
    return results
