"""``capture --check W.json``: replay a captured workload on this server through sysbench
(``bench.session.run_bench`` with ``--workload-file``) and capture the replay meanwhile,
then compare the two (``fidelity``).

Replaying is what ``--check`` is for, so it runs the workload's statements on the server it
captures (the one the options name, as ``bench`` does), and only those a replay may issue:
the CLI reads the file with ``load_replayable`` before anything else (single DML statements
and transaction control on the file's own schemas, ``capture.sqlguard``), the replay script
is written from statements checked again (``bench.replay.replay_lua``), and ``run_bench``
checks the server's schemas (refusing a statement that names another schema of it) before
sysbench starts. It never runs DDL: the server must hold the schemas already."""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Any

from myaccel.bench.choices import ReplayMode
from myaccel.bench.profiles import ProfileOptions, build_profile
from myaccel.bench.replay import captured_rate, check_pacing, replay_profile, write_replay_script
from myaccel.bench.run_record import RunRecord
from myaccel.bench.session import BenchRequest, BenchResult, run_bench
from myaccel.bench.workload import Workload
from myaccel.capture.fidelity import Fidelity, compare
from myaccel.capture.session import CaptureRequest, Note, capture
from myaccel.errors import MyaccelError

# sysbench's start (a quietness sample, the server's variables, its threads' connections,
# its first interval report) before the capture's baseline may begin
START_TIMEOUT_S = 60.0
# the capture's own start after sysbench's first report (connecting, switching its source
# on) and its end (last poll, switching back): the replay must outlast the window, or its
# end (the harness's status query after the run) falls inside it on a loaded host
TAIL_S = 5


class _Progress:
    """The replay's progress: only the start of its run matters here."""

    def __init__(self, note: Note) -> None:
        self._note = note
        self.started = threading.Event()

    def note(self, msg: str) -> None:
        self._note(f"replay: {msg}")

    def run_started(self, label: str, total_s: float) -> None:
        return None

    def run_report(self, report: dict[str, Any]) -> None:
        self.started.set()  # sysbench's first interval: its threads are running

    def run_finished(self, record: RunRecord) -> None:
        return None


@dataclass(frozen=True)
class CheckResult:
    replayed: Workload  # the capture of the replay
    fidelity: Fidelity
    bench: BenchResult | None


def check_replay(
    original: Workload,
    req: CaptureRequest,
    note: Note,
    *,
    threads: int | None = None,
    paced: bool = False,
    mode: ReplayMode = "mix",
) -> CheckResult:
    """Replay ``original`` on ``req.target`` for the capture's whole span and capture it;
    ``paced``: at the captured statements per second (else as fast as the server answers
    at the captured concurrency); ``mode``: as ``bench --replay-mode``."""
    check_pacing(mode, paced)
    span = int(req.baseline_s + req.duration_s + TAIL_S) + 1
    prof = build_profile(ProfileOptions(name="quick", duration_s=span, warmup_s=0, runs_per_arm=1))
    rate = captured_rate(original) if paced else None
    script = write_replay_script(original, mode=mode)
    prof = replay_profile(prof, original, script, threads_given=False, rate_per_s=rate)
    if threads is not None:
        prof = replace(prof, threads=(threads,))
    progress = _Progress(note)
    outcome: dict[str, Any] = {}

    def replay() -> None:
        try:
            outcome["result"] = run_bench(
                BenchRequest(
                    bench=req.target,
                    admin=req.target,
                    profile=prof,
                    command=["myaccel", "capture", "--check"],
                    workload=original,
                ),
                progress,
            )
        except BaseException as exc:  # reported in the caller's thread
            outcome["error"] = exc
        finally:
            progress.started.set()

    worker = threading.Thread(target=replay, name="myaccel-replay", daemon=True)
    pace = f", paced at {rate:,.0f} statements/s" if rate is not None else ""
    note(f"replaying the workload ({mode}) at {prof.threads[0]} thread(s){pace} for up to {span} s")
    worker.start()
    progress.started.wait(START_TIMEOUT_S)
    if "error" in outcome:
        raise outcome["error"]
    replayed = capture(replace(req, redact=False), note)
    replayed = replayed.model_copy(update={"replay_of": original.created_at})
    worker.join(span + 120)
    if "error" in outcome:
        err = outcome["error"]
        if isinstance(err, MyaccelError):
            raise err
        raise MyaccelError(f"the replay failed: {err}", hint="see its results directory")
    return CheckResult(
        replayed=replayed, fidelity=compare(original, replayed), bench=outcome.get("result")
    )
