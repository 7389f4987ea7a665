"""`accelerate --build` on an existing server (issue 17, build item 3): a "production"
sandbox running Debian's own MariaDB 10.11.18 binaries, reached by its socket and restarted
by a command like any server, and a REAL complete PGO+LTO build of the same version
(``--build-dir``, reused: nothing is compiled here).

The three arms run on the clone (distro defaults = the clone's own binary, the server's;
distro + plan; build + plan) in the sandbox mode's campaign; one run per arm decides
nothing, so nothing is applied to the server (the guarded apply is
test_accelerate_existing.py's); ``--swap-binary`` on this server (restarted by a command,
no unit) is refused before anything runs (systemd is not PID 1 here). Skipped when the trees are absent
(CI has none): MYACCEL_TEST_DISTRO_USR and MYACCEL_TEST_BUILD_DIR point elsewhere."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_accelerate_build_live import Notes
from test_accelerate_existing import _restart_command

from myaccel import accelerate as pipeline
from myaccel.accelerate.existing_build import CLONE_ARMS_FIGURES
from myaccel.actions import journals_dir
from myaccel.bench.profiles import ProfileOptions, build_profile
from myaccel.errors import UsageError
from myaccel.server.connection import ConnectParams
from myaccel.server.sandbox import Sandbox

pytestmark = pytest.mark.integration

DISTRO_USR = Path(os.environ.get("MYACCEL_TEST_DISTRO_USR", "/work/srcs/deb-10.11.18/root/usr"))
BUILD_DIR = Path(os.environ.get("MYACCEL_TEST_BUILD_DIR", "/work/srcs/b/deb-pgolto"))
if not ((DISTRO_USR / "sbin/mariadbd").is_file() and (BUILD_DIR / "manifest.json").is_file()):
    pytest.skip(
        f"needs Debian's MariaDB binaries ({DISTRO_USR}) and a complete build of the same "
        f"version ({BUILD_DIR})",
        allow_module_level=True,
    )


@pytest.fixture
def prod(myaccel_home: Path) -> Iterator[Sandbox]:
    sb = Sandbox.init("prod", basedir=DISTRO_USR, timeout_s=120)
    try:
        yield sb
    finally:
        Sandbox.destroy_named("prod")


def _request(prod: Sandbox, tmp_path: Path, *, swap: bool) -> pipeline.AccelerateRequest:
    conf_dir = tmp_path / "conf.d"
    conf_dir.mkdir(exist_ok=True)
    profile = build_profile(
        ProfileOptions(
            workloads=("oltp_read_only",),
            threads=(2,),
            duration_s=2,
            warmup_s=0,
            runs_per_arm=1,
            scale=0.01,
        )
    )
    return pipeline.AccelerateRequest(
        target=pipeline.ExistingServer(
            params=ConnectParams(
                host=None, port=3306, socket=str(prod.socket), user="root", password=None
            ),
            conf_dir=conf_dir,
            restart_command=_restart_command(prod, conf_dir),
            yes=True,
        ),
        profile=profile,
        command=["myaccel", "accelerate", "--build"],
        durability="relaxed",
        out_dir=tmp_path / "acc",
        measure_storage=False,
        build=pipeline.BuildSpec(build_dir=BUILD_DIR, swap_binary=swap),
    )


def test_swap_binary_without_a_unit_is_refused_before_anything(
    prod: Sandbox, tmp_path: Path
) -> None:
    with pytest.raises(UsageError, match="swaps the binary of the systemd unit") as err:
        pipeline.run(_request(prod, tmp_path, swap=True), Notes())  # type: ignore[arg-type]
    assert "--server-unit UNIT" in err.value.hint
    assert not (tmp_path / "acc").exists()  # no facts, no plan, no results
    assert [s.name for s in Sandbox.list_all()] == ["prod"]  # no clone
    assert not list(journals_dir().glob("*.json"))  # nothing applied


def test_three_arms_on_the_clone(prod: Sandbox, tmp_path: Path) -> None:
    notes = Notes()
    res = pipeline.run(_request(prod, tmp_path, swap=False), notes)  # type: ignore[arg-type]
    assert res.build is not None and res.build.reused and res.build.install == BUILD_DIR / "install"
    arms = [ln.split()[1] for ln in notes.lines if ln.startswith("[")]
    assert arms == ["baseline", "candidate", "build"]
    i = notes.lines.index
    assert i("== optimized build (PGO+LTO) of the server's version") < i(
        "== three arms, interleaved: distro defaults, distro + plan, build + plan"
    )
    assert res.comparison.baseline_label == "distro defaults"
    assert set(res.more) == {"build", "build-vs-plan"}
    assert res.more["build-vs-plan"].candidate_label == "build + plan"
    # one line, from the clone (with its memory-scaling note when the plan was scaled);
    # nothing from the live server: not applied
    assert len(res.figures) == 1 and res.figures[0].startswith(CLONE_ARMS_FIGURES)
    assert res.journal is None and res.swap_journal is None and res.live is None
    assert not list(journals_dir().glob("*.json"))
    out = tmp_path / "acc"
    for f in ("existing.json", "existing-build.json", "ab/comparison-build-vs-plan.json"):
        assert (out / f).is_file(), f
    assert [s.name for s in Sandbox.list_all()] == ["prod"]  # the clone is gone
    # the server still runs the distribution's binary
    assert Sandbox.load("prod").binary_path.resolve() == (DISTRO_USR / "sbin/mariadbd").resolve()
