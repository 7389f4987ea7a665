"""`accelerate --build [--swap-binary]` on an existing server (``accelerate/existing_build.py``)
without a server or systemd: the refusals checked before any work, and the order of the
guarded swap after the plan (a fixture unit shaped like Debian's under a temporary root,
``systemctl`` and ``--version`` answered by the fake runner, the guard's windows and
health check given as fakes). The flow on a real server is in
tests/integration/test_accelerate_existing_build_live.py."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner
from fake_runner import Recording, ReplayRunner
from test_swap_unit_binary import NEW, OLD, UNIT, UNIT_TEXT, _exe, tree, versions

from myaccel.accelerate.build_arm import BuildSpec, BuiltServer
from myaccel.accelerate.existing_build import (
    CLONE_ARMS_FIGURES,
    LIVE_SWAP_FIGURES,
    ServerBuild,
    check_build_version,
    check_unit_runs,
    swap_unit,
)
from myaccel.accelerate.live import Window
from myaccel.accelerate.request import AccelerateResult
from myaccel.accelerate.rollout import GuardrailBreach
from myaccel.actions import Journal, apply_changes, journals_dir
from myaccel.actions.plan_apply import PlannedChanges
from myaccel.actions.settings.mycnf import OptionFileSetting
from myaccel.actions.settings.server_binary import ServerBinarySetting
from myaccel.actions.target import CommandServer, SandboxServer, SystemdServer, UnmanagedServer
from myaccel.builder.manifest import BuildManifest
from myaccel.cli.main import cli
from myaccel.clone.preflight import RestartMethod
from myaccel.env import Environment, using
from myaccel.errors import UsageError
from myaccel.rules.model import Plan
from myaccel.server.flavor import parse_binary_version
from myaccel.server.sandbox import ServerInstall

INSTALL = str(Path(NEW).parent.parent)
CONF = "/etc/mysql/conf.d"
VERSION_LINE = "mariadbd  Ver {}-MariaDB for Linux on x86_64 (Source distribution)"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """test_swap_unit_binary's fixture unit, with systemd running and a conf.d."""
    r = tmp_path / "root"
    (r / "lib/systemd/system").mkdir(parents=True)
    (r / "lib/systemd/system" / UNIT).write_text(UNIT_TEXT)
    for d in ("etc/systemd/system", "run/systemd/system", CONF.lstrip("/")):
        (r / d).mkdir(parents=True)
    _exe(r, OLD)
    _exe(r, NEW)
    return r


def install(version: str = "10.11.18") -> ServerInstall:
    v = parse_binary_version(VERSION_LINE.format(version))
    assert v is not None
    return ServerInstall(binary=Path(OLD), basedir=Path("/usr"), version=v)


# ---------------------------------------------------------------- refusals before any work


def test_swap_needs_a_systemd_unit() -> None:
    command = RestartMethod(CommandServer, "/usr/local/sbin/restart-db")
    with pytest.raises(UsageError, match="has none known") as err:
        swap_unit(command, None)
    assert "--server-unit UNIT" in err.value.hint and "leave out --swap-binary" in err.value.hint
    assert swap_unit(command, "mariadb.service") == "mariadb.service"  # --server-unit wins
    assert swap_unit(RestartMethod(SystemdServer, "mysql.service"), None) == "mysql.service"
    with pytest.raises(UsageError, match="myaccel sandbox 'prod'") as err:
        swap_unit(RestartMethod(SandboxServer, "prod"), None)
    assert "--sandbox prod --build --swap-binary" in err.value.hint
    with pytest.raises(UsageError, match="none known"):
        swap_unit(RestartMethod(UnmanagedServer, "pid 7 runs outside any systemd unit"), None)


def test_the_unit_must_run_the_servers_binary_under_a_running_systemd(root: Path) -> None:
    assert check_unit_runs(root, UNIT, root / OLD.lstrip("/")) == OLD
    assert check_unit_runs(root, UNIT, None) == OLD  # a process not readable: the unit's word
    with pytest.raises(UsageError, match="runs /usr/sbin/mariadbd, the server's process runs"):
        check_unit_runs(root, UNIT, root / NEW.lstrip("/"))
    with pytest.raises(UsageError, match="not installed or its ExecStart names no server"):
        check_unit_runs(root, "mysql.service", None)
    (root / "run/systemd/system").rmdir()
    with pytest.raises(UsageError, match="systemd is not running"):
        check_unit_runs(root, UNIT, None)


def test_a_build_of_another_version_is_refused(tmp_path: Path) -> None:
    spec = BuildSpec(build_dir=tmp_path / "b")
    check_build_version(spec, install())  # nothing there yet: built later
    (tmp_path / "b").mkdir()
    for status in ("running", "complete"):
        BuildManifest(status=status, source={"version": "10.11.19"}).save(tmp_path / "b")
        with pytest.raises(
            UsageError, match=r"holds a build of 10\.11\.19, the server runs 10\.11\.18"
        ):
            check_build_version(spec, install())
    BuildManifest(status="complete", source={"version": "10.11.18"}).save(tmp_path / "b")
    check_build_version(spec, install())


def test_cli_accepts_build_with_server_options_but_not_basedir(myaccel_home: Path) -> None:
    r = CliRunner().invoke(
        cli, ["accelerate", "--build", "--socket", "/tmp/x.sock", "--basedir", "/opt/x"]
    )
    assert r.exit_code != 0 and "--basedir chooses a sandbox's server" in r.stderr
    r = CliRunner().invoke(cli, ["accelerate", "--socket", "/tmp/x.sock", "--swap-binary"])
    assert r.exit_code != 0 and "go(es) with --build" in r.stderr


# ---------------------------------------------------------------- the swap after the plan


def window(qps: float) -> Window:
    return Window("w", 5.0, qps=[qps, qps * 1.01, qps * 0.99, qps], threads_running=[1.0] * 4)


class Notes:
    """The progress: its notes, steps as ``== title``."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.note = self.lines.append

    def step(self, title: str) -> None:
        self.note(f"== {title}")


def _plan() -> Plan:
    return Plan(
        created_at="2026-11-25T00:00:00+00:00",
        myaccel_version="test",
        facts_digest="test",
        hostname=None,
        recommendations=[],
    )


def _applied_plan(root: Path, jdir: Path) -> Path:
    """The plan's journal, applied: one restart-only option in the managed file."""
    s = OptionFileSetting("mysqld", "innodb_log_buffer_size", root=root, conf_dir=CONF)
    res = apply_changes([(s, "64M")], jdir, plan_id="p", facts_digest="d")
    assert res.journal_path is not None
    return Path(res.journal_path)


def _setup(root: Path, tmp_path: Path, after_qps: float, fail_first_start: bool = False) -> Any:
    jdir = journals_dir()  # the swap's journal goes there too
    before = tree(root)
    jplan = _applied_plan(root, jdir)
    starts: list[tuple[str | None, bool]] = []

    def start(argv: tuple[str, ...]) -> Recording:
        unit_binary = ServerBinarySetting(UNIT, root=root).read()
        plan_file = (root / CONF.lstrip("/") / "99-myaccel.cnf").exists()
        starts.append((unit_binary, plan_file))
        fail = fail_first_start and len(starts) == 1
        return Recording(returncode=1 if fail else 0, stderr="Job failed" if fail else "")

    fake = versions(root).on(["systemctl"], Recording()).on(["systemctl", "start"], start)
    windows = iter([window(100.0), window(after_qps)])
    sb = ServerBuild(
        BuildSpec(build_dir=Path(INSTALL).parent, swap_binary=True),
        window_s=1,
        settle_s=0,
        root=root,
        runner=lambda argv: None,
        window=lambda h, label, s: (next(windows), []),
        health=lambda h, expected: [],
        install=install(),
        unit=UNIT,
        built=BuiltServer(Path(INSTALL), Path(INSTALL).parent, True, 0.0, 0.0),
        swap_gate=(True, "improved"),
    )
    result = AccelerateResult(
        out_dir=tmp_path,
        facts=None,  # type: ignore[arg-type]
        plan=_plan(),
        comparison=SimpleNamespace(  # type: ignore[arg-type]
            baseline_label="distro defaults",
            candidate_label="distro + plan",
            geomean_delta_pct=5.0,
            geomean_ci_low_pct=1.0,
            geomean_ci_high_pct=9.0,
        ),
        journal=jplan,
        figures=[CLONE_ARMS_FIGURES, "from the live server: the plan"],
    )
    handle = SystemdServer(None, Path(CONF), UNIT)
    pc = PlannedChanges(restart_needed=True)
    return SimpleNamespace(
        sb=sb, result=result, handle=handle, pc=pc, fake=fake, starts=starts, before=before,
        jplan=jplan, jdir=jdir,
    )  # fmt: skip


def _systemctl(fake: ReplayRunner) -> list[tuple[str, ...]]:
    return [a[1:] for a in fake.argvs("run") if a[0] == "systemctl"]


def test_the_swap_runs_after_the_plan_and_stays_without_a_breach(
    root: Path, tmp_path: Path, myaccel_home: Path
) -> None:
    t = _setup(root, tmp_path, after_qps=101.0)
    notes = Notes()
    with using(Environment(runner=t.fake)):
        done = t.sb.after_apply(t.result, t.handle, t.pc, notes)
    assert done.swap_journal is not None and Journal.load(done.swap_journal).status == "applied"
    assert Journal.load(t.jplan).status == "applied"  # the plan stays too
    assert ServerBinarySetting(UNIT, root=root).read() == NEW
    assert _systemctl(t.fake) == [("stop", UNIT), ("start", UNIT)]
    assert t.starts == [(NEW, True)]  # the build starts with the plan's file in place
    assert done.figures[-1] == LIVE_SWAP_FIGURES and done.swap_live is not None
    assert notes.lines[0] == f"== swap the binary of {UNIT}, guarded"
    assert (tmp_path / "existing-build.json").is_file()


def test_a_breach_after_the_swap_rolls_back_the_swap_then_the_plan(
    root: Path, tmp_path: Path, myaccel_home: Path
) -> None:
    t = _setup(root, tmp_path, after_qps=30.0)
    with using(Environment(runner=t.fake)), pytest.raises(GuardrailBreach) as err:
        t.sb.after_apply(t.result, t.handle, t.pc, Notes())
    assert (
        "throughput fell" in err.value.message and "plan was rolled back too" in err.value.message
    )
    # swap; undo the swap (the distro binary, the plan still there); undo the plan
    assert t.starts == [(NEW, True), (OLD, True), (OLD, False)]
    assert _systemctl(t.fake) == [("stop", UNIT), ("start", UNIT)] * 3
    assert tree(root) == t.before  # drop-in, its directory and the managed file gone
    statuses = [Journal.load(p).status for p in sorted(t.jdir.glob("*.json"))]
    assert statuses == ["rolled-back", "rolled-back"]  # the plan's, then the swap's


def test_a_build_that_does_not_start_rolls_back_both(
    root: Path, tmp_path: Path, myaccel_home: Path
) -> None:
    t = _setup(root, tmp_path, after_qps=100.0, fail_first_start=True)
    with using(Environment(runner=t.fake)), pytest.raises(GuardrailBreach, match="rolled back"):
        t.sb.after_apply(t.result, t.handle, t.pc, Notes())
    assert t.starts == [(NEW, True), (OLD, True), (OLD, False)]
    assert tree(root) == t.before
    assert Journal.load(t.jplan).status == "rolled-back"


def test_no_swap_without_a_win_on_the_clone_or_without_swap_binary(
    root: Path, tmp_path: Path, myaccel_home: Path
) -> None:
    t = _setup(root, tmp_path, after_qps=100.0)
    t.sb.swap_gate = (False, "a workload regressed")
    notes = Notes()
    with using(Environment(runner=t.fake)):
        assert t.sb.after_apply(t.result, t.handle, t.pc, notes) is t.result
        t.sb.unit = None  # no --swap-binary
        assert t.sb.after_apply(t.result, t.handle, t.pc, notes) is t.result
    assert notes.lines == [
        "binary not swapped: build + plan does not beat distro + plan (a workload regressed)"
    ]
    assert _systemctl(t.fake) == [] and ServerBinarySetting(UNIT, root=root).read() == OLD


def test_measured_decides_the_swap_by_the_plans_rule(
    root: Path, tmp_path: Path, myaccel_home: Path
) -> None:
    t = _setup(root, tmp_path, after_qps=100.0)

    def cmp(verdict: str, low: float) -> Any:
        return SimpleNamespace(
            cells=[SimpleNamespace(verdict=verdict)], geomean_ci_low_pct=low,
            geomean_delta_pct=low + 5, geomean_ci_high_pct=low + 10,
            baseline_label="distro + plan", candidate_label="build + plan",
        )  # fmt: skip

    for verdict, low, ok in (("improved", 3.0, True), ("inconclusive", 3.0, False)):
        t.sb.ab = SimpleNamespace(more={"build-vs-plan": cmp(verdict, low)})
        notes = Notes()
        base = AccelerateResult(**{**t.result.__dict__, "figures": ["from the clone: x"]})
        done = t.sb.measured(base, notes)  # type: ignore[arg-type]
        assert t.sb.swap_gate[0] is ok and set(done.more) == {"build-vs-plan"}
        assert done.build is t.sb.built
        assert ("it wins" in notes.lines[0]) is ok


def test_a_server_that_already_runs_the_build_is_refused() -> None:
    built = BuiltServer(Path(INSTALL), Path(INSTALL).parent, True, 0.0, 0.0)
    swapped = ServerInstall(binary=Path(NEW), basedir=Path(INSTALL), version=install().version)
    with pytest.raises(UsageError, match="already runs the build") as err:
        ServerBuild(BuildSpec(), install=swapped)._refuse_running(built)
    assert "myaccel rollback" in err.value.hint
    ServerBuild(BuildSpec(), install=install())._refuse_running(built)  # the distro binary


def test_force_swaps_without_a_win_on_the_clone_still_guarded(
    root: Path, tmp_path: Path, myaccel_home: Path
) -> None:
    """--force: the plan and the swap go ahead without a win on the clone (a second binary
    of the same version, as in the lab), under the same guard."""
    t = _setup(root, tmp_path, after_qps=101.0)
    t.sb.swap_gate = (False, "a workload regressed")
    t.sb.force = True
    with using(Environment(runner=t.fake)):
        done = t.sb.after_apply(t.result, t.handle, t.pc, Notes())
    assert done.swap_journal is not None and Journal.load(done.swap_journal).status == "applied"
    assert ServerBinarySetting(UNIT, root=root).read() == NEW
