"""The compiled defaults of a server binary: the table that ``mysqld --no-defaults
--verbose --help`` prints after "Variables (--variable-name=value)". A variable whose
running value differs from it was configured (option file, ``SET PERSIST``, ``SET
GLOBAL``); the names in the table are also the only ones that may go into an option file."""

from __future__ import annotations

from myaccel import proc
from myaccel.clone.errors import CloneError
from myaccel.server.optionfile import normalize_key
from myaccel.server.sandbox.install import ServerInstall

_TABLE_START = "Variables (--variable-name=value)"
NO_DEFAULT = "(No default value)"


def parse_help_defaults(text: str) -> dict[str, str]:
    """``name -> default`` from ``--verbose --help`` output (names as variables: ``_``)."""
    out: dict[str, str] = {}
    lines = text.splitlines()
    try:
        start = next(i for i, ln in enumerate(lines) if ln.startswith(_TABLE_START))
    except StopIteration:
        return out
    body = lines[start + 1 :]
    dashes = next((i for i, ln in enumerate(body) if ln.startswith("-----")), -1)
    for line in body[dashes + 1 :]:
        if not line.strip() or line.startswith("To see what values"):
            break
        name, _, value = line.partition(" ")
        value = value.strip()
        out[normalize_key(name)] = "" if value == NO_DEFAULT else value
    return out


def help_argv(install: ServerInstall) -> list[str]:
    argv = [str(install.binary), "--no-defaults"]
    if install.custom:  # where the binary finds its messages and plugins
        argv.append(f"--basedir={install.basedir}")
        if install.lc_messages_dir:
            argv.append(f"--lc-messages-dir={install.lc_messages_dir}")
    return [*argv, "--verbose", "--help"]


def compiled_defaults(install: ServerInstall) -> dict[str, str]:
    done = proc.run(help_argv(install), timeout_s=60.0)
    found = parse_help_defaults(done.stdout)
    if not found:
        raise CloneError(
            f"'{install.binary} --verbose --help' printed no table of defaults",
            hint="check that the binary runs here (see its output with that command)",
        )
    return found


def same_value(a: str, b: str) -> bool:
    """Whether a ``SHOW VARIABLES`` value and a ``--help`` default are the same setting
    (``--help`` spells booleans TRUE/FALSE, the server ON/OFF)."""

    def norm(v: str) -> str:
        u = v.strip().upper()
        return {"TRUE": "ON", "FALSE": "OFF"}.get(u, u)

    try:  # 100.000000 (the server) and 100 (--help)
        return float(a) == float(b)
    except ValueError:
        return norm(a) == norm(b)
