"""The names the command line offers as choices for the dataset and the replay of a
captured workload, in a module that imports nothing: ``--help`` lists them without loading
the models (``bench.dataset``, ``bench.workload`` use them from here)."""

from __future__ import annotations

from typing import Literal, get_args

DATASET_KINDS = ("cpu-bound", "io-bound")
# how bench/ab/accelerate --workload-file and capture --check replay it (bench.replay)
ReplayMode = Literal["mix", "sequence", "timed"]
REPLAY_MODES: tuple[str, ...] = get_args(ReplayMode)
