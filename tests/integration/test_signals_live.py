"""Signals at points of bench and capture, on a real sandbox (issue 38, acceptance 2).

A sample of scripts/signal_matrix.py (the whole matrix, every command and signal, is the
table in docs/safety.md): a real ``myaccel`` subprocess with a canary password on its
command line is stopped by SIGTERM, two SIGINTs 50 ms apart, SIGHUP or SIGKILL while
sysbench runs, while the general log is switched on or while tune measures a candidate;
afterwards no file holds the password, no process it started still runs, and the server's
variables equal those before (after a SIGKILL: once the next command has run). Before the
fix, SIGTERM left sysbench running and its password in /dev/shm, a killed capture left the
general log on, and a killed tune left the sandbox on the candidate's configuration.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "signal_matrix.py"


def _harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("signal_matrix", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


H = _harness()


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    with H.lab_in(tmp_path_factory.mktemp("signals")) as the_lab:
        yield the_lab


CASES = [
    ("bench", "run 1 (sysbench)", "TERM"),
    ("bench", "run 1 (sysbench)", "KILL"),
    ("bench", "sysbench prepare", "INT2"),
    ("capture", "window", "INT2"),
    ("capture", "switched on", "HUP"),
    ("capture", "window", "KILL"),
    ("tune", "a candidate arm", "KILL"),
]
EXIT = {"TERM": 143, "INT2": 130, "HUP": 129, "KILL": -9}


@pytest.mark.parametrize(("command", "point", "sig"), CASES)
def test_a_signal_leaves_nothing_behind(lab: object, command: str, point: str, sig: str) -> None:
    cmd = H.COMMANDS[command]
    (where,) = [p for p in cmd.points if p.name == point]
    H.reset(lab, cmd)
    o = H.run_case(lab, cmd, where, sig)
    assert o.reached, f"the point was not reached: {o.tail}"
    assert o.exit_code == EXIT[sig], o.tail
    assert o.secret_files == [], o.secret_files
    assert o.children_left == [], o.children_left
    assert o.server_changed == [], o.server_changed
    if sig == "KILL" and command in ("capture", "tune"):
        # the kill left the general log on (capture) or the sandbox on an arm's
        # configuration (tune); the next command put it back
        assert o.repaired_by_next, "nothing was left to repair: the case tests nothing"
