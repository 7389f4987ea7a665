"""The environment a command runs in: which runner executes subprocesses.

One object, carried implicitly (a context variable) so that domain code keeps calling
``proc.run``/``proc.stream``/``proc.spawn`` while a test swaps the runner for one that
replays recorded tool outputs (``with using(Environment(runner=fake)): ...``).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass, field

from myaccel.runner import Runner, SystemRunner


@dataclass(frozen=True)
class Environment:
    runner: Runner = field(default_factory=SystemRunner)


_CURRENT: contextvars.ContextVar[Environment | None] = contextvars.ContextVar(
    "myaccel_environment", default=None
)
_DEFAULT: list[Environment] = []


def current() -> Environment:
    """The environment in effect: the innermost ``using``, else the process default."""
    env = _CURRENT.get()
    if env is not None:
        return env
    if not _DEFAULT:
        _DEFAULT.append(Environment())
    return _DEFAULT[0]


@contextlib.contextmanager
def using(env: Environment) -> Iterator[Environment]:
    """Run the block with ``env`` in effect (threads started inside inherit it only if
    they copy the context; the gateway's own threads do)."""
    token = _CURRENT.set(env)
    try:
        yield env
    finally:
        _CURRENT.reset(token)
