"""Compare myaccel's plan against what MySQLTuner recommends, on one sandbox, with an
interleaved A/B (baseline: MySQLTuner's advice, candidate: myaccel's option file).

Usage: .venv/bin/python scripts/vs_mysqltuner.py SANDBOX MYACCEL_TUNED_CNF [ab options...]

Steps: the sandbox is restarted on its base configuration, one `myaccel bench` run of the
workload given in the ab options loads it (MySQLTuner reads status counters), the real
MySQLTuner (Debian's `mysqltuner` package, 1.9.9) reads the server, and its "Variables to
adjust" list becomes an option file line by line (`map_line`, documented in
docs/measured-plans.md "MySQLTuner's advice, line by line"); that file is the baseline of
`myaccel ab`.

MySQLTuner 1.9.9 on MariaDB 10.8+ and its crash: stock 1.9.9 dies with "Illegal division
by zero at /usr/bin/mysqltuner line 6024" in `mysql_innodb`, before it prints its
recommendations. The divisor is the server variable `innodb_buffer_pool_chunk_size`
(`int(innodb_buffer_pool_size) / int(innodb_buffer_pool_chunk_size)`, for its "Number of
InnoDB Buffer Pool Chunk" line): since MariaDB 10.8 its default is 0, meaning "autosize"
(the server picks the chunk from the pool size), and SHOW VARIABLES reports that 0.
(`innodb_buffer_pool_instances`, removed in 10.6, is not the cause: MySQLTuner takes 1 when
the variable is missing; nor `innodb_log_files_in_group`, which it also defaults to 1.)
MySQLTuner's logic is left as it is; the server is given the input it needs: when the
sandbox reports a chunk size of 0, it is restarted with `innodb_buffer_pool_chunk_size`
set explicitly to the pool size / 64, rounded down to a MiB (at least 1 MiB), what the
autosize of 10.8+ picks. The chunk size is only the granularity of an online buffer pool
resize (`SET GLOBAL innodb_buffer_pool_size`, which nothing here does), so the server
MySQLTuner reads runs as the one the arms run; the arms themselves start without it. A
server that reports a non-zero chunk size (MariaDB before 10.8, MySQL) is not restarted
for it. If MySQLTuner still dies or prints no "Variables to adjust" list, the script
stops with its output's tail rather than guess.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Container, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from myaccel.errors import MyaccelError
from myaccel.server.sandbox import Sandbox
from myaccel.server.sandbox.state import ServerOptions

UNITS = {"B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
MIB = 1024**2
HEADER = "Variables to adjust:"


@dataclass(frozen=True)
class Mapped:
    """One "Variables to adjust" line and what became of it: an option file line
    (`option`, `value`), or the reason it was left out."""

    line: str
    option: str | None = None
    value: str | None = None
    ignored: str | None = None


def size_value(text: str) -> str:
    """MySQLTuner's sizes (`381.0M`, `32M`, `16K`) as bytes; other values unchanged."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT])B?", text)
    if m is None:
        return text
    return str(int(Decimal(m.group(1)) * UNITS[m.group(2)]))


def adjust_lines(text: str) -> list[str]:
    """The lines of MySQLTuner's "Variables to adjust" list (its last section: every
    indented line after the header); [] when it printed none."""
    if HEADER not in text:
        return []
    out: list[str] = []
    for line in text.split(HEADER, 1)[1].splitlines()[1:]:
        if not line.startswith("    "):
            break
        out.append(line.strip())
    return out


# One pattern per shape of line MySQLTuner 1.9.9 prints with a value to set (the table in
# docs/measured-plans.md lists which of its lines have which shape).
_VALUE_SHAPES = (
    # performance_schema=ON, innodb_file_per_table=ON, key_buffer_size=0,
    # binlog_format = ROW, SET innodb_stats_on_metadata = OFF
    re.compile(r"(?:SET )?(?P<name>[a-z_]+)\s*=\s*(?P<value>[\w.]+)"),
    # innodb_buffer_pool_size (>= 381.0M) if possible.  query_cache_size (=0)
    # long_query_time (<= 10)  innodb_buffer_pool_instances(=8)
    re.compile(r"(?P<name>[a-z_]+)\s*\((?:>=|<=|=)\s*(?P<value>[\w.]+)\).*"),
    # innodb_log_file_size should be (=32M) if possible, so InnoDB total log files ...
    re.compile(r"(?P<name>[a-z_]+) should be \(=(?P<value>[\w.]+)\).*"),
    # thread_cache_size (start at 4)
    re.compile(r"(?P<name>[a-z_]+) \(start at (?P<value>\d+)\)"),
    # binlog_cache_size (48.0M): its value plus 16M, with no relation printed
    re.compile(r"(?P<name>[a-z_]+) \((?P<value>[\d.]+[KMGT]?)\)"),
)

# Lines with no value to set, first match wins: (pattern, why the line is left out).
_GALERA = re.compile(r".*(?:wsrep|gcs\.|Galera|parallel slave)")
_NO_VALUE = (
    (re.compile(r"[a-z]+\.[\w.-]+ "), "a kernel setting (sysctl), not a server option"),
    (re.compile(r"[A-Z][A-Z' .!]+$"), "a warning, not a setting"),
    (re.compile(r"[a-z_]+ between "), "a range, not a value: MySQLTuner names no setting"),
    (
        re.compile(r"[a-z_]+\s*(?:\(\d+\))?\s*\(?[<>] "),
        "a direction without a value ('more/less than now'): MySQLTuner names no setting",
    ),
    (re.compile(r"[a-z_]+ must "), "a rule between settings, not a value"),
)


def map_line(line: str, known: Container[str] | None = None) -> Mapped:
    """The option file line MySQLTuner's advice `line` asks for, literally: its own value
    (for a bound, `>=`/`<=`, the bound itself); never a value of ours. `known`: the
    server's variable names, when given an option the server lacks is left out (it
    would refuse to start)."""
    if _GALERA.match(line):
        return Mapped(line, ignored="Galera cluster advice; the sandbox is one server")
    for shape in _VALUE_SHAPES:
        m = shape.fullmatch(line)
        if m is None:
            continue
        name, value = m.group("name"), size_value(m.group("value"))
        if known is not None and name not in known:
            return Mapped(line, ignored=f"{name} is not a variable of this server")
        return Mapped(line, option=name, value=value)
    for pattern, why in _NO_VALUE:
        if pattern.match(line):
            return Mapped(line, ignored=why)
    return Mapped(line, ignored="not a shape MySQLTuner 1.9.9 prints a setting in")


def option_file(mapped: Sequence[Mapped]) -> str:
    """The baseline arm's option file: every mapped line, the later of two for one option."""
    settings = {m.option: m.value for m in mapped if m.option is not None}
    lines = ["# MySQLTuner's advice, mapped line by line by scripts/vs_mysqltuner.py\n"]
    lines += [f"# left out: {m.line} ({m.ignored})\n" for m in mapped if m.ignored]
    lines.append("[mysqld]\n")
    lines += [f"{k} = {v}\n" for k, v in settings.items()]
    return "".join(lines)


def autosized_chunk(pool_bytes: int) -> int:
    """The chunk size MariaDB 10.8+ picks for `innodb_buffer_pool_chunk_size = 0`: the
    pool / 64, rounded down to a MiB, at least 1 MiB."""
    return max(MIB, pool_bytes // 64 // MIB * MIB)


# The `myaccel ab` options that shape the workload, which the load run before MySQLTuner
# takes too (the others, --baseline, --runs, --out, --target, ..., are ab's own).
_LOAD_OPTIONS = {
    "-w", "--workload", "-t", "--threads", "--time", "--warmup", "--tables", "--table-size",
    "--dataset", "--scale", "--profile", "--ps-mode", "--workload-file", "--replay-mode",
    "--replay-keys",
}  # fmt: skip


def load_args(ab_args: Sequence[str]) -> list[str]:
    """The workload options among `ab_args` (`--opt VALUE` or `--opt=VALUE`; `--paced`,
    `--cleanup`)."""
    out: list[str] = []
    it = iter(ab_args)
    for arg in it:
        if arg.split("=", 1)[0] in _LOAD_OPTIONS:
            out.append(arg)
            if "=" not in arg:
                out.append(next(it, ""))
        elif arg in ("--paced", "--cleanup"):
            out.append(arg)
    return out


def _variables(sb: Sandbox) -> dict[str, str]:
    return {str(k): str(v) for k, v in sb.query("SHOW GLOBAL VARIABLES")}


def prepare_server(sb: Sandbox) -> None:
    """Restart the sandbox on its base configuration; with an explicit chunk size when
    the server autosizes it (MariaDB 10.8+ reports 0, which MySQLTuner 1.9.9 divides by)."""
    sb.restart(reset=True)
    v = _variables(sb)
    if v.get("innodb_buffer_pool_chunk_size") == "0":
        chunk = autosized_chunk(int(v["innodb_buffer_pool_size"]))
        print(
            f"innodb_buffer_pool_chunk_size is 0 (autosized, MariaDB 10.8+), which MySQLTuner "
            f"1.9.9 divides by: restarting with it set to {chunk} (pool / 64)",
            flush=True,
        )
        sb.restart(ServerOptions(sets={"innodb_buffer_pool_chunk_size": str(chunk)}), reset=True)


def run_mysqltuner(sb: Sandbox) -> str:
    """MySQLTuner's whole output on the running sandbox (its admin option file: the
    socket and root without a password, nothing on the command line)."""
    r = subprocess.run(
        ["mysqltuner", "--defaults-file", str(sb.option_file), "--nocolor"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return r.stdout + r.stderr


def tuner_mapping(sb: Sandbox, save: Path | None = None) -> list[Mapped]:
    """Run MySQLTuner on the running sandbox and map its "Variables to adjust" list,
    printing each line and what became of it (exits when there is no list). `save`: where
    its whole output goes."""
    text = run_mysqltuner(sb)
    if save is not None:
        save.write_text(text)
    lines = adjust_lines(text)
    if not lines:
        sys.exit(
            "error: MySQLTuner printed no 'Variables to adjust' list (hint: read its output"
            + (f" in {save}" if save else "")
            + "; it ends: "
            + " | ".join(text.strip().splitlines()[-3:])
            + ")"
        )
    known = set(_variables(sb))
    mapped = [map_line(line, known) for line in lines]
    for m in mapped:
        what = f"{m.option} = {m.value}" if m.option else f"left out: {m.ignored}"
        print(f"  MySQLTuner: {m.line}\n    -> {what}", flush=True)
    return mapped


def tuner_advice(sb: Sandbox, save: Path | None = None) -> dict[str, str]:
    """The mapped settings only, option -> value (scripts/rule_ablation.py)."""
    return {m.option: m.value for m in tuner_mapping(sb, save) if m.option and m.value is not None}


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit("usage: vs_mysqltuner.py SANDBOX MYACCEL_TUNED_CNF [ab options...]")
    name, tuned = sys.argv[1], Path(sys.argv[2])
    rest = sys.argv[3:]
    if not tuned.is_file():
        sys.exit(
            f"error: {tuned} is not a file (hint: the candidate's option file, e.g. `myaccel plan --format cnf`)"
        )
    if shutil.which("mysqltuner") is None:
        sys.exit("error: mysqltuner is not installed (hint: apt-get install mysqltuner)")
    try:
        sb = Sandbox.load(name)
    except MyaccelError as e:
        sys.exit(f"error: {e} (hint: `myaccel sandbox list` shows the sandboxes of $MYACCEL_HOME)")
    exe = str(Path(sys.executable).with_name("myaccel"))
    prepare_server(sb)
    with tempfile.TemporaryDirectory(prefix="mysqltuner-load-") as tmp:
        load = [exe, "bench", "--sandbox", name, *load_args(rest), "--runs", "1", "--out", tmp]
        print("loading the server for MySQLTuner:", " ".join(load), flush=True)
        if subprocess.call(load) != 0:
            sys.exit("error: the load run failed (hint: see its output above)")
    mapped = tuner_mapping(sb, save=tuned.with_name("mysqltuner.out"))
    sb.restart(reset=True)  # the base configuration again, without the explicit chunk
    cnf = tuned.with_name("mysqltuner.cnf")
    cnf.write_text(option_file(mapped))
    ab_rest = [a for a in rest if a != "--cleanup"]  # the load run prepared the dataset
    cmd = [exe, "ab", "--sandbox", name, "--baseline", str(cnf), "--candidate", str(tuned)]
    cmd += ab_rest
    print(f"MySQLTuner's option file: {cnf}\nrunning:", " ".join(cmd), flush=True)
    sys.exit(subprocess.call(cmd))


if __name__ == "__main__":
    main()
