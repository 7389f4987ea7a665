"""`python -m lab build [--arch arm64] | boot DIR [--arch arm64] [--cpu MODEL] | ssh DIR
[COMMAND] | stop DIR | crash-matrix DIR [PHASE:POINT ...]`: the lab by hand (crash-matrix:
lab/crash_matrix.py, on the booted guest with myaccel installed).

`boot` leaves the guest running (state in DIR/guest.json) for a person to look around in;
`stop` powers it off. The tests use the same classes (lab/tests/conftest.py). `--arch arm64`
is the aarch64 lab (`--cpu neoverse-n1`, the default, or `cortex-a72`).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from lab.config import AMD64, ARCHES, Arch, cache_dir
from lab.errors import LabError
from lab.guest import Guest
from lab.image import build_image, cached_image, image_at
from lab.install import mariadb_system_tables, wheelhouse
from lab.preflight import missing_reason
from lab.timing import Timings
from lab.topology import Topology, lab_topology

USAGE = (
    "usage: python -m lab build [--arch arm64] | boot DIR [--arch arm64] [--cpu MODEL] | "
    "ssh DIR [COMMAND...] | stop DIR | crash-matrix DIR [apply:POINT | rollback:POINT ...] | "
    "repro SYSROOT DIR [OPTION_FILE]"
)


def _saved(workdir: Path, timings: Timings) -> Guest:
    state = json.loads((workdir / "guest.json").read_text())
    image = image_at(Path(state["image"]))
    topology = lab_topology(image.arch, state.get("cpu_model"))
    guest = Guest(image, topology, workdir, timings, port=state["port"])
    guest.pid = state["pid"]
    guest.boots = state["boots"]
    return guest


def _boot(
    workdir: Path,
    timings: Timings,
    arch: Arch = AMD64,
    cpu_model: str | None = None,
    topology: Topology | None = None,
) -> Guest:
    """Boot a guest in ``workdir`` (``topology``: the lab's machine for ``arch``)."""
    topology = topology or lab_topology(arch, cpu_model)
    reason = missing_reason(cache_dir(), cached_image(arch=arch) is not None, arch)
    if reason:
        raise LabError(reason)
    from lab.layers import deps_layer

    house = wheelhouse(cache_dir(), timings, arch)
    image = build_image(timings, arch=arch, house=house)
    layer = deps_layer(image, house, timings)
    guest = Guest(image, topology, workdir, timings, backing=layer)
    guest.boot()
    if arch != AMD64:
        mariadb_system_tables(guest, timings)
    _save(workdir, guest)
    print(f"ssh: python -m lab ssh {workdir}   (pid {guest.pid}, port {guest.port})")
    return guest


def _save(workdir: Path, guest: Guest) -> None:
    state = {
        "image": str(guest.image.directory),
        "cpu_model": guest.topology.cpu_model,
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
    from lab.install import build_wheel, install

    machine = repro.read_machine(sysroot)
    topology = repro.guest_topology(machine)
    cnf = repro.stage_option_file(Path(option_file[0]), workdir) if option_file else None
    print(f"reported: {machine.describe()}")
    print(f"guest:    {repro.describe_topology(topology)} (sizes scaled, layout kept)")
    if machine.arch != "x86_64":
        print(f"note: an {machine.arch} report in the x86-64 lab: its layout, not its CPU")
    guest = _boot(workdir, timings, topology=topology)
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


def _options(argv: list[str]) -> tuple[list[str], Arch, str | None]:
    """`--arch NAME` and `--cpu MODEL` taken out of argv (build and boot)."""
    rest: list[str] = []
    arch, cpu = AMD64, None
    words = iter(argv)
    for word in words:
        if word in ("--arch", "--cpu"):
            value = next(words, None)
            if value is None:
                raise LabError(f"lab: {word} needs a value")
            if word == "--cpu":
                cpu = value
            elif value in ARCHES:
                arch = ARCHES[value]
            else:
                raise LabError(f"lab: --arch is one of {', '.join(ARCHES)}")
        else:
            rest.append(word)
    return rest, arch, cpu


def main(argv: list[str]) -> int:
    timings = Timings()
    try:
        if argv[:1] in (["build"], ["boot"]):
            argv, arch, cpu = _options(argv)
        else:
            arch, cpu = AMD64, None
        match argv:
            case ["build"]:
                house = wheelhouse(cache_dir(), timings, arch)
                print(build_image(timings, arch=arch, house=house).directory)
            case ["boot", directory]:
                _boot(Path(directory), timings, arch, cpu)
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
