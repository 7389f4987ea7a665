"""The smoke run of a built server on a fake runner: the one qemu command with its address
space bound, the server's small configuration (the buffer pool's reservation bounded), the
stage only on cross builds of SQL servers, and a server that dies reported with its error."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fake_runner import Recording, ReplayChild, ReplayRunner

from myaccel import proc
from myaccel.builder import cross, smoke
from myaccel.builder.errors import DependencyMissing, SmokeFailed
from myaccel.builder.pipeline import stages_for
from myaccel.env import Environment, using

LIMITS = smoke.SmokeLimits()


def tools() -> ReplayRunner:
    return ReplayRunner().on(["qemu-aarch64"], Recording()).on(["prlimit"], Recording())


def test_qemu_reserved_va_comes_before_the_root() -> None:
    with using(Environment(runner=tools())):
        plain = cross.qemu_argv("aarch64")
        bounded = cross.qemu_argv("aarch64", reserved_va="4G")
    assert bounded == [plain[0], "-R", "4G", *plain[1:]]
    assert "-R" not in plain  # cmake's try-runs and the tests keep the unbounded command


def test_cross_smoke_argv_bounds_qemu_and_the_buffer_pool(tmp_path: Path) -> None:
    with using(Environment(runner=tools())):
        argv = smoke.smoke_argv(
            Path("/b/install/bin/mariadbd"), Path("/b/install"), tmp_path / "data", tmp_path,
            target_arch="aarch64", cross=True, limits=LIMITS,
        )  # fmt: skip
        qemu = cross.qemu_argv("aarch64", reserved_va="4G")
    assert argv[:3] == ["/usr/bin/prlimit", f"--as={8 << 30}", "--"]
    assert argv[3 : 3 + len(qemu)] == qemu
    rest = argv[3 + len(qemu) :]
    assert rest[0] == "/b/install/bin/mariadbd" and rest[1] == "--no-defaults"
    for opt in (
        "--innodb-buffer-pool-size=64M",
        # the cause of the 23.6 GB: 8 TiB reserved by default, a page descriptor each in qemu
        "--loose-innodb-buffer-pool-size-max=128M",
        "--performance-schema=OFF",
        "--innodb-use-native-aio=0",  # ENOSYS under qemu-user
        "--skip-grant-tables",  # an empty datadir: no bootstrap of the system tables
        "--skip-networking",
        f"--socket={tmp_path / 's.sock'}",
        f"--log-error={tmp_path / 'error.log'}",
        f"--datadir={tmp_path / 'data'}",
    ):
        assert opt in rest, opt


def test_native_smoke_argv_has_no_qemu(tmp_path: Path) -> None:
    with using(Environment(runner=tools())):
        argv = smoke.smoke_argv(
            Path("/b/bin/mariadbd"), Path("/b"), tmp_path, tmp_path,
            target_arch="x86_64", cross=False, limits=LIMITS,
        )  # fmt: skip
    assert argv[3] == "/b/bin/mariadbd"
    assert not any("qemu" in a for a in argv) and "--innodb-use-native-aio=0" not in argv


def test_missing_prlimit_names_its_package() -> None:
    with (
        using(Environment(runner=ReplayRunner().on(["qemu-aarch64"], Recording()))),
        pytest.raises(DependencyMissing) as exc,
    ):
        smoke.launcher("aarch64", True, LIMITS)
    assert exc.value.hint == "apt-get install util-linux"


class DyingRunner(ReplayRunner):
    """The server writes its error log and exits at once (InnoDB could not map its pool)."""

    def spawn(self, req: proc.SpawnRequest) -> proc.Child:
        log = next(a.split("=", 1)[1] for a in req.argv if a.startswith("--log-error="))
        Path(log).write_text(
            "2026-11-25  7:54:48 0 [Note] InnoDB: Using ARMv8 crc32 + pmull instructions\n"
            "2026-11-25  7:54:48 0 [ERROR] InnoDB: Cannot map innodb_buffer_pool_size_max=131072m\n"
        )
        child = super().spawn(req)
        assert isinstance(child, ReplayChild)
        child.wait()  # ended
        return child


def _dying_smoke(tmp_path: Path, returncode: int, cross: bool) -> tuple[SmokeFailed, DyingRunner]:
    """The smoke run of a server that ends with ``returncode`` before answering."""
    fake = DyingRunner().on(["qemu-aarch64"], Recording())
    fake = fake.on(["prlimit"], Recording(returncode=returncode))
    with using(Environment(runner=fake)), pytest.raises(SmokeFailed) as exc:
        smoke.run_smoke(
            tmp_path / "install" / "bin" / "mariadbd", tmp_path / "install", tmp_path / "work",
            target_arch="aarch64", cross=cross,
        )  # fmt: skip
    return exc.value, fake


def test_a_server_that_exits_is_reported_with_its_first_error(tmp_path: Path) -> None:
    err, fake = _dying_smoke(tmp_path, 1, cross=True)
    assert "exited (1) before answering" in err.message
    assert "Cannot map innodb_buffer_pool_size_max" in err.message
    # the error log is next to the datadir, the socket directory is gone
    kept = tmp_path / "work" / "smoke" / "error.log"
    assert kept.is_file() and str(kept) in err.hint
    rundir = next(
        Path(a.split("=", 1)[1]).parent for a in fake.argvs("spawn")[0] if a.startswith("--socket=")
    )
    assert not rundir.exists()


def test_peak_rss_reads_vmhwm() -> None:
    import os

    assert (smoke.peak_rss_kib(os.getpid()) or 0) > 0
    assert smoke.peak_rss_kib(2**22 + 12345) is None


def _ctx(cross_build: bool, trainer: str, flavor: str = "mariadb") -> Any:
    return SimpleNamespace(
        source_dir=None,
        request=SimpleNamespace(wants=lambda opt: False, holdout=False),
        toolchain=SimpleNamespace(cross=cross_build),
        tree=SimpleNamespace(flavor=flavor, adapter=SimpleNamespace(trainer=trainer, label=flavor)),
    )


def test_the_smoke_stage_runs_on_cross_builds_of_sql_servers_only() -> None:
    names = [s.name for s in stages_for(_ctx(True, "sandbox"))]
    assert names == ["configure", "build", "install", "verify", "smoke", "measure"]
    # native builds (sandboxes run them) and the kvlab fixture (no SQL) keep their stages
    assert "smoke" not in [s.name for s in stages_for(_ctx(False, "sandbox"))]
    assert "smoke" not in [s.name for s in stages_for(_ctx(True, "fixture"))]
    reason = smoke.SmokeStage().skip_reason(_ctx(True, "sandbox", "mysql"))
    assert reason is not None and "--initialize" in reason
    assert smoke.SmokeStage().skip_reason(_ctx(True, "sandbox")) is None


def test_a_server_killed_by_sigill_is_said_to_need_another_build(tmp_path: Path) -> None:
    """An inline-LSE build on a CPU without LSE (the aarch64 lab's cortex-a72): SIGILL."""
    err, _ = _dying_smoke(tmp_path, -4, cross=False)
    assert "was killed by SIGILL before answering" in err.message
    assert "--atomics outline" in err.hint
