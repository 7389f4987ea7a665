"""`make fleet-test`: the collection's playbooks against three hosts on this machine.

Each host is `ansible_connection: local` with its own MYACCEL_HOME, its own venv (myaccel
installed from a wheel built from this clone) and its own MariaDB sandbox standing for its
server. The run: lint -> plan.yml (probe, classes, one reviewed plan per class) ->
rollout.yml with the canary's server down (the class stops, naming db1; no other host is
measured or changed in its place) -> rollout.yml (canary measured by an A/B on a sandbox,
then batches of one; db2's health check is made to fail: it is rolled back byte for byte,
its class is held, the batch stops and db3 is never touched) -> collect.yml (drift,
journals, the fleet report, written by the myaccel on the controller's PATH) -> a second
plan + rollout that must report no change -> rollback.yml, after which every option file
is back to its first bytes. No playbook may print a deprecation warning.

Usage: python ansible/tests/fleet_test.py [--keep]  (--keep leaves the work directory and
the sandboxes for a look; FLEET_TEST_DIR chooses the work directory). A failed run keeps
its work directory (the playbooks' logs in logs/, each sandbox's error log) and says where;
its sandboxes are stopped. Only a passed run removes it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
HOSTS = ("db1", "db2", "db3")
FAILING = "db2"  # its health check fails
ONLY = "server-log-buffer"  # a restart-only option: the apply restarts the server
T0 = time.monotonic()


def say(text: str) -> None:
    print(f"[fleet-test {time.monotonic() - T0:5.1f}s] {text}", flush=True)


def sh(argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    r = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r.stdout


def host_env(work: Path, host: str) -> dict[str, str]:
    return {**os.environ, "MYACCEL_HOME": str(work / host / "home")}


def option_file_hashes(work: Path, host: str) -> dict[str, str]:
    """sha256 of the sandbox's option files (my.cnf and everything in conf.d/)."""
    sb = work / host / "home" / "sandboxes" / f"fleet-{host}"
    files = [sb / "my.cnf", *sorted((sb / "conf.d").glob("*"))]
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest()[:16] for f in files if f.is_file()}


def server_var(work: Path, host: str, name: str) -> str:
    out = sh(
        [str(BIN / "python"), "-c", _VAR_SCRIPT, f"fleet-{host}", name],
        env=host_env(work, host),
    )
    return out.strip()


_VAR_SCRIPT = """
import sys
from myaccel.server.connection import connect, query_value
from myaccel.server.sandbox import Sandbox
c = connect(Sandbox.load(sys.argv[1]).connect_params())
print(query_value(c, "SELECT @@GLOBAL." + sys.argv[2]))
"""


def write_inventory(work: Path, wheel: Path) -> Path:
    hosts = {}
    for h in HOSTS:
        hv: dict[str, object] = {
            "myaccel_home": str(work / h / "home"),
            "myaccel_venv": str(work / h / "venv"),
            "myaccel_sandbox": f"fleet-{h}",
            "myaccel_canary_sandbox": f"canary-{h}",
        }
        if h == FAILING:
            hv["myaccel_health_command"] = (
                "sh -c 'echo \"site check: replication lag over the limit (injected)\" >&2; exit 1'"
            )
        hosts[h] = hv
    inventory = {
        "all": {
            "hosts": hosts,
            "vars": {
                "ansible_connection": "local",
                "ansible_python_interpreter": sys.executable,
                "myaccel_wheel": str(wheel),
                # this venv's site-packages has the dependencies: no download per host
                "myaccel_shared_site": sysconfig.get_path("purelib"),
                **short_rollout(work),
            },
        }
    }
    return save_inventory(work, inventory)


def short_rollout(work: Path) -> dict[str, object]:
    """The test's rollout: one restart-only rule, batches of one, a canary A/B of seconds
    (the machinery, not a verdict), the fleet directory in the work directory."""
    return {
        "myaccel_fleet_dir": str(work / "fleet"),
        "myaccel_only": [ONLY],
        "myaccel_batches": [1],
        "myaccel_canary_workloads": ["oltp_point_select"],
        "myaccel_canary_threads": [1],
        "myaccel_canary_time": 1,
        "myaccel_canary_warmup": 0,
        "myaccel_canary_runs": 3,
        "myaccel_canary_tables": 1,
        "myaccel_canary_table_size": 1000,
    }


def save_inventory(work: Path, inventory: dict[str, object]) -> Path:
    path = work / "inventory.json"
    path.write_text(json.dumps(inventory, indent=2))
    return path


def write_config(work: Path) -> Path:
    coll = work / "collections" / "ansible_collections" / "myaccel"
    coll.mkdir(parents=True)
    (coll / "fleet").symlink_to(ROOT / "ansible")
    cfg = work / "ansible.cfg"
    cfg.write_text(
        "[defaults]\n"
        f"collections_path = {work / 'collections'}\n"
        f"inventory = {work / 'inventory.json'}\n"
        "forks = 5\n"
        "retry_files_enabled = False\n"
        f"local_tmp = {work / 'ansible-tmp'}\n"
        "callback_result_format = yaml\n"
        "[connection]\npipelining = True\n"
    )
    return cfg


def playbook(work: Path, name: str, *extra: str) -> tuple[int, str, dict[str, dict[str, int]]]:
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(work / "ansible.cfg"),
        "ANSIBLE_HOME": str(work / "ansible-home"),
        "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
        "ANSIBLE_DEPRECATION_WARNINGS": "True",
        # the canary's 1 s A/B says "inconclusive" whatever the load: its quiet gate would
        # wait up to 60 s for a busy machine to calm down (it did, 58 s, in a run here)
        "MYACCEL_QUIET_WAIT": "0",
    }
    argv = [str(BIN / "ansible-playbook"), str(ROOT / "ansible" / "playbooks" / name), *extra]
    log = work / "logs" / f"{len(list((work / 'logs').glob('*'))) + 1:02d}-{name}.log"
    # written as it runs (`tail -f` it), stderr after stdout
    with log.open("w") as out, (work / "logs" / ".stderr").open("w+") as err:
        rc = subprocess.run(argv, env=env, stdout=out, stderr=err, text=True, check=False)
        err.seek(0)
        stderr = err.read()
    stdout = log.read_text()
    log.write_text(stdout + stderr)
    (work / "logs" / ".stderr").unlink()
    recap: dict[str, dict[str, int]] = {}
    for m in re.finditer(r"^(\S+)\s+:\s+(ok=.*)$", stdout, re.M):
        recap[m.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
    return rc.returncode, stdout, recap


def lint(work: Path) -> subprocess.Popen[str]:
    """ansible-lint, started in the background (it takes ~30 s of one CPU)."""
    env = {
        **os.environ,
        "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
        "ANSIBLE_COLLECTIONS_PATH": str(work / "collections"),
        "ANSIBLE_HOME": str(work / "ansible-home"),
        "NO_COLOR": "1",
    }
    return subprocess.Popen(
        [str(BIN / "ansible-lint"), "--offline", "-q", "."],
        cwd=ROOT / "ansible",
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def check(cond: bool, what: str, work: Path) -> None:
    if not cond:
        sys.exit(f"FAILED: {what}")
    say(f"ok: {what}")


def flat(text: str) -> str:
    """``text`` with its line breaks and runs of spaces made one space (the YAML callback
    wraps long messages)."""
    return " ".join(text.split())


def task_output(out: str, task: str) -> str:
    """What ansible-playbook printed for the task named ``task`` (every host, every play)."""
    parts = re.split(r"^(?=TASK \[|PLAY \[|PLAY RECAP)", out, flags=re.M)
    return "".join(p for p in parts if p.startswith(f"TASK [{task}"))


def failure_lines(work: Path) -> str:
    """The newest playbook log's failures (fatal: and [ERROR] lines) and recap."""
    logs = sorted((work / "logs").glob("*.log"))
    if not logs:
        return ""
    text = logs[-1].read_text(errors="replace")
    lines = [x for x in text.splitlines() if x.startswith(("fatal:", "[ERROR]", "FAILED"))]
    recap = text[text.rfind("PLAY RECAP") :] if "PLAY RECAP" in text else ""
    return f"--- {logs[-1]} (failures, recap)\n" + "\n".join(lines[-20:]) + "\n" + recap


def finish(work: Path, sandboxes: list[tuple[str, str]], passed: bool, keep: bool) -> None:
    """A passed run removes its work directory (unless --keep); a failed one keeps it, logs
    and sandboxes included (their servers stopped), and says where to look."""
    if keep:
        say(f"kept (--keep): {work}")
        return
    if passed:
        for h, sb in sandboxes:
            subprocess.run(
                [str(BIN / "myaccel"), "sandbox", "destroy", sb, "--yes"],
                env=host_env(work, h),
                capture_output=True,
                check=False,
            )
        shutil.rmtree(work, ignore_errors=True)
        return
    for h, sb in sandboxes:
        if (work / h / "home" / "sandboxes" / sb).is_dir():
            subprocess.run(
                [str(BIN / "myaccel"), "sandbox", "stop", sb],
                env=host_env(work, h),
                capture_output=True,
                check=False,
            )
    print(failure_lines(work), file=sys.stderr, flush=True)
    print(
        f"fleet-test FAILED: work directory kept: {work}\n"
        f"  playbook logs: {work / 'logs'}\n"
        f"  each host's MYACCEL_HOME (journals, sandboxes and their error logs): "
        f"{work}/HOST/home\n"
        f"  remove it when done: rm -rf {work}",
        file=sys.stderr,
        flush=True,
    )


def main() -> None:  # one scenario, step by step
    keep = "--keep" in sys.argv
    work = Path(os.environ.get("FLEET_TEST_DIR") or tempfile.mkdtemp(prefix="myaccel-fleet-"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "logs").mkdir(exist_ok=True)
    sandboxes = [(h, f"fleet-{h}") for h in HOSTS] + [(h, f"canary-{h}") for h in HOSTS]
    passed = False
    try:
        say(f"work directory {work}")
        sh(
            [
                str(BIN / "python"),
                "-m",
                "build",
                "--wheel",
                "--outdir",
                str(work / "dist"),
                str(ROOT),
            ]
        )
        wheel = next((work / "dist").glob("myaccel-*.whl"))
        say(f"built {wheel.name}")
        for h in HOSTS:
            sh([str(BIN / "myaccel"), "sandbox", "init", f"fleet-{h}"], env=host_env(work, h))
        write_inventory(work, wheel)
        write_config(work)
        linting = lint(work)
        before = {h: option_file_hashes(work, h) for h in HOSTS}
        log_buffer = {h: server_var(work, h, "innodb_log_buffer_size") for h in HOSTS}
        say(f"3 sandboxes up; option files {before['db1']}")

        rc, _out, recap = playbook(work, "plan.yml")
        check(rc == 0, "plan.yml: probed, grouped, one plan per class", work)
        plans = list((work / "fleet" / "plans").glob("*.json"))
        check(len(plans) == 1, f"one class, plan {plans[0].name}", work)
        reviewed = json.loads(plans[0].read_text())
        check(
            [r["id"] for r in reviewed["recommendations"]] == [ONLY],
            f"the class plan holds {ONLY}",
            work,
        )

        # the canary's server down: its class stops, no other host stands in silently
        sh([str(BIN / "myaccel"), "sandbox", "stop", "fleet-db1"], env=host_env(work, "db1"))
        rc, out, recap = playbook(work, "rollout.yml")
        check(
            rc != 0
            and "its canary db1 (the host its reviewed plan was made on) failed" in flat(out)
            and "myaccel_canary_substitute" in out,
            "canary db1 down: rollout.yml stopped and named it",
            work,
        )
        check(
            all(
                option_file_hashes(work, h) == before[h]
                and not list((work / h / "home" / "journals").glob("*.json"))
                for h in HOSTS
            ),
            "canary db1 down: no host measured or changed in its place",
            work,
        )
        sh([str(BIN / "myaccel"), "sandbox", "start", "fleet-db1"], env=host_env(work, "db1"))

        rc, out, recap = playbook(work, "rollout.yml", "--diff")
        check(rc != 0, "rollout.yml stopped (db2's health check failed)", work)
        check(
            "innodb_log_buffer_size = 64M" in task_output(out, "Apply the plan"),
            "--diff showed the option file the apply wrote (not only the dry run's)",
            work,
        )
        check(
            recap["db1"]["changed"] > 0 and recap["db1"]["failed"] == 0, "canary db1 applied", work
        )
        check(
            server_var(work, "db1", "innodb_log_buffer_size") == str(64 * 1024**2),
            "db1 runs with the new value after its restart",
            work,
        )
        check(recap[FAILING]["failed"] == 1 and recap[FAILING]["rescued"] == 1, "db2 failed", work)
        check(
            option_file_hashes(work, FAILING) == before[FAILING],
            "db2 rolled back byte for byte (option file hashes)",
            work,
        )
        check(
            server_var(work, FAILING, "innodb_log_buffer_size") == log_buffer[FAILING],
            "db2 runs on its old value",
            work,
        )
        check(
            "db3" not in recap or recap["db3"]["changed"] == 0,
            "db3 untouched (batch stopped)",
            work,
        )
        check(option_file_hashes(work, "db3") == before["db3"], "db3 option files unchanged", work)
        check(
            not list((work / "db3" / "home" / "journals").glob("*.json")),
            "db3 has no journal",
            work,
        )
        check(any((work / "fleet" / "holds").glob("*.json")), "the class is held", work)

        rc, _out, recap = playbook(work, "collect.yml")
        check(rc == 0, "collect.yml: drift, journals, fleet report", work)
        report = (work / "fleet" / "fleet-report.md").read_text()
        check("failed health check: rolled back" in report, "the report shows db2's rollback", work)

        rc, _out, recap = playbook(work, "rollout.yml")
        changed = {h: r["changed"] for h, r in recap.items()}
        check(
            rc == 0 and not any(changed.values()), f"second rollout.yml: no change {changed}", work
        )

        rc, _out, recap = playbook(work, "rollback.yml")
        check(rc == 0, "rollback.yml", work)
        check(
            all(option_file_hashes(work, h) == before[h] for h in HOSTS),
            "every host's option files are back to their first bytes",
            work,
        )
        check(
            server_var(work, "db1", "innodb_log_buffer_size") == log_buffer["db1"],
            "db1 runs on its old value again",
            work,
        )
        print((work / "fleet" / "fleet-report.md").read_text())
        deprecated = [
            log.name
            for log in sorted((work / "logs").glob("*.log"))
            if "DEPRECATION WARNING" in log.read_text(errors="replace")
        ]
        check(not deprecated, f"no deprecation warning in the playbooks' output {deprecated}", work)
        lint_out, _ = linting.communicate()
        if linting.returncode != 0:
            sys.exit(f"FAILED: ansible-lint\n{lint_out[-3000:]}")
        say("ok: ansible-lint clean")
        say("passed")
        passed = True
    finally:
        finish(work, sandboxes, passed, keep)


if __name__ == "__main__":
    main()
