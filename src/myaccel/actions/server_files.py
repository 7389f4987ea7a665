"""Which option files a running server reads, derived from its process.

``apply -S SOCKET`` (or ``-h/-P``) without ``--conf-dir`` must write ``99-myaccel.cnf`` only
into a directory that this very server reads at its next start: not the first conf.d that
happens to exist on the machine (that one may belong to another server). The server's
command line (``/proc/PID/cmdline``) says which files it reads:

- ``--no-defaults``: none;
- ``--defaults-file=F``: only F;
- otherwise the binary's default search order (``mariadbd --verbose --help`` prints it:
  ``/etc/my.cnf /etc/mysql/my.cnf ~/.my.cnf`` on Debian), plus ``--defaults-extra-file=F``
  after the global files;

and each file's ``!include`` / ``!includedir`` directives are followed. The directory for the
managed file is the *last* ``!includedir`` read (files read later win; Debian's my.cnf
includes ``conf.d`` then ``mariadb.conf.d``). Without one, there is no directory to write to.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from myaccel import proc

# What MariaDB and MySQL read when the binary cannot tell (``--verbose --help`` failed).
FALLBACK_ORDER = ("/etc/my.cnf", "/etc/mysql/my.cnf", "~/.my.cnf")
_ORDER_LINE = "Default options are read from the following files in the given order:"
_MAX_DEPTH = 10


@dataclass
class ServerOptionFiles:
    """The option files and ``!includedir`` directories a server process reads, in order."""

    files: list[str] = field(default_factory=list)
    include_dirs: list[str] = field(default_factory=list)
    source: str = ""  # how this was found, for messages

    @property
    def conf_dir(self) -> str | None:
        """Where a new option file is read last: the last ``!includedir``; None if none."""
        return self.include_dirs[-1] if self.include_dirs else None

    def why_no_dir(self) -> str:
        read = ", ".join(self.files) if self.files else "no option file"
        return f"the server reads {read} ({self.source}) and no !includedir directory"


def process_args(pid: int, proc_root: Path = Path("/proc")) -> list[str] | None:
    """The command line of ``pid``, None when it cannot be read."""
    try:
        raw = (proc_root / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    args = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
    return args or None


def process_cwd(pid: int, proc_root: Path = Path("/proc")) -> str:
    try:
        return os.readlink(proc_root / str(pid) / "cwd")
    except OSError:
        return "/"


def default_search_order(binary: str | None) -> tuple[list[str], str]:
    """The files ``binary`` reads by default, in order, and where that came from."""
    if binary:
        try:
            r = proc.run([binary, "--no-defaults", "--verbose", "--help"], timeout_s=30)
        except Exception:  # a missing or broken binary: fall back to the usual order
            r = None
        if r is not None:
            lines = (r.stdout or "").splitlines()
            for i, line in enumerate(lines):
                if line.strip() == _ORDER_LINE and i + 1 < len(lines):
                    found = lines[i + 1].split()
                    if found:
                        return found, f"default order of {binary}"
    return list(FALLBACK_ORDER), "the usual default order (the binary did not tell)"


def _directive(line: str) -> tuple[str, str] | None:
    s = line.strip()
    if not s.startswith("!"):
        return None
    name, _, arg = s.partition(" ")
    return name, arg.strip()


def _walk(path: Path, out: ServerOptionFiles, depth: int) -> None:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return
    if str(path) not in out.files:
        out.files.append(str(path))
    if depth >= _MAX_DEPTH:
        return
    for line in text.splitlines():
        d = _directive(line)
        if d is None or not d[1]:
            continue
        name, arg = d
        target = Path(arg) if os.path.isabs(arg) else path.parent / arg
        if name == "!include":
            _walk(target, out, depth + 1)
        elif name == "!includedir" and target.is_dir():
            tdir = str(target).rstrip("/") or "/"
            if tdir not in out.include_dirs:
                out.include_dirs.append(tdir)
            try:
                names = sorted(os.listdir(target))
            except OSError:
                continue
            for n in names:
                if n.endswith(".cnf"):
                    _walk(target / n, out, depth + 1)


def option_files_of(
    args: list[str], *, cwd: str = "/", search_order: list[str] | None = None, source: str = ""
) -> ServerOptionFiles:
    """The files a server started with ``args`` reads (``search_order``: the binary's
    default order, used without ``--defaults-file``)."""
    defaults_file: str | None = None
    extra: str | None = None
    for a in args[1:]:  # the server honours these only as its first options
        if a == "--no-defaults":
            return ServerOptionFiles(source="started with --no-defaults")
        if a.startswith("--defaults-file="):
            defaults_file = a.split("=", 1)[1]
        elif a.startswith("--defaults-extra-file="):
            extra = a.split("=", 1)[1]
        elif a.startswith("--defaults-group-suffix="):
            continue
        else:
            break
    if defaults_file is not None:
        order = [defaults_file]
        source = f"--defaults-file={defaults_file}"
    else:
        order = [p for p in (search_order or list(FALLBACK_ORDER)) if not p.startswith("~")]
        if extra is not None:
            order.append(extra)
            source += f", --defaults-extra-file={extra}"
    out = ServerOptionFiles(source=source)
    for p in order:
        _walk(Path(p) if os.path.isabs(p) else Path(cwd) / p, out, 0)
    return out


def server_option_files(
    pid: int, binary: str | None = None, proc_root: Path = Path("/proc")
) -> ServerOptionFiles | None:
    """What the server process ``pid`` reads; None when its command line is unreadable."""
    args = process_args(pid, proc_root)
    if args is None:
        return None
    order, source = default_search_order(binary or args[0])
    return option_files_of(args, cwd=process_cwd(pid, proc_root), search_order=order, source=source)
