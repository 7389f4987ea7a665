"""The amd64 Debian package, built as `make dist-amd64` does (packaging/build_deb.py) but
compressed with zstd and without lintian (both take minutes: docs/packaging.md), then read
back with dpkg-deb: its control fields, its files, and the unpacked tree run by this
host's Debian python3 as /usr/bin/myaccel would be. Needs PyPI (pip's cache makes a
second build take about 30 s here)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from myaccel import __version__

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.system]


def _run(argv: list[str], **kw: object) -> str:
    r = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=600, **kw)  # type: ignore[call-overload]
    assert r.returncode == 0, f"{argv}: {r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    out: str = r.stdout
    return out


@pytest.fixture(scope="module")
def deb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for tool in ("dpkg-deb", "/usr/bin/python3"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is missing")
    pytest.importorskip("build")
    pytest.importorskip("click_man")
    tmp = tmp_path_factory.mktemp("deb")
    _run([sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp), str(ROOT)], cwd=tmp)
    (wheel,) = tmp.glob("myaccel-*.whl")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = _run(
        [sys.executable, str(ROOT / "packaging/build_deb.py"), "--arch", "amd64",
         "--wheel", str(wheel), "--out", str(tmp), "--work", str(tmp / "work"),
         "--compress", "zstd", "--no-lintian"],
        env=env,
    )  # fmt: skip
    print(out)
    return tmp / f"myaccel_{__version__}_amd64.deb"


def test_control_fields(deb: Path) -> None:
    info = _run(["dpkg-deb", "--field", str(deb)])
    fields = dict(line.split(": ", 1) for line in info.splitlines() if ": " in line[:30])
    assert fields["Package"] == "myaccel" and fields["Architecture"] == "amd64"
    assert fields["Version"] == __version__
    depends = fields["Depends"]
    assert "python3 (>= 3.11~), python3 (<< 3.12)" in depends
    assert "libc6 (>= 2." in depends
    assert not any(p.startswith("python3-") for p in depends.split(", ")), depends
    assert {"sysbench", "linux-perf", "fio", "numactl"} <= set(fields["Recommends"].split(", "))


def test_contents(deb: Path) -> None:
    listing = _run(["dpkg-deb", "--contents", str(deb)])
    paths = {line.split()[5].removeprefix(".") for line in listing.splitlines()}
    owners = {line.split()[1] for line in listing.splitlines()}
    assert owners == {"root/root"}
    lib = "/usr/lib/myaccel/python"
    for path in (
        "/usr/bin/myaccel",
        "/usr/share/man/man1/myaccel.1.gz",
        "/usr/share/man/man1/myaccel-doctor.1.gz",
        "/usr/share/bash-completion/completions/myaccel",
        "/usr/share/doc/myaccel/copyright",
        "/usr/share/doc/myaccel/changelog.gz",
        "/usr/share/lintian/overrides/myaccel",
        f"{lib}/myaccel/cli/main.py",
        f"{lib}/myaccel/rules/data/simple_rules.json",
        f"{lib}/click/__init__.py",
    ):
        assert path in paths, path
    so = [p for p in paths if p.endswith(".so") and "cpython-311-x86_64-linux-gnu" in p]
    assert any("/numpy/" in p for p in so) and any("/pydantic_core/" in p for p in so)
    assert not [p for p in paths if p.startswith(f"{lib}/bin/") or "__pycache__" in p]
    assert "-rwxr-xr-x" in next(line for line in listing.splitlines() if "/usr/bin/myaccel" in line)


def test_the_unpacked_package_runs_on_debians_python3(deb: Path, tmp_path: Path) -> None:
    tree = tmp_path / "root"
    _run(["dpkg-deb", "-x", str(deb), str(tree)])
    env = {"PATH": "/usr/bin:/bin", "MYACCEL_HOME": str(tmp_path / "home"), "LC_ALL": "C.UTF-8"}
    launcher = str(tree / "usr/bin/myaccel")
    assert _run(["/usr/bin/python3", "-I", launcher, "--version"], env=env).strip() == (
        f"myaccel, version {__version__}"
    )
    where = _run(
        ["/usr/bin/python3", "-I", launcher, "explain", "server-buffer-pool-size"], env=env
    )
    assert "buffer" in where.lower()
    out = _run(["/usr/bin/python3", "-I", launcher, "doctor", "--json", "probe"], env=env)
    assert '"probe"' in out
