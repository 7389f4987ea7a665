"""MariaDB 11.8 LTS end to end on a real server: the one scripts/ensure-mariadb.sh installs
(Debian sid's mariadb-server-core, extracted beside the sid tree and run from the host), or
``$MYACCEL_MARIADB118_BASEDIR``.

One sandbox for the module, in its own ``$MYACCEL_HOME``, made as a user would make it
(``sandbox init --flavor mariadb --version 11.8``): lifecycle, the catalog against the live
server, plan -> apply -> restart -> rollback byte-identical. The catalog's full live check
(defaults, ranges, scope, dynamic-ness, removals) runs in test_knobs_live.py (param
``mariadb-11.8``). In CI (``CI`` set) a missing 11.8 fails instead of skipping: `make test`
installs it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from myaccel.cli.main import cli
from myaccel.knobs import Catalog
from myaccel.server.sandbox import Sandbox
from recorders import tree_digest

pytestmark = pytest.mark.integration

NAME = "m118"


def run_cli(home: Path, *args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, list(args), env={"MYACCEL_HOME": str(home)})
    return r.exit_code, r.stdout, r.stderr


class Maria:
    """The module's MariaDB 11.8 sandbox and a CLI bound to its MYACCEL_HOME."""

    def __init__(self, home: Path, sb: Sandbox) -> None:
        self.home = home
        self.sb = sb

    def run(self, *args: str) -> tuple[int, str, str]:
        return run_cli(self.home, *args)

    def var(self, name: str) -> str:
        return str(self.sb.query(f"SELECT @@GLOBAL.{name}")[0][0])


@pytest.fixture(scope="module")
def maria(tmp_path_factory: pytest.TempPathFactory, mariadb118_basedir: Path) -> Iterator[Maria]:
    home = tmp_path_factory.mktemp("mariadb118-home")
    # the prefix scripts/ensure-mariadb.sh makes is found by flavor and release line; another
    # install ($MYACCEL_MARIADB118_BASEDIR) is passed as --basedir
    where = (
        ["--basedir", str(mariadb118_basedir)]
        if mariadb118_basedir.name != "mariadb-11.8"
        else ["--flavor", "mariadb", "--version", "11.8"]
    )
    code, _, err = run_cli(home, "sandbox", "init", NAME, *where)
    assert code == 0, err
    assert "using MariaDB 11.8." in err, err
    m = Maria(home, Sandbox.load(NAME, home=home))
    try:
        yield m
    finally:
        m.sb.destroy()


def test_sandbox_lifecycle(maria: Maria, mariadb118_basedir: Path) -> None:
    code, out, err = maria.run("sandbox", "status", NAME, "--json")
    assert code == 0, err
    st = json.loads(out)
    assert st["state"] == "running" and st["flavor"] == "mariadb"
    assert str(st["version"]).startswith("11.8."), st
    assert Path(st["binary"]).resolve().is_relative_to(mariadb118_basedir.resolve())
    # its own (empty) plugin directory, never the host's 10.11 plugins
    plugin_dir = Path(maria.var("plugin_dir"))
    assert plugin_dir.resolve().is_relative_to(mariadb118_basedir.resolve()), plugin_dir
    assert maria.var("innodb_snapshot_isolation") == "1"  # ON by default from 11.6.2
    pid = maria.sb.pid
    code, _, err = maria.run("sandbox", "restart", NAME)
    assert code == 0, err
    assert maria.sb.pid not in (None, pid)
    maria.sb.query("CREATE TABLE sbtest.before_snap (i INT PRIMARY KEY)")
    code, _, err = maria.run("sandbox", "snapshot", "save", NAME, "s1", "--stop")
    assert code == 0, err
    maria.sb.query("DROP TABLE sbtest.before_snap")
    code, _, err = maria.run("sandbox", "snapshot", "restore", NAME, "s1", "--stop")
    assert code == 0, err
    assert maria.sb.query("SHOW TABLES FROM sbtest LIKE 'before_snap'") == [("before_snap",)]
    maria.sb.query("DROP TABLE sbtest.before_snap")
    code, _, err = maria.run("sandbox", "stop", NAME)
    assert code == 0, err
    assert not maria.sb.is_running()
    maria.sb.start(timeout_s=120)
    # the 10.11 binary refuses the 11.8 datadir before anything changes
    code, _, err = maria.run("sandbox", "restart", NAME, "--basedir", "/usr")
    assert code != 0 and "MariaDB 11.8 datadir" in err, err
    assert maria.sb.is_running() and str(maria.var("version")).startswith("11.8.")


def test_catalog_resolves_the_live_series(maria: Maria) -> None:
    version = str(maria.sb.query("SELECT VERSION()")[0][0])
    srv = Catalog.load().for_server("mariadb", version)
    assert srv.exact and srv.series == "11.8", version
    for name in ("innodb_buffer_pool_size_max", "innodb_snapshot_isolation"):
        assert srv.exists(name) and maria.sb.query(f"SHOW GLOBAL VARIABLES LIKE '{name}'")
    assert srv.default("innodb_snapshot_isolation") is True
    assert srv.dynamic("innodb_log_file_size")  # resized online since 10.9
    assert srv.removed("innodb_buffer_pool_instances")
    assert not maria.sb.query("SHOW GLOBAL VARIABLES LIKE 'innodb_buffer_pool_instances'")


def test_plan_apply_restart_rollback_is_byte_identical(maria: Maria, tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    code, _, err = maria.run("plan", "--sandbox", NAME, "--layers", "server", "--out", str(plan))
    assert code == 0, err
    recs = {r["id"]: r for r in json.loads(plan.read_text())["recommendations"]}
    srv = Catalog.load().for_server("mariadb", str(maria.sb.query("SELECT VERSION()")[0][0]))
    targets = [r["target"].removeprefix("mysql:") for r in recs.values()]
    for name in (t for t in targets if ":" not in t):
        assert srv.exists(name) and not srv.removed(name), name
        assert maria.sb.query(f"SHOW GLOBAL VARIABLES LIKE '{name}'"), name
    # 11.8.9's ceiling is 8 TiB (MDEV-38671): the pool grows online, nothing raises it
    assert recs["server-buffer-pool-size"]["risk"] == "online"
    assert "server-buffer-pool-size-max" not in recs
    applied = {
        r["target"].removeprefix("mysql:"): r["proposed"]
        for r in recs.values()
        if r["action"] == "apply" and r["target"].startswith("mysql:")
    }
    assert "innodb_buffer_pool_size" in applied, recs
    restart_only = [n for n in applied if not srv.dynamic(n)]
    conf_d = maria.sb.dir / "conf.d"
    before = {name: maria.var(name) for name in applied}
    before_conf = tree_digest(conf_d)
    before_cnf = (maria.sb.dir / "my.cnf").read_bytes()

    code, out, err = maria.run("apply", str(plan), "--sandbox", NAME, "--yes")
    assert code == 0, err
    after = {name: maria.var(name) for name in applied}
    assert after["innodb_buffer_pool_size"] != before["innodb_buffer_pool_size"]
    for name in restart_only:  # in effect after apply's own restart
        assert after[name] != before[name] or applied[name] == before[name], name
    code, out, err = maria.run("verify")
    assert code == 0, out + err
    # a restart of the sandbox keeps what apply wrote
    code, _, err = maria.run("sandbox", "restart", NAME)
    assert code == 0, err
    assert {name: maria.var(name) for name in applied} == after
    code, out, err = maria.run("verify")
    assert code == 0, out + err

    code, out, err = maria.run("rollback")
    assert code == 0, err
    assert {name: maria.var(name) for name in applied} == before
    assert tree_digest(conf_d) == before_conf
    assert (maria.sb.dir / "my.cnf").read_bytes() == before_cnf
