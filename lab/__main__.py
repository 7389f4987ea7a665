"""`python -m lab build | boot DIR | ssh DIR [COMMAND] | stop DIR | crash-matrix DIR
[PHASE:POINT ...]`: the lab by hand (crash-matrix: lab/crash_matrix.py, on the booted guest
with myaccel installed).

`boot` leaves the guest running (state in DIR/guest.json) for a person to look around in;
`stop` powers it off. The tests use the same classes (lab/tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from lab.config import cache_dir
from lab.errors import LabError
from lab.guest import Guest
from lab.image import Image, build_image, cached_image
from lab.preflight import missing_reason
from lab.timing import Timings
from lab.topology import LAB_TOPOLOGY, Topology

USAGE = (
    "usage: python -m lab build | boot DIR | ssh DIR [COMMAND...] | stop DIR | "
    "crash-matrix DIR [apply:POINT | rollback:POINT ...] | "
    "repro SYSROOT DIR [OPTION_FILE]"
)


def _saved(workdir: Path, timings: Timings) -> Guest:
    state = json.loads((workdir / "guest.json").read_text())
    guest = Guest(Image(Path(state["image"])), LAB_TOPOLOGY, workdir, timings, port=state["port"])
    guest.pid = state["pid"]
    guest.boots = state["boots"]
    return guest


def _boot(workdir: Path, timings: Timings, topology: Topology = LAB_TOPOLOGY) -> Guest:
    reason = missing_reason(cache_dir(), image_cached=cached_image() is not None)
    if reason:
        raise LabError(reason)
    guest = Guest(build_image(timings), topology, workdir, timings)
    guest.boot()
    _save(workdir, guest)
    print(f"ssh: python -m lab ssh {workdir}   (pid {guest.pid}, port {guest.port})")
    return guest


def _save(workdir: Path, guest: Guest) -> None:
    state = {
        "image": str(guest.image.directory),
        "port": guest.port,
        "pid": guest.pid,
        "boots": guest.boots,
    }
    (workdir / "guest.json").write_text(json.dumps(state) + "\n")


def _repro(sysroot: Path, workdir: Path, timings: Timings, option_file: list[str]) -> None:
    """A bug report's machine (lab/repro.py) booted, myaccel installed, the report's
    option file in the server's configuration, and the plan made there."""
    import tempfile

    from lab import repro
    from lab.install import build_wheel, install, wheelhouse

    machine = repro.read_machine(sysroot)
    topology = repro.guest_topology(machine)
    cnf = repro.stage_option_file(Path(option_file[0]), workdir) if option_file else None
    print(f"reported: {machine.describe()}")
    print(f"guest:    {repro.describe_topology(topology)} (sizes scaled, layout kept)")
    if machine.arch != "x86_64":
        print(f"note: an {machine.arch} report in the x86-64 lab: its layout, not its CPU")
    guest = _boot(workdir, timings, topology)
    wheel = build_wheel(Path(tempfile.mkdtemp(prefix="lab-wheel-")), timings)
    print(
        f"myaccel in the guest: {install(guest, wheel, wheelhouse(cache_dir(), timings), timings)}"
    )
    if cnf is not None:
        guest.copy_in([cnf], repro.OPTION_FILE)
        r = guest.ssh("systemctl restart mariadb.service", timeout=600)
        if r.returncode != 0:
            print(f"the server does not start with {cnf.name} (as reported?):")
            print(guest.ssh("journalctl -b -u mariadb.service -n 15 --no-pager").stdout)
    print(guest.ssh("myaccel plan -S /run/mysqld/mysqld.sock -u root", timeout=900).stdout)
    print(f"the guest runs: python -m lab ssh {workdir}; python -m lab stop {workdir}")


def _crash_matrix(workdir: Path, timings: Timings, points: list[str]) -> int:
    """Every point (default: all of lab/crash_matrix.py), a row each as it ends, then the
    table; exit 1 when a row failed."""
    from lab import crash_matrix as cm

    guest = _saved(workdir, timings)
    todo = [tuple(p.split(":", 1)) for p in points] or [
        *(("apply", p) for p in cm.APPLY_POINTS),
        *(("rollback", p) for p in cm.ROLLBACK_POINTS),
    ]
    cm.prepare_plan(guest)
    rows = []
    for phase, point in todo:
        rows.append(cm.run_point(guest, phase, point))
        _save(workdir, guest)  # a new qemu pid and port after every boot
        print(cm.table(rows[-1:])[-1], flush=True)
    print("\n".join(cm.table(rows)))
    return 0 if all(r.ok for r in rows) else 1


def main(argv: list[str]) -> int:
    timings = Timings()
    try:
        match argv:
            case ["build"]:
                print(build_image(timings).directory)
            case ["boot", directory]:
                _boot(Path(directory), timings)
            case ["ssh", directory, *command]:
                guest = _saved(Path(directory), timings)
                os.execvp("ssh", guest.ssh_argv(" ".join(command)))
            case ["stop", directory]:
                _saved(Path(directory), timings).stop()
            case ["crash-matrix", directory, *points]:
                return _crash_matrix(Path(directory), timings, points)
            case ["repro", sysroot, directory, *option_file] if len(option_file) <= 1:
                _repro(Path(sysroot), Path(directory), timings, option_file)
            case _:
                print(USAGE, file=sys.stderr)
                return 2
    except LabError as e:
        print(e, file=sys.stderr)
        return 1
    for line in timings.table():
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
