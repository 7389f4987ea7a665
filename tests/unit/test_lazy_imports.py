"""The heavy libraries (plots: matplotlib and Pillow; tune's optimizer: optuna and its
SQLAlchemy; statistics: scipy) are imported only by the commands that use them: not by
`myaccel --version`, the help, nor by what a DBA runs first on a server (doctor, probe,
explain). Each case runs in a fresh interpreter and reads sys.modules after the command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("matplotlib", "PIL", "optuna", "sqlalchemy", "alembic", "scipy")
KUNPENG = str(ROOT / "tests/fixtures/sysroots/kunpeng920-2s")

CASES = [
    ["--version"],
    ["--help"],
    ["probe", "--help"],
    ["tune", "--help"],
    ["report", "--help"],
    ["doctor", "--json", "bench"],
    ["probe", "--json", "--sysroot", KUNPENG],
    ["explain", "server-buffer-pool-size"],
]


def _heavy_after(argv: list[str], home: Path, before: str = "") -> list[str]:
    """The heavy modules loaded once ``myaccel ARGV`` has run (``before``: code run first)."""
    code = (
        "import contextlib, io, sys\n"
        f"{before}\n"
        "from myaccel.cli.main import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    cli.main({argv!r}, prog_name='myaccel', standalone_mode=False)\n"
        f"print('done', *sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    env = {"PATH": "/usr/bin:/bin", "MYACCEL_HOME": str(home), "PYTHONPATH": ":".join(sys.path)}
    r = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert r.returncode == 0 and r.stdout.startswith("done"), r.stderr[-2000:]
    return r.stdout.split()[1:]


@pytest.mark.parametrize("argv", CASES, ids=lambda a: " ".join(a[:2]))
def test_heavy_libraries_are_not_imported(argv: list[str], tmp_path: Path) -> None:
    heavy = _heavy_after(argv, tmp_path)
    assert heavy == [], f"myaccel {' '.join(argv)} imported {heavy}"


def test_the_check_sees_a_heavy_import(tmp_path: Path) -> None:
    """The same probe notices a heavy library a command would have pulled in."""
    assert _heavy_after(["--version"], tmp_path, before="import scipy.stats") == ["scipy"]
