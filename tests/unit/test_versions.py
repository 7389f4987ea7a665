"""The version headroom's pieces (``accelerate --versions``): the next release line
installed here, the catalog's differences between two versions, the arms and their own
data in an interleaved campaign, and the datadir check that lets only a newer line of
the same flavor run on the upgraded copy."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from myaccel.accelerate.upgrade import UPGRADED, UpgradedDataset, upgrade_argv, upgrade_tool
from myaccel.accelerate.versions import (
    VERSION_ARM,
    VERSION_PLAN_ARM,
    VersionHeadroom,
    next_version,
    version_arms,
)
from myaccel.bench import ab
from myaccel.bench.profiles import get_profile
from myaccel.errors import SandboxError, ToolMissing
from myaccel.knobs.catalog import Catalog
from myaccel.knobs.version_diff import version_diff
from myaccel.server.flavor import ServerVersion
from myaccel.server.sandbox import ServerInstall
from myaccel.server.sandbox.datadir import DatadirMarkers, check_compatible, series_key


def install(flavor: str, version: str, base: str = "/opt/x") -> ServerInstall:
    major, minor, patch = (int(p) for p in version.split("."))
    return ServerInstall(
        binary=Path(base) / "sbin" / ("mariadbd" if flavor == "mariadb" else "mysqld"),
        basedir=Path(base),
        version=ServerVersion(flavor, major, minor, patch),
    )


def mariadb(version: str) -> ServerVersion:
    major, minor, patch = (int(p) for p in version.split("."))
    return ServerVersion("mariadb", major, minor, patch)


# ------------------------------------------------------------------ the next version


def test_series_are_ordered_by_number_not_text() -> None:
    assert series_key("9.7") < series_key("10.11") < series_key("11.8") < series_key("26.7")
    assert sorted(["11.8", "10.6", "10.11", "9.7"], key=series_key) == [
        "9.7",
        "10.6",
        "10.11",
        "11.8",
    ]


def test_the_nearest_newer_line_installed_is_the_next_version() -> None:
    have = [
        install("mariadb", "10.11.19", "/usr"),
        install("mariadb", "12.3.1", "/opt/a"),
        install("mariadb", "11.8.9", "/opt/b"),
    ]
    got = next_version("mariadb", mariadb("10.11.19"), have)
    assert got.version.series == "11.8" and got.basedir == Path("/opt/b")
    assert next_version("mariadb", mariadb("11.8.9"), have).version.series == "12.3"


def test_no_newer_version_is_a_one_line_error_with_the_install_script() -> None:
    with pytest.raises(ToolMissing) as exc:
        next_version("mariadb", mariadb("10.11.19"), [install("mariadb", "10.11.19", "/usr")])
    assert "no MariaDB newer than 10.11.19 is installed here (found: 10.11.19)" in str(
        exc.value.message
    )
    assert "scripts/ensure-mariadb.sh" in exc.value.hint
    assert "\n" not in exc.value.message


def test_a_server_already_on_the_newest_line_the_project_installs_is_told_so() -> None:
    with pytest.raises(ToolMissing) as exc:
        next_version("mariadb", mariadb("11.8.9"), [install("mariadb", "11.8.9")])
    assert "no MariaDB newer than 11.8" in exc.value.hint
    assert "--versions" in exc.value.hint


# ------------------------------------------------------------------ what the catalog says


def test_the_catalog_diff_follows_each_knobs_history() -> None:
    cat = Catalog.load()
    d = version_diff("mariadb", "10.11.19", "11.8.9", catalog=cat)
    old, new = cat.for_server("mariadb", "10.11.19"), cat.for_server("mariadb", "11.8.9")
    for name, _ in d.removed:
        assert old.exists(name) and not new.exists(name)
    for name in d.added:
        assert new.exists(name) and not old.exists(name)
    for c in d.defaults:
        assert old.knob(c.name).default_value != new.knob(c.name).default_value or (
            old.knob(c.name).auto != new.knob(c.name).auto
        )
    # every knob that changes presence or default between the two is listed
    changed = {
        s.name
        for s in cat.specs
        if old.knob(s.name).exists != new.knob(s.name).exists
        or (
            old.knob(s.name).exists
            and (old.knob(s.name).default_value, old.knob(s.name).auto)
            != (new.knob(s.name).default_value, new.knob(s.name).auto)
        )
    }
    listed = {n for n, _ in d.removed} | set(d.added) | {c.name for c in d.defaults}
    assert listed == changed and listed  # 10.11 -> 11.8 changes something
    assert d.old == "MariaDB 10.11.19" and d.new == "MariaDB 11.8.9"


def test_the_same_version_has_no_difference() -> None:
    d = version_diff("mariadb", "10.11.19", "10.11.19")
    assert d.lines() == [] and not d.removed and not d.defaults


def test_a_removed_knob_the_configuration_sets_is_named() -> None:
    d = version_diff("mariadb", "10.11.19", "11.8.9")
    assert d.removed, "the catalog records a knob 11.8 removed"
    gone = d.removed[0][0]
    marked = version_diff("mariadb", "10.11.19", "11.8.9", configured=[gone.replace("_", "-")])
    assert marked.configured_removed() == [gone]
    assert f"{gone} (set in this configuration)" in " ".join(marked.lines())
    head = VersionHeadroom(
        current=mariadb("10.11.19"), newer=install("mariadb", "11.8.9"), diff=marked
    )
    advice = head.advice()
    assert any("one way" in a and "MariaDB 10.11.19 cannot start" in a for a in advice)
    assert any(f"sets {gone}" in a for a in advice)
    assert head.summary()["removed"][0]["knob"] == gone  # type: ignore[index]


# ------------------------------------------------------------------ the arms


def accelerate_request(tmp_path: Path) -> ab.AbRequest:
    cand = tmp_path / "tuned.cnf"
    cand.write_text("[mysqld]\ninnodb_log_buffer_size=64M\n")
    return ab.AbRequest(
        sandbox="s",
        profile=get_profile("quick"),
        baseline=ab.Arm("baseline"),
        candidate=ab.Arm("candidate", config=cand),
        command=["myaccel", "accelerate", "--versions"],
    )


def test_version_arms_run_the_newer_server_on_the_upgraded_copy(tmp_path: Path) -> None:
    newer = install("mariadb", "11.8.9", "/opt/myaccel/mariadb-11.8")
    head = VersionHeadroom(
        current=mariadb("10.11.19"),
        newer=newer,
        diff=version_diff("mariadb", "10.11.19", "11.8.9"),
    )
    req = version_arms(accelerate_request(tmp_path), head)
    arms = req.arms
    assert list(arms) == ["baseline", "candidate", VERSION_ARM, VERSION_PLAN_ARM]
    for name in (VERSION_ARM, VERSION_PLAN_ARM):
        a = arms[name]
        assert a.basedir == newer.basedir and a.dataset == UPGRADED and a.newer
        assert a.options().newer and a.options().basedir == newer.basedir
    assert arms[VERSION_ARM].config is None  # the same configuration as the server's
    assert arms[VERSION_PLAN_ARM].config == arms["candidate"].config
    assert arms["baseline"].dataset is None and not arms["baseline"].newer
    assert [(p.name, p.baseline, p.candidate) for p in req.pairs] == [
        ("version", "baseline", VERSION_ARM),
        ("version-plan", "baseline", VERSION_PLAN_ARM),
        ("version-plan-vs-plan", "candidate", VERSION_PLAN_ARM),
    ]
    assert (req.baseline_label, req.candidate_label) == ("10.11 as is", "10.11 + plan")
    assert [p.candidate_label for p in req.pairs] == ["11.8 as is", "11.8 + plan", "11.8 + plan"]
    (made,) = req.datasets
    assert isinstance(made, UpgradedDataset) and made.snapshot == UPGRADED


class FakeSandbox:
    """What a campaign asks of a sandbox, in order (no server)."""

    pid = 4242

    def __init__(self) -> None:
        self.log: list[str] = []

    def stop(self) -> None:
        pass

    def snapshot_restore(self, name: str) -> None:
        self.log.append(f"restore {name}")

    def snapshot_delete(self, name: str) -> None:
        self.log.append(f"delete {name}")

    def start(self, options: object, wrapper: object = (), owner: object = None) -> None:
        self.log.append("start")


@pytest.mark.parametrize("workload", ["oltp_read_only", "oltp_write_only"])
def test_each_arm_runs_on_its_own_data_read_only_runs_too(
    monkeypatch: pytest.MonkeyPatch, workload: str
) -> None:
    arms = {
        "baseline": ab.Arm("baseline"),
        "candidate": ab.Arm("candidate", sets={"innodb_log_buffer_size": "64M"}),
        "version": ab.Arm("version", basedir=Path("/opt/n"), dataset="up", newer=True),
    }
    on_disk: list[str] = []
    snaps = {name: f"snap-{name}" for name in arms}
    data_of = {f"snap-{n}": a.data for n, a in arms.items()}
    sb = FakeSandbox()
    seen: list[tuple[str, str]] = []

    def fake_measure(ctx: object, spec: object, *, index: int, arm: str | None = None) -> object:
        restores = [e.split()[1] for e in sb.log if e.startswith("restore")]
        on_disk.append(data_of[restores[-1]] if restores else "?")
        seen.append((str(arm), on_disk[-1]))
        return SimpleNamespace(validity=SimpleNamespace(reasons=[], failure="ok"))

    def fake_snapshots(sb_: object, arms_: dict[str, ab.Arm], note: object) -> dict[str, str]:
        sb.log.append(f"restore snap-{list(arms_)[-1]}")  # arm_snapshots ends on the last
        return snaps

    monkeypatch.setattr(ab, "measure_run", fake_measure)
    monkeypatch.setattr(ab, "arm_snapshots", fake_snapshots)
    prof = replace(get_profile("quick"), workloads=(workload,), threads=(2,), runs_per_arm=3)
    plan = ab.AbPlan(sandbox=sb, profile=prof, arms=arms, prewarm=False)  # type: ignore[arg-type]
    ab.run_campaign(plan, SimpleNamespace(records=[], server_pid=None))  # type: ignore[arg-type]
    assert len(seen) == 9
    # every run found its arm's data on disk: the upgraded copy for the newer server only
    assert all(data == arms[a].data for a, data in seen)
    restores = [e for e in sb.log if e.startswith("restore")][1:]
    if workload == "oltp_read_only":
        # a read-only run restores only when the data on disk is another arm's (here:
        # when the version arm comes or goes), not before every run
        assert len(restores) < len(seen)
    else:
        assert len(restores) == len(seen)


def test_arm_without_own_data_keeps_the_old_campaign_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[str] = []
    monkeypatch.setattr(ab, "arm_snapshots", lambda *a: called.append("snap") or {})
    monkeypatch.setattr(
        ab,
        "measure_run",
        lambda ctx, spec, *, index, arm=None: SimpleNamespace(
            validity=SimpleNamespace(reasons=[], failure="ok")
        ),
    )
    prof = replace(
        get_profile("quick"), workloads=("oltp_read_only",), threads=(2,), runs_per_arm=2
    )
    sb = FakeSandbox()
    arms = {"baseline": ab.Arm("baseline"), "candidate": ab.Arm("candidate", sets={"a": "1"})}
    plan = ab.AbPlan(sandbox=sb, profile=prof, arms=arms, prewarm=False)  # type: ignore[arg-type]
    ab.run_campaign(plan, SimpleNamespace(records=[], server_pid=None))  # type: ignore[arg-type]
    assert called == [] and not any(e.startswith("restore") for e in sb.log)


def test_the_campaign_ends_on_the_sandboxs_own_dataset() -> None:
    class Snaps(FakeSandbox):
        def snapshot_list(self) -> list[object]:
            return [SimpleNamespace(name=ab.SNAPSHOT), SimpleNamespace(name=UPGRADED)]

    sb = Snaps()
    ab.restore_base_data(sb, [UpgradedDataset(install("mariadb", "11.8.9"))], lambda m: None)  # type: ignore[arg-type]
    assert sb.log == [f"restore {ab.SNAPSHOT}", f"delete {UPGRADED}"]


# ------------------------------------------------------------------ the upgrade tool


def test_the_upgrade_tool_is_the_flavors_own_next_to_the_newer_server(tmp_path: Path) -> None:
    base = tmp_path / "mariadb-11.8"
    (base / "bin").mkdir(parents=True)
    tool = base / "bin" / "mariadb-upgrade"
    tool.write_text("")
    assert upgrade_tool(install("mariadb", "11.8.9", str(base))) == tool
    tool.unlink()
    with pytest.raises(SandboxError) as exc:
        upgrade_tool(install("mariadb", "11.8.9", str(base)))
    assert "mariadb-upgrade or mysql_upgrade not found" in exc.value.message
    # MySQL upgrades the data directory itself when the newer server starts
    assert upgrade_tool(install("mysql", "9.7.0", str(base))) is None


def test_the_upgrade_connects_over_the_sandbox_socket_without_a_password() -> None:
    sb = SimpleNamespace(
        socket=Path("/h/s.sock"), connect_params=lambda: SimpleNamespace(user="root")
    )
    argv = upgrade_argv(Path("/opt/m/bin/mariadb-upgrade"), sb)  # type: ignore[arg-type]
    assert argv == [
        "/opt/m/bin/mariadb-upgrade",
        "--no-defaults",
        "--socket=/h/s.sock",
        "--user=root",
    ]
    assert not any("password" in a for a in argv)


# ------------------------------------------------------------------ the datadir check


def test_only_a_newer_line_of_the_same_flavor_may_run_the_copy() -> None:
    new = install("mariadb", "11.8.9")
    markers = DatadirMarkers("mariadb", "10.11.19", ("mariadb_upgrade_info=10.11.19-MariaDB",))
    with pytest.raises(SandboxError):
        check_compatible("s", "mariadb", "10.11.19", new, markers)
    check_compatible("s", "mariadb", "10.11.19", new, markers, newer=True)
    # never an older server, never another flavor
    old = install("mariadb", "10.6.21")
    with pytest.raises(SandboxError):
        check_compatible("s", "mariadb", "10.11.19", old, markers, newer=True)
    with pytest.raises(SandboxError):
        check_compatible("s", "mariadb", "10.11.19", install("mysql", "9.7.0"), None, newer=True)
    # the 10.11 server on the upgraded copy: refused by its marker, before it starts
    upgraded = DatadirMarkers("mariadb", "11.8.9", ("mariadb_upgrade_info=11.8.9-MariaDB",))
    with pytest.raises(SandboxError) as exc:
        check_compatible("s", "mariadb", "10.11.19", install("mariadb", "10.11.19"), upgraded)
    assert "11.8.9" in exc.value.message


@pytest.mark.parametrize("extra", [["--build"], ["--target", "5"]])
def test_versions_with_another_multi_arm_option_is_refused_first(
    extra: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from myaccel.cli.main import cli

    monkeypatch.setenv("MYACCEL_HOME", str(tmp_path / "home"))
    res = CliRunner().invoke(cli, ["accelerate", "--sandbox", "nosuch", "--versions", *extra])
    assert res.exit_code == 2, res.output
    assert "--versions adds two arms to the campaign" in res.output
    assert not (tmp_path / "home" / "sandboxes" / "nosuch").exists()
