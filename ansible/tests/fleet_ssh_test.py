"""`make fleet-test`, its second part: the collection over real SSH against two lab guests.

Two guests of the lab (lab/, qemu under TCG, systemd, Debian's MariaDB under its own unit)
with different hardware, so that the fleet has two classes: `big` (4 CPUs in 2 sockets, 2
NUMA nodes, 3 GiB) and `small` (2 CPUs, 1 node, 2 GiB). Nothing of myaccel is in them (the
image's venv of dependencies is removed first): the role installs the Debian package built
from this checkout (`apt-get install ./myaccel_*_amd64.deb`, apt pulling what it recommends
from Debian's archive through qemu's network), over SSH as root with the lab's key.

The run: plan.yml (each guest probed over SSH; two classes, one reviewed plan each, made on
its own host) -> rollout.yml (each class's canary measured by an A/B on a sandbox in its
guest, the plan applied to the systemd server, which restarts, and checked) -> collect.yml
(the fleet report names both hosts, applied) -> a second rollout.yml that changes nothing
-> rollback.yml, after which every guest's /etc/mysql is back to its first bytes and its
server runs on its old value again.

Usage: python ansible/tests/fleet_ssh_test.py [--keep]. Needs what the lab needs (root, qemu,
the image, cached by `make lab-test` or built here first); without them it says why and
exits 1. A failed run keeps its work directory (the playbooks' logs, each guest's console)
and says where.
MYACCEL_LAB_DEB names a package to use instead of building one.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
from dataclasses import replace
from pathlib import Path

from fleet_test import (
    ONLY,
    ROOT,
    check,
    failure_lines,
    playbook,
    save_inventory,
    say,
    sh,
    short_rollout,
    task_output,
    write_config,
)

sys.path.insert(0, str(ROOT))

from lab.config import cache_dir
from lab.guest import Guest
from lab.image import build_image, cached_image
from lab.install import build_wheel, mariadb_system_tables, wheelhouse
from lab.preflight import missing_reason
from lab.timing import Timings
from lab.topology import LAB_TOPOLOGY, NumaNode, Topology

VARIABLE = "innodb_log_buffer_size"
SOCKET = "/run/mysqld/mysqld.sock"
MACHINES: dict[str, Topology] = {
    "big": replace(LAB_TOPOLOGY, extra_disks_gib=(), nic_queues=0),
    "small": Topology(sockets=1, cores_per_socket=2, nodes=(NumaNode((0, 1), 2048),)),
}


def build_deb(work: Path, timings: Timings) -> Path:
    """The amd64 package as `make dist-amd64` builds it (zstd, no lintian: seconds)."""
    given = os.environ.get("MYACCEL_LAB_DEB")
    if given:
        return Path(given).resolve()
    wheel = build_wheel(work / "dist", timings)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with timings.step("build the amd64 package"):
        sh(
            [sys.executable, str(ROOT / "packaging/build_deb.py"), "--arch", "amd64",
             "--wheel", str(wheel), "--out", str(work / "dist"), "--work",
             str(work / "deb-work"), "--compress", "zstd", "--no-lintian"],
            env=env,
        )  # fmt: skip
    return next((work / "dist").glob("myaccel_*_amd64.deb"))


def boot_all(guests: dict[str, Guest], timings: Timings) -> None:
    """Boot every guest at once (a boot is minutes of TCG, mostly waiting)."""
    errors: dict[str, BaseException] = {}

    def boot(name: str, guest: Guest) -> None:
        try:
            guest.boot()
            # the image's venv of myaccel's dependencies (lab/image.py): not on a DBA's server
            guest.run("rm -rf /opt/myaccel /usr/local/bin/myaccel")
            mariadb_system_tables(guest, timings)
        except BaseException as e:
            errors[name] = e

    threads = [threading.Thread(target=boot, args=item) for item in guests.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        sys.exit("FAILED: boot: " + "; ".join(f"{n}: {e}" for n, e in errors.items()))


def write_inventory(work: Path, guests: dict[str, Guest], deb: Path) -> Path:
    hosts = {
        name: {
            "ansible_host": "127.0.0.1",
            "ansible_port": guest.port,
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(guest.image.key),
        }
        for name, guest in guests.items()
    }
    inventory = {
        "all": {
            "hosts": hosts,
            "vars": {
                "ansible_python_interpreter": "/usr/bin/python3",
                "ansible_ssh_common_args": (
                    "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
                    "-o ServerAliveInterval=15"
                ),
                "ansible_timeout": 60,
                "myaccel_deb": str(deb),
                "myaccel_socket": SOCKET,
                "myaccel_login_user": "root",
                **short_rollout(work),
                # a TCG guest is never quiet: measure at once (the verdict is not the point)
                "myaccel_canary_quiet_wait": 0,
            },
        }
    }
    return save_inventory(work, inventory)


def etc_mysql(guest: Guest) -> str:
    """sha256 of every file under /etc/mysql (the server's option files), sorted."""
    return guest.run("find /etc/mysql -type f -print0 | sort -z | xargs -0 sha256sum")


def variable(guest: Guest) -> str:
    return guest.run(f"mariadb -S {SOCKET} -u root -NBe 'SELECT @@GLOBAL.{VARIABLE}'").strip()


def main_pid(guest: Guest) -> str:
    return guest.run("systemctl show -P MainPID mariadb.service").strip()


def main() -> None:  # one scenario, step by step
    keep = "--keep" in sys.argv
    timings = Timings(say=say)
    cache = cache_dir()
    reason = missing_reason(cache, cached_image(cache) is not None)
    if reason:
        sys.exit(f"fleet-ssh-test: cannot run: {reason}")
    work = Path(
        os.environ.get("FLEET_SSH_TEST_DIR") or tempfile.mkdtemp(prefix="myaccel-fleet-ssh-")
    )
    (work / "logs").mkdir(parents=True, exist_ok=True)
    image = build_image(timings, cache, house=wheelhouse(cache, timings))
    guests = {
        name: Guest(image, topology, work / name, timings) for name, topology in MACHINES.items()
    }
    for g in guests.values():
        g.workdir.mkdir(parents=True, exist_ok=True)
    passed = False
    try:
        say(f"work directory {work}")
        deb = build_deb(work, timings)
        say(f"package {deb.name} ({deb.stat().st_size / 2**20:.1f} MiB)")
        with timings.step("boot two guests"):
            boot_all(guests, timings)
        for name, g in guests.items():
            say(f"{name}: {g.topology.cpus} CPUs, {len(g.topology.nodes)} NUMA node(s), "
                f"{g.topology.memory_mib} MiB, ssh on 127.0.0.1:{g.port}")  # fmt: skip
        write_inventory(work, guests, deb)
        write_config(work)
        before = {n: etc_mysql(g) for n, g in guests.items()}
        old = {n: variable(g) for n, g in guests.items()}
        pids = {n: main_pid(g) for n, g in guests.items()}

        with timings.step("plan.yml over SSH"):
            rc, out, recap = playbook(work, "plan.yml")
        check(rc == 0, "plan.yml: the package installed over SSH, probed, grouped", work)
        for name, g in guests.items():
            check(
                g.run("command -v myaccel").strip() == "/usr/bin/myaccel"
                and g.ssh("dpkg-query -W -f='${Status}' myaccel", timeout=60).stdout
                == "install ok installed",
                f"{name}: the role installed the package (/usr/bin/myaccel, dpkg says installed)",
                work,
            )
            check(
                g.ssh("dpkg-query -W -f='${Status}' sysbench", timeout=60).stdout
                == "install ok installed",
                f"{name}: apt pulled sysbench (a Recommends) from Debian",
                work,
            )
        plans = sorted((work / "fleet" / "plans").glob("*.json"))
        made_on = {json.loads(p.read_text()).get("made_on") for p in plans}
        check(
            len(plans) == 2 and made_on == set(guests),
            f"two classes, one plan each, made on its own host: {[p.name for p in plans]}",
            work,
        )
        for p in plans:
            ids = [r["id"] for r in json.loads(p.read_text())["recommendations"]]
            check(ids == [ONLY], f"{p.name} holds {ONLY}", work)

        with timings.step("rollout.yml over SSH"):
            rc, out, recap = playbook(work, "rollout.yml", "--diff")
        check(rc == 0, "rollout.yml: each class's canary measured, applied, checked", work)
        check(
            all(recap[n]["changed"] > 0 and recap[n]["failed"] == 0 for n in guests),
            f"both canaries changed, none failed {recap}",
            work,
        )
        measured = task_output(out, "Measure the class plan on a sandbox")
        check(
            all(f"ok: [{n}]" in measured for n in guests),
            "each canary measured by an A/B on a sandbox in its guest",
            work,
        )
        for name, g in guests.items():
            check(variable(g) == str(64 * 1024**2), f"{name}: the server runs with 64M", work)
            check(main_pid(g) != pids[name], f"{name}: systemd restarted the server", work)
            check(etc_mysql(g) != before[name], f"{name}: the option files changed", work)

        with timings.step("collect.yml over SSH"):
            rc, _out, recap = playbook(work, "collect.yml")
        check(rc == 0, "collect.yml: drift, journals, the fleet report", work)
        report = (work / "fleet" / "fleet-report.md").read_text()
        check(all(n in report for n in guests), "the fleet report names both hosts", work)
        check(
            "- applied: 2 hosts" in report and "| 2 classes" not in report,
            "the fleet report: both hosts applied",
            work,
        )

        with timings.step("second rollout.yml"):
            rc, _out, recap = playbook(work, "rollout.yml")
        changed = {h: r["changed"] for h, r in recap.items()}
        check(rc == 0 and not any(changed.values()), f"second rollout: no change {changed}", work)

        with timings.step("rollback.yml over SSH"):
            rc, _out, recap = playbook(work, "rollback.yml")
        check(rc == 0, "rollback.yml", work)
        for name, g in guests.items():
            check(etc_mysql(g) == before[name], f"{name}: /etc/mysql back to its first bytes", work)
            check(variable(g) == old[name], f"{name}: the server runs on {old[name]} again", work)
        print(report)
        deprecated = [
            log.name
            for log in sorted((work / "logs").glob("*.log"))
            if "DEPRECATION WARNING" in log.read_text(errors="replace")
        ]
        check(not deprecated, f"no deprecation warning {deprecated}", work)
        for line in timings.table():
            say(line)
        say("passed")
        passed = True
    finally:
        for g in guests.values():
            if g.running():
                g.stop()
        if passed and not keep:
            shutil.rmtree(work, ignore_errors=True)
        elif not passed:
            print(failure_lines(work), file=sys.stderr, flush=True)
            print(
                f"fleet-ssh-test FAILED: work directory kept: {work}\n"
                f"  playbook logs: {work / 'logs'}\n"
                f"  each guest's console and overlay: {work}/big, {work}/small\n"
                f"  remove it when done: rm -rf {work}",
                file=sys.stderr,
                flush=True,
            )
        else:
            say(f"kept (--keep): {work}")


if __name__ == "__main__":
    main()
