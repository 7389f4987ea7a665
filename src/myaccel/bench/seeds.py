"""The seeds of a `bench` campaign's runs: distinct, never replayed on data they wrote.

`bench` runs a write workload again and again on the same dataset (it does not restore a
snapshot between runs, unlike `ab`). sysbench's random sequence is fixed by its seed, per
thread: a run whose seed an earlier run on the same data already used sends the same
UPDATEs with the same values, and where a row still holds that value the non-index UPDATE
changes nothing. The server then writes less (measured: 590 redo bytes per transaction
instead of 1,385) and sysbench counts the no-op as "other", not "write" (3.08 writes per
transaction instead of 4): a lighter workload than the one asked for, flattering its TPS.
Until 2026-12-02 every `bench` started at seed 1000, so two campaigns on one sandbox
replayed each other (and `--seed S` gave every run the same seed). Now run ``r`` has seed
``base + r``: ``--seed`` sets the base, else a fresh one per campaign, recorded in every run
record so a campaign can be repeated exactly with ``--seed``."""

from __future__ import annotations

import secrets

FIRST = 10_000  # below this: the fixed bases of ab (1000 + round) and --seed users' habits
LAST = 2**31 - 1_000_000  # sysbench takes an unsigned 32-bit seed; room for the runs


def fresh_seed_base() -> int:
    return FIRST + secrets.randbelow(LAST - FIRST)
