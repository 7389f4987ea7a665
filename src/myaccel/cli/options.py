"""Click options that several commands take, each declared once here; a command composes
them (``@options.runs``, ``@options.json("...")``). The server options and
``--measure-storage`` are in ``cli.common``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from myaccel.bench.choices import DATASET_KINDS, REPLAY_MODES
from myaccel.cli import ranges

F = TypeVar("F", bound=Callable[..., Any])


def compose(*options: Callable[[F], F]) -> Callable[[F], F]:
    """One decorator applying ``options`` in order (the first is the first in --help)."""

    def apply(f: F) -> F:
        for o in reversed(options):
            f = o(f)
        return f

    return apply


def json(help: str | None = None) -> Callable[[F], F]:
    """``--json`` (``as_json``): print JSON instead of text."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def durability(help: str | None = None) -> Callable[[F], F]:
    """``--durability strict|relaxed`` (default strict), with the command's own help."""
    return click.option(
        "--durability",
        type=click.Choice(["strict", "relaxed"]),
        default="strict",
        show_default=True,
        help=help,
    )


def seconds(name: str, lo: float, hi: float, default: float, help: str) -> Callable[[F], F]:
    """An option taking seconds within [lo, hi], its default shown in --help."""
    return click.option(
        name, type=click.FloatRange(lo, hi), default=default, show_default=True, help=help
    )


def directory(*decls: str, help: str, metavar: str | None = None) -> Callable[[F], F]:
    """An option naming a directory (``--out``, ``--basedir``, ``--source``, ...)."""
    return click.option(*decls, type=click.Path(file_okay=False), metavar=metavar, help=help)


# ------------------------------------------------- an existing server's files and unit


def conf_dir(help: str) -> Callable[[F], F]:
    """``--conf-dir DIR``: where the managed 99-myaccel.cnf goes, with the command's help."""
    return click.option("--conf-dir", metavar="DIR", help=help)


def server_unit(help: str) -> Callable[[F], F]:
    """``--server-unit UNIT``: the server's systemd unit, with the command's help."""
    return click.option("--server-unit", metavar="UNIT", help=help)


# ------------------------------------------------- the benchmark profile and its runs

profile = click.option(
    "--profile",
    default="quick",
    show_default=True,
    help="quick, standard, full, yitian, polardb-cpu, polardb-io, tdsql, kunpeng.",
)
workload = click.option(
    "--workload",
    "-w",
    multiple=True,
    help="Workload (repeatable): oltp_read_only ... or ro/rw/wo/ps, or a .lua path.",
)
threads = click.option("--threads", "-t", help="Thread counts, e.g. 1,8,32 (a sweep).")
time = click.option(
    "--time", type=ranges.RUN_SECONDS, help="Measured seconds per run (after warm-up)."
)
warmup = click.option(
    "--warmup", type=ranges.WARMUP_SECONDS, help="Warm-up seconds excluded from the summary."
)
tables = click.option("--tables", type=ranges.TABLES, help="Number of tables.")
table_size = click.option("--table-size", type=ranges.TABLE_ROWS, help="Rows per table.")
dataset = click.option(
    "--dataset",
    type=click.Choice(DATASET_KINDS),
    help="Size the data from the buffer pool (<= 50% / >= 4x) and check it after the run.",
)
runs = click.option(
    "--runs", type=ranges.RUNS, help="Runs per arm and cell (default: the profile's, 5 for quick)."
)
# ``--target`` and ``--budget``: an adaptive campaign (bench/adaptive.py), in ab and accelerate.
adaptive = compose(
    click.option(
        "--target",
        "target_pct",
        type=click.FloatRange(0.5, 100.0),
        metavar="PCT",
        help="Add rounds until each cell is improved, regressed or shown within +-PCT (a "
        "sequential design, docs/statistics.md); --runs is then the most rounds (default 20).",
    ),
    click.option(
        "--budget",
        "budget_min",
        type=click.FloatRange(1.0, 24 * 60.0),
        metavar="MIN",
        help="With --target: stop adding rounds before this many minutes of runs.",
    ),
)
# ``--instructions``: each arm's instruction count beside TPS (bench/instructions.py).
instructions = compose(
    click.option(
        "--instructions",
        is_flag=True,
        help="Also count each arm's instructions per transaction of the CPU-bound workloads "
        "under callgrind (about a minute per arm and workload): a figure noise cannot move, "
        "which decides an inconclusive cell between builds or CPU-side knobs.",
    ),
    click.option("--instructions-events", type=click.IntRange(10, 1_000_000), hidden=True),
)
scale = click.option(
    "--scale", type=ranges.SCALE, help="Shrink rows and time (0 < F <= 1) for small machines."
)
ps_mode = click.option(
    "--ps-mode", type=click.Choice(["auto", "disable"]), default="auto", show_default=True
)
report_interval = click.option(
    "--report-interval", type=ranges.REPORT_INTERVAL_S, help="Seconds between interval reports."
)
pin_client = click.option(
    "--pin-client",
    metavar="CPUS",
    help="Pin sysbench to these CPUs (taskset list, e.g. 1 or 2-3); recorded. Default: unpinned.",
)
out_dir = directory(
    "--out", "out_dir", help="Results directory (default under $MYACCEL_HOME/results)."
)
cleanup = click.option(
    "--cleanup", is_flag=True, help="Drop an existing dataset of another size and prepare anew."
)
quiet_wait = click.option(
    "--quiet-wait",
    "quiet_wait",
    type=click.FloatRange(0, 24 * 3600.0),
    default=60.0,
    show_default=True,
    envvar="MYACCEL_QUIET_WAIT",
    metavar="SECONDS",
    help="Before the first run, wait up to this long for other processes to use at most "
    "10% of the CPU; still busier: go on, every output then says its figures are disturbed "
    "(0: measure once, no wait; env MYACCEL_QUIET_WAIT).",
)
workload_file = click.option(
    "--workload-file",
    type=click.Path(dir_okay=False),
    metavar="W.json",
    help="Replay a workload written by `myaccel capture` (its statement mix, at its "
    "concurrency unless --threads) on a server holding the same schemas.",
)
# ``--replay-mode`` and ``--paced``: how ``--workload-file`` is replayed.
replay = compose(
    click.option(
        "--replay-mode",
        type=click.Choice(REPLAY_MODES),
        default="mix",
        show_default=True,
        help="With --workload-file: mix = each statement drawn from the captured mix; "
        "sequence = each thread replays a captured connection's statements in order "
        "(transactions kept together); timed = sequence with the captured time between "
        "a connection's statements (its client's think time).",
    ),
    click.option(
        "--paced",
        is_flag=True,
        help="With --workload-file: replay at the captured statements per second "
        "(sysbench --rate) instead of as fast as the server answers.",
    ),
    click.option(
        "--replay-keys",
        type=click.Choice(("shift", "as-captured")),
        default="shift",
        show_default=True,
        help="With --workload-file: shift = an insert's explicit integer primary key gets a "
        "new value each time (no duplicate key); as-captured = issued as written.",
    ),
)
