"""Test hook: kill this process with SIGKILL at a named point of apply or rollback.

The crash-injection tests (tests/integration/test_crash_injection.py) run ``myaccel apply``
as a subprocess with ``MYACCEL_CRASH_AT=<point>[:<n>]`` in its environment; when the process
reaches that point it sends itself SIGKILL: no ``finally``, no ``atexit``, no flush, exactly
what a power cut or ``kill -9`` leaves behind. This module is the only place that reads the
variable; nothing sets it outside tests.

Points (``n`` is the journal entry index, 0-based; without ``:n`` the first match fires):

- ``journaled:n``  entry n saved as pending, its change not made yet
- ``changed:n``    change n made, its entry still pending
- ``applied:n``    entry n marked applied
- ``reverted:n``   (rollback) entry n marked reverted
- ``restart-stop``   the server was asked to shut down and may still be going down
- ``restart-down``   the server is down, not started again yet
- ``restart-start``  the server was spawned again and is not ready yet
- ``health-check``   the server is up with the new configuration, before the health check
- ``rollback-finish``  (rollback) entries reverted and the server restarted, the journal not
  yet marked rolled back
- ``journal-write:n``  right after the n-th durable journal write of this process (1-based)

With ``MYACCEL_CRASH_HOW=kernel`` (the lab's OS-crash matrix, in a throwaway guest only) the
point panics the operating system instead (``c`` into ``/proc/sysrq-trigger``: no sync, no
unmount, the page cache lost), which is what the journal's fsync order is for.
"""

from __future__ import annotations

import os
import signal
import time

CRASH_ENV = "MYACCEL_CRASH_AT"
CRASH_HOW_ENV = "MYACCEL_CRASH_HOW"

POINTS = (
    "journaled",
    "changed",
    "applied",
    "reverted",
    "restart-stop",
    "restart-down",
    "restart-start",
    "health-check",
    "rollback-finish",
    "journal-write",
)


def armed(point: str, index: int | None = None) -> bool:
    """Whether ``MYACCEL_CRASH_AT`` asks for a crash at this point (and index)."""
    spec = os.environ.get(CRASH_ENV, "")
    if not spec:
        return False
    name, sep, n = spec.partition(":")
    if name != point:
        return False
    if not sep:
        return True
    return index is not None and n.strip() == str(index)


def kill_self() -> None:
    """SIGKILL this process, or with ``MYACCEL_CRASH_HOW=kernel`` panic the kernel (never
    returns)."""
    if os.environ.get(CRASH_HOW_ENV) == "kernel":
        try:
            with open("/proc/sysrq-trigger", "w") as trigger:
                trigger.write("c")  # the kernel panics inside this write
            time.sleep(60)
        except OSError:
            pass  # not root or no sysrq: die the usual way
    os.kill(os.getpid(), signal.SIGKILL)


def crash_point(point: str, index: int | None = None) -> None:
    """Die here if ``MYACCEL_CRASH_AT`` names this point (a test hook; no-op otherwise)."""
    if armed(point, index):
        kill_self()
