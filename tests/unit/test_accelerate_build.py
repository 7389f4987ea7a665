"""`accelerate --build` without a compiler or a server: the N-arm order, the build arm's
reuse, resume and estimate (the build pipeline and the source lookup replaced by fakes),
the journaled sandbox basedir, the three-arm report table and the option checks."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

from myaccel.accelerate import build_arm
from myaccel.accelerate.build_arm import (
    REFERENCE_S,
    BuildNotes,
    BuildSpec,
    complete_build,
    ensure_build,
    remaining_s,
    stage_estimates,
)
from myaccel.bench.ab import AbRequest, Arm, ArmPair, abba_order, interleaved_order
from myaccel.bench.profiles import get_profile
from myaccel.builder.manifest import BuildManifest, StageRecord
from myaccel.cli.main import cli
from myaccel.errors import UsageError


def test_interleaved_order_rotates_and_two_arms_stay_abba() -> None:
    assert interleaved_order(["a", "b", "c"], 4) == [*"abc", *"bca", *"cab", *"abc"]
    assert interleaved_order(["baseline", "candidate"], 3) == abba_order(3)
    assert abba_order(2) == ["baseline", "candidate", "candidate", "baseline"]


def test_ab_request_more_arms_keep_the_two_arm_names_first() -> None:
    req = AbRequest(
        sandbox="s",
        profile=get_profile("quick"),
        baseline=Arm("baseline"),
        candidate=Arm("candidate"),
        command=[],
        more=(Arm("build", basedir=Path("/b")),),
        pairs=(ArmPair("build", "baseline", "build", "d", "b"),),
    )
    assert list(req.arms) == ["baseline", "candidate", "build"]


def _man(stages: list[tuple[str, str, float | None]], **kw: Any) -> BuildManifest:
    return BuildManifest(
        stages=[StageRecord(name=n, status=s, duration_s=d) for n, s, d in stages],  # type: ignore[arg-type]
        **kw,
    )


def test_estimate_scales_compiles_by_cores_and_prefers_a_previous_build() -> None:
    two = stage_estimates(None, 2)
    four = stage_estimates(None, 4)
    assert two == REFERENCE_S
    assert four["build"] == pytest.approx(REFERENCE_S["build"] / 2)
    assert four["train"] == REFERENCE_S["train"]  # not a parallel compile
    prev = _man([("build", "done", 600.0), ("train", "done", 30.0)])
    est = stage_estimates(prev, 2)
    assert est["build"] == 600.0 and est["train"] == 30.0
    current = _man([("configure-instrumented", "done", 1.0), ("build-instrumented", "done", 9.0)])
    left = remaining_s(est, current)
    assert left == pytest.approx(
        sum(est.values()) - est["configure-instrumented"] - est["build-instrumented"]
    )


def test_complete_build_reused_refused_or_absent(tmp_path: Path) -> None:
    assert complete_build(tmp_path, "10.11.18") is None  # no manifest
    inst = tmp_path / "install"
    inst.mkdir()
    _man([], status="running", install_dir=str(inst)).save(tmp_path)
    assert complete_build(tmp_path, "10.11.18") is None  # unfinished: resumed, not reused
    _man([], status="complete", source={"version": "10.11.18"}, install_dir=str(inst)).save(
        tmp_path
    )
    got = complete_build(tmp_path, "10.11.18")
    assert got is not None and got.reused and got.install == inst
    with pytest.raises(UsageError, match=r"10\.11\.18, the server is 10\.11\.19"):
        complete_build(tmp_path, "10.11.19")


@pytest.fixture
def fake_pipeline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    """describe_installed, resolve_source and build replaced: records what build gets."""
    from myaccel.builder import distsrc, pipeline, tree

    seen: dict[str, Any] = {}
    server = distsrc.InstalledServer("/usr/sbin/mariadbd", "mariadb", "10.11.18")
    monkeypatch.setattr(distsrc, "describe_installed", lambda b: server)
    monkeypatch.setattr(
        distsrc, "resolve_source", lambda s, h, src, say=None: (tmp_path / "src", {"from": src})
    )
    monkeypatch.setattr(tree, "detect_tree", lambda p: SimpleNamespace(flavor="mariadb"))
    monkeypatch.setattr(build_arm, "previous_build", lambda flavor: None)

    def fake_build(source: Path, req: Any, out: Path, **kw: Any) -> BuildManifest:
        seen.update(source=source, req=req, out=out, **kw)
        kw["progress"].stage_started("build", "compile")
        kw["progress"].stage_finished("build", "done", 1.0, "")
        return _man([], status="complete", out_dir=str(out), install_dir=str(out / "install"))

    monkeypatch.setattr(pipeline, "build", fake_build)
    return seen


def test_ensure_build_builds_new_and_resumes_unfinished(
    fake_pipeline: dict[str, Any], tmp_path: Path
) -> None:
    said: list[str] = []
    out = tmp_path / "b"
    got = ensure_build(
        BuildSpec(build_dir=out, train_profile="quick", jobs=2), Path("/x"), said.append
    )
    req = fake_pipeline["req"]
    assert req.opts == ("lto", "pgo") and req.jobs == 2 and req.train_profile == "quick"
    assert fake_pipeline["resume"] is False and fake_pipeline["out"] == out
    assert not got.reused and got.install == out / "install"
    total = sum(REFERENCE_S.values()) / 60
    assert any(f"estimate {total:.0f} min on 2 job(s)" in s for s in said)
    assert any(s.startswith("build [build] compile (about") for s in said)
    # an interrupted build: its manifest exists, not complete -> resumed, estimate shorter
    out.mkdir()
    _man([("build-instrumented", "done", 5.0)], status="failed").save(out)
    said.clear()
    ensure_build(BuildSpec(build_dir=out, jobs=2), Path("/x"), said.append)
    assert fake_pipeline["resume"] is True
    left = (sum(REFERENCE_S.values()) - REFERENCE_S["build-instrumented"]) / 60
    assert any("resuming PGO+LTO" in s and f"estimate {left:.0f} min" in s for s in said)


def test_ensure_build_reuses_a_complete_build_without_building(
    fake_pipeline: dict[str, Any], tmp_path: Path
) -> None:
    (tmp_path / "install").mkdir()
    _man(
        [],
        status="complete",
        source={"version": "10.11.18"},
        install_dir=str(tmp_path / "install"),
    ).save(tmp_path)
    got = ensure_build(BuildSpec(build_dir=tmp_path), Path("/x"), lambda s: None)
    assert got.reused and "req" not in fake_pipeline


def test_build_notes_progress_once_a_minute_with_eta() -> None:
    said: list[str] = []
    now = [0.0]
    n = BuildNotes(said.append, {"build": 100.0}, 100.0, clock=lambda: now[0])
    n.stage_started("build", "compile")
    n.stage_progress(10, 100, "")
    now[0] = 61.0
    n.stage_progress(10, 100, "")  # 61 s for 10 edges: about 9 min to go
    now[0] = 70.0
    n.stage_progress(20, 100, "")  # under a minute since the last line: silent
    assert said[1] == "build [build] 10/100, 61 s, about 9 min to go" and len(said) == 2
    n.stage_finished("build", "done", 70.0, "")
    assert n.left_s == 0.0


def test_sandbox_basedir_setting_journaled_and_reverted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from myaccel.actions import apply_changes, rollback
    from myaccel.actions.settings.registry import setting_from_spec
    from myaccel.actions.settings.sandbox import SandboxBasedirSetting
    from myaccel.server.sandbox import install

    sdir = tmp_path / "sb"
    sdir.mkdir()
    state = {"name": "sb", "version": "10.11.18", "basedir": "/usr", "binary": "/usr/sbin/m"}
    (sdir / "state.json").write_text(json.dumps(state))
    before = (sdir / "state.json").read_bytes()

    def fake_find(basedir: Path) -> Any:
        ver = "10.11.19" if "other" in str(basedir) else "10.11.18"
        return SimpleNamespace(
            binary=basedir / "sbin/mariadbd", basedir=basedir, version=SimpleNamespace(text=ver)
        )

    monkeypatch.setattr(install, "find_server", fake_find)
    s = SandboxBasedirSetting("sb", root=sdir)
    assert s.target == "sandbox:sb/basedir" and not s.needs_root
    assert s.plan("/usr") is None
    with pytest.raises(UsageError, match=r"holds a 10\.11\.18 datadir"):
        s.plan(str(tmp_path / "other"))
    res = apply_changes([(s, str(tmp_path / "b"))], tmp_path / "j", server={"sandbox": "sb"})
    after = json.loads((sdir / "state.json").read_text())
    assert after["basedir"] == str(tmp_path / "b") and after["custom_basedir"] is True
    assert after["binary"] == str(tmp_path / "b/sbin/mariadbd")
    again = setting_from_spec("sandbox", s.spec())
    assert again.target == s.target
    rollback(Path(res.journal_path or ""))
    assert (sdir / "state.json").read_bytes() == before


def test_cli_build_options_need_build(myaccel_home: Path) -> None:
    r = CliRunner().invoke(cli, ["accelerate", "--swap-binary"])
    assert r.exit_code != 0 and "go(es) with --build" in r.stderr
    r = CliRunner().invoke(cli, ["accelerate", "--build", "--train", "nope"])
    assert r.exit_code != 0 and "unknown profile 'nope'" in r.stderr
    # --build on an existing server: tests/unit/test_accelerate_existing_build.py
    r = CliRunner().invoke(cli, ["accelerate", "--socket", "/tmp/x.sock", "--basedir", "/x"])
    assert r.exit_code != 0 and "--basedir chooses a sandbox's server" in r.stderr


def test_arms_table_orders_arms_and_comparisons() -> None:
    from myaccel.report.content.experiments import Experiment, arms_tables

    camp = SimpleNamespace(campaign_id="c1", kind="ab")

    def exp(base: str, cand: str) -> Experiment:
        cmp = SimpleNamespace(cells=[SimpleNamespace(workload="ro", threads=8, delta_pct=1.0)])
        return Experiment(
            title="t",
            source=Path("/r/comparison.json"),
            comparison=cmp,  # type: ignore[arg-type]
            provisional=False,
            arms=[base, cand],
            runs={},
            campaign=camp,  # type: ignore[arg-type]
        )

    d, p, b = "distro defaults", "distro + plan", "build + plan"
    lone = Experiment("x", Path("/x"), None, False, ["a"], {}, None)
    (t,) = arms_tables([exp(p, b), exp(d, b), exp(d, p), lone])
    assert t.arms == [d, p, b]
    assert t.columns == [f"{p} vs {d}", f"{b} vs {d}", f"{b} vs {p}"]
    assert [(r.workload, r.threads, r.medians) for r in t.rows] == [("ro", 8, [None] * 3)]
    assert t.title == "ab campaign c1"
    assert arms_tables([exp(d, p)]) == []  # two arms: the usual section only
