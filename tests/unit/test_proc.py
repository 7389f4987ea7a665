"""The subprocess gateway: run, stream and spawn on this machine, and the runner swap."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest
from fake_runner import Recording, ReplayRunner

from myaccel import proc
from myaccel.env import Environment, current, using
from myaccel.errors import ProcessFailed, ToolMissing

PY = sys.executable


def test_stream_delivers_lines_in_order_stderr_merged() -> None:
    lines: list[str] = []
    code = "import sys\nfor i in range(200):\n    print(f'line {i}', flush=True)\nsys.stderr.write('last\\n')"
    done = proc.stream([PY, "-c", code], timeout_s=60, on_line=lines.append)
    assert done.ok and done.returncode == 0 and not done.timed_out
    assert lines == [f"line {i}" for i in range(200)] + ["last"]


def test_stream_reports_exit_code_and_cwd_env(tmp_path: Path) -> None:
    lines: list[str] = []
    code = (
        "import os, sys\nprint(os.getcwd())\nprint(os.environ.get('MYACCEL_T', '-'))\nsys.exit(3)"
    )
    done = proc.stream(
        [PY, "-c", code], timeout_s=60, on_line=lines.append, cwd=tmp_path, env={"MYACCEL_T": "x"}
    )
    assert done.returncode == 3 and not done.ok and not done.timed_out
    assert lines == [str(tmp_path), "x"]


def test_env_none_removes_an_inherited_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MYACCEL_SECRET_T", "s3cret")
    code = "import os; print(os.environ.get('MYACCEL_SECRET_T', 'unset'))"
    assert proc.run([PY, "-c", code]).stdout.strip() == "s3cret"
    done = proc.run([PY, "-c", code], env={"MYACCEL_SECRET_T": None})
    assert done.stdout.strip() == "unset"
    lines: list[str] = []
    proc.stream(
        [PY, "-c", code], timeout_s=60, on_line=lines.append, env={"MYACCEL_SECRET_T": None}
    )
    assert lines == ["unset"]


def test_stream_timeout_sets_timed_out_and_kills() -> None:
    lines: list[str] = []
    t0 = time.monotonic()
    done = proc.stream(
        [PY, "-c", "import time; print('started', flush=True); time.sleep(60)"],
        timeout_s=1.0,
        on_line=lines.append,
    )
    assert time.monotonic() - t0 < 30
    assert done.timed_out and not done.ok
    assert done.returncode == -signal.SIGKILL
    assert lines == ["started"]


def test_run_timeout_raises_process_failed() -> None:
    with pytest.raises(ProcessFailed, match="did not finish within"):
        proc.run([PY, "-c", "import time; time.sleep(60)"], timeout_s=0.5)


def _wait_for(path: Path, text: str, timeout_s: float = 30.0) -> None:
    end = time.monotonic() + timeout_s
    while text not in path.read_text():
        assert time.monotonic() < end, f"{text!r} never appeared in {path}"
        time.sleep(0.05)


def test_spawn_stop_ends_a_child_that_obeys(tmp_path: Path) -> None:
    out = tmp_path / "child.log"
    with out.open("w") as fh:
        child = proc.spawn(
            [PY, "-c", "import time; print('up', flush=True); time.sleep(60)"], output=fh
        )
    _wait_for(out, "up")
    assert child.poll() is None and child.wait(0.1) is None
    t0 = time.monotonic()
    assert child.stop(grace_s=30) == -signal.SIGTERM
    assert time.monotonic() - t0 < 20
    assert child.poll() == -signal.SIGTERM


def test_spawn_stop_escalates_to_sigkill_after_grace(tmp_path: Path) -> None:
    out = tmp_path / "child.log"
    code = (
        "import signal, time\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "print('ignoring', flush=True)\n"
        "time.sleep(60)"
    )
    with out.open("w") as fh:
        child = proc.spawn([PY, "-c", code], output=fh, new_session=True)
    _wait_for(out, "ignoring")
    t0 = time.monotonic()
    rc = child.stop(grace_s=0.5, sig=signal.SIGINT)
    assert rc == -signal.SIGKILL
    assert 0.4 < time.monotonic() - t0 < 20
    child.send_signal(signal.SIGTERM)  # an ended child: nothing to signal, no error


@pytest.mark.parametrize("shape", ["run", "stream", "spawn"])
def test_missing_tool_is_tool_missing(shape: str, tmp_path: Path) -> None:
    argv = [str(tmp_path / "no-such-tool")]
    with pytest.raises(ToolMissing, match="no-such-tool"):
        if shape == "run":
            proc.run(argv)
        elif shape == "stream":
            proc.stream(argv, timeout_s=5, on_line=lambda _: None)
        else:
            proc.spawn(argv)


def test_require_names_the_package() -> None:
    with pytest.raises(ToolMissing) as exc:
        proc.require("myaccel-no-such-tool")
    assert "apt-get install" in exc.value.hint


def test_using_swaps_the_runner_and_restores_it() -> None:
    before = current()
    fake = ReplayRunner(missing=["perf"]).on(
        ["sysbench", "--version"], Recording("sysbench 1.0.20\n")
    )
    with using(Environment(runner=fake)):
        assert proc.which("sysbench") == "/usr/bin/sysbench"
        assert proc.which("perf") is None
        with pytest.raises(ToolMissing):
            proc.require("perf")
        assert proc.run(["sysbench", "--version"], check=True).stdout == "sysbench 1.0.20\n"
        with pytest.raises(ToolMissing, match="no recording"):
            proc.run(["objdump", "-d", "x"])
    assert current() is before
    assert fake.argvs() == [("sysbench", "--version"), ("objdump", "-d", "x")]


def test_replayed_run_check_raises_with_the_recorded_tail() -> None:
    fake = ReplayRunner().on(["perf"], Recording.perfstat_stderr("vm-unknown-event.stderr", 129))
    with using(Environment(runner=fake)), pytest.raises(ProcessFailed, match="exit code 129"):
        proc.run(["perf", "stat", "-e", "nosuchevent", "--", "true"], check=True)


def test_replayed_spawn_writes_output_and_records_the_stop(tmp_path: Path) -> None:
    fake = ReplayRunner().on(["perf", "record"], Recording("[ perf record: Woken up 1 times ]\n"))
    log = tmp_path / "log"
    with using(Environment(runner=fake)), log.open("w") as fh:
        child = proc.spawn(["perf", "record", "-p", "1"], output=fh)
        assert child.poll() is None
        assert child.stop(grace_s=300, sig=signal.SIGINT) == 0
    assert "Woken up" in log.read_text()
    assert fake.children[0].stop_calls == [(300, signal.SIGINT)]
    assert fake.children[0].signals == [signal.SIGINT]
