"""Every lab step is timed and said as it ends: `lab: debootstrap 805.2 s`."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

Say = Callable[[str], None]


def say_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass
class Timings:
    """The steps taken so far, in order, with their durations in seconds."""

    say: Say = say_stderr
    steps: list[tuple[str, float]] = field(default_factory=list)
    # prefixed to the steps' names while set (the aarch64 lab: which CPU model's guest)
    label: str = ""

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        if self.label:
            name = f"{self.label}: {name}"
        self.say(f"lab: {name} ...")
        start = time.monotonic()
        ok = False
        try:
            yield
            ok = True
        finally:
            seconds = time.monotonic() - start
            self.steps.append((name if ok else f"{name} (failed)", seconds))
            self.say(f"lab: {name} {'done' if ok else 'FAILED'} in {seconds:.1f} s")

    def table(self) -> list[str]:
        width = max((len(name) for name, _ in self.steps), default=0)
        return [f"{name:<{width}}  {seconds:8.1f} s" for name, seconds in self.steps]
