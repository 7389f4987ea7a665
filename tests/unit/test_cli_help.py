"""`myaccel --help` lists the commands from a static table (cli/main.py: SUMMARIES) without
importing them: the table must say what the commands themselves say, and the listing must
read as click would draw it from the loaded commands."""

from __future__ import annotations

import importlib
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from myaccel.cli.main import COMMANDS, SUMMARIES, cli


def _loaded(name: str) -> click.Command:
    mod, _, attr = COMMANDS[name].partition(":")
    cmd = getattr(importlib.import_module(mod), attr)
    assert isinstance(cmd, click.Command)
    return cmd


def test_every_command_has_a_summary() -> None:
    assert set(SUMMARIES) == set(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_summary_is_the_first_line_of_the_commands_docstring(name: str) -> None:
    help_text = _loaded(name).help or ""
    assert SUMMARIES[name] == help_text.strip().splitlines()[0].strip()


@pytest.mark.parametrize("width", [40, 60, 80])
def test_the_listing_equals_clicks_own_from_the_loaded_commands(width: int) -> None:
    """Up to click's 80 columns (wider terminals get 80 too), where every summary line
    is longer than the room for it or the whole first sentence."""
    ours = CliRunner().invoke(cli, ["--help"], terminal_width=width, prog_name="myaccel")
    loaded = click.Group(
        "myaccel",
        help=cli.help,
        params=cli.params,
        commands={name: _loaded(name) for name in COMMANDS},
        context_settings={"help_option_names": ["--help"]},
    )
    theirs = CliRunner().invoke(loaded, ["--help"], terminal_width=width, prog_name="myaccel")
    assert ours.exit_code == 0 and ours.output == theirs.output


def test_help_imports_no_command_module() -> None:
    """The listing and a command's own help load only that command's module."""
    code = (
        "import contextlib, io, sys\n"
        "from myaccel.cli.main import cli\n"
        "for argv in (['--help'], ['probe', '--help']):\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        cli.main(argv, prog_name='myaccel', standalone_mode=False)\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('myaccel.cli.'))))\n"
        "print(' '.join(sorted(m for m in ('scipy', 'optuna', 'matplotlib') if m in sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    loaded = set(out[0].split())
    assert "myaccel.cli.probe" in loaded
    others = {t.partition(":")[0] for n, t in COMMANDS.items() if n != "probe"}
    assert not loaded & (others - {"myaccel.cli.probe"}), loaded & others
    assert out[1:] in ([""], []), f"heavy libraries imported: {out[1:]}"


# What no `--help` may import: the command bodies' domain (models, settings, sandboxes,
# collectors) and the heavy libraries under it. Each costs tens of milliseconds; together
# they made `myaccel apply --help` take 0.55 s (scripts/bench_probe.py prints the times).
HEAVY_FOR_HELP = (
    "pydantic",
    "rich",
    "pymysql",
    "psutil",
    "numpy",
    "scipy",
    "myaccel.model",
    "myaccel.artifacts",
    "myaccel.actions",
    "myaccel.server.sandbox",
    "myaccel.facts",
    "myaccel.rules",
    "myaccel.knobs",
    "myaccel.bench.workload",
)


@pytest.mark.parametrize("argv", [[], *([name] for name in sorted(COMMANDS))], ids=" ".join)
def test_help_imports_no_domain_module(argv: list[str]) -> None:
    """`myaccel --help` and `myaccel CMD --help` load the command's options, not its body:
    the modules the body needs are imported where it uses them."""
    code = (
        "import contextlib, io, sys\n"
        "from myaccel.cli.main import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    cli.main({[*argv, '--help']!r}, prog_name='myaccel', standalone_mode=False)\n"
        f"heavy = {HEAVY_FOR_HELP!r}\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(heavy))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == []


def test_the_sandbox_commands_show_the_sandbox_defaults() -> None:
    """cli/sandbox.py copies two defaults so that its `--help` loads no sandbox module."""
    from myaccel.cli import sandbox as cli_sandbox
    from myaccel.server import sandbox

    assert cli_sandbox.DEFAULT_NAME == sandbox.DEFAULT_NAME
    assert cli_sandbox.DEFAULT_TIMEOUT_S == sandbox.DEFAULT_TIMEOUT_S


def test_a_subcommand_help_is_printed_before_the_group_callback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`myaccel CMD --help` changes nothing: no repair of orphaned journals runs."""
    from myaccel.cli import repair

    called: list[str] = []
    monkeypatch.setattr(repair, "repair_orphans", lambda note: called.append("repair"))
    for argv in (["probe", "--help"], ["sandbox", "start", "--help"], ["sandbox", "--help"]):
        res = CliRunner().invoke(cli, argv, prog_name="myaccel")
        assert res.exit_code == 0 and res.output.startswith("Usage: myaccel "), res.output
    assert called == []
