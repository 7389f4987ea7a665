"""The process's signal policy (myaccel.signals) and children that die with myaccel
(myaccel.runner: PR_SET_PDEATHSIG, inherited descriptors)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from myaccel import proc, signals
from myaccel.errors import Interrupted

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def policy() -> Iterator[None]:
    """``signals.install()`` for one test; Python's handlers and a clean state after."""
    saved = {sig: signal.getsignal(sig) for sig in signals.HANDLED}
    signals.install()
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        signals._state.installed = False
        signals._state.first = None
        signals._state.held = []


def _deliver(sig: int) -> None:
    os.kill(os.getpid(), sig)
    time.sleep(0.05)  # the handler runs between bytecodes of the main thread


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_each_signal_raises_interrupted_once(policy: None, sig: int) -> None:
    with pytest.raises(Interrupted) as caught:
        _deliver(sig)
    assert caught.value.signum == sig and signals.stopping() == sig
    # a second signal (timeout's second SIGINT, Ctrl-C pressed again) does not cut the
    # clean-up that the first one started
    _deliver(signal.SIGINT)
    _deliver(signal.SIGTERM)


def test_shielded_holds_a_signal_until_the_block_ends(policy: None) -> None:
    done = []
    with pytest.raises(Interrupted) as caught, signals.shielded():
        _deliver(signal.SIGTERM)
        done.append("the block went on to its end")
    assert done and caught.value.signum == signal.SIGTERM


def test_shielded_without_install_restores_the_handlers() -> None:
    before = signal.getsignal(signal.SIGHUP)
    with pytest.raises(Interrupted), signals.shielded():
        _deliver(signal.SIGHUP)
    assert signal.getsignal(signal.SIGHUP) is before


def test_raising_turns_sigterm_into_interrupted_in_process() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Interrupted) as caught, signals.raising():
        _deliver(signal.SIGTERM)
    assert caught.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before


def _python(code: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**os.environ, "PYTHONPATH": str(SRC)},
        stdout=subprocess.PIPE,
        text=True,
    )


def test_a_late_second_sigint_does_not_change_the_exit_code() -> None:
    """The exit code of the first signal stands even when a second one lands while the
    interpreter shuts down (it used to die by SIGINT: exit -2)."""
    p = _python(
        """
        import os, signal, sys, time
        from myaccel import signals
        signals.install()
        try:
            print("ready", flush=True)
            time.sleep(30)
        except KeyboardInterrupt:
            signals.quiet()
            os.kill(os.getpid(), signal.SIGINT)  # the second one, after the clean-up
            time.sleep(0.1)
            sys.exit(130)
        """
    )
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    p.send_signal(signal.SIGINT)
    assert p.wait(timeout=10) == 130


@pytest.mark.parametrize(("die", "survives"), [(True, False), (False, True)])
def test_children_die_with_a_killed_parent(die: bool, survives: bool) -> None:
    """A helper tool started through proc dies when myaccel is killed with SIGKILL; a
    server (spawned with die_with_parent=False) outlives it."""
    p = _python(
        f"""
        from myaccel import proc
        child = proc.spawn(["sleep", "60"], die_with_parent={die}, new_session=True)
        print(child.pid, flush=True)
        import time; time.sleep(60)
        """
    )
    assert p.stdout is not None
    pid = int(p.stdout.readline())
    p.kill()
    p.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and psutil.pid_exists(pid):
        if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            break
        time.sleep(0.05)
    alive = psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    try:
        assert alive is survives
    finally:
        if alive:
            os.kill(pid, signal.SIGKILL)


def test_run_and_stream_children_die_with_the_parent() -> None:
    p = _python(
        """
        from myaccel import proc
        proc.stream(["sh", "-c", "echo $$; exec sleep 60"], timeout_s=60,
                    on_line=lambda line: print(line, flush=True))
        """
    )
    assert p.stdout is not None
    pid = int(p.stdout.readline())
    assert psutil.pid_exists(pid)
    p.kill()
    p.wait()
    deadline = time.monotonic() + 5
    while psutil.pid_exists(pid) and time.monotonic() < deadline:
        if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            break
        time.sleep(0.05)
    gone = not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert gone


def test_a_passed_descriptor_is_read_by_the_child() -> None:
    r, w = os.pipe()
    os.write(w, b"secret line\n")
    os.close(w)
    try:
        done = proc.run(["cat", f"/dev/fd/{r}"], pass_fds=(r,), timeout_s=10)
    finally:
        os.close(r)
    assert done.ok and done.stdout == "secret line\n"
    # not passed: the child cannot open it
    r2, w2 = os.pipe()
    os.close(w2)
    try:
        assert not proc.run(["cat", f"/dev/fd/{r2}"], timeout_s=10).ok
    finally:
        os.close(r2)


def test_sysbench_never_gets_the_password_by_argv_or_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """prepare (and every other sysbench command) runs without MYSQL_PWD in its
    environment and with the password in an inherited pipe (it used to inherit MYSQL_PWD:
    issue 38, item 8)."""
    from fake_runner import Recording, ReplayRunner

    from myaccel.bench.runner import run_sysbench
    from myaccel.env import Environment, using

    monkeypatch.setenv("MYSQL_PWD", "pw-in-env")
    fake = ReplayRunner().on(["sysbench"], Recording())
    with using(Environment(runner=fake)):
        run_sysbench(["sysbench", "oltp_common", "prepare"], "pw-secret", timeout_s=5)
    (call,) = fake.calls
    assert call.env is not None and call.env.get("MYSQL_PWD", "absent") is None
    assert not any("pw-secret" in a or "pw-in-env" in a for a in call.argv)
    (fd,) = call.pass_fds
    assert f"--config-file=/dev/fd/{fd}" in call.argv and call.die_with_parent
