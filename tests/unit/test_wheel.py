"""The wheel works outside a clone: built with `python -m build --wheel`, installed into a
fresh virtual environment and run from a directory with no source tree, it finds its rule
and knob data (`explain --all --md`), its report templates (`report`) and its Lua scripts.

This is what the Ansible collection installs on every host (ansible/), so a file missing
from package data breaks a fleet rollout, not a test in the clone.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    r = subprocess.run(
        argv, check=False, cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, f"{argv}: {r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    return r.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding the wheel (dependencies come from this test's environment through a
    .pth line: no network for numpy and scipy); returns its bin directory."""
    pytest.importorskip("build")
    tmp = tmp_path_factory.mktemp("wheel")
    dist = tmp / "dist"
    _run([sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT)], tmp)
    wheels = list(dist.glob("myaccel-*.whl"))
    assert len(wheels) == 1
    env_dir = tmp / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    site = Path(
        sysconfig.get_path("purelib", vars={"base": str(env_dir), "platbase": str(env_dir)})
    )
    deps = sysconfig.get_path("purelib")
    (site / "_deps.pth").write_text(deps + "\n")
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-compile",
            "--target",
            str(site),
            str(wheels[0]),
        ],
        tmp,
    )
    # the console script pip writes with --target lands in site/bin: use the module
    return env_dir / "bin"


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["MYACCEL_HOME"] = str(home)
    return env


def test_wheel_runs_outside_the_clone(installed: Path, tmp_path: Path) -> None:
    py = str(installed / "python")
    env = _env(tmp_path / "home")
    where = _run([py, "-c", "import myaccel; print(myaccel.__file__)"], tmp_path, env)
    assert not where.startswith(str(ROOT)), f"imported from the clone: {where}"

    rules = _run([py, "-m", "myaccel", "explain", "--all", "--md"], tmp_path, env)
    assert "server-buffer-pool-size" in rules and "server-log-buffer" in rules

    lua = _run(
        [
            py,
            "-c",
            "from myaccel.bench.runner import wrapper_script as w; "
            "from myaccel.bench.sysbench_output import LUA_REPORT_MODULE as r; "
            "print(w().is_file(), r.is_file(), w())",
        ],
        tmp_path,
        env,
    )
    assert lua.startswith("True True ") and str(ROOT) not in lua

    facts = tmp_path / "art" / "facts.json"
    facts.parent.mkdir()
    _run([py, "-m", "myaccel", "probe", "--no-server", "--out", str(facts)], tmp_path, env)
    _run([py, "-m", "myaccel", "report", str(facts.parent)], tmp_path, env)
    html = (facts.parent / "report.html").read_text()
    assert "<style>" in html and "</html>" in html  # the template and its inlined css
    assert (facts.parent / "report.md").is_file()
