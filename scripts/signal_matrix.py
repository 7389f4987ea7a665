"""The signal matrix of docs/safety.md: every way a DBA (or ``timeout``, or ssh going
away, or the OOM killer) can stop a myaccel command, at several points of each command,
and what is left afterwards.

For each case a real ``myaccel`` subprocess runs against a real sandbox server, reached
over TCP as a user whose password is a canary (``-p CANARY``, the way a DBA types it).
When a line of its output matches the case's point, the harness waits the point's delay
and sends the signal: SIGINT, two SIGINTs 50 ms apart (what ``timeout`` and an impatient
Ctrl-C do), SIGTERM, SIGHUP, or SIGKILL. Then it checks, from the outside:

- **secrets**: no file under MYACCEL_HOME, the results directory, /dev/shm or the temporary
  directory holds the canary or the sandbox's benchmark password (except the sandbox's own
  0600 ``state.json``, which keeps its benchmark password by design);
- **children**: no process started by the command is still running (the command's
  environment carries a tag; servers, which a sandbox keeps by design, are listed apart);
- **server**: the sandbox's global variables equal those before the case (a general log
  switched on, a candidate configuration, a performance_schema consumer put back); after a
  SIGKILL this is checked after the next command that reaches the server (``myaccel
  probe`` with the same options), which repairs what a killed command left
  (``myaccel.cli.repair``);
- **sandboxes**: no half-made clone is listed as usable.

Usage::

    python scripts/signal_matrix.py [--only bench,capture] [--signals INT,KILL] [--md OUT]

Prints one row per case and a markdown table (the one in docs/safety.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
MYACCEL = [sys.executable, "-m", "myaccel"]
TAG_VAR = "MYACCEL_SIGNAL_TAG"
SIGNALS = ("INT", "INT2", "TERM", "HUP", "KILL")
# The exit status each signal must give (KILL: the process dies by it); 0 only when the
# command was already done when the signal landed.
EXPECTED_EXIT = {"INT": 130, "INT2": 130, "TERM": 143, "HUP": 129, "KILL": -9}
SERVERS = {"mariadbd", "mysqld", "mariadb-install-db", "mysql_install_db"}
# Global variables that change by themselves (a restart, time passing).
VOLATILE = re.compile(
    r"^(gtid_.*|timestamp|rand_seed\d|last_insert_id|pseudo_thread_id|warning_count|"
    r"error_count|identity|insert_id|server_uuid|insert_id|in_transaction|"
    r"innodb_buffer_pool_load_at_startup_status|.*_status)$"
)


@dataclass(frozen=True)
class Point:
    """Where in a command the signal lands: after the first output line matching
    ``after`` (a regular expression), plus ``delay_s``."""

    name: str
    after: str
    delay_s: float = 0.0


@dataclass(frozen=True)
class Command:
    name: str
    argv: Callable[[Lab], list[str]]
    points: tuple[Point, ...]
    timeout_s: float = 600.0
    fresh_schema: bool = False  # the command prepares its own dataset: drop sbtest first


@dataclass
class Lab:
    """The sandbox and the canary user the cases run against."""

    home: Path
    work: Path
    sandbox: str
    port: int
    socket: str
    canary: str
    bench_password: str
    runs: int = 0

    def out(self, what: str) -> Path:
        self.runs += 1
        return self.work / f"{what}-{self.runs:03d}"

    def conn_args(self) -> list[str]:
        return ["-h", "127.0.0.1", "-P", str(self.port), "-u", "canary", "-p", self.canary]


@dataclass
class Outcome:
    command: str
    point: str
    signal: str
    reached: bool = False
    exit_code: int | None = None
    seconds: float = 0.0
    secret_files: list[str] = field(default_factory=list)
    children_left: list[str] = field(default_factory=list)
    servers_left: list[str] = field(default_factory=list)
    server_changed: list[str] = field(default_factory=list)
    repaired_by_next: bool | None = None  # SIGKILL: the next command put something back
    bad_sandboxes: list[str] = field(default_factory=list)
    tail: str = ""

    @property
    def ok(self) -> bool:
        return (
            self.reached
            and self.exit_code in (EXPECTED_EXIT[self.signal], 0)
            and not self.secret_files
            and not self.children_left
            and not self.server_changed
            and not self.bad_sandboxes
        )


# ------------------------------------------------------------------ the commands


def _bench(lab: Lab) -> list[str]:
    return [
        "bench",
        *lab.conn_args(),
        "--workload",
        "oltp_read_write",
        "--threads",
        "2",
        "--time",
        "5",
        "--warmup",
        "0",
        "--runs",
        "2",
        "--tables",
        "4",
        "--table-size",
        "40000",
        "--cleanup",
        "--out",
        str(lab.out("bench")),
    ]


def _capture(lab: Lab) -> list[str]:
    out = lab.out("capture")
    out.mkdir(parents=True)
    return ["capture", *lab.conn_args(), "--duration", "6", "--baseline", "2", "--out",
            str(out / "w.json")]  # fmt: skip


def _clone(lab: Lab) -> list[str]:
    lab.runs += 1
    return ["clone", *lab.conn_args(), "--name", f"c{lab.runs:03d}"]


def _tune(lab: Lab) -> list[str]:
    return [
        "tune", "--sandbox", lab.sandbox, "-w", "ro", "-t", "2", "--time", "2", "--warmup",
        "0", "--tables", "1", "--table-size", "2000", "--trials", "3", "--knob",
        "innodb_io_capacity", "--seed", "1", "--out", str(lab.out("tune")),
    ]  # fmt: skip


def _accelerate(lab: Lab) -> list[str]:
    # the existing-server path (clone, A/B on the clone, guarded apply): --force --yes
    # takes it to the apply whatever the A/B says
    return [
        "accelerate", *lab.conn_args(), "--runs", "1", "--time", "3", "--scale", "0.02",
        "--force", "--yes", "--out", str(lab.out("accelerate")),
    ]  # fmt: skip


COMMANDS = {
    c.name: c
    for c in (
        Command(
            "bench",
            _bench,
            (
                Point("dropping the dataset", r"^dropping the existing dataset"),
                Point("sysbench prepare", r"^preparing \d", 0.3),
                Point("run 1 (sysbench)", r"^\[1/2\] .*started", 1.5),
                Point("between runs", r"^\[1/2\] .*tps"),
                Point("run 2 (sysbench)", r"^\[2/2\] .*started", 1.5),
            ),
        ),
        Command(
            "capture",
            _capture,
            (
                Point("baseline", r"^measuring the server's throughput", 0.5),
                Point("switched on", r"^switched on"),
                Point("window", r"^capturing for", 2.0),
                Point("window end", r"^capturing for", 5.9),
                Point("switched back", r"^switched back"),
            ),
        ),
        Command(
            "clone",
            _clone,
            (
                Point("reading the source", r"^reading the source server", 0.2),
                Point("sandbox registered", r"^registered sandbox"),
                Point("hot copy (mariadb-backup)", r"mariadb-backup --backup", 0.5),
                Point("making it consistent", r"mariadb-backup --prepare", 0.2),
                Point("clone's first start", r"^starting MariaDB", 0.1),
            ),
        ),
        Command(
            "tune",
            _tune,
            (
                Point("start", r"^searching"),
                Point("noise floor", r"^== noise floor", 2.0),
                Point("screening", r"^== screening", 1.0),
                Point("a candidate arm", r"^trial 1 ", 0.5),
                Point("confirmation", r"^== (confirmation|final)", 1.0),
            ),
            fresh_schema=True,
        ),
        Command(
            "accelerate",
            _accelerate,
            (
                Point("probe and plan", r"^== probe and plan", 0.3),
                Point("hot copy (mariadb-backup)", r"mariadb-backup --backup", 0.3),
                Point("baseline arm", r"^\[1/\d+\] baseline .*started", 2.0),
                Point("candidate arm", r"^\[\d+/\d+\] candidate .*started", 2.0),
                Point("guarded apply", r"(?i)^== .*(apply|guard)", 1.0),
            ),
            timeout_s=1200.0,
            fresh_schema=True,
        ),
    )
}


# ------------------------------------------------------------------ the lab


def _myaccel(lab: Lab, args: list[str], timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MYACCEL_HOME": str(lab.home), "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [*MYACCEL, *args], env=env, capture_output=True, text=True, timeout=timeout_s, check=False
    )


def _sql(lab: Lab, statement: str) -> list[tuple[str, ...]]:
    import pymysql

    conn = pymysql.connect(unix_socket=lab.socket, user="root", autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(statement)
            return [tuple("" if v is None else str(v) for v in row) for row in cur.fetchall()]
    finally:
        conn.close()


def make_lab(work: Path) -> Lab:
    home = work / "home"
    name = "sig"
    lab = Lab(home=home, work=work, sandbox=name, port=0, socket="", canary="", bench_password="")
    done = _myaccel(lab, ["sandbox", "init", name], timeout_s=300)
    if done.returncode != 0:
        raise SystemExit(f"sandbox init failed: {done.stderr.strip()}")
    state = json.loads((home / "sandboxes" / name / "state.json").read_text())
    lab.port, lab.socket = int(state["port"]), str(state["socket"])
    lab.bench_password = str(state.get("bench_password") or "")
    lab.canary = "canary-" + secrets.token_hex(8)
    for stmt in (
        f"CREATE USER 'canary'@'127.0.0.1' IDENTIFIED BY '{lab.canary}'",
        "GRANT ALL PRIVILEGES ON *.* TO 'canary'@'127.0.0.1' WITH GRANT OPTION",
    ):
        _sql(lab, stmt)
    return lab


def server_variables(lab: Lab) -> dict[str, str]:
    try:
        rows = _sql(lab, "SHOW GLOBAL VARIABLES")
    except Exception as exc:  # a server left down is a server not as before
        return {"(server)": f"unreachable: {type(exc).__name__}"}
    out = {r[0]: r[1] for r in rows if not VOLATILE.match(r[0])}
    with contextlib.suppress(Exception):
        for r in _sql(
            lab, "SELECT NAME, ENABLED FROM performance_schema.setup_consumers ORDER BY NAME"
        ):
            out[f"consumer:{r[0]}"] = r[1]
    return out


# ------------------------------------------------------------------ one case


def _send(pid: int, sig: str) -> None:
    with contextlib.suppress(ProcessLookupError):
        if sig == "INT2":
            os.kill(pid, signal.SIGINT)
            time.sleep(0.05)
            os.kill(pid, signal.SIGINT)
        else:
            os.kill(pid, getattr(signal, f"SIG{sig}"))


def _tagged(tag: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["name"]):
        with contextlib.suppress(psutil.Error):
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            if p.environ().get(TAG_VAR) == tag:
                found.append(p)
    return found


def _describe(p: psutil.Process) -> str:
    with contextlib.suppress(psutil.Error):
        return f"{p.pid} {' '.join(p.cmdline())[:80]}"
    return str(p.pid)


def _files_holding(roots: list[Path], needles: list[bytes], allowed: set[Path]) -> list[str]:
    hits = []
    for root in roots:
        if not root.exists():
            continue
        for dirpath, _dirs, files in os.walk(root):
            for f in files:
                path = Path(dirpath) / f
                if path in allowed or path.is_symlink():
                    continue
                with contextlib.suppress(OSError):
                    if path.stat().st_size > 256 * 1024 * 1024:
                        continue
                    data = path.read_bytes()
                    if any(n in data for n in needles):
                        hits.append(str(path))
    return hits


def _usable_sandboxes(lab: Lab) -> list[str]:
    done = _myaccel(lab, ["sandbox", "list", "--json"])
    with contextlib.suppress(ValueError):
        doc = json.loads(done.stdout)
        items = doc if isinstance(doc, list) else doc.get("sandboxes", [])
        return [str(i.get("name")) for i in items if isinstance(i, dict)]
    return [line.split()[0] for line in done.stdout.splitlines()[1:] if line.strip()]


def run_case(lab: Lab, cmd: Command, point: Point, sig: str) -> Outcome:
    out = Outcome(cmd.name, point.name, sig)
    before = server_variables(lab)
    sandboxes_before = set(_usable_sandboxes(lab))
    tag = secrets.token_hex(8)
    env = {
        **os.environ,
        "MYACCEL_HOME": str(lab.home),
        "PYTHONPATH": str(ROOT / "src"),
        TAG_VAR: tag,
    }
    argv = [*MYACCEL, *cmd.argv(lab)]
    t0 = time.monotonic()
    child = subprocess.Popen(
        argv,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # our own Ctrl-C must not reach it; signals are ours to send
    )
    lines: list[str] = []
    pattern = re.compile(point.after)

    def _read() -> None:
        assert child.stdout is not None
        fired = False
        for line in child.stdout:
            lines.append(line.rstrip("\n"))
            if not fired and pattern.search(line):
                fired = True
                out.reached = True
                threading.Timer(point.delay_s, _send, (child.pid, sig)).start()

    reader = threading.Thread(target=_read, daemon=True)
    reader.start()
    try:
        child.wait(timeout=cmd.timeout_s)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
        lines.append("(timed out: killed by the harness)")
    reader.join(timeout=5)
    out.seconds = time.monotonic() - t0
    out.exit_code = child.returncode
    out.tail = " | ".join(lines[-3:])[-300:]
    # children die with their parent (SIGKILL: the kernel's parent-death signal); allow
    # them a moment to go
    deadline = time.monotonic() + 5
    left = _tagged(tag)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = [p for p in _tagged(tag) if p.name() not in SERVERS]
    everything = _tagged(tag)
    out.children_left = [_describe(p) for p in everything if p.name() not in SERVERS]
    out.servers_left = [_describe(p) for p in everything if p.name() in SERVERS]
    if sig == "KILL":
        changed_now = _diff(before, server_variables(lab))
        # the next command that reaches the server (with the same options, the password
        # given by -p) repairs what was left (myaccel.cli.repair)
        _myaccel(lab, ["probe", *lab.conn_args(), "--out", f"{lab.out('probe')}.json"])
        out.repaired_by_next = bool(changed_now) and not _diff(before, server_variables(lab))
    out.server_changed = _diff(before, server_variables(lab))
    allowed = {lab.home / "sandboxes" / n / "state.json" for n in _usable_sandboxes(lab)}
    needles = [lab.canary.encode()] + ([lab.bench_password.encode()] if lab.bench_password else [])
    roots = [lab.home, lab.work, Path("/dev/shm"), Path(tempfile.gettempdir()) / "myaccel"]
    roots += [p for p in Path(tempfile.gettempdir()).glob("myaccel-*")]
    out.secret_files = _files_holding(roots, needles, allowed)
    out.bad_sandboxes = _half_made(lab, sandboxes_before)
    return out


def _half_made(lab: Lab, before: set[str]) -> list[str]:
    """Sandboxes the case left that are listed but do not start (a half-made clone)."""
    bad = []
    for name in sorted(set(_usable_sandboxes(lab)) - before):
        st = _myaccel(lab, ["sandbox", "status", name])
        if st.returncode != 0 or "running" not in st.stdout:
            bad.append(name)
            continue
        # a complete clone: remove it so the next case starts alike
        _myaccel(lab, ["sandbox", "destroy", name, "--yes"])
    return bad


def _diff(a: dict[str, str], b: dict[str, str]) -> list[str]:
    keys = sorted(set(a) | set(b))
    return [f"{k}: {a.get(k)} -> {b.get(k)}" for k in keys if a.get(k) != b.get(k)]


def reset(lab: Lab, cmd: Command | None = None) -> None:
    """Back to a known state between cases: no journal in effect, the sandbox running on
    its own configuration (and an empty sbtest for a command that prepares its own), so
    that a case that failed to put things back does not fail the next one too."""
    _myaccel(lab, ["rollback", *lab.conn_args()])
    _myaccel(lab, ["sandbox", "start", lab.sandbox])
    state = json.loads((lab.home / "sandboxes" / lab.sandbox / "state.json").read_text())
    active = state.get("active_config") or {}
    if active.get("config_file") or active.get("sets") or active.get("basedir"):
        _myaccel(lab, ["sandbox", "restart", lab.sandbox, "--base-config"])
    if cmd is not None and cmd.fresh_schema:
        _sql(lab, "DROP DATABASE IF EXISTS sbtest")
        _sql(lab, "CREATE DATABASE sbtest")


# ------------------------------------------------------------------ the table


def yes_no(ok: bool) -> str:
    return "yes" if ok else "**no**"


def table(outcomes: list[Outcome]) -> str:
    head = (
        "| command | point | signal | exit | secret on disk | children left | server as before "
        "| half-made sandbox | s |\n|---|---|---|---:|---|---|---|---|---:|"
    )
    rows = []
    for o in outcomes:
        server = yes_no(not o.server_changed)
        if o.repaired_by_next:
            server = "yes (next command)"
        rows.append(
            f"| {o.command} | {o.point}{'' if o.reached else ' (not reached)'} | "
            f"{'INT x2' if o.signal == 'INT2' else o.signal} | {o.exit_code} | "
            f"{'**' + str(len(o.secret_files)) + ' files**' if o.secret_files else 'none'} | "
            f"{'**' + str(len(o.children_left)) + '**' if o.children_left else 'none'} | "
            f"{server} | {'**' + ', '.join(o.bad_sandboxes) + '**' if o.bad_sandboxes else 'none'}"
            f" | {o.seconds:.1f} |"
        )
    return "\n".join([head, *rows])


@contextlib.contextmanager
def lab_in(work: Path | None) -> Iterator[Lab]:
    tmp = Path(tempfile.mkdtemp(prefix="sigmatrix-")) if work is None else work
    lab = make_lab(tmp)
    try:
        yield lab
    finally:
        for n in [p.name for p in (lab.home / "sandboxes").glob("*")]:
            _myaccel(lab, ["sandbox", "destroy", n, "--yes"])
        if work is None:
            shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=",".join(COMMANDS), help="commands, comma-separated")
    ap.add_argument("--signals", default=",".join(SIGNALS))
    ap.add_argument("--points", default="", help="point names to keep (substring), comma-separated")
    ap.add_argument("--md", type=Path, help="write the markdown table here too")
    ap.add_argument("--work", type=Path, help="keep the lab here (default: a temporary dir)")
    ns = ap.parse_args()
    sigs = [s for s in ns.signals.split(",") if s]
    wanted = [s for s in ns.points.split(",") if s]
    outcomes: list[Outcome] = []
    with lab_in(ns.work) as lab:
        for name in ns.only.split(","):
            cmd = COMMANDS[name]
            for point in cmd.points:
                if wanted and not any(w in point.name for w in wanted):
                    continue
                for sig in sigs:
                    reset(lab, cmd)
                    o = run_case(lab, cmd, point, sig)
                    outcomes.append(o)
                    print(
                        f"{'ok  ' if o.ok else 'FAIL'} {o.command:10} {o.point:22} {sig:5} "
                        f"exit {o.exit_code} {o.seconds:5.1f}s "
                        f"secrets={o.secret_files} children={o.children_left} "
                        f"server={o.server_changed[:3]} next={o.repaired_by_next} "
                        f"half={o.bad_sandboxes}"
                        + ("" if o.reached else f" NOT REACHED: {o.tail}"),
                        flush=True,
                    )
    md = table(outcomes)
    print(md)
    if ns.md:
        ns.md.write_text(md + "\n")
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
