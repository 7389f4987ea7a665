"""Simulated micro-architecture figures with valgrind: the fallback where no PMU exists.

Virtual machines like these have no hardware counters (``perf stat`` says ``<not
supported>``). Valgrind runs the server on a synthetic CPU instead and counts every
instruction it executes (``Ir``), with a model of the I1/D1/last-level caches
(``--cache-sim=yes``) and a simple branch predictor (``--branch-sim=yes``). The counts are
exact for that model and do not depend on the machine's load, so they suit before/after
comparisons of builds and settings (issue 7's "instructions per query") where wall-time
benchmarks are noisy. They are a SIMULATION: three LRU caches (I1, D1, LL) sized from
CPUID, no TLB, no prefetcher, no out-of-order core and no timing, and the server runs
20-50 times slower, one thread at a time. docs/simulation.md has the figures measured here.

``simulate()`` restarts a sandbox's server under valgrind, runs a bounded, deterministic
sysbench workload (``--events N --time 0 --rand-seed S``, one client thread), shuts the
server down cleanly so valgrind writes its file, starts the server again as it ran before,
and parses what valgrind wrote. Only the workload window is counted:

* callgrind: ``--instr-atstart=no`` runs startup uninstrumented; ``callgrind_control -i
  on`` switches instrumentation on before the prewarm (so the simulated caches are warm),
  ``--zero`` clears the counts after it and ``-i off`` ends the window after the
  workload. ``--collect-atstart=no --toggle-collect=do_command*`` then counts
  only what the server does inside ``do_command()`` (one client command, MariaDB and MySQL
  alike) on the client's own connection thread: background threads (purge, page cleaner,
  master thread timers) and connection set-up are left out. This is the deterministic
  window; the default tool.
* cachegrind (valgrind 3.19 here has neither ``--instr-at-start`` nor the client requests
  to switch counting on; they came in 3.22, and only the program itself could make those
  requests): two complete runs, one with ``base_events`` and one with
  ``base_events + events`` events, everything else identical. Their difference (totals
  from each file's ``summary:`` line, functions from ``cg_diff``) is what the extra
  ``events`` transactions cost. Startup, prewarm, connection set-up, statement
  preparation and shutdown cancel out; what does not cancel is work that depends on the
  clock (timer calibration at startup, background threads), 0.3-3 M instructions per run
  here, so the window should hold a few hundred million instructions. A startup-only
  baseline was not chosen because the baseline run must contain the client's connection
  and statement preparation to cancel them.

The result (``SimulationResult``) is labelled as a simulation, records the valgrind
version, the binary and its digest, the workload and the server settings used, and fits in
the profile artifact (``Profile.simulation``). ``compare_simulations`` gives the
before/after table normalised to baseline = 100% (``metrics.NormalizedRow``).
"""

from __future__ import annotations

from myaccel.profile.simulate.figures import (
    METRIC_UNITS,
    compare_simulations,
    derive_metrics,
    format_simulation,
)
from myaccel.profile.simulate.models import (
    SIMULATION_LABEL,
    CacheSpec,
    FunctionCost,
    Progress,
    SimulationResult,
    SimulationRun,
    Tool,
)
from myaccel.profile.simulate.parse import (
    AnnotatedFunction,
    OutFileSummary,
    parse_annotate,
    parse_out_file,
    read_out_file,
)
from myaccel.profile.simulate.request import (
    DEFAULT_EVENTS,
    SIMULATION_SETTINGS,
    SimulationRequest,
)
from myaccel.profile.simulate.run import simulate
from myaccel.profile.simulate.valgrind import (
    COLLECT_FUNCTION,
    TOP_N,
    function_table,
    valgrind_argv,
    valgrind_version,
)
from myaccel.profile.simulate.window import file_sha256

__all__ = [
    "COLLECT_FUNCTION",
    "DEFAULT_EVENTS",
    "METRIC_UNITS",
    "SIMULATION_LABEL",
    "SIMULATION_SETTINGS",
    "TOP_N",
    "AnnotatedFunction",
    "CacheSpec",
    "FunctionCost",
    "OutFileSummary",
    "Progress",
    "SimulationRequest",
    "SimulationResult",
    "SimulationRun",
    "Tool",
    "compare_simulations",
    "derive_metrics",
    "file_sha256",
    "format_simulation",
    "function_table",
    "parse_annotate",
    "parse_out_file",
    "read_out_file",
    "simulate",
    "valgrind_argv",
    "valgrind_version",
]
