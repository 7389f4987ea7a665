"""Ranges of the numeric command-line options, shared by every command.

A value outside its range is refused by click while parsing, before anything runs: no
directory is created, no server is touched, and no value can overflow later (a
``--time 99999999999`` used to end in an OverflowError inside a timer thread).
"""

from __future__ import annotations

import click

WEEK_S = 7 * 86400

RUN_SECONDS = click.IntRange(1, WEEK_S)  # --time: measured seconds per run
WARMUP_SECONDS = click.IntRange(0, 86400)  # --warmup
REPORT_INTERVAL_S = click.IntRange(1, 3600)  # --report-interval
TABLES = click.IntRange(1, 10_000)  # --tables (sysbench sbtestN)
TABLE_ROWS = click.IntRange(1, 2_000_000_000)  # --table-size (sysbench's int)
RUNS = click.IntRange(1, 1000)  # --runs per cell / per arm
SCALE = click.FloatRange(0, 1, min_open=True)  # --scale: shrink rows and time
SEED = click.IntRange(0, 2**32 - 1)  # --seed (sysbench --rand-seed)
THREADS = click.IntRange(1, 100_000)  # a single thread count (plan, profile)
MAX_THREADS = 100_000
TCP_PORT = click.IntRange(1, 65535)  # --port
PID = click.IntRange(1, 2**22)  # --pid (Linux pid_max is at most 2^22)
TIMEOUT_S = click.FloatRange(0, WEEK_S, min_open=True)  # --timeout of sandbox commands
