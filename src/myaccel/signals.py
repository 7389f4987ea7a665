"""How the ``myaccel`` process ends on a signal: one policy for every command.

SIGINT, SIGTERM and SIGHUP all raise ``Interrupted`` (a ``KeyboardInterrupt``) in the main
thread, so every ``finally`` block runs before the process exits: a sysbench child is
stopped, a server switch (the general log, a performance_schema consumer) is put back, a
half-made clone is removed. Python's defaults would end the process on SIGTERM and SIGHUP
without running any of them.

Only the first signal raises. One that arrives while the clean-up runs (``timeout`` sends a
second SIGINT 50 ms after the first; a terminal's Ctrl-C pressed twice) is noted and
swallowed: raising it would abort the clean-up half way. ``shielded()`` holds signals for a
block that must not be cut in two even before any signal (a restore, a switch put back);
a held signal is raised when the block ends.

Children started through ``myaccel.proc`` die with this process even when it is killed
with SIGKILL (``PR_SET_PDEATHSIG``, see ``myaccel.runner``), so nothing here needs to chase
them.

Written here rather than taken from a library: the standard ``signal`` module is the
library; what is ours is the policy (which signals, first one raises, clean-up shielded).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import FrameType

from myaccel.errors import Interrupted

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass
class _State:
    installed: bool = False
    first: int | None = None  # the signal that started the process's end
    shield_depth: int = 0
    held: list[int] = field(default_factory=list)


_state = _State()


def _name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _handler(signum: int, _frame: FrameType | None) -> None:
    if _state.shield_depth > 0:
        _state.held.append(signum)
        return
    if not _state.installed:  # in-process (tests): every signal raises, nothing is kept
        raise Interrupted(signum)
    if _state.first is not None:
        sys.stderr.write(
            f"myaccel: {_name(signum)} received while undoing what was started after "
            f"{_name(_state.first)}; waiting for that to finish (SIGKILL abandons it: "
            "then run `myaccel rollback`)\n"
        )
        return
    _state.first = signum
    raise Interrupted(signum)


def install() -> None:
    """Make SIGINT, SIGTERM and SIGHUP raise ``Interrupted`` (called once by ``main``)."""
    if threading.current_thread() is not threading.main_thread():
        return
    _state.installed = True
    _state.first = None
    _state.held = []
    for sig in HANDLED:
        signal.signal(sig, _handler)


@contextlib.contextmanager
def raising() -> Iterator[None]:
    """The policy of ``install`` for this block only, where ``main`` did not install it
    (a command called in-process); the previous handlers come back afterwards."""
    if _state.installed or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, object] = {sig: signal.getsignal(sig) for sig in HANDLED}
    for sig in HANDLED:
        signal.signal(sig, _handler)
    try:
        yield
    finally:
        _restore(previous)


def _restore(previous: dict[int, object]) -> None:
    for sig, handler in previous.items():
        if handler is not None:
            signal.signal(sig, handler)  # type: ignore[arg-type]


def quiet() -> None:
    """Ignore SIGINT, SIGTERM and SIGHUP from here on: the process is exiting, its
    clean-up done. Python puts the default action back on its own handlers while it shuts
    down, so a second Ctrl-C arriving then would kill it by the signal (exit -2) instead of
    letting it exit with the code already chosen; an ignored signal stays ignored."""
    if threading.current_thread() is threading.main_thread():
        for sig in HANDLED:
            signal.signal(sig, signal.SIG_IGN)


def stopping() -> int | None:
    """The signal that is ending this process, or None."""
    return _state.first


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP during this block (a restart that puts a server
    back, a switch turned off); the first held signal is raised when the block ends,
    unless the process is already ending on an earlier one.

    Works whether or not ``install`` ran (tests call commands in-process): the handlers
    are put in place for the block and the previous ones restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, object] = {sig: signal.getsignal(sig) for sig in HANDLED}
    _state.shield_depth += 1
    for sig in HANDLED:
        signal.signal(sig, _handler)
    try:
        yield
    finally:
        _state.shield_depth -= 1
        _restore(previous)
    if _state.shield_depth == 0 and _state.held:
        held, _state.held = _state.held[0], []
        if _state.first is None or not _state.installed:
            if _state.installed:
                _state.first = held
            raise Interrupted(held)
