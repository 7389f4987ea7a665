"""`accelerate --build` end to end on a real sandbox: the three arms (distro defaults,
distro + plan, build + plan) interleaved in one campaign, the three-arm report table, and
``--swap-binary`` journaled and rolled back.

No compiler runs here: the "build" is a FAKE, a complete manifest next to an install tree
whose bin/, sbin/, lib/ and share/ are symbolic links to the system's /usr (the same
mariadbd as the distro arms, so the build + plan arm must measure like distro + plan)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from myaccel import accelerate
from myaccel.accelerate.request import AccelerateRequest, SandboxTarget
from myaccel.bench.profiles import Profile
from myaccel.builder.manifest import BuildManifest
from myaccel.cli.main import cli
from myaccel.server.sandbox import Sandbox
from myaccel.server.sandbox.install import find_server
from recorders import Notes

pytestmark = pytest.mark.integration

TINY = Profile(
    name="tiny",
    description="three-arm test",
    source="test",
    workloads=("oltp_read_only",),
    threads=(2,),
    tables=1,
    table_size=1000,
    duration_s=1,
    warmup_s=0,
    report_interval_s=1,
    runs_per_arm=2,
)


def fake_build(root: Path) -> Path:
    """A build directory whose 'install' is the system's server (see the module doc)."""
    inst = find_server()
    usr = inst.binary.parent.parent
    install = root / "install"
    install.mkdir(parents=True)
    for d in ("bin", "sbin", "lib", "share"):
        if (usr / d).is_dir():
            (install / d).symlink_to(usr / d)
    man = BuildManifest(
        status="complete",
        source={"flavor": inst.version.flavor, "version": inst.version.text, "path": "fake"},
        request={"opts": ["lto", "pgo"]},
        out_dir=str(root),
        install_dir=str(install),
    )
    man.save(root)
    return root


def test_accelerate_build_three_arms_and_swap(myaccel_home: Path, tmp_path: Path) -> None:
    build_dir = fake_build(tmp_path / "fake-build")
    out = tmp_path / "acc"
    progress = Notes()
    try:
        res = accelerate.run(
            AccelerateRequest(
                target=SandboxTarget(name="three"),
                profile=TINY,
                command=["myaccel", "accelerate", "--build"],
                out_dir=out,
                measure_storage=False,
                build=accelerate.BuildSpec(build_dir=build_dir, swap_binary=True),
            ),
            progress,  # type: ignore[arg-type]
        )
        assert res.build is not None and res.build.reused
        assert any("reusing the complete build" in ln for ln in progress.lines)
        arms = [ln.split()[1] for ln in progress.lines if ln.startswith("[")]
        # a run sysbench did not run as asked is left out and run again at once (bench/ab.py:
        # "running it again"): the same arm twice in a row, seen once in CI under load
        arms = [a for i, a in enumerate(arms) if i == 0 or a != arms[i - 1]]
        assert arms == ["baseline", "candidate", "build", "candidate", "build", "baseline"]
        assert set(res.more) == {"build", "build-vs-plan"}
        assert res.comparison.baseline_label == "distro defaults"
        assert res.more["build"].candidate_label == "build + plan"
        assert res.more["build-vs-plan"].baseline_label == "distro + plan"
        for name in ("comparison.json", "comparison-build.json", "comparison-build-vs-plan.json"):
            assert (out / "ab" / name).is_file()
        # swapped: the sandbox runs the build, journaled
        assert res.journal is not None and res.journal.is_file()
        sb = Sandbox.load("three")
        assert Path(sb.state.basedir) == build_dir / "install" and sb.is_running()
        rep = CliRunner().invoke(cli, ["report", str(out), "--out", str(tmp_path / "rep")])
        assert rep.exit_code == 0, rep.stderr
        md = (tmp_path / "rep" / "report.md").read_text()
        assert "## All arms" in md
        assert "distro defaults TPS | distro + plan TPS | build + plan TPS" in md
        assert "build + plan vs distro + plan" in md
        rb = CliRunner().invoke(cli, ["rollback"])
        assert rb.exit_code == 0, rb.stderr
        assert not Sandbox.load("three").state.custom_basedir
    finally:
        if Sandbox.exists("three"):
            Sandbox.load("three").destroy()
