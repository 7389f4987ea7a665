"""Man pages and shell completion for the Debian package, generated from the CLI itself.

Man pages: click-man (a generator built on click's own command metadata: usage, options,
help texts), one page per command as git does (``myaccel(1)``, ``myaccel-probe(1)``,
``myaccel-sandbox-init(1)``...). Completion: click's own shell completion, whose scripts
call ``myaccel`` back at completion time (``_MYACCEL_COMPLETE``), so they always match
the installed commands and options.

``myaccel``'s group loads its commands lazily (``cli/main.py``: ``COMMANDS``) and so holds
none in ``.commands``, where click-man looks: ``loaded_cli`` is the same group with every
command loaded.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import click
from click.shell_completion import get_completion_class
from click_man.core import write_man_pages

PROG = "myaccel"
COMPLETE_VAR = "_MYACCEL_COMPLETE"
# shell -> where Debian's shells look for a package's completion (bash-completion, zsh, fish)
COMPLETION_PATHS = {
    "bash": "usr/share/bash-completion/completions/myaccel",
    "zsh": "usr/share/zsh/vendor-completions/_myaccel",
    "fish": "usr/share/fish/vendor_completions.d/myaccel.fish",
}


def loaded_cli() -> click.Group:
    """``myaccel``'s top-level group with every lazily loaded command in ``.commands``."""
    from myaccel.cli.main import COMMANDS, cli

    ctx = click.Context(cli, info_name=PROG)
    commands: dict[str, click.Command] = {}
    for name in COMMANDS:
        cmd = cli.get_command(ctx, name)
        assert cmd is not None, name
        commands[name] = cmd
    return click.Group(PROG, help=cli.help, params=cli.params, commands=commands)


def command_paths(group: click.Command, prefix: str = PROG) -> list[str]:
    """Every command's path, the group itself first: ``myaccel``, ``myaccel sandbox init``."""
    paths = [prefix]
    if isinstance(group, click.Group):
        for name, cmd in sorted(group.commands.items()):
            if not cmd.hidden:
                paths += command_paths(cmd, f"{prefix} {name}")
    return paths


def write_man(target: Path, version: str, date: str) -> list[Path]:
    """One gzipped page per command under ``target`` (``man1``); returns them sorted.
    gzip without a name or time stamp in its header (reproducible, as lintian asks)."""
    target.mkdir(parents=True, exist_ok=True)
    write_man_pages(PROG, loaded_cli(), version=version, target_dir=str(target), date=date)
    pages = []
    for page in sorted(target.glob("*.1")):
        gz = page.with_suffix(".1.gz")
        with gz.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
            f.write(page.read_bytes())
        page.unlink()
        pages.append(gz)
    return pages


def completion_source(shell: str) -> str:
    """click's completion script for ``shell`` (bash, zsh, fish)."""
    cls = get_completion_class(shell)
    if cls is None:
        raise ValueError(f"click has no completion for {shell}")
    return cls(loaded_cli(), {}, PROG, COMPLETE_VAR).source()


def write_completions(root: Path) -> list[Path]:
    """The completion scripts at their Debian paths under ``root``."""
    written = []
    for shell, rel in COMPLETION_PATHS.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(completion_source(shell))
        written.append(path)
    return written
