"""The collection's playbooks (ansible/) run by ansible-playbook against hosts whose myaccel
is a stand-in (``fake_myaccel``): the same argv and JSON documents as the real command, no
server, so each rollout takes seconds. `make fleet-test` runs the real one on sandboxes.

Each test is one defect of issue 36 (item 3): the report command of collect.yml, the
canary's A/B after a failed canary, the canary that must not move silently, and the
rollback module's use of an API ansible-core 2.19 deprecates.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CLASS = "x86_64__fake_cpu__2c__4g__mariadb__10_11"
REC = {
    "id": "server-log-buffer",
    "layer": "server",
    "target": "mysql:innodb_log_buffer_size",
    "proposed": "64M",
    "risk": "restart",
    "title": "Larger log buffer",
}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.system,
    pytest.mark.skipif(
        not (BIN / "ansible-playbook").exists(), reason="ansible-core is not installed"
    ),
]

# The stand-in for `myaccel` on a host: state under $MYACCEL_HOME (journals/, a file
# `server-down` makes every server command fail as a stopped server does), every call
# appended to $MYACCEL_HOME/calls.log.
FAKE = r"""
import json, os, sys
from pathlib import Path

home = Path(os.environ.get("MYACCEL_HOME") or Path(__file__).resolve().parents[2] / "home")
home.mkdir(parents=True, exist_ok=True)
args = sys.argv[1:]
with open(home / "calls.log", "a") as f:
    f.write(" ".join(args) + "\n")
REC = json.loads(os.environ.get("FAKE_REC") or %(rec)r)
jdir = home / "journals"


def opt(name):
    return args[args.index(name) + 1] if name in args else None


def journals():
    return sorted(jdir.glob("*.json")) if jdir.is_dir() else []


def applied():
    return [p for p in journals() if json.loads(p.read_text())["status"] == "applied"]


def out(doc):
    print(json.dumps(doc))
    sys.exit(0)


if args[0] == "--version":
    out("myaccel 0.1.0")
if args[0] in ("probe", "apply", "verify", "rollback") and (home / "server-down").exists():
    sys.stderr.write("error: cannot reach a server at root@socket /x/mysqld.sock\n")
    sys.exit(3)
change = {"target": "mycnf:mysqld/innodb_log_buffer_size", "current": None, "desired": "64M"}
if args[0] == "probe":
    facts = {
        "hostname": "fake",
        "cpu": {"arch": "x86_64", "model_name": "Fake CPU", "logical_cpus": 2},
        "memory": {"total_bytes": 4 * 2**30},
        "server": {"flavor": "mariadb", "version": "10.11.6"},
    }
    if opt("--out"):
        Path(opt("--out")).write_text(json.dumps(facts))
    out(facts)
if args[0] == "plan":
    plan = {
        "server": {"flavor": "mariadb", "version": "10.11.6"},
        "durability": "strict",
        "layers": ["server"],
        "recommendations": [REC],
    }
    Path(opt("--out")).write_text(json.dumps(plan))
    out(plan)
if args[0] == "apply":
    if applied():
        out({"changed": False, "changes": [], "files": []})
    if "--dry-run" in args:
        out({"changed": True, "changes": [change], "files": []})
    jdir.mkdir(exist_ok=True)
    j = jdir / f"{len(journals()) + 1:05d}.json"
    j.write_text(json.dumps({"status": "applied"}))
    out({"changed": True, "changes": [change], "files": [], "journal": str(j)})
if args[0] == "verify":
    a = applied()
    out({"journal": str(a[-1]) if a else None, "drift": []})
if args[0] == "rollback":
    if "--list" in args:
        out({"journals": [{"path": str(p), "status": "applied"} for p in applied()]})
    a = applied()
    if not a:
        out({"journal": None})
    a[-1].write_text(json.dumps({"status": "undone"}))
    out({"journal": str(a[-1]), "reverted": [change["target"]], "warnings": ["a warning"]})
if args[0] == "ab":
    o = Path(opt("--out"))
    if o.is_dir() and any(o.iterdir()):
        sys.stderr.write(
            f"error: --out '{o}' already holds a campaign (ab); it cannot be extended\n"
        )
        sys.exit(2)
    o.mkdir(parents=True, exist_ok=True)
    (o / "campaign.json").write_text("{}")
    cell = {"workload": "oltp_point_select", "threads": 1, "delta_pct": 0.4,
            "verdict": "inconclusive", "p_adjusted": 0.6, "reason": "noise"}
    (o / "comparison.json").write_text(json.dumps({"cells": [cell], "geomean_delta_pct": 0.4}))
    sys.exit(0)
sys.stderr.write(f"error: the fake myaccel does not know {args}\n")
sys.exit(2)
"""


class Fleet:
    """Hosts db1.. on this machine (ansible_connection local), each with the fake myaccel
    in its own venv and its own MYACCEL_HOME, and a controller fleet directory."""

    def __init__(self, tmp: Path, hosts: list[str], host_vars: dict[str, dict[str, object]]):
        self.tmp = tmp
        self.hosts = hosts
        self.fleet = tmp / "fleet"
        inv: dict[str, dict[str, object]] = {}
        for h in hosts:
            venv = tmp / h / "venv"
            (venv / "bin").mkdir(parents=True)
            fake = venv / "bin" / "myaccel"
            fake.write_text(f"#!{sys.executable}\n" + FAKE % {"rec": json.dumps(REC)})
            fake.chmod(0o755)
            inv[h] = {
                "myaccel_venv": str(venv),
                "myaccel_home": str(self.home(h)),
                "myaccel_sandbox": f"fleet-{h}",
                "myaccel_canary_sandbox": f"canary-{h}",
                **host_vars.get(h, {}),
            }
        inventory = {
            "all": {
                "hosts": inv,
                "vars": {
                    "ansible_connection": "local",
                    "ansible_python_interpreter": sys.executable,
                    "myaccel_fleet_dir": str(self.fleet),
                    "myaccel_batches": [1],
                },
            }
        }
        (tmp / "inventory.json").write_text(json.dumps(inventory))
        coll = tmp / "collections" / "ansible_collections" / "myaccel"
        coll.mkdir(parents=True)
        (coll / "fleet").symlink_to(ROOT / "ansible")
        (tmp / "ansible.cfg").write_text(
            "[defaults]\n"
            f"collections_path = {tmp / 'collections'}\n"
            f"inventory = {tmp / 'inventory.json'}\n"
            "retry_files_enabled = False\n"
            f"local_tmp = {tmp / 'ansible-tmp'}\n"
            "[connection]\npipelining = True\n"
        )

    def home(self, host: str) -> Path:
        return self.tmp / host / "home"

    def calls(self, host: str) -> list[str]:
        log = self.home(host) / "calls.log"
        return log.read_text().splitlines() if log.exists() else []

    def class_plan(self, made_on: str) -> None:
        """The reviewed class plan, as plan.yml writes it."""
        plans = self.fleet / "plans"
        plans.mkdir(parents=True, exist_ok=True)
        doc = {
            "class": CLASS,
            "made_on": made_on,
            "hosts": self.hosts,
            "flavor": "mariadb",
            "version": "10.11.6",
            "durability": "strict",
            "layers": ["server"],
            "recommendations": [REC],
        }
        (plans / f"{CLASS}.json").write_text(json.dumps(doc))
        for h in self.hosts:  # what plan.yml leaves on each host
            work = self.home(h) / "fleet"
            work.mkdir(parents=True, exist_ok=True)

    def run(
        self, playbook: str | Path, *extra: str, env: dict[str, str] | None = None
    ) -> tuple[int, str]:
        path = Path(playbook)
        if not path.is_absolute():
            path = ROOT / "ansible" / "playbooks" / playbook
        full_env = {
            **os.environ,
            "ANSIBLE_CONFIG": str(self.tmp / "ansible.cfg"),
            "ANSIBLE_HOME": str(self.tmp / "ansible-home"),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
            # the controller: this venv's bin first (ansible-playbook, the real myaccel)
            "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
            "PYTHONPATH": str(ROOT / "src"),
            **(env or {}),
        }
        r = subprocess.run(
            [str(BIN / "ansible-playbook"), str(path), *extra],
            env=full_env,
            cwd=self.tmp,
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        return r.returncode, r.stdout + r.stderr


def applies(calls: list[str]) -> list[str]:
    return [c for c in calls if c.startswith("apply") and "--yes" in c]


def test_collect_writes_the_report_without_myaccel_report_command(tmp_path: Path) -> None:
    """collect.yml as documented (no myaccel_report_command): the report is written by the
    myaccel found on the controller, not by /opt/myaccel/bin/myaccel there."""
    f = Fleet(tmp_path, ["db1"], {})
    f.class_plan("db1")
    (f.home("db1") / "fleet" / "facts.json").write_text("{}")
    hdir = f.fleet / "hosts" / "db1"
    hdir.mkdir(parents=True)
    (hdir / "probe.json").write_text(json.dumps({"class": CLASS, "canary": True}))
    rc, out = f.run("collect.yml")
    assert rc == 0, out[-3000:]
    assert (f.fleet / "fleet-report.md").is_file()
    assert "db1" in (f.fleet / "fleet-report.md").read_text()


def test_collect_names_the_missing_report_command(tmp_path: Path) -> None:
    f = Fleet(tmp_path, ["db1"], {})
    (f.fleet / "hosts").mkdir(parents=True)
    rc, out = f.run(
        "collect.yml",
        "-e",
        "myaccel_hosts=none",
        "-e",
        f"myaccel_report_command={tmp_path / 'nowhere' / 'myaccel'}",
    )
    assert rc != 0
    assert "myaccel_report_command" in out and str(tmp_path / "nowhere") in out


def test_a_rollout_after_a_failed_canary_measures_again(tmp_path: Path) -> None:
    """The canary's health check fails (rolled back, class held); once the hold is removed
    the next rollout measures the canary again: its A/B does not refuse the first one's
    results directory."""
    unhealthy = tmp_path / "unhealthy"
    f = Fleet(tmp_path, ["db1"], {"db1": {"myaccel_health_command": f"test ! -e {unhealthy}"}})
    f.class_plan("db1")
    unhealthy.touch()
    rc, out = f.run("rollout.yml")
    assert rc != 0 and "rolled back, class" in out, out[-3000:]
    assert len(applies(f.calls("db1"))) == 1
    (f.fleet / "holds" / f"{CLASS}.json").unlink()
    unhealthy.unlink()
    rc, out = f.run("rollout.yml")
    assert rc == 0, out[-3000:]
    assert len([c for c in f.calls("db1") if c.startswith("ab ")]) == 2
    assert len(applies(f.calls("db1"))) == 2
    # and the report shows the host as it is now, not the first rollout's failure
    rc, out = f.run("collect.yml")
    assert rc == 0, out[-3000:]
    row = next(
        x for x in (f.fleet / "fleet-report.md").read_text().splitlines() if x.startswith("| db1")
    )
    assert "| applied |" in row and "failed" not in row, row


def test_a_canary_that_cannot_be_reached_stops_its_class(tmp_path: Path) -> None:
    """db1, the class's canary (its plan was made there), has its server down: no other
    host is measured or changed in its place, and the output names db1."""
    f = Fleet(tmp_path, ["db1", "db2", "db3"], {})
    f.class_plan("db1")
    (f.home("db1") / "server-down").touch()
    rc, out = f.run("rollout.yml")
    assert rc != 0
    for h in ("db2", "db3"):
        assert not applies(f.calls(h)), f"{h} was changed with the canary down"
        assert not [c for c in f.calls(h) if c.startswith("ab ")], f"{h} became the canary"
    assert re.search(r"canary db1\b.*(unreachable|failed)", out), out[-3000:]
    assert "myaccel_canary_substitute" in out


def test_a_substitute_canary_only_when_asked(tmp_path: Path) -> None:
    f = Fleet(tmp_path, ["db1", "db2", "db3"], {})
    f.class_plan("db1")
    (f.home("db1") / "server-down").touch()
    rc, out = f.run("rollout.yml", "-e", "myaccel_canary_substitute=true")
    assert rc != 0  # db1 itself failed its probe
    assert [c for c in f.calls("db2") if c.startswith("ab ")], "db2 was not measured"
    assert applies(f.calls("db2")) and applies(f.calls("db3"))
    assert "in place of db1" in out
    probe = json.loads((f.fleet / "hosts" / "db2" / "probe.json").read_text())
    assert probe["canary"] is True and probe["canary_in_place_of"] == "db1"


def test_rollback_module_uses_no_deprecated_api(tmp_path: Path) -> None:
    """ansible-core 2.19 deprecates `warnings` passed to exit_json (removed in 2.23): the
    module's warnings go through module.warn, and the run shows no deprecation."""
    f = Fleet(tmp_path, ["db1"], {})
    jdir = f.home("db1") / "journals"
    jdir.mkdir(parents=True)
    (jdir / "00001.json").write_text(json.dumps({"status": "applied"}))
    fake = tmp_path / "db1" / "venv" / "bin" / "myaccel"
    book = tmp_path / "rollback-module.yml"
    book.write_text(
        "- name: The module alone\n"
        "  hosts: db1\n"
        "  gather_facts: false\n"
        "  tasks:\n"
        "    - name: Roll back\n"
        "      myaccel.fleet.myaccel_rollback:\n"
        f"        executable: {fake}\n"
        f"        home: {f.home('db1')}\n"
        "      register: r\n"
        "    - name: Show\n"
        "      ansible.builtin.debug:\n"
        "        var: r\n"
    )
    rc, out = f.run(
        book,
        env={"ANSIBLE_DEPRECATION_WARNINGS": "True", "ANSIBLE_DEVEL_WARNING": "False"},
    )
    assert rc == 0, out[-3000:]
    assert "a warning" in out  # myaccel's own warning still reaches the output
    assert "deprecat" not in out.lower(), out[-3000:]


def test_a_canary_left_out_of_the_run_stops_its_class(tmp_path: Path) -> None:
    f = Fleet(tmp_path, ["db1", "db2"], {})
    f.class_plan("db1")
    rc, out = f.run("rollout.yml", "--limit", "db2")
    assert rc != 0 and not applies(f.calls("db2"))
    assert "its canary db1 (the host its reviewed plan was made on) is not in this run" in " ".join(
        out.split()
    )
