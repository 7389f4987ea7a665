"""The load a profile records: a bench profile's sysbench cells, run one after another in
a thread while perf samples the server (loopback only)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from myaccel.bench.campaign import BenchContext
from myaccel.bench.runner import RunSpec
from myaccel.errors import MyaccelError, UsageError
from myaccel.server.connection import ConnectParams

LOOPBACK_HOSTS = frozenset({None, "", "localhost", "127.0.0.1", "::1"})
# The workload starts this long before the recording window, so the window sees steady load
# (connections made, statements prepared), and runs this much after it.
WORKLOAD_LEAD_S = 1.0
WORKLOAD_TAIL_S = 1.0
# Longest wait for the workload's first interval report before giving up.
WORKLOAD_START_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Target:
    """The server process to sample and the connections to read it through."""

    pid: int
    label: str
    admin: ConnectParams | None  # SHOW GLOBAL STATUS (and dataset checks)
    bench: ConnectParams | None  # the workload's user
    sandbox: str | None = None


def _quiet(_msg: str) -> None:
    pass


@dataclass(frozen=True)
class WorkloadChoice:
    """The bench profile to drive while recording (``none``: no load), its overrides
    (``--threads``, ``--tables``, ``--table-size``; None: the profile's own) and whether
    to drop the dataset afterwards (``--cleanup``)."""

    name: str = "none"
    threads: int | None = None
    tables: int | None = None
    table_size: int | None = None
    cleanup: bool = False


NO_WORKLOAD = WorkloadChoice()


@dataclass
class WorkloadDriver:
    """Runs the profile's sysbench cells one after another in a thread (bench harness)."""

    target: Target
    workload: WorkloadChoice
    window_s: float
    out_dir: Path
    command: list[str] = field(default_factory=list)  # recorded in the campaign
    note: Callable[[str], None] = _quiet
    started: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    lines: list[str] = field(default_factory=list)
    specs: list[RunSpec] = field(default_factory=list)
    _thread: threading.Thread | None = None
    _budget_s: float = 0.0
    _ctx: BenchContext | None = None

    def prepare(self) -> None:
        """Everything that may fail fast: the workload name, sysbench, loopback, the
        server's limits and the dataset (prepared or verified)."""
        from myaccel import proc
        from myaccel.bench.campaign import server_info
        from myaccel.bench.dataset import ensure_dataset
        from myaccel.bench.profiles import get_profile
        from myaccel.bench.runner import preflight
        from myaccel.bench.session import CampaignSetup, cell_spec, open_campaign

        w = self.workload
        prof = get_profile(w.name)
        if w.threads is not None:
            prof = replace(prof, threads=(w.threads,))
        if w.tables is not None:
            prof = replace(prof, tables=w.tables)
        if w.table_size is not None:
            prof = replace(prof, table_size=w.table_size)
        t = self.target
        if t.admin is None or t.bench is None:
            raise UsageError(
                "a workload needs a connection to the server",
                hint="use --sandbox NAME, or give --socket/--user with --pid",
            )
        if t.bench.socket is None and t.bench.host not in LOOPBACK_HOSTS:
            raise UsageError(
                f"a workload runs only against a local server, not {t.bench.host}",
                hint="profile on the server's host over its socket or 127.0.0.1, or "
                "--workload none and drive the load yourself",
            )
        proc.require("sysbench")
        cells = prof.cells
        per_cell = max(
            1, math.ceil((self.window_s + WORKLOAD_LEAD_S + WORKLOAD_TAIL_S) / len(cells))
        )
        self.specs = [
            replace(
                cell_spec(prof, w, th),
                duration_s=per_cell,
                warmup_s=0,
                report_interval_s=1,
                seed=1000,
            )
            for w, th in cells
        ]
        # measure_run spends ~1.5 s per cell around sysbench (quietness check, counters)
        self._budget_s = sum(s.total_s + 120 for s in self.specs)
        preflight(t.admin, max(self.specs, key=lambda s: s.threads))
        ensure_dataset(t.admin, t.bench, prof, cleanup=w.cleanup, note=self.note)
        sinfo, _ = server_info(t.admin)
        self._ctx = open_campaign(
            CampaignSetup(kind="profile", command=self.command, pid=t.pid, out_dir=self.out_dir),
            bench_p=t.bench,
            admin=t.admin,
            sinfo=sinfo,
            prof=prof,
            note=self.note,
        )
        self._ctx.on_report = self._report

    def _report(self, _doc: dict[str, Any]) -> None:
        self.started.set()

    def _run(self) -> None:
        from myaccel.bench.campaign import measure_run
        from myaccel.bench.session import finish_campaign

        try:
            assert self._ctx is not None, "prepare() first"
            for i, spec in enumerate(self.specs, 1):
                rec = measure_run(self._ctx, spec, index=i)
                s = rec.summary
                self.lines.append(
                    f"{spec.workload} {spec.threads} thr {spec.duration_s} s: "
                    + (f"tps {s.tps:,.1f} qps {s.qps:,.1f}" if s else "no summary")
                    + ("" if rec.validity.valid else " INVALID: " + "; ".join(rec.validity.reasons))
                )
            # one run per cell is the whole plan of a profile's workload: the campaign is
            # complete (reports would otherwise count the profile's 5 runs per cell as missing)
            finish_campaign(self._ctx)
        except BaseException as exc:  # reported by wait_started/join
            self.error = exc
        finally:
            self.started.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="workload", daemon=True)
        self._thread.start()

    def wait_started(self) -> None:
        if not self.started.wait(WORKLOAD_START_TIMEOUT_S) or self.error is not None:
            self._raise("the workload did not start")
        time.sleep(WORKLOAD_LEAD_S)

    def join(self, *, quiet: bool = False) -> None:
        if self._thread is not None:
            self._thread.join(timeout=self._budget_s)
            if quiet:
                return
            if self._thread.is_alive():
                self._raise("the workload did not finish in time")
        if self.error is not None:
            self._raise("the workload failed")

    def _raise(self, what: str) -> None:
        if isinstance(self.error, MyaccelError):
            raise self.error
        detail = f": {self.error}" if self.error else ""
        raise MyaccelError(
            f"{what}{detail}",
            hint=f"see the sysbench output under {self.out_dir}",
        )
