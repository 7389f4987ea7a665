"""The one option-key normalizer, and the sandbox's process table and locks (no server)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from myaccel.errors import SandboxError
from myaccel.server.optionfile import normalize_key
from myaccel.server.sandbox import process
from myaccel.server.sandbox.options import canonical_key


@pytest.mark.parametrize(
    ("key", "kwargs", "expected"),
    [
        (" Innodb-Buffer-Pool-Size ", {}, "innodb_buffer_pool_size"),
        ("loose-skip-log-bin", {}, "loose_skip_log_bin"),
        ("loose-skip-log-bin", {"drop_loose": True}, "skip_log_bin"),
        ("loose-skip-log-bin", {"drop_loose": True, "drop_modifier": True}, "log_bin"),
        ("skip-name-resolve", {"drop_modifier": {"log_bin"}}, "skip_name_resolve"),
        ("disable-log-bin", {"drop_modifier": {"log_bin"}}, "log_bin"),
        ("enable_performance_schema", {"drop_modifier": True}, "performance_schema"),
    ],
)
def test_normalize_key(key: str, kwargs: dict[str, object], expected: str) -> None:
    assert normalize_key(key, **kwargs) == expected  # type: ignore[arg-type]


def test_canonical_key_is_the_normalizer() -> None:
    assert canonical_key("--loose-skip-log-error".lstrip("-")) == "log_error"
    assert canonical_key("skip-name-resolve") == "skip_name_resolve"


def test_find_server_pids_and_zombies(tmp_path: Path) -> None:
    cnf = tmp_path / "my.cnf"
    cnf.write_text("")
    child = process.spawn_server(
        [sys.executable, "-c", "import time; time.sleep(30)", f"--defaults-file={cnf}"],
        tmp_path / "log",
        tmp_path,
    )
    try:
        deadline = time.monotonic() + 10
        while child.pid not in process.find_server_pids(cnf) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert process.find_server_pids(cnf) == [child.pid]
        assert process.runs_option_file(child.pid, cnf)
        assert not process.runs_option_file(child.pid, tmp_path / "other.cnf")
        assert process.pid_alive(child.pid)
        assert not process.terminate(child.pid, grace_s=10.0)  # SIGTERM was enough
        assert not process.pid_alive(child.pid)  # reaped, not a zombie
        assert process.find_server_pids(cnf) == []
    finally:
        child.stop(grace_s=1.0)


def test_zombie_is_not_alive() -> None:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with open(f"/proc/{p.pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[-1].split()[0] == "Z":
                    break
            time.sleep(0.02)
        assert not process.pid_alive(p.pid)  # exited, not yet reaped
    finally:
        p.wait()
    assert not process.pid_alive(p.pid)


def test_file_lock_times_out_with_the_same_message(tmp_path: Path) -> None:
    path = tmp_path / "locks" / "x.lock"
    held = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with process.file_lock(path, "sandbox 'x'"):
            held.set()
            release.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    try:
        assert held.wait(10)
        t0 = time.monotonic()
        with (
            pytest.raises(SandboxError, match="another myaccel command is working on sandbox 'x'"),
            process.file_lock(path, "sandbox 'x'", timeout_s=0.3),
        ):
            pass
        assert time.monotonic() - t0 >= 0.3
    finally:
        release.set()
        t.join()
    with process.file_lock(path, "sandbox 'x'", timeout_s=0.3):
        assert path.exists()


def test_server_env_removes_what_would_point_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MYSQL_UNIX_PORT", "/tmp/other.sock")
    monkeypatch.delenv("MYSQL_TCP_PORT", raising=False)
    env = process.server_env()
    assert "MYSQL_UNIX_PORT" in env and env["MYSQL_UNIX_PORT"] is None
    assert "MYSQL_TCP_PORT" not in env
    assert "PATH" not in env  # the rest is inherited as it is
    assert os.environ["MYSQL_UNIX_PORT"] == "/tmp/other.sock"
